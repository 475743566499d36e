#!/usr/bin/env bash
# export_gpt merges a fine-tuning run's LoRA adapters (W + alpha/r B A) into what it writes: a tiny
# byte-level GPT is trained, then fine-tuned with adapters on every projection (saved whole, and
# adapter-only), and each checkpoint is exported as Hugging Face GPT-2 and as llm.c's .bin. PyTorch
# (tests/parity/hf_perplexity_reference.py) reads only the exported files, and its sliding-window
# nats per token must be tools/evaluate's on the checkpoint within 1e-6 relative. The base's
# own export must differ from the fine-tuned one by more than 1e-3 relative, so that an export
# that writes the frozen base weights (export_gpt before the merge) fails here. Skips (77)
# without PyTorch.
#   lora_export_matches_torch.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/../in_scratch_directory.sh" "$@"
source "$(dirname "$0")/export_checks.sh"

# gelu_tanh: GPT-2's GELU, the only one the exported formats can say.
run train "$build/tools/train_gpt" --data text.txt --tokenizer byte --layers 2 --d-model 32 --heads 2 \
  --block-size "$window" --activation gelu_tanh --batch 8 --steps 30 --eval-every 30 --quiet \
  --save base.safetensors --log base.jsonl --plot base.svg
# Adapters on all six projections, so that both the export's fused c_attn (w_q, w_k, w_v side by
# side) and the MLP's weights are merged; lr 0.03, ten times the default, moves the model by about
# 1% in nats per token in 20 steps, well clear of the 1e-3 below.
lora=(--init-from base.safetensors --lora-rank 4 --lora-alpha 8 --lora-targets w_q w_k w_v w_o linear1 linear2
  --lr 0.03 --batch 8 --steps 20 --eval-every 20 --quiet)
run tune_whole "$build/tools/train_gpt" --data text.txt "${lora[@]}" --save whole.safetensors \
  --log whole.jsonl --plot whole.svg
run tune_adapter "$build/tools/train_gpt" --data text.txt "${lora[@]}" --save-adapter-only \
  --save adapter.safetensors --log adapter.jsonl --plot adapter.svg

# The tokens scored and nats per token in an output of evaluate or of the reference, from the total
# nats, which both print with more digits than their nats/token line.
per_token() { awk '{ printf "%d %.12g\n", $1, $2 / $1 }'; }
unreadable() {  # LABEL: no figures in LABEL.txt; nothing after this could be checked
  cat "$1.txt"
  fail "$1: no tokens and nats in the output"
  finish
  exit 1
}

# evaluated CHECKPOINT: evaluate's tokens and nats per token on CHECKPOINT.safetensors, in $tokens
# and $nats_per_token.
evaluated() {
  run "evaluate_$1" "$build/tools/evaluate" --checkpoint "$1.safetensors" --data text.txt --stride "$stride" \
    --block-size "$window" --batch 3
  read -r tokens nats_per_token < <(sed -n 's/^scored *\([0-9]*\) tokens, .* bytes, \([-0-9.e+]*\) nats$/\1 \2/p' \
    "evaluate_$1.txt" | per_token) || unreadable "evaluate_$1"
}
# referenced MODEL: the same from PyTorch on an exported MODEL (a directory or a .bin).
referenced() {
  run "torch_$1" /usr/bin/python3 "$source/tests/parity/hf_perplexity_reference.py" "$1" text.txt "$stride" "$window"
  read -r tokens nats_per_token < <(sed -n 's/^tokens \([0-9]*\) nats \([-0-9.e+]*\) .*/\1 \2/p' "torch_$1.txt" |
    per_token) || unreadable "torch_$1"
}
# exported CHECKPOINT FORMAT OUT: export_gpt's export, and what it says about adapters.
exported() {
  local ck=$1 format=$2 out=$3
  run "export_$out" "$build/tools/export_gpt" --checkpoint "$ck.safetensors" --format "$format" --out "$out"
  if [ "$ck" = base ]; then
    if grep -q "LoRA" "export_$out.txt"; then
      fail "export of base, which has no adapters: $(cat "export_$out.txt")"
    fi
  else
    grep -q "LoRA adapters merged" "export_$out.txt" || fail "export of $ck does not say it merged: $(cat "export_$out.txt")"
  fi
}

# The base, through the same path: the reference reads an export right where no adapters are
# involved, and its figure is what export_gpt wrote for a LoRA checkpoint before the merge.
evaluated base
base_tokens=$tokens base_evaluate=$nats_per_token
exported base hf hf_base
referenced hf_base
base_torch=$nats_per_token
[ "$tokens" = "$base_tokens" ] || fail "base -> hf: PyTorch scored $tokens tokens, evaluate $base_tokens"
rel=$(relative "$base_torch" "$base_evaluate")
echo "base -> hf: evaluate $base_evaluate, PyTorch $base_torch nats/token ($rel relative)"
at_most "$rel" 1e-6 || fail "base -> hf: PyTorch and evaluate differ by $rel relative"

for ck in whole adapter; do
  evaluated "$ck"
  ck_tokens=$tokens ck_evaluate=$nats_per_token
  # The base's export must not pass for the fine-tuned model, or this test could not tell an
  # export that merges from one that writes the frozen base weights.
  gap=$(relative "$base_torch" "$ck_evaluate")
  if at_most "$gap" 1e-3; then
    fail "$ck: the base's export is within $gap of it: the adapters barely moved the model"
  fi
  echo "$ck: evaluate $ck_evaluate nats/token; the base's export $base_torch, $gap relative away"
  for format in hf llmc; do
    case $format in
      hf) out=hf_$ck ;;
      llmc) out=$ck.bin ;;
    esac
    exported "$ck" "$format" "$out"
    referenced "$out"
    [ "$tokens" = "$ck_tokens" ] || fail "$ck -> $format: PyTorch scored $tokens tokens, evaluate $ck_tokens"
    rel=$(relative "$nats_per_token" "$ck_evaluate")
    echo "$ck -> $format: evaluate $ck_evaluate, PyTorch $nats_per_token nats/token ($rel relative)"
    at_most "$rel" 1e-6 || fail "$ck -> $format: PyTorch and evaluate differ by $rel relative"
  done
done
finish
