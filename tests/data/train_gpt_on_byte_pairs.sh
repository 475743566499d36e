#!/usr/bin/env bash
# train_gpt on words, as a user runs it (from a scratch directory): with a 4096-token vocabulary
# trained there by train_bpe, and with GPT-2's own (its files from the cache, see
# text/fetch_gpt2_vocab.sh; in CI they must be there). For each: the validation loss falls, a run stopped by
# Ctrl-C and resumed logs the very rows of the uninterrupted run, and generate, which has only
# the checkpoint, prints valid UTF-8.
#
#   tests/data/train_gpt_on_byte_pairs.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/../in_scratch_directory.sh" "$@"
tiny=(--layers 1 --d-model 32 --heads 2 --block-size 16 --batch 8 --warmup 5 --eval-windows 16 --threads 1)
untimed() { sed -E 's/"tokens_per_s":[^,}]*//; s/"elapsed_s":[^,}]*//' "$1"; }
rows() { [ -f "$1" ] && wc -l <"$1" || echo 0; }

"$build/tools/train_bpe" --vocab-size 4096 --out fortunes.bpe >bpe.out 2>&1 || { cat bpe.out; exit 1; }
tokenizers=(fortunes.bpe)
printf 'hello\n' >hello.txt
if "$build/tools/tokenize" --tokenizer gpt2 hello.txt >refs.out 2>&1; then
  tokenizers+=(gpt2)
elif [ "${CI:-}" = "true" ]; then
  fail "GPT-2's files are missing (.ci/run installs them): $(cat refs.out)"
else
  echo "(GPT-2's files are missing, only the trained vocabulary is checked: $(cat refs.out))"
fi

for tok in "${tokenizers[@]}"; do
  name=${tok%.bpe}
  # Uninterrupted: 150 steps, an evaluation every 50.
  run=("$build/tools/train_gpt" --tokenizer "$tok" "${tiny[@]}" --steps 150 --eval-every 50)
  "${run[@]}" --save "$name-u.st" --log "$name-u.jsonl" --plot "$name-u.svg" >u.out 2>&1 || { fail "$tok: $(cat u.out)"; continue; }
  grep -q "bpe tokenizer, vocab $([ "$tok" = gpt2 ] && echo 50257 || echo 4096)" u.out ||
    fail "$tok: the run does not name its tokenizer: $(grep '^data' u.out)"
  /usr/bin/python3 - "$name-u.jsonl" <<'PY' || fail "$tok: the validation loss did not fall"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
first, last = rows[0]["eval_loss"], rows[-1]["eval_loss"]
print(f"validation loss {first:.4f} at step 0, {last:.4f} at step {rows[-1]['step']}")
sys.exit(0 if last < first - 0.5 else 1)
PY
  # Stopped by Ctrl-C after its first evaluation, then resumed: the same rows, bit for bit.
  interruptible "${run[@]}" --save "$name-r.st" --log "$name-r.jsonl" --plot "$name-r.svg" >r.out 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do [ "$(rows "$name-r.jsonl")" -ge 2 ] && break; sleep 0.05; done
  kill -INT "$pid" 2>/dev/null
  status=0
  wait "$pid" || status=$?
  if [ "$status" = 130 ]; then
    # What only observes the run (the evaluation's windows and cadence, threads) is given again.
    "$build/tools/train_gpt" --resume "$name-r.st" --log "$name-r.jsonl" --plot "$name-r.svg" --quiet \
      --eval-windows 16 --eval-every 50 --threads 1 >r2.out 2>&1 ||
      fail "$tok: resume: $(cat r2.out)"
    cmp -s <(untimed "$name-u.jsonl") <(untimed "$name-r.jsonl") &&
      echo "ok: $tok: $(grep -o 'interrupted after [0-9]* steps' r.out), resumed: the uninterrupted run's rows" ||
      fail "$tok: the resumed run's rows differ: $(diff <(untimed "$name-u.jsonl") <(untimed "$name-r.jsonl") | head -5)"
  else
    fail "$tok: Ctrl-C after the first evaluation: exit $status, not 130 (the run ended first?): $(tail -3 r.out)"
  fi
  # generate needs only the checkpoint; what it prints is UTF-8 (a token's bytes can split a
  # character, so a sample that decodes is the tokenizer's doing, not luck).
  "$build/tools/generate" --checkpoint "$name-u.st" --prompt "The meaning of life" --tokens 200 --seed 3 \
    >sample.txt 2>gen.err || fail "$tok: generate: $(cat gen.err)"
  if /usr/bin/python3 -c 'import sys; t = open(sys.argv[1], "rb").read(); t.decode("utf-8"); sys.exit(0 if t.startswith(b"The meaning of life") and len(t) > 40 else 1)' sample.txt; then
    echo "ok: $tok: generate printed $(wc -c <sample.txt) bytes of UTF-8"
  else
    fail "$tok: the sample is not UTF-8 text after the prompt: $(head -c 200 sample.txt | od -c | head -3)"
  fi
done
finish
