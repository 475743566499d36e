#!/usr/bin/env bash
# GPT-2's weights through the programs, as a user meets them: train_gpt --init-from a Hugging
# Face file written by PyTorch (tests/parity/fixtures/gpt2/hf_byte_f32.safetensors, 256 tokens
# for --tokenizer byte) fine-tunes and saves a checkpoint that generate reads and export_gpt
# writes back in both layouts, the Hugging Face export reading back into train_gpt; a file that
# does not fit the model is an error naming it, with nothing written (no run directory); a model
# llm.c cannot express is refused with no file written; an export replaces an existing file only
# with --overwrite.
#   gpt2_weights_in_and_out.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/../in_scratch_directory.sh" "$@"
fixtures=$source/tests/parity/fixtures/gpt2
shape=(--tokenizer byte --layers 2 --heads 4 --block-size 64 --dropout 0)
model=("${shape[@]}" --d-model 32 --activation gelu_tanh)
run=(--data "$source/README.md" --steps 2 --eval-every 2 --eval-windows 1 --batch 2 --quiet)

check() {  # check DESCRIPTION COMMAND...: the command succeeds
  local what=$1
  shift
  if "$@" >out.txt 2>err.txt; then echo "ok: $what"; else fail "$what (status $?)"; cat err.txt; fi
}
refused() {  # refused DESCRIPTION TEXT COMMAND...: exit $want (1: an error, 2: usage), TEXT in the message, no runs/ left
  local what=$1 text=$2 status=0
  shift 2
  "$@" >out.txt 2>err.txt || status=$?
  if [ "$status" -ne "${want:-1}" ] || ! grep -qF -- "$text" err.txt || [ -e runs ]; then
    fail "$what (status $status, expected ${want:-1} naming '$text' and nothing written)"
    cat err.txt
  else
    echo "ok: $what -> $(head -c 200 err.txt)"
  fi
  rm -rf runs
}

check "train_gpt --init-from a Hugging Face file" \
  "$build/tools/train_gpt" "${model[@]}" "${run[@]}" --init-from "$fixtures/hf_byte_f32.safetensors" --save ck.safetensors
ckpt=ck.safetensors
check "generate reads the fine-tuned checkpoint" "$build/tools/generate" --checkpoint "$ckpt" --prompt "a" --tokens 5
check "export_gpt --format hf" "$build/tools/export_gpt" --checkpoint "$ckpt" --format hf --out hf
check "export_gpt --format llmc" "$build/tools/export_gpt" --checkpoint "$ckpt" --format llmc --out model.bin
[ -f hf/model.safetensors ] && [ -f hf/config.json ] && [ -f model.bin ] || fail "the exports are missing"
grep -q '"activation_function": "gelu_new"' hf/config.json || fail "config.json does not name gelu_new"
# A second export to the same place, or onto a file of the user's, replaces nothing unless asked.
rm -rf runs
before=$(cat hf/model.safetensors hf/config.json | sha256sum)
want=2 refused "a second hf export without --overwrite" "hf/model.safetensors': exists; give --overwrite" \
  "$build/tools/export_gpt" --checkpoint "$ckpt" --format hf --out hf
[ "$(cat hf/model.safetensors hf/config.json | sha256sum)" = "$before" ] || fail "the refused export changed hf/"
echo "my notes" >notes.txt
want=2 refused "an llmc export onto a user's file" "notes.txt': exists" \
  "$build/tools/export_gpt" --checkpoint "$ckpt" --format llmc --out notes.txt
[ "$(cat notes.txt)" = "my notes" ] || fail "the refused export changed notes.txt"
check "export_gpt --format hf --overwrite" "$build/tools/export_gpt" --checkpoint "$ckpt" --format hf --out hf --overwrite
[ "$(cat hf/model.safetensors hf/config.json | sha256sum)" = "$before" ] || fail "the same export over itself differs"
check "train_gpt --init-from the llm.c export" \
  "$build/tools/train_gpt" "${model[@]}" "${run[@]}" --init-from model.bin --save again.safetensors
grep -q "llm.c weights from model.bin" out.txt || fail "the llm.c import is not reported"
rm -rf runs

# LoRA on GPT-2's weights: the adapter-only checkpoint records the Hugging Face base, and
# generate rebuilds the model from that file plus the adapters.
check "train_gpt --init-from a Hugging Face file with LoRA" \
  "$build/tools/train_gpt" "${model[@]}" "${run[@]}" --init-from "$fixtures/hf_byte_f32.safetensors" \
  --lora-rank 4 --save-adapter-only --save adapter.safetensors
grep -q "Hugging Face weights from" out.txt || fail "the LoRA run does not report its base's layout"
[ "$(stat -c %s adapter.safetensors)" -lt "$(stat -c %s ck.safetensors)" ] || fail "the adapter is not smaller than the whole model"
check "generate reads the adapter on its Hugging Face base" \
  "$build/tools/generate" --checkpoint adapter.safetensors --prompt "a" --tokens 5
rm -rf runs

refused "an llm.c file of another vocabulary" "llmc_f32.bin" \
  "$build/tools/train_gpt" "${model[@]}" "${run[@]}" --init-from "$fixtures/llmc_f32.bin"
refused "a Hugging Face file of other layers" "h.0.attn.c_attn.weight" \
  "$build/tools/train_gpt" "${shape[@]}" --d-model 64 --activation gelu_tanh "${run[@]}" --init-from "$fixtures/hf_byte_f32.safetensors"
refused "a missing file" "missing.bin" \
  "$build/tools/train_gpt" "${model[@]}" "${run[@]}" --init-from missing.bin
want=2 refused "--preset gpt2 with the byte tokenizer" "50257" \
  "$build/tools/train_gpt" --preset gpt2 --tokenizer byte "${run[@]}"

# A Hugging Face directory: config.json decides the shape (no model flag given), a flag that says
# otherwise is refused naming both, and the weights may be half precision (F16 and BF16 copies of
# the export, rounded to nearest even by Python's own conversions).
run_dir=(--tokenizer byte --dropout 0 "${run[@]}")
check "train_gpt --init-from a Hugging Face directory, its shape from config.json" \
  "$build/tools/train_gpt" "${run_dir[@]}" --init-from hf --save from-dir.safetensors
grep -q "model  GPT 2 layers, 4 heads, d_model 32, context 64" out.txt || fail "config.json did not decide the shape: $(grep model out.txt)"
rm -rf runs
want=2 refused "--layers 3 against config.json's n_layer 2" "--layers 3 contradicts" \
  "$build/tools/train_gpt" "${run_dir[@]}" --layers 3 --init-from hf
want=2 refused "--activation gelu against config.json's gelu_new" "--activation gelu contradicts" \
  "$build/tools/train_gpt" "${run_dir[@]}" --activation gelu --init-from hf
mkdir -p empty-dir
want=2 refused "a directory without model.safetensors" "holds no model.safetensors" \
  "$build/tools/train_gpt" "${run_dir[@]}" --init-from empty-dir
for half in F16 BF16; do
  mkdir -p "hf-$half" && cp hf/config.json "hf-$half/"
  /usr/bin/python3 - hf/model.safetensors "hf-$half/model.safetensors" "$half" <<'PY'
import json, struct, sys
src, dst, dtype = sys.argv[1], sys.argv[2], sys.argv[3]
blob = open(src, "rb").read()
(n,) = struct.unpack("<Q", blob[:8])
header = json.loads(blob[8:8 + n])
data = blob[8 + n:]
out, at = bytearray(), 0
for name, e in header.items():
    if name == "__metadata__":
        continue
    begin, end = e["data_offsets"]
    values = struct.unpack("<%df" % ((end - begin) // 4), data[begin:end])
    if dtype == "F16":
        piece = struct.pack("<%de" % len(values), *values)
    else:  # bfloat16: a float's high half, rounded to nearest even
        bits = struct.unpack("<%dI" % len(values), data[begin:end])
        piece = struct.pack("<%dH" % len(values), *(((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF for b in bits))
    e.update(dtype=dtype, data_offsets=[at, at + len(piece)])
    out += piece
    at += len(piece)
header.pop("__metadata__", None)
text = json.dumps(header).encode()
open(dst, "wb").write(struct.pack("<Q", len(text)) + text + bytes(out))
PY
  check "train_gpt --init-from a Hugging Face directory in $half" \
    "$build/tools/train_gpt" "${run_dir[@]}" --init-from "hf-$half" --save "from-$half.safetensors"
  grep -q "Hugging Face weights from hf-$half/model.safetensors" out.txt || fail "$half: the import is not reported: $(cat out.txt)"
  rm -rf runs
done

check "train_gpt with the exact GELU" "$build/tools/train_gpt" "${shape[@]}" --d-model 32 --activation gelu "${run[@]}" --save exact.safetensors
rm -rf runs
refused "llm.c cannot express the exact GELU" "gelu_tanh" \
  "$build/tools/export_gpt" --checkpoint exact.safetensors --format llmc --out exact.bin
[ -e exact.bin ] && fail "a refused export left exact.bin"
finish
