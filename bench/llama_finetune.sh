#!/usr/bin/env bash
# A LoRA fine-tune at a real model's size, as a user runs it: a Qwen3-0.6B-shaped Hugging Face
# directory (seeded random weights in bfloat16, two shards, and Qwen3's real tokenizer.json, whose
# 151,669 ids the model's padded table of 151,936 rows exceeds) fine-tuned by train_gpt from a
# scratch directory on fortunes. Prints the run's lines, the load before and after, the wall time
# and the peak resident memory. The directory is written once (bench/hf_llama_directory.py, with
# PyTorch) under $TMPDIR and reused.
#   bench/llama_finetune.sh BUILD_DIR [STEPS]
# Needs the tokenizer from text/fetch_hf_tokenizers.sh (~/.cache/attograd/hf/qwen3/tokenizer.json).
set -euo pipefail
build=$(cd "$1" && pwd)
steps=${2:-4}
here=$(cd "$(dirname "$0")" && pwd)
tokenizer=${ATTOGRAD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/attograd}/hf/qwen3/tokenizer.json
[ -f "$tokenizer" ] || { echo "no $tokenizer: run text/fetch_hf_tokenizers.sh first" >&2; exit 1; }
dir=${TMPDIR:-/tmp}/attograd-bench-qwen3-0.6b
[ -f "$dir/tokenizer.json" ] || /usr/bin/python3 "$here/hf_llama_directory.py" "$dir" --shape qwen3-0.6b --tokenizer "$tokenizer"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cd "$scratch"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/time -f "wall %e s, peak resident %M KB" "$build/tools/train_gpt" --init-from "$dir" --data fortunes \
  --lora-rank 8 --steps "$steps" --batch 2 --block-size 128 --eval-every "$steps" --eval-windows 2 --quiet
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
