#!/usr/bin/env bash
# generate on a Hugging Face directory of the Llama family (a Llama of 256 byte tokens that the
# PyTorch twin wrote: tests/parity/fixtures/llama/byte_llama): it prints the prompt and the new
# tokens; greedy decoding repeats itself and --no-cache prints the same text; a directory
# without tokenizer.json needs --tokenizer, and --quantize int8 is refused by name (GPT only so
# far). Token-for-token agreement with the twin is test_llama_parity's. From a scratch directory.
#   generate_reads_llama_directories.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/../in_scratch_directory.sh" "$@"
dir="$source/tests/parity/fixtures/llama/byte_llama"
generate=("$build/tools/generate" --checkpoint "$dir" --prompt "Once upon a time" --tokens 30 --temperature 0)

"${generate[@]}" --tokenizer byte >cached.txt 2>err.txt || { cat err.txt; fail "generate on $dir"; }
"${generate[@]}" --tokenizer byte >again.txt 2>err.txt || { cat err.txt; fail "generate again"; }
"${generate[@]}" --tokenizer byte --no-cache >uncached.txt 2>err.txt || { cat err.txt; fail "generate --no-cache"; }
head -c 16 cached.txt | grep -qx "Once upon a time" || fail "the output does not start with the prompt: $(head -c 40 cached.txt | od -c | head -2)"
[ "$(wc -c <cached.txt)" -gt 17 ] || fail "no new tokens after the prompt"
cmp -s cached.txt again.txt || fail "greedy generation printed different text twice"
cmp -s cached.txt uncached.txt || fail "--no-cache printed other text than the cached run"
echo "ok: $(wc -c <cached.txt) bytes, the same cached, uncached and twice"

status=0
"${generate[@]}" >out.txt 2>err.txt || status=$?
[ "$status" -eq 2 ] && grep -q "has no tokenizer.json; name one with --tokenizer" err.txt ||
  { cat err.txt; fail "a directory without tokenizer.json and no --tokenizer: status $status"; }
status=0
"${generate[@]}" --tokenizer byte --quantize int8 >out.txt 2>err.txt || status=$?
[ "$status" -eq 2 ] && grep -q "int8 weights are for GPT models only so far" err.txt ||
  { cat err.txt; fail "--quantize int8 on a Llama: status $status"; }
echo "ok: the refusals"
finish
