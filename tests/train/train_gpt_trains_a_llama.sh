#!/usr/bin/env bash
# train_gpt --preset llama-tiny, as a user runs it (from a scratch directory, on the default text,
# Debian's fortunes): the run describes a Llama, its validation loss falls, a run stopped by Ctrl-C
# and resumed logs the very rows of the uninterrupted run, and generate and evaluate read the
# checkpoint alone. What a preset cannot take (GPT's shape flags, a base that is not of the
# family, a window beyond the context, a preset without its tokenizer) is refused by name with
# exit 2. (export_gpt's Llama export is tests/parity/llama_export_matches_torch.sh's; fine-tuning
# is train_gpt_fine_tunes_a_llama.sh's.)
#   train_gpt_trains_a_llama.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/../in_scratch_directory.sh" "$@"
untimed() { sed -E 's/"tokens_per_s":[^,}]*//; s/"elapsed_s":[^,}]*//' "$1"; }
rows() { [ -f "$1" ] && wc -l <"$1" || echo 0; }

run=("$build/tools/train_gpt" --preset llama-tiny --block-size 32 --batch 8 --steps 300 --eval-every 100
  --eval-windows 16 --threads 1)
"${run[@]}" --save u.st --log u.jsonl --plot u.svg >u.out 2>&1 || { cat u.out; fail "the uninterrupted run"; finish; exit 1; }
grep -q "^model  Llama 4 layers, 4 heads over 2 key/value heads, d_model 128, MLP 384, context 256, window 32" u.out ||
  fail "the run does not describe its Llama: $(grep '^model' u.out)"
grep -q "byte tokenizer, vocab 256" u.out || fail "llama-tiny does not read bytes: $(grep '^data' u.out)"
/usr/bin/python3 - u.jsonl <<'PY' || fail "the validation loss did not fall by 1 nat"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
first, last = rows[0]["eval_loss"], rows[-1]["eval_loss"]
print(f"ok: validation loss {first:.4f} at step 0, {last:.4f} at step {rows[-1]['step']}")
sys.exit(0 if last < first - 1.0 else 1)
PY

# Stopped by Ctrl-C after its first evaluation after step 0, then resumed: the same rows, bit for bit.
interruptible "${run[@]}" --save r.st --log r.jsonl --plot r.svg >r.out 2>&1 &
pid=$!
for _ in $(seq 1 600); do [ "$(rows r.jsonl)" -ge 2 ] && break; sleep 0.05; done
kill -INT "$pid" 2>/dev/null
status=0
wait "$pid" || status=$?
if [ "$status" = 130 ]; then
  "$build/tools/train_gpt" --resume r.st --log r.jsonl --plot r.svg --quiet --eval-windows 16 --eval-every 100 \
    --threads 1 >r2.out 2>&1 || fail "resume: $(cat r2.out)"
  cmp -s <(untimed u.jsonl) <(untimed r.jsonl) &&
    echo "ok: $(grep -o 'interrupted after [0-9]* steps' r.out), resumed: the uninterrupted run's rows" ||
    fail "the resumed run's rows differ: $(diff <(untimed u.jsonl) <(untimed r.jsonl) | head -5)"
else
  fail "Ctrl-C after the first evaluation: exit $status, not 130 (the run ended first?): $(tail -3 r.out)"
fi

# generate and evaluate need only the checkpoint.
"$build/tools/generate" --checkpoint u.st --prompt "The " --tokens 60 --seed 3 >sample.txt 2>gen.err ||
  fail "generate: $(cat gen.err)"
{ head -c 4 sample.txt | grep -qx "The " && [ "$(wc -c <sample.txt)" -gt 40 ]; } ||
  fail "generate did not continue the prompt: $(head -c 80 sample.txt | od -c | head -2)"
"$build/tools/generate" --checkpoint u.st --prompt "The " --tokens 60 --seed 3 --no-cache >again.txt 2>gen.err ||
  fail "generate --no-cache: $(cat gen.err)"
cmp -s sample.txt again.txt || fail "generate printed other text without the cache"
head -c 3000 /usr/share/games/fortunes/fortunes >part.txt
"$build/tools/evaluate" --checkpoint u.st --data part.txt --block-size 32 --stride 16 >eval.txt 2>eval.err ||
  fail "evaluate: $(cat eval.err)"
grep -q "^model .*Llama 4 layers, d_model 128, context 256" eval.txt || fail "evaluate's model line: $(grep '^model' eval.txt)"
grep -q "^bits/byte " eval.txt || fail "evaluate printed no bits per byte: $(cat eval.txt)"
echo "ok: generate printed $(wc -c <sample.txt) bytes, the same without the cache; evaluate: $(grep '^bits/byte' eval.txt)"

# refused ERROR_PART ARGS...: train_gpt ARGS exits 2 and says ERROR_PART.
refused() {
  local expected=$1 status=0
  shift
  "$build/tools/train_gpt" "$@" >out.txt 2>err.txt || status=$?
  [ "$status" = 2 ] && grep -qF -- "$expected" err.txt || fail "train_gpt $*: exit $status, $(cat err.txt)"
}
refused "--layers shapes a GPT; --preset llama-tiny gives the Llama family's whole shape" --preset llama-tiny --layers 2
refused "is not a Llama-family base" --preset llama-tiny --init-from "$source/README.md"
refused "--block-size 300 is longer than --preset llama-tiny's context of 256 tokens" --preset llama-tiny --block-size 300
refused "--preset smollm2-135m reads 49152 tokens: give its tokenizer with --tokenizer" --preset smollm2-135m
status=0
"$build/tools/export_gpt" --checkpoint u.st --format llmc --out u.bin >out.txt 2>err.txt || status=$?
[ "$status" = 2 ] && grep -q "only the Hugging Face layout (hf) expresses" err.txt || fail "export --format llmc: $status $(cat err.txt)"
echo "ok: the refusals"
finish
