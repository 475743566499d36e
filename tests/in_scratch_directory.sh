# Sourced by the tests that run the programs from a scratch directory, as a user would:
#   source "$(dirname "$0")/../in_scratch_directory.sh" "$@"     # BUILD_DIR [SOURCE_DIR]
# leaves $build and $source as absolute paths, the working directory a fresh directory that is
# removed at exit, and `fail MESSAGE` to count a failure; `finish` prints the count and is the
# script's status.
set -euo pipefail
build=$(cd "$1" && pwd)
source=$(cd "${2:-.}" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cd "$scratch"
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
finish() {
  echo "$failures failures"
  [ "$failures" -eq 0 ]
}
