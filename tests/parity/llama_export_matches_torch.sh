#!/usr/bin/env bash
# A Llama-family run of train_gpt (--preset llama-tiny, byte tokens) exported by export_gpt as a
# Hugging Face directory loads in the PyTorch twin (tests/parity/torch_llama.py, built from the
# exported config.json alone) to the same model: the twin's sliding-window nats per token on a
# text equal tools/evaluate's on the training checkpoint within 1e-6 relative, and evaluate on the
# exported directory gives evaluate's figure on the checkpoint exactly. An untrained model's
# figure must be more than 1e-2 relative away, so that the trained weights are what is compared.
# Skips (77) without PyTorch.
#   llama_export_matches_torch.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/../in_scratch_directory.sh" "$@"
source "$(dirname "$0")/export_checks.sh"

# nats_per_token FILE: total nats / tokens from evaluate's "scored" line or the reference's "tokens" line.
nats_per_token() {
  sed -n -e 's/^scored *\([0-9]*\) tokens, .* bytes, \([-0-9.e+]*\) nats$/\1 \2/p' \
    -e 's/^tokens \([0-9]*\) nats \([-0-9.e+]*\) .*/\1 \2/p' "$1" | awk '{ printf "%d %.12g\n", $1, $2 / $1 }'
}

run train "$build/tools/train_gpt" --preset llama-tiny --data text.txt --block-size "$window" --batch 8 --steps 40 \
  --eval-every 40 --lr 0.01 --quiet --save ck.safetensors --log ck.jsonl --plot ck.svg
grep -q "^model  Llama 4 layers, 4 heads over 2 key/value heads" train.txt || { cat train.txt; fail "train_gpt's model line"; }
run export "$build/tools/export_gpt" --checkpoint ck.safetensors --format hf --out exported
grep -q "LlamaForCausalLM 4 layers" export.txt || fail "export_gpt's line: $(cat export.txt)"
[ -f exported/config.json ] && [ -f exported/model.safetensors ] || fail "the export lacks config.json or model.safetensors"

evaluate=(--data text.txt --stride "$stride" --block-size "$window" --batch 3)
run evaluate_ck "$build/tools/evaluate" --checkpoint ck.safetensors "${evaluate[@]}"
run evaluate_export "$build/tools/evaluate" --checkpoint exported --tokenizer byte "${evaluate[@]}"
run torch /usr/bin/python3 "$source/tests/parity/llama_perplexity_reference.py" exported text.txt "$stride" "$window"
read -r ck_tokens ck_nats < <(nats_per_token evaluate_ck.txt) || fail "no figures from evaluate: $(cat evaluate_ck.txt)"
read -r ex_tokens ex_nats < <(nats_per_token evaluate_export.txt) || fail "no figures from evaluate on the export"
read -r torch_tokens torch_nats < <(nats_per_token torch.txt) || fail "no figures from the twin: $(cat torch.txt)"
[ "$ck_nats" = "$ex_nats" ] && [ "$ck_tokens" = "$ex_tokens" ] ||
  fail "evaluate: $ck_nats nats/token on the checkpoint, $ex_nats on its export"
[ "$torch_tokens" = "$ck_tokens" ] || fail "the twin scored $torch_tokens tokens, evaluate $ck_tokens"
rel=$(relative "$torch_nats" "$ck_nats")
echo "llama-tiny -> hf: evaluate $ck_nats, the PyTorch twin $torch_nats nats/token ($rel relative)"
at_most "$rel" 1e-6 || fail "the twin and evaluate differ by $rel relative"
# ln 256 = 5.545 is a uniform guess; 40 steps of training must have moved well off it.
gap=$(relative "$ck_nats" 5.545177)
at_most "$gap" 1e-2 && fail "the trained model is within $gap of a uniform guess: nothing was compared"
finish
