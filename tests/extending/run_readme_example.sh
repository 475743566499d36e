#!/usr/bin/env bash
# Compiles and runs the README's example program (its first ```cpp block) against the BUILD
# TREE, with nothing but the flags of build/meson-uninstalled/attograd-uninstalled.pc, from a
# scratch directory outside the source tree, as the README's "Using attograd from your own
# project" describes. The block is a fragment: its #include and using lines stay at file scope,
# the statements go into main(), which exits 0 when the block's gradient check passes.
# Usage: run_readme_example.sh SOURCE_ROOT BUILD_ROOT   (meson test passes both)
set -euo pipefail
src=$(cd "${1:?usage: run_readme_example.sh SOURCE_ROOT BUILD_ROOT}" && pwd)
build=$(cd "${2:?usage: run_readme_example.sh SOURCE_ROOT BUILD_ROOT}" && pwd)
block=$(awk '/^```cpp$/ { inside = 1; next } inside && /^```$/ { exit } inside' "$src/README.md")
if [ -z "$block" ]; then
  echo "run_readme_example: README.md has no \`\`\`cpp block" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
{
  echo "#include <iostream>"
  grep -E '^(#include|using namespace)' <<<"$block"
  echo "int main() {"
  grep -vE '^(#include|using namespace)' <<<"$block"
  echo '  std::cout << "gradcheck: " << (check.ok ? "ok" : check.report) << "\n";'
  echo "  return check.ok ? 0 : 1;"
  echo "}"
} >example.cpp

# A sanitizer build of the library needs a consumer built with the same sanitizers.
sanitize=$(meson configure "$build" | awk '$1 == "b_sanitize" { print $2 }')
extra=()
[ "$sanitize" = none ] || extra=(-fsanitize="$sanitize")

# The README's words: PKG_CONFIG_PATH=build/meson-uninstalled, run from the scratch directory.
export PKG_CONFIG_PATH="$build/meson-uninstalled"
flags=$(pkg-config --cflags --libs attograd-uninstalled)
echo "pkg-config --cflags --libs attograd-uninstalled: $flags"
# shellcheck disable=SC2086  # pkg-config prints several flags
"${CXX:-c++}" -std=c++20 -Wall -Wextra -Werror "${extra[@]}" example.cpp -o example $flags
LD_LIBRARY_PATH="$build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ./example
