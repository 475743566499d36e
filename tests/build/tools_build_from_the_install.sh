#!/usr/bin/env bash
# The programs are written on the public API: installed into a staging directory, the library's
# headers are all a tool needs.
#   1. every "attograd/..." header any file of tools/ includes is among the installed headers,
#      and tools/ includes nothing else of the tree (its own files only, by relative path);
#   2. tools/evaluate.cpp with tools/common/ is compiled and linked in a scratch directory
#      against the staged install alone (pkg-config attograd-models, CLI11), and the program
#      runs from there, loading the staged libraries;
#   3. the framework's library links no PCRE2 (text/ does), and no MPI when the build was
#      configured without it.
# Usage: tools_build_from_the_install.sh SOURCE_ROOT BUILD_ROOT
set -euo pipefail
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
stage="$build/staging-tools"
rm -rf "$stage"
meson install -C "$build" --no-rebuild --quiet --destdir "$stage"
pc=$(find "$stage" -name attograd-models.pc -print -quit)
[ -n "$pc" ] || { echo "tools_build_from_the_install: no attograd-models.pc under $stage" >&2; exit 1; }
export PKG_CONFIG_PATH
PKG_CONFIG_PATH=$(dirname "$pc")
includedir=$(pkg-config --variable=includedir attograd-models)
libdir=$(pkg-config --variable=libdir attograd-models)
work=$(mktemp -d "$build/tools_install.XXXXXX")
trap 'rm -rf "$work" "$stage"' EXIT

echo "== 1. tools/ includes installed headers only"
bad=0
while IFS= read -r line; do
  file=${line%%:*}
  header=$(sed -n 's/.*#include "\([^"]*\)".*/\1/p' <<<"$line")
  case $header in
    attograd/*|attograd.h)
      [ -f "$includedir/$header" ] || { echo "$file includes $header, which is not installed"; bad=1; } ;;
    *)
      [ -f "$src/$(dirname "$file")/$header" ] || { echo "$file includes $header, not a file of tools/"; bad=1; } ;;
  esac
done < <(cd "$src" && grep -rn '#include "' tools)
[ "$bad" = 0 ] || exit 1
echo "$(cd "$src" && grep -rh '#include "attograd' tools | sort -u | wc -l) distinct library headers, all installed"

echo "== 2. tools/evaluate.cpp built from the install"
cp -r "$src/tools/common" "$src/tools/evaluate.cpp" "$work/"
# A sanitizer build of the library needs a program built with the same sanitizers.
sanitize=$(meson introspect "$build" --buildoptions |
  python3 -c 'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "b_sanitize"))')
sanitizer_flags=()
[ "$sanitize" = none ] || sanitizer_flags=(-fsanitize="$sanitize")
# shellcheck disable=SC2046  # pkg-config prints several flags
(cd "$work" && "${CXX:-c++}" -std=c++20 -O0 "${sanitizer_flags[@]}" -DATTOGRAD_VERSION='"install-test"' evaluate.cpp \
   -o evaluate $(pkg-config --cflags --libs attograd-models CLI11))
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
loaded=$(ldd "$work/evaluate" | grep libattograd)
echo "$loaded"
if grep -v -q "$stage" <<<"$loaded"; then
  echo "tools_build_from_the_install: evaluate loads a libattograd outside the staging directory" >&2
  exit 1
fi
(cd "$work" && ./evaluate --version)
status=0
echo "Some text to score." >"$work/text.txt"
(cd "$work" && ./evaluate --checkpoint missing.safetensors --data text.txt --stride 4 >out.txt 2>err.txt) || status=$?
cat "$work/err.txt"
[ "$status" != 0 ] && grep -q 'missing.safetensors' "$work/err.txt" ||
  { echo "tools_build_from_the_install: the staged evaluate did not refuse a missing checkpoint by name" >&2; exit 1; }

echo "== 3. what the framework's library links"
# Each ldd output is read whole before it is searched: grep -q leaving at its first match can end
# ldd with SIGPIPE, which pipefail would report as no match.
framework=$(find "$build" -maxdepth 1 -name 'libattograd.so' -print -quit)
framework_links=$(ldd "$framework")
text_links=$(ldd "$build/libattograd-text.so")
sed 's/^/  /' <<<"$framework_links"
if grep -q pcre2 <<<"$framework_links"; then
  echo "tools_build_from_the_install: libattograd.so links PCRE2; only libattograd-text should" >&2
  exit 1
fi
grep -q pcre2 <<<"$text_links" || { echo "libattograd-text.so does not link PCRE2" >&2; exit 1; }
mpi=$(meson introspect "$build" --buildoptions |
  python3 -c 'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "mpi"))')
if [ "$mpi" = disabled ] && grep -q libmpi <<<"$framework_links"; then
  echo "tools_build_from_the_install: a build configured with -Dmpi=disabled links MPI" >&2
  exit 1
fi
echo "ok (mpi: $mpi)"
