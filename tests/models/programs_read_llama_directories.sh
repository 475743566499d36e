#!/usr/bin/env bash
# generate and evaluate on a Hugging Face directory of the Llama family (a Llama of 256 byte
# tokens that the PyTorch twin wrote: tests/parity/fixtures/llama/byte_llama). generate prints the
# prompt and the new tokens; greedy decoding repeats itself and --no-cache prints the same text.
# evaluate reports the model and the text's bits per byte, the same for any --batch. A directory
# without tokenizer.json needs --tokenizer. With --quantize int8 and q4_0 both programs run the
# quantized model (Llama::quantize): other text and bits per byte than float32's, the same text
# cached and uncached, and the report says which weights it scored. Agreement with the twin
# (tokens, perplexity) is test_llama_parity's. From a scratch directory.
#   programs_read_llama_directories.sh BUILD_DIR SOURCE_DIR
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
echo "ok: the refusals"
for q in int8 q4_0; do
  "${generate[@]}" --tokenizer byte --quantize $q >$q.txt 2>err.txt || { cat err.txt; fail "generate --quantize $q"; }
  "${generate[@]}" --tokenizer byte --quantize $q --no-cache >$q.uncached.txt 2>err.txt || fail "generate --quantize $q --no-cache"
  head -c 16 $q.txt | grep -qx "Once upon a time" && [ "$(wc -c <$q.txt)" -gt 17 ] || fail "--quantize $q printed no new tokens"
  cmp -s $q.txt $q.uncached.txt || fail "--quantize $q: --no-cache printed other text than the cached run"
  cmp -s $q.txt cached.txt && fail "--quantize $q printed the float32 model's text: was it quantized?"
done
echo "ok: generate --quantize int8 and q4_0"

evaluate=("$build/tools/evaluate" --checkpoint "$dir" --tokenizer byte --data "$source/README.md" --block-size 64 --stride 32)
"${evaluate[@]}" >eval.txt 2>err.txt || { cat err.txt; fail "evaluate on $dir"; }
"${evaluate[@]}" --batch 3 >eval3.txt 2>err.txt || { cat err.txt; fail "evaluate --batch 3"; }
grep -q "^model .*LlamaForCausalLM 2 layers, d_model 32, context 256" eval.txt || { cat eval.txt; fail "evaluate's model line"; }
bpb=$(sed -n 's/^bits\/byte  //p' eval.txt)
[ -n "$bpb" ] && [ "$bpb" = "$(sed -n 's/^bits\/byte  //p' eval3.txt)" ] || fail "bits/byte '$bpb' is missing or changes with --batch"
echo "ok: evaluate, $bpb bits/byte over README.md (a random model: about 8)"
for q in int8 q4_0; do
  "${evaluate[@]}" --quantize $q >eval.$q.txt 2>err.txt || { cat err.txt; fail "evaluate --quantize $q"; }
  grep -q "^model .*context 256, $q weights$" eval.$q.txt || fail "evaluate --quantize $q: $(grep ^model eval.$q.txt)"
  qbpb=$(sed -n 's/^bits\/byte  //p' eval.$q.txt)
  # Another model, near the float one (measured: 8.262370 and 8.299278 against 8.262090).
  awk -v f="$bpb" -v q="$qbpb" 'BEGIN { d = q / f - 1; exit !(q != f && d < 0.02 && d > -0.02) }' ||
    fail "evaluate --quantize $q: $qbpb bits/byte against float32's $bpb"
  echo "ok: evaluate --quantize $q, $qbpb bits/byte"
done
status=0
"$build/tools/evaluate" --checkpoint "$dir" --tokenizer byte --data "$source/README.md" --block-size 300 --stride 32 \
  >out.txt 2>err.txt || status=$?
[ "$status" -eq 2 ] && grep -q "longer than the model's context, 256 tokens" err.txt ||
  { cat err.txt; fail "evaluate --block-size 300 on a context of 256: status $status"; }
finish
