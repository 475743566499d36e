#!/usr/bin/env bash
# Installs what attograd needs on Debian (only the packages that are missing) and configures
# the release build in build/. Safe to run again: it does nothing that is already done.
#   ./bootstrap.sh                  release build in build/ (configured, nothing compiled)
#   ./bootstrap.sh --run PROGRAM [ARGS...]
#                                   the same, then builds only the library and
#                                   build/tools/PROGRAM and runs it with ARGS
#   CI=true ./bootstrap.sh          the same with warnings as errors
# Every stage (packages, configure, and with --run build and run) prints one line when it
# starts and one with its elapsed time when it ends.
set -euo pipefail
caller=$PWD  # the program of --run writes its outputs (runs/) here, as when started by hand
cd "$(dirname "$0")"

program=""
if [ "${1:-}" = "--run" ]; then
  if [ -z "${2:-}" ]; then
    echo "usage: $0 [--run PROGRAM [ARGS...]]   (PROGRAM: train_sequence, train_gpt, ... in tools/)" >&2
    exit 2
  fi
  program=$2
  shift 2
  if [ ! -f "tools/$program.cpp" ]; then
    programs=(tools/*.cpp)
    programs=("${programs[@]#tools/}")
    echo "bootstrap: tools/$program.cpp does not exist: PROGRAM is one of ${programs[*]%.cpp}" >&2
    exit 2
  fi
elif [ $# -gt 0 ]; then
  echo "usage: $0 [--run PROGRAM [ARGS...]]" >&2
  exit 2
fi
stages=3
[ -z "$program" ] || stages=4
stage=0 started=0

# "== 3/4 build: what" when a stage starts; "== 3/4 build: done in 2 min 41 s" when it ends.
begin() {
  stage=$((stage + 1)) name=$1
  started=$(date +%s.%N)
  echo "== $stage/$stages $name: $2"
}
end() {
  local seconds
  seconds=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { s = b - a;
    if (s < 60) printf "%.1f s", s; else printf "%d min %d s", s / 60, s % 60 }')
  echo "== $stage/$stages $name: ${1:+$1, }done in $seconds"
}

# What the library and its programs need to build and run: compiler, build tools, OpenBLAS,
# CLI11 (command lines and config files) and nlohmann-json (header-only both). fortunes: the
# default text corpus of the language model (train_gpt), plain text under
# /usr/share/games/fortunes/. PCRE2: the byte-pair encoder's pre-tokenisation (GPT-2's pattern
# needs Unicode properties; text/pretokenize.cpp). ICU: the NFC normalization some Hugging Face
# tokenizer.json files ask for (Qwen's; text/hf_bpe.cpp).
packages=(g++ meson ninja-build pkg-config libopenblas-dev libcli11-dev nlohmann-json3-dev libpcre2-dev libicu-dev fortunes)
# What the rest needs: Boost.Test for the tests; python3-numpy only for the test that reads a
# checkpoint with an independent reader (never needed at run time); OpenMPI for data-parallel runs
# under mpirun (train/dist/communicator.h; a build without it works, meson -Dmpi=disabled);
# bible-kjv-text, the King James Bible, the language model's second corpus (train_gpt --data
# bible): the package keeps the text compressed in a format of its own (/usr/lib/bible.data),
# which its reader /usr/bin/bible from bible-kjv prints as plain text. The first README command
# (--run) leaves them to the second, so that a first run is minutes away.
# procps: pgrep, with which the MPI tests find the ranks under mpirun (a minimal Debian lacks it).
# python3-torch: the reference of the parity tests that compute with PyTorch (never needed at run
# time). Node.js and npm, for GPT-2's vocabulary files, Llama 3's and Qwen3's tokenizer.json and the
# byte-pair encoding tests' references, come with tests/data/install_references.sh below (which
# keeps a Node.js that is already there).
rest=(libboost-test-dev python3 python3-numpy libopenmpi-dev openmpi-bin bible-kjv-text bible-kjv procps python3-torch)
[ -n "$program" ] || packages+=("${rest[@]}")
begin packages "${#packages[@]} Debian packages (apt-get installs the missing ones)"
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
  end "${#missing[@]} installed"
else
  end "all present"
fi

werror=false
[ "${CI:-}" = "true" ] && werror=true
# The tests are configured when Boost.Test is there (always after the second command). What this
# run installed (Boost.Test, MPI) is only seen by a configuration that looks again: --clearcache.
tests=false
dpkg-query -W -f='${Status}' libboost-test-dev 2>/dev/null | grep -q 'install ok installed' && tests=true
begin configure "build/ (release, werror=$werror, tests=$tests)"
if [ ! -f build/build.ninja ]; then
  meson setup build --buildtype=release -Dwerror=$werror -Dtests=$tests >/dev/null
elif [ ${#missing[@]} -gt 0 ]; then
  meson configure build --clearcache -Dwerror=$werror -Dtests=$tests >/dev/null
else
  meson configure build -Dwerror=$werror -Dtests=$tests >/dev/null
fi
end

if [ -z "$program" ]; then
  # GPT-2's vocabulary (--tokenizer gpt2) and the tokenizer tests' references, outside the
  # repository; once there, nothing is fetched again.
  begin references "GPT-2's vocabulary files and the byte-pair encoding tests' references (npm)"
  tests/data/install_references.sh --apt >/dev/null
  end
  exit 0
fi
# Only the library and the one program: the tests and benchmarks (most of the ~190 targets)
# are left to `ninja -C build`, which the test command runs.
begin build "the library and build/tools/$program (ninja -C build -j2 tools/$program)"
ninja -C build -j2 "tools/$program"
end

begin run "build/tools/$program${*:+ $*} (in $caller)"
status=0
binary="$PWD/build/tools/$program"
(cd "$caller" && "$binary" "$@") || status=$?
end "exit status $status"
exit "$status"
