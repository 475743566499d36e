#!/usr/bin/env bash
# Builds and runs examples/custom_layer against an INSTALLED attograd, the way a user would:
#   1. `meson install` into a staging directory inside the build tree (DESTDIR);
#   2. points pkg-config (and the loader) at the staged copy, and nothing else (the .pc file
#      is relocatable);
#   3. compiles every installed header from the staged include directory alone (a header that
#      a public header includes but the install lists miss fails here);
#   4. configures examples/custom_layer as a separate meson project (no subproject fallback),
#      builds it, checks it loads the staged library, and runs it.
# Usage: run_custom_layer.sh SOURCE_ROOT BUILD_ROOT   (meson test passes both)
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 SOURCE_ROOT BUILD_ROOT" >&2
  exit 2
fi
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
stage="$build/staging"

rm -rf "$stage"
meson install -C "$build" --no-rebuild --quiet --destdir "$stage"

pc=$(find "$stage" -name attograd.pc -print -quit)
if [ -z "$pc" ]; then
  echo "run_custom_layer: meson install put no attograd.pc under $stage" >&2
  exit 1
fi
# The README's words and nothing more: the .pc file is relocatable (its prefix is relative to
# the file), so pointing PKG_CONFIG_PATH at the staged copy is all pkg-config needs.
export PKG_CONFIG_PATH
PKG_CONFIG_PATH=$(dirname "$pc")
libdir=$(pkg-config --variable=libdir attograd)
includedir=$(pkg-config --variable=includedir attograd)
case "$libdir" in
  "$stage"/*) ;;
  *) echo "run_custom_layer: pkg-config puts the staged library at $libdir, outside $stage" >&2; exit 1 ;;
esac
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

work=$(mktemp -d "$build/custom_layer.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "== every installed header compiles from $includedir"
# Every header as a user includes it: <attograd.h> and <attograd/core/tensor.h>, ... The
# include path is <prefix>/include alone, so a user's own core/ folder cannot collide.
(cd "$includedir" && find attograd.h attograd -name '*.h' | sort | sed 's|^\(.*\)$|#include <\1>|') >"$work/all_headers.cpp"
if grep -rn '#include "\(core\|autograd\|layers\|models\|text\|train\)/' "$includedir/attograd" "$includedir/attograd.h"; then
  echo "run_custom_layer: an installed header includes a bare path (above) instead of attograd/..." >&2
  exit 1
fi
echo "int main() { return 0; }" >>"$work/all_headers.cpp"
# shellcheck disable=SC2046  # pkg-config prints several flags
"${CXX:-c++}" -std=c++20 -fsyntax-only $(pkg-config --cflags attograd) "$work/all_headers.cpp"
echo "$(grep -c '#include' "$work/all_headers.cpp") headers"

# An ASan/UBSan build of the library needs a consumer built with the same sanitizers.
sanitize=$(meson introspect "$build" --buildoptions |
  python3 -c 'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "b_sanitize"))')

echo "== configure and build examples/custom_layer against the staged install"
meson setup "$work/build" "$src/examples/custom_layer" --wrap-mode=nofallback -Dwerror=true \
  -Db_sanitize="$sanitize" >"$work/setup.log" || { cat "$work/setup.log"; exit 1; }
grep -i "dependency attograd" "$work/setup.log" || true
ninja -C "$work/build" >"$work/build.log" || { cat "$work/build.log"; exit 1; }

loaded=$(ldd "$work/build/custom_layer" | grep libattograd || true)
case "$loaded" in
  *"$stage"*) echo "loads $loaded" ;;
  *)
    echo "run_custom_layer: custom_layer does not load the staged libattograd: ${loaded:-not linked}" >&2
    exit 1
    ;;
esac

echo "== run"
"$work/build/custom_layer"
