#!/usr/bin/env bash
# generate, evaluate and export_gpt read another tool's GPT-2 weights directly, with no training
# step to make a checkpoint first: a Hugging Face directory (config.json decides the shape), its
# model.safetensors alone, an llm.c .bin, and a file written by PyTorch. The same network gives
# the same greedy tokens and the same perplexity from each file as from the checkpoint it was
# exported from, and converting between the layouts gives the bytes a direct export gives.
#   other_tools_weights_run_directly.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/../in_scratch_directory.sh" "$@"
E=$build/tools
fixtures=$source/tests/parity/fixtures/gpt2
"$E/train_gpt" --data "$source/README.md" --tokenizer byte --layers 2 --heads 2 --d-model 32 --block-size 32 \
  --activation gelu_tanh --batch 4 --steps 30 --eval-every 30 --eval-windows 2 --quiet --save ck.safetensors >train.txt 2>&1 ||
  fail "could not train the model: $(cat train.txt)"
"$E/export_gpt" --checkpoint ck.safetensors --format hf --out hf >/dev/null 2>err.txt || fail "export hf: $(cat err.txt)"
"$E/export_gpt" --checkpoint ck.safetensors --format llmc --out model.bin >/dev/null 2>err.txt || fail "export llmc: $(cat err.txt)"

sample=(--prompt "The model" --tokens 40 --temperature 0)
"$E/generate" --checkpoint ck.safetensors "${sample[@]}" >want.txt 2>err.txt || fail "generate on the checkpoint: $(cat err.txt)"
[ "$(wc -c <want.txt)" -gt 40 ] || fail "the checkpoint generated too little: $(cat want.txt)"
same_text() {  # same_text DESCRIPTION ARGS...: generate from ARGS gives want.txt
  local what=$1
  shift
  if "$E/generate" "$@" "${sample[@]}" >got.txt 2>err.txt && cmp -s want.txt got.txt; then
    echo "ok: generate $what"
  else
    fail "generate $what: $(cat err.txt) $(head -c 200 got.txt)"
  fi
}
same_text "on a Hugging Face directory" --checkpoint hf --tokenizer byte
same_text "on its model.safetensors (config.json beside it)" --checkpoint hf/model.safetensors --tokenizer byte
same_text "on an llm.c file" --checkpoint model.bin --tokenizer byte
mkdir alone && cp hf/model.safetensors alone/
same_text "on a model.safetensors alone, told its heads" --checkpoint alone/model.safetensors --tokenizer byte --heads 2

score() { "$E/evaluate" --data "$source/README.md" --stride 16 "$@" 2>err.txt | sed -n 's/^perplexity //p'; }
want=$(score --checkpoint ck.safetensors)
[ -n "$want" ] || fail "evaluate on the checkpoint: $(cat err.txt)"
for args in "--checkpoint hf --tokenizer byte" "--checkpoint model.bin --tokenizer byte"; do
  # shellcheck disable=SC2086 # the words of $args are the flags
  got=$(score $args)
  [ "$got" = "$want" ] && echo "ok: evaluate $args: perplexity $got" || fail "evaluate $args: '$got', the checkpoint: $want ($(cat err.txt))"
done

# GPT-2's vocabulary size: GPT-2's tokenizer without being told.
if [ -f "${XDG_CACHE_HOME:-$HOME/.cache}/attograd/gpt2/encoder.json" ]; then
  "$E/train_gpt" --data "$source/README.md" --tokenizer gpt2 --layers 1 --heads 2 --d-model 16 --block-size 16 \
    --batch 2 --steps 2 --eval-every 2 --eval-windows 1 --quiet --save wide.safetensors >train.txt 2>&1 ||
    fail "could not train the GPT-2-vocabulary model: $(cat train.txt)"
  "$E/export_gpt" --checkpoint wide.safetensors --format hf --out wide >/dev/null 2>err.txt || fail "export wide: $(cat err.txt)"
  "$E/generate" --checkpoint wide.safetensors "${sample[@]}" >want_wide.txt 2>err.txt || fail "generate wide: $(cat err.txt)"
  "$E/generate" --checkpoint wide "${sample[@]}" >got_wide.txt 2>err.txt && cmp -s want_wide.txt got_wide.txt &&
    echo "ok: generate on a Hugging Face directory of GPT-2's vocabulary, no --tokenizer" ||
    fail "generate on the GPT-2-vocabulary directory: $(cat err.txt)"
else
  echo "GPT-2's files are not in the cache: the GPT-2 vocabulary part is passed over"
fi

# Converting between the layouts: the llm.c file from the Hugging Face directory is the direct export's.
"$E/export_gpt" --checkpoint hf --format llmc --out converted.bin >/dev/null 2>err.txt || fail "export hf -> llmc: $(cat err.txt)"
cmp -s model.bin converted.bin || fail "the llm.c file converted from the Hugging Face directory differs from the direct export"
"$E/export_gpt" --checkpoint model.bin --format hf --out back >/dev/null 2>err.txt || fail "export llmc -> hf: $(cat err.txt)"
cmp -s hf/model.safetensors back/model.safetensors || fail "the Hugging Face file converted back from llm.c differs"

# A file PyTorch wrote (tests/parity/make_gpt2_fixtures.py: 2 layers, 4 heads, GPT-2's tanh GELU).
"$E/generate" --checkpoint "$fixtures/hf_byte_f32.safetensors" --tokenizer byte --heads 4 "${sample[@]}" >torch.txt 2>err.txt ||
  fail "generate on PyTorch's file: $(cat err.txt)"
# What the file does not say is asked for, and what a checkpoint says may not be said again.
status=0
"$E/evaluate" --checkpoint "$fixtures/hf_byte_f32.safetensors" --data "$source/README.md" --stride 16 >out.txt 2>err.txt || status=$?
[ "$status" -eq 1 ] && grep -q "give --heads" err.txt || fail "no --heads for a file without config.json: exit $status, $(cat err.txt)"
status=0
"$E/evaluate" --checkpoint model.bin --data "$source/README.md" --stride 16 >out.txt 2>err.txt || status=$?
[ "$status" -eq 1 ] && grep -q "give --tokenizer" err.txt || fail "no --tokenizer for 256 tokens: exit $status, $(cat err.txt)"
status=0
"$E/generate" --checkpoint ck.safetensors --tokenizer byte "${sample[@]}" >out.txt 2>err.txt || status=$?
[ "$status" -eq 1 ] && grep -q "its model and tokenizer are its own" err.txt ||
  fail "--tokenizer beside a checkpoint: exit $status, $(cat err.txt)"
status=0
"$E/generate" --checkpoint hf --tokenizer byte --heads 4 "${sample[@]}" >out.txt 2>err.txt || status=$?
[ "$status" -eq 1 ] && grep -q "contradicts.*config.json: its n_head is 2" err.txt ||
  fail "--heads against config.json: exit $status, $(cat err.txt)"
finish
