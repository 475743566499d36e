#!/usr/bin/env bash
# train_gpt fine-tuning a Llama-family model, as a user runs it from a scratch directory, with
# the checkpoints compared tensor by tensor:
#   --init-from a Hugging Face directory (the PyTorch twin's byte_llama, copied here) with
#     --lora-rank: every base tensor of the checkpoint is bit-identical to the directory's, the
#     16 adapter tensors are there and B has moved off zero; export_gpt merges the adapters into a
#     directory that evaluate scores as the checkpoint (bits per byte within 1e-5);
#   --freeze PATTERN: the tensors it names bit-identical, the others changed;
#   --save-adapter-only: stopped by Ctrl-C and resumed, bit for bit the uninterrupted run;
#     generate reads it; export_gpt refuses to write over its base; a base directory changed by
#     one byte is refused by generate and resume;
#   export_gpt --dtype bf16 from a checkpoint and from a directory: half the bytes, the scores
#     within 0.01 bits per byte (a GPT is refused bf16);
#   a run's own directory and tokenizer.json: train_bpe --format hf, a llama-tiny on it, export_gpt
#     (which writes that tokenizer.json back), then --init-from the directory with no --tokenizer;
#     and --init-from a Llama checkpoint of train_gpt;
#   bad input (a target that does not exist, a rank above a projection, a --freeze that names
#     nothing, a directory without tokenizer.json, GPT shape flags or --preset beside a base, a
#     tokenizer larger than the model's table, a window beyond the context, a base with adapters):
#     a message naming the value, and nothing written.
#   train_gpt_fine_tunes_a_llama.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/../in_scratch_directory.sh" "$@"
tensors="$source/tests/train/checkpoint_tensors.py"
cp -r "$source/tests/parity/fixtures/llama/byte_llama" base
for i in $(seq 1 300); do echo "line $i: the cat sat on the mat, and the dog ran after $((i * 7 % 13)) birds."; done >text.txt
tg() { "$build/tools/train_gpt" --data text.txt --quiet "$@"; }
small=(--batch 4 --eval-windows 2)
window=(--block-size 64)

# LoRA on a Hugging Face directory: only the adapters change.
tg --init-from base --tokenizer byte --lora-rank 4 "${small[@]}" "${window[@]}" --steps 20 --eval-every 10 --save lora.st \
  --log lora.jsonl --plot lora.svg >out.txt 2>&1 || { cat out.txt; fail "the LoRA run failed"; finish; exit 1; }
grep -q "^init   Hugging Face directory base$" out.txt || fail "no init line: $(cat out.txt)"
grep -q "^tune   LoRA rank 4 alpha 4 on q_proj k_proj v_proj o_proj, 1792 of 33696 parameters train" out.txt ||
  fail "the description does not say LoRA: $(cat out.txt)"
python3 "$tensors" base/model.safetensors lora.st | grep -v optimizer/ >cmp.txt
[ "$(grep -c '^same ' cmp.txt)" -eq 21 ] && [ "$(grep -vc -e '^same ' -e 'lora_[ab]$' cmp.txt)" -eq 0 ] ||
  fail "a base tensor changed under LoRA: $(grep -v '^same ' cmp.txt | grep -v lora_)"
[ "$(grep -c '^only-in-b model\.layers\.[01]\.self_attn\.[qkvo]_proj\.lora_[ab]$' cmp.txt)" -eq 16 ] ||
  fail "not 16 adapter tensors: $(grep lora_ cmp.txt)"
python3 "$tensors" --nonzero .lora_b lora.st || fail "an adapter's B is still zero"
echo "ok: LoRA on a Hugging Face directory, all 21 base tensors bit-identical after 20 steps"

# The merged export scores as the checkpoint with its adapters; the base scores worse.
"$build/tools/export_gpt" --checkpoint lora.st --format hf --out merged >out.txt 2>&1 || fail "export: $(cat out.txt)"
bpb() { "$build/tools/evaluate" --checkpoint "$@" --data text.txt --block-size 64 --stride 32 | sed -n 's/^bits\/byte  //p'; }
tuned=$(bpb lora.st) merged=$(bpb merged --tokenizer byte) untuned=$(bpb base --tokenizer byte)
awk -v a="$tuned" -v b="$merged" -v c="$untuned" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d < 1e-5 && a < c) }' ||
  fail "bits per byte: checkpoint '$tuned', merged export '$merged', base '$untuned'"
echo "ok: the merged export scores $merged bits per byte as the checkpoint ($tuned); the base $untuned"

# --freeze: what it names stays, the rest trains.
tg --init-from base --tokenizer byte --freeze model.embed_tokens --freeze 'model.layers.0.*' "${small[@]}" "${window[@]}" --steps 4 \
  --eval-every 4 --save frozen.st --log frozen.jsonl --plot frozen.svg >out.txt 2>&1 || fail "--freeze: $(cat out.txt)"
python3 "$tensors" base/model.safetensors frozen.st | grep -v optimizer/ >cmp.txt
grep -E " (model\.embed_tokens\.weight|model\.layers\.0\..*)$" cmp.txt | grep -v "^same " && fail "a frozen tensor changed"
grep -Ev " (model\.embed_tokens\.weight|model\.layers\.0\..*)$" cmp.txt | grep "^same " && fail "an unfrozen tensor did not train"
echo "ok: --freeze"

# Adapter-only, stopped by Ctrl-C (SIGINT) and resumed, against the uninterrupted run.
long=(--init-from base --tokenizer byte --lora-rank 2 --lora-alpha 8 --lora-targets q_proj v_proj down_proj
      --save-adapter-only "${small[@]}" "${window[@]}" --steps 300 --eval-every 10)
tg "${long[@]}" --save straight.st --log straight.jsonl --plot straight.svg >out.txt 2>&1 ||
  fail "the uninterrupted adapter run failed: $(cat out.txt)"
interruptible "$build/tools/train_gpt" --data text.txt --quiet "${long[@]}" --save stopped.st --log stopped.jsonl \
  --plot stopped.svg >stopped.txt 2>&1 &
stop_when_logged INT $! stopped.jsonl 2
grep -q "interrupted" stopped.txt || fail "the run was not interrupted: $(cat stopped.txt)"
tg --resume stopped.st >resumed.txt 2>&1 || fail "the resume failed: $(cat resumed.txt)"
python3 "$tensors" straight.st stopped.st | grep -v "^same " && fail "the resumed adapter run differs from the uninterrupted one"
python3 "$tensors" straight.st straight.st | grep -Ev "lora_[ab](/[a-z_]+)?$" && fail "the adapter checkpoint holds a base tensor"
"$build/tools/generate" --checkpoint straight.st --prompt "line" --tokens 5 >gen.txt 2>&1 ||
  fail "generate could not read the adapter: $(cat gen.txt)"
echo "ok: an adapter-only run stopped and resumed ends bit for bit as the uninterrupted one"

# An export never writes over the base an adapter reads, whatever --overwrite says.
cp base/model.safetensors pristine.safetensors
status=0
"$build/tools/export_gpt" --checkpoint straight.st --format hf --out base --overwrite >out.txt 2>&1 || status=$?
[ "$status" -eq 2 ] && grep -q "the checkpoint's base weights" out.txt ||
  fail "an export over the adapter's base: exit $status, $(cat out.txt)"
cmp -s base/model.safetensors pristine.safetensors || fail "the export over the base changed it"
# bfloat16 on request, from a checkpoint and from a directory: half the bytes, the same scores
# within bfloat16's rounding.
"$build/tools/export_gpt" --checkpoint lora.st --format hf --dtype bf16 --out half >out.txt 2>&1 ||
  fail "export --dtype bf16: $(cat out.txt)"
grep -q "parameters, bfloat16" out.txt || fail "the bf16 export does not say so: $(cat out.txt)"
"$build/tools/export_gpt" --checkpoint base --format hf --dtype bf16 --out base-half >out.txt 2>&1 ||
  fail "converting a directory to bf16: $(cat out.txt)"
half=$(bpb half --tokenizer byte) base_half=$(bpb base-half --tokenizer byte)
awk -v a="$tuned" -v b="$half" -v c="$untuned" -v d="$base_half" \
  'BEGIN { x = a - b; y = c - d; if (x < 0) x = -x; if (y < 0) y = -y; exit !(b != "" && d != "" && x < 0.01 && y < 0.01) }' ||
  fail "bf16 exports score '$half' (checkpoint $tuned) and '$base_half' (base $untuned)"
[ $(($(stat -c %s half/model.safetensors) * 19 / 10)) -lt "$(stat -c %s merged/model.safetensors)" ] ||
  fail "the bf16 export is not about half the float32 one"
status=0
"$build/tools/export_gpt" --checkpoint "$source/tests/parity/fixtures/gpt2/hf_byte_f32.safetensors" --heads 4 --format hf \
  --dtype bf16 --out gpt-half >out.txt 2>&1 || status=$?
[ "$status" -eq 2 ] && grep -q -- "--dtype bf16: GPT-2's layouts are written in float32" out.txt ||
  fail "--dtype bf16 for a GPT: exit $status, $(cat out.txt)"
echo "ok: exports keep off the base; bf16 exports score $half and $base_half"

# One byte of the base's weights changes under the adapter: refused by name.
cp base/model.safetensors keep.safetensors
python3 - base/model.safetensors <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(-1, 2)
    b = f.read(1)
    f.seek(-1, 2)
    f.write(bytes([b[0] ^ 1]))
PY
status=0
"$build/tools/generate" --checkpoint straight.st --prompt "line" >gen.txt 2>&1 || status=$?
[ "$status" -ne 0 ] && grep -q "another base" gen.txt || fail "an adapter on another base: exit $status, $(cat gen.txt)"
status=0
tg --resume straight.st --steps 400 >out.txt 2>&1 || status=$?
[ "$status" -ne 0 ] && grep -q "another base" out.txt || fail "resuming on another base: exit $status, $(cat out.txt)"
cp keep.safetensors base/model.safetensors
echo "ok: a changed base is refused"

# A run's own tokenizer.json travels with the export, and a fine-tune reads it from the directory.
"$build/tools/train_bpe" --data text.txt --vocab-size 300 --format hf --out tok.json >out.txt 2>&1 ||
  fail "train_bpe: $(cat out.txt)"
tg --preset llama-tiny --tokenizer tok.json "${small[@]}" "${window[@]}" --steps 4 --eval-every 4 --save bpe.st --log bpe.jsonl \
  --plot bpe.svg >out.txt 2>&1 || fail "llama-tiny on tok.json: $(cat out.txt)"
"$build/tools/export_gpt" --checkpoint bpe.st --format hf --out mine >out.txt 2>&1 || fail "export: $(cat out.txt)"
grep -q "and tokenizer.json" out.txt || fail "the export wrote no tokenizer.json: $(cat out.txt)"
python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1])) != json.load(open(sys.argv[2])))' tok.json mine/tokenizer.json ||
  fail "the exported tokenizer.json is not the run's"
"$build/tools/train_gpt" --data text.txt --init-from mine --lora-rank 2 "${small[@]}" "${window[@]}" --steps 4 --eval-every 4 \
  --save mine.st --log mine.jsonl --plot mine.svg >out.txt 2>&1 || fail "fine-tuning mine/: $(cat out.txt)"
grep -q "^data .*hf_bpe tokenizer, vocab 300$" out.txt || fail "the directory's tokenizer.json was not read: $(grep '^data' out.txt)"
tg --init-from bpe.st --freeze model.embed_tokens "${small[@]}" "${window[@]}" --steps 4 --eval-every 4 --save ck.st --log ck.jsonl \
  --plot ck.svg >out.txt 2>&1 || fail "--init-from a Llama checkpoint: $(cat out.txt)"
python3 "$tensors" bpe.st ck.st >cmp.txt
grep -q "^same model.embed_tokens.weight$" cmp.txt || fail "the checkpoint base was not the start: $(head -3 cmp.txt)"
echo "ok: train, export with tokenizer.json, fine-tune the directory; a Llama checkpoint as the base"

# Bad input: a message naming the value; nothing written.
bad() {  # WHAT EXPECTED FLAGS...
  local what=$1 expected=$2
  shift 2
  local status=0
  tg "${small[@]}" --steps 2 --save bad/ckpt.st --log bad/m.jsonl --plot bad/p.svg "$@" >out.txt 2>&1 || status=$?
  [ "$status" -ne 0 ] && grep -qF -- "$expected" out.txt || fail "$what: exit $status, $(cat out.txt)"
  [ ! -e bad ] || fail "$what: something was written: $(ls -R bad)"
}
b=(--init-from base --tokenizer byte)
bad "a GPT's target" "no Linear is named 'w_q'" "${b[@]}" --lora-rank 2 --lora-targets w_q
bad "a rank above k_proj" "LoRA rank 17 must lie in [1, 16]: 'k_proj'" "${b[@]}" --lora-rank 17
bad "a --freeze that names nothing" "'model.layers.7' names no parameter" "${b[@]}" --freeze model.layers.7
bad "no tokenizer.json" "'base' has no tokenizer.json; name one with --tokenizer" --init-from base --lora-rank 2
bad "--preset beside a base" "--preset cannot go with --init-from base" "${b[@]}" --preset llama-tiny
bad "--d-model beside a base" "--d-model cannot go with --init-from base" "${b[@]}" --d-model 64
bad "a tokenizer wider than the table" "do not fit the model's vocabulary of 256" --init-from base --tokenizer tok.json
bad "a window beyond the context" "--block-size 300 is longer than base/config.json's context of 256" "${b[@]}" --block-size 300
bad "--tokenizer beside a checkpoint" "--tokenizer cannot go with --init-from bpe.st" --init-from bpe.st --tokenizer byte
bad "a base with adapters" "holds a model with LoRA adapters" --init-from mine.st
echo "ok: the refusals"
finish
