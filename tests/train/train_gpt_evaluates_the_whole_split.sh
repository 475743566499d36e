#!/usr/bin/env bash
# train_gpt's recipe knobs as a user meets them: --eval-windows, --no-bias, --decay-params,
# --beta1 / --beta2 run, and --eval-full ends the run with the loss over the whole validation
# split, over every non-overlapping window of it: floor((validation tokens - 1) / block size), in
# nats per token and in bits per byte.
#   train_gpt_evaluates_the_whole_split.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/../in_scratch_directory.sh" "$@"
block=8
status=0
"$build/tools/train_gpt" --data "$source/README.md" --layers 1 --d-model 16 --heads 2 --block-size "$block" \
  --batch 4 --steps 2 --eval-windows 8 --no-bias --decay-params matrices --beta1 0.8 --beta2 0.95 --eval-full \
  --save run/ckpt.safetensors --log run/metrics.jsonl --plot run/plot.svg >out.txt 2>err.txt || status=$?
if [ "$status" -ne 0 ]; then
  fail "train_gpt exited $status: $(cat err.txt)"
else
  validation=$(sed -n 's/.* train, \([0-9]*\) validation).*/\1/p' out.txt)
  want=$(((validation - 1) / block))
  if ! grep -Eq "^validation loss over the whole split: [0-9]+\.[0-9]{4} over $want windows, [0-9]+\.[0-9]{4} bits per byte$" out.txt; then
    fail "expected the whole split's $want windows ($validation validation tokens), got: $(grep -i 'whole split' out.txt)"
  fi
fi
# Without --eval-full there is no such line.
"$build/tools/train_gpt" --data "$source/README.md" --layers 1 --d-model 16 --heads 2 --block-size "$block" \
  --batch 4 --steps 2 --quiet --save plain/ckpt.safetensors --log plain/metrics.jsonl --plot plain/plot.svg \
  >out.txt 2>err.txt || fail "train_gpt without --eval-full: $(cat err.txt)"
if grep -q "whole split" out.txt; then fail "a whole-split evaluation without --eval-full"; fi
finish
