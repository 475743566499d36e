#!/usr/bin/env bash
# The training programs check their writes to stdout as generate does: a closed stdout or a full
# disk is an error (exit 1 with a message) found before the first step, so no output file ever
# receives the progress lines; with SIGPIPE ignored, a reader that went away makes the run end
# with an error once its files are safe, instead of exit 0. Run from a scratch directory.
#   training_programs_check_their_writes.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/../in_scratch_directory.sh" "$@"
tiny=(--steps 2 --warmup 1 --eval-every 2 --d-model 8 --heads 1 --quiet)
declare -A flags=(
  [train_sequence]="--d-ff 8 --layers 1 --eval-sequences 8"
  [train_gpt]="--data $source/README.md --layers 1 --block-size 8 --batch 4"
  [train_seq2seq]="--d-ff 8 --encoder-layers 1 --decoder-layers 1 --eval-sequences 8 --batch 8"
)

# check DESCRIPTION STATUS EXPECTED_STATUS WORDS: the status, and a stderr line with WORDS.
check() {
  if [ "$2" -eq "$3" ] && grep -q -- "$4" err.txt; then
    echo "ok: $1 -> exit $2: $(head -c 160 err.txt)"
  else
    fail "$1 (status $2, expected $3 and '$4')"
    cat err.txt
  fi
}

for program in train_sequence train_gpt train_seq2seq; do
  # shellcheck disable=SC2206  # the flags are words
  run=("$build/tools/$program" "${tiny[@]}" ${flags[$program]})
  rm -rf runs
  status=0
  "${run[@]}" >/dev/full 2>err.txt || status=$?
  check "$program >/dev/full" "$status" 1 "cannot write to standard output: No space left on device"
  [ ! -e runs ] || [ -z "$(find runs -name metrics.jsonl -size +0)" ] || fail "$program trained with stdout full"
  rm -rf runs
  status=0
  "${run[@]}" >&- 2>err.txt || status=$?
  check "$program with stdout closed" "$status" 1 "cannot write to standard output: Bad file descriptor"
  ! grep -rqsE "^(run    |model  |step )" runs ||
    fail "$program wrote its progress into a file: $(grep -rlE "^(run    |model  |step )" runs)"
  status=0
  # A pipe whose reader is gone before the program starts (no race with a reader still reading),
  # and SIGPIPE ignored as the program inherits it.
  /usr/bin/python3 -c '
import os, signal, subprocess, sys
r, w = os.pipe()
os.close(r)
signal.signal(signal.SIGPIPE, signal.SIG_IGN)
with open("err.txt", "w") as err:
    sys.exit(subprocess.call(sys.argv[1:], stdout=w, stderr=err, restore_signals=False))
' "${run[@]}" || status=$?
  check "$program into a pipe nobody reads, SIGPIPE ignored" "$status" 1 "cannot write to standard output: Broken pipe"
done
finish
