#!/usr/bin/env bash
# --recompute (activation recompute in every block) changes no number in any training program:
# with dropout on, the checkpoint after 4 updates holds the same bits in every tensor (parameters
# and optimizer state) as the run without it, and the metrics logs give the same losses; with
# --grad-accum 2 as well for the GPT. The description says it is on. A run resumed with the
# switch turned on ends where the plain run ends. And it is on: a GPT of 8 blocks over 16 x 256
# tokens peaks at less than half the resident memory of the plain run.
#   recompute_changes_no_number.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/../in_scratch_directory.sh" "$@"
tensors="$source/tests/train/checkpoint_tensors.py"
seq 1 3000 | tr '\n' ' ' >text.txt
declare -A flags=(
  [train_gpt]="--data text.txt --layers 2 --d-model 16 --heads 2 --block-size 8 --batch 4 --eval-windows 4"
  [train_sequence]="--d-model 16 --heads 2 --d-ff 32 --layers 2 --batch 4 --eval-sequences 8"
  [train_seq2seq]="--d-model 16 --heads 2 --d-ff 32 --encoder-layers 2 --decoder-layers 2 --batch 4 --eval-sequences 8"
)
run() {  # run PROGRAM TAG FLAGS...: with dropout 0.1, saved as TAG.st, logged as TAG.jsonl
  local program=$1 tag=$2
  shift 2
  # shellcheck disable=SC2086
  "$build/tools/$program" ${flags[$program]} --dropout 0.1 --warmup 0 --seed 5 \
    --save "$tag.st" --log "$tag.jsonl" --plot "$tag.svg" "$@" >"$tag.out" 2>&1 ||
    { fail "$program $*: $(cat "$tag.out")"; return 1; }
}
losses() { grep -o '"[a-z_]*loss[a-z_]*":[^,}]*' "$1"; }
same_run() {  # same_run A B WHAT
  python3 "$tensors" "$1.st" "$2.st" >cmp.txt
  if grep -qv '^same ' cmp.txt || [ ! -s cmp.txt ]; then
    fail "$3: the checkpoints differ: $(grep -v '^same ' cmp.txt | head -3)"
  elif [ "$(losses "$1.jsonl")" != "$(losses "$2.jsonl")" ] || [ -z "$(losses "$1.jsonl")" ]; then
    fail "$3: the losses differ: $(losses "$1.jsonl" | head -2) / $(losses "$2.jsonl" | head -2)"
  else
    echo "ok: $3: $(grep -c '^same ' cmp.txt) tensors bit-identical, $(losses "$1.jsonl" | wc -l) losses equal"
  fi
}
for program in train_gpt train_sequence train_seq2seq; do
  run "$program" "$program-plain" --steps 4 --eval-every 2 || continue
  run "$program" "$program-recompute" --steps 4 --eval-every 2 --recompute || continue
  grep -q "blocks recomputed in backward" "$program-recompute.out" ||
    fail "$program: the description does not say --recompute: $(cat "$program-recompute.out")"
  same_run "$program-plain" "$program-recompute" "$program --recompute"
done

run train_gpt accum-plain --steps 4 --eval-every 2 --grad-accum 2 &&
  run train_gpt accum-recompute --steps 4 --eval-every 2 --grad-accum 2 --recompute &&
  same_run accum-plain accum-recompute "train_gpt --grad-accum 2 --recompute"

# Stopped plain and resumed with the switch: a resume may turn it on, and ends where the plain,
# uninterrupted run ends (SIGTERM: a background job of a script ignores SIGINT).
long=(--steps 300 --eval-every 20)
run train_gpt straight "${long[@]}"
# shellcheck disable=SC2086
"$build/tools/train_gpt" ${flags[train_gpt]} --dropout 0.1 --warmup 0 --seed 5 "${long[@]}" --save stopped.st \
  --log stopped.jsonl --plot stopped.svg >stopped.out 2>&1 &
pid=$!
for _ in $(seq 1 300); do
  [ -e stopped.jsonl ] && [ "$(wc -l <stopped.jsonl)" -ge 2 ] && break
  sleep 0.05
done
kill -TERM "$pid" 2>/dev/null || true
wait "$pid" || true
grep -q "interrupted" stopped.out || fail "the run was not interrupted: $(cat stopped.out)"
"$build/tools/train_gpt" --data text.txt --resume stopped.st --recompute --quiet >resume.out 2>&1 ||
  fail "resuming with --recompute: $(cat resume.out)"
if python3 "$tensors" straight.st stopped.st | grep -v '^same '; then
  fail "the run resumed with --recompute does not end where the uninterrupted plain run ends"
else
  echo "ok: stopped plain, resumed with --recompute: ends bit for bit where the uninterrupted run ends"
fi

peak_mb() {  # peak_mb FLAGS...: the peak resident memory of a train_gpt run, in MB
  /usr/bin/python3 - "$build/tools/train_gpt" --data text.txt --layers 8 --d-model 64 --heads 4 --block-size 256 \
    --batch 16 --steps 2 --eval-every 2 --eval-windows 16 --quiet --overwrite "$@" <<'PY'
import resource, subprocess, sys
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)
PY
}
seq 1 30000 | tr '\n' ' ' >text.txt
# (Not `ldd | grep -q`: grep quits at the first match, ldd may then die of SIGPIPE, and under
# pipefail the test would go on to compare the sanitizer's sizes.)
if [[ $(ldd "$build/tools/train_gpt") == *libasan* ]]; then
  # AddressSanitizer's shadow and quarantine make the resident size its own; the library's
  # tests (recompute_region, recompute_models) hold the tensor memory in that build too.
  echo "skipped under AddressSanitizer: the peak resident memory comparison"
  finish
  exit
fi
plain_mb=$(peak_mb --run-name peak-plain) && recomputed_mb=$(peak_mb --run-name peak-recompute --recompute) &&
  if [ "$((2 * recomputed_mb))" -lt "$plain_mb" ]; then
    echo "ok: peak resident memory $plain_mb MB plain, $recomputed_mb MB with --recompute"
  else
    fail "--recompute does not lower the peak memory: $plain_mb MB plain, $recomputed_mb MB with it"
  fi || fail "the peak-memory runs failed"
finish
