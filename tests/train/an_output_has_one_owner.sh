#!/usr/bin/env bash
# An output path has one owner: while a run trains, a second run on its --save (even with
# --overwrite) or on its metrics log is refused at start, naming the first's pid, and the first's
# checkpoint and log stay whole; the lock file a killed run leaves behind is taken over. Run from
# a scratch directory, as a user would. Nothing here is timed: the script waits for what the
# first run writes, then acts.
#   an_output_has_one_owner.sh BUILD_DIR
source "$(dirname "$0")/../in_scratch_directory.sh" "$@"
seq=$build/tools/train_sequence
pids=()  # the runs started in the background, killed at exit if still running
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  rm -rf "$scratch"
}
trap cleanup EXIT
# sort over 64 symbols stays far from 100% exact: a run with this budget trains until stopped.
tiny=(--task sort --vocab 64 --length 32 --d-model 16 --heads 2 --d-ff 32 --layers 1 --batch 8 --warmup 1
  --eval-every 5 --eval-sequences 8 --quiet)
endless=("${tiny[@]}" --steps 1000000 --target-acc 1)
# wait_for_line PID FILE REGEX: until FILE has a line matching REGEX; 1 if PID ended first.
wait_for_line() {
  until grep -qE "$3" "$2" 2>/dev/null; do
    kill -0 "$1" 2>/dev/null || { grep -qE "$3" "$2" 2>/dev/null; return; }
    sleep 0.05
  done
}

interruptible "$seq" "${endless[@]}" --save run.ck --log run.jsonl --plot run.svg >first.out 2>first.err &
first=$!
pids+=("$first")
# Its metrics row after step 5 comes after its first save, and once its Ctrl-C handler is in place.
wait_for_line "$first" run.jsonl '^\{"step":5,' || { cat first.err; exit 1; }

# second NAME FLAG PATH ARGS...: a short run that must be refused, naming FLAG and the first's pid.
second() {
  local name=$1 role=$2 status=0
  shift
  "$seq" "${tiny[@]}" --steps 5 "$@" >"$name.out" 2>"$name.err" || status=$?
  if [ "$status" -ne 1 ] || ! grep -q -- "^train_sequence: error: $role .*in use by another run (pid $first" "$name.err"; then
    fail "$name: $* (status $status, expected 1 naming $role and pid $first)"
    cat "$name.err"
  else
    echo "ok: $name refused: $(head -c 200 "$name.err")"
  fi
}
# Each second run logs into a directory of its own, so that only the path tried is shared.
second same-save --save run.ck --overwrite --log a/m.jsonl
second same-log --log run.jsonl --save b/other.ck
ln -s run.ck link.ck
second same-save-by-symlink --save link.ck --overwrite --log c/m.jsonl
[ ! -e b/other.ck ] || fail "a refused run wrote b/other.ck"

kill -INT "$first"
status=0
wait "$first" || status=$?
[ "$status" -eq 130 ] || fail "the first run ended with $status after Ctrl-C, expected 130"
stopped=$(sed -n 's/^interrupted after \([0-9]*\) steps.*/\1/p' first.out)
[ -n "$stopped" ] || fail "the first run does not say where it stopped: $(cat first.out)"
# Its log: one row per evaluation of this run alone, steps rising, every line whole.
previous=-1
while IFS= read -r line; do
  step=$(sed -n 's/^{"step":\([0-9]*\),.*}$/\1/p' <<<"$line")
  if [ -z "$step" ] || [ "$step" -le "$previous" ]; then
    fail "run.jsonl has a line out of place after step $previous: $line"
    break
  fi
  previous=$step
done <run.jsonl
[ "$previous" -le "${stopped:-0}" ] || fail "run.jsonl goes on to step $previous, the run stopped at $stopped"
ls ./*.lock >/dev/null 2>&1 && fail "lock files remain after the run: $(ls ./*.lock)"
# Its checkpoint resumes at the step it stopped at.
"$seq" --resume run.ck --log resumed.jsonl --plot resumed.svg --eval-sequences 8 --quiet >resumed.out 2>resumed.err &
resumed=$!
pids+=("$resumed")
wait_for_line "$resumed" resumed.out '^train  ' || true
grep -q "^resumed run.ck at step $stopped$" resumed.out || fail "run.ck does not resume at step $stopped: $(cat resumed.out resumed.err)"
kill -9 "$resumed" 2>/dev/null || true
wait "$resumed" 2>/dev/null || true

# A run killed with -9 leaves its lock file behind; the next run on the path takes it over.
"$seq" "${endless[@]}" --save killed.ck --log killed.jsonl --plot killed.svg >killed.out 2>killed.err &
killed=$!
pids+=("$killed")
wait_for_line "$killed" killed.jsonl '^\{"step":0' || { cat killed.err; exit 1; }
kill -9 "$killed"
wait "$killed" 2>/dev/null || true
grep -q "pid $killed" killed.ck.lock || fail "the killed run left no lock file naming pid $killed"
status=0
"$seq" "${tiny[@]}" --steps 5 --save killed.ck --overwrite --log killed.jsonl --plot killed.svg >after.out 2>after.err ||
  status=$?
if [ "$status" -ne 0 ] || [ -e killed.ck.lock ]; then
  fail "the run after a killed one (status $status; expected 0 and its lock file gone)"
  cat after.err
else
  echo "ok: the lock file of the killed pid $killed was taken over and removed at the end"
fi

finish
