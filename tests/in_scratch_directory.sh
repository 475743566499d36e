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
# `interruptible COMMAND... &`: starts COMMAND in the background with SIGINT and SIGQUIT at their
# defaults, as a job in a terminal has them, and $! is COMMAND's own pid. A script's background
# job (`cmd &`) starts with both ignored, and the programs keep a signal that was ignored at start,
# so a `kill -INT` meant as Ctrl-C must go to a job started this way. Only with `&`: it execs.
interruptible() {
  trap - INT QUIT
  exec "$@"
}
# `stop_when_logged SIGNAL PID LOG ROWS`: once the metrics log LOG holds ROWS rows (or after 10 s),
# sends SIGNAL to PID (a run started with `interruptible ... &` for INT) and waits for it to end,
# whatever its status.
stop_when_logged() {
  local signal=$1 pid=$2 log=$3 rows=$4
  for _ in $(seq 1 1000); do
    [ -e "$log" ] && [ "$(wc -l <"$log")" -ge "$rows" ] && break
    sleep 0.01
  done
  kill -"$signal" "$pid" 2>/dev/null || true
  wait "$pid" || true
}
