#!/usr/bin/env bash
# Installs what attograd needs on Debian (only the packages that are missing) and configures
# the release build in build/. Safe to run again: it does nothing that is already done.
#   ./bootstrap.sh            release build in build/
#   CI=true ./bootstrap.sh    the same with warnings as errors
set -euo pipefail
cd "$(dirname "$0")"

# Compiler, build tools, OpenBLAS, Boost.Test, CLI11 (command lines and config files) and
# nlohmann-json (header-only both); python3-numpy only for the test that reads a checkpoint with
# an independent reader (never needed at run time).
# fortunes: the default text corpus of the language model (train_gpt), plain text under
# /usr/share/games/fortunes/. OpenMPI: data-parallel runs under mpirun (train/dist/communicator.h;
# a build without it works, meson -Dmpi=disabled).
packages=(g++ meson ninja-build pkg-config libopenblas-dev libboost-test-dev libcli11-dev nlohmann-json3-dev
          python3 python3-numpy fortunes libopenmpi-dev openmpi-bin)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

werror=false
[ "${CI:-}" = "true" ] && werror=true
if [ ! -f build/build.ninja ]; then
  meson setup build --buildtype=release -Dwerror=$werror >/dev/null
else
  meson configure build -Dwerror=$werror >/dev/null
fi
echo "bootstrap: build/ is configured (werror=$werror)"
