# Helpers of the scripts that run the training programs under a real mpirun (sourced by
# run_dp_checks.sh, run_rank_checks.sh and tests/hostile/sweep.sh).

# Root is refused unless asked for (this machine's CI runs as root); no ptrace-based single copy
# between ranks (containers forbid it), plain shared memory instead.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# `interruptible COMMAND... &`: starts COMMAND in the background with SIGINT and SIGQUIT at their
# defaults, as a job in a terminal has them, and $! is COMMAND's own pid. A script's background
# job (`cmd &`) starts with both ignored, and the programs keep a signal that was ignored at start,
# so a `kill -INT` meant as Ctrl-C must go to a job started this way. Only with `&`: it execs.
interruptible() {
  trap - INT QUIT
  exec "$@"
}

fail() {
  echo "FAIL: $*"
  exit 1
}
# enter_scratch_dir KEEP: cd into a new directory, removed at exit unless KEEP is non-empty.
enter_scratch_dir() {
  work=$(mktemp -d)
  [ -n "$1" ] || trap 'rm -rf "$work"' EXIT
  echo "work dir $work"
  cd "$work" || exit 1
}
# rank_pid PID R: the process of rank R in the job whose `timeout` has PID (timeout -> mpirun -> ranks).
rank_pid() {
  local launcher p
  launcher=$(pgrep -P "$1" | head -1)
  for p in $(pgrep -P "$launcher"); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then
      echo "$p"
      return
    fi
  done
}
# wait_rows FILE N: until FILE has N lines, at most 20 s.
wait_rows() {
  for _ in $(seq 1 200); do
    [ -f "$1" ] && [ "$(wc -l <"$1")" -ge "$2" ] && return
    sleep 0.1
  done
}
# A metrics log without its wall-clock fields.
untimed() { sed -E 's/"tokens_per_s":[^,}]*//; s/"elapsed_s":[^,}]*//' "$1"; }
# checkpoint_loop_step FILE: the update a checkpoint was saved after (its "loop" metadata entry).
checkpoint_loop_step() {
  python3 -c '
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    meta = json.loads(f.read(n))["__metadata__"]
print(json.loads(meta["loop"])["step"])' "$1" 2>/dev/null
}
