#!/usr/bin/env bash
# LoRA rank 8 on the attention projections against full fine-tuning, at GPT-2 124M's shape
# (12 layers, 12 heads, d_model 768, vocabulary 50,257) with a context of 256 tokens, batch 1:
# the median step time and the optimizer state of each. Prints the date and the load first, as
# bench/RESULTS.md quotes them.
#   bench/lora_step.sh [BUILD_DIR] [extra lora_step flags...]
set -euo pipefail
build=${1:-build}
shift || true
date -u +"%Y-%m-%d %H:%M UTC"
echo "load: $(uptime | sed 's/.*load average/load average/')"
"$build/bench/lora_step" --layers 12 --heads 12 --d-model 768 --block 256 --batch 1 --vocab 50257 --rank 8 \
  --steps 5 --warmup 1 --threads 2 "$@"
