#!/usr/bin/env bash
# A first try of any training program with a tiny budget runs: unless --warmup is given, the
# warm-up follows --steps (at most a tenth of it), and the configuration the run leaves beside
# its log repeats it. An explicit --warmup that does not fit is still refused, by name. Run from
# a scratch directory, as a user would.
#   programs_run_any_budget.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/../in_scratch_directory.sh" "$@"
passed=0
small_gpt=(--data "$source/README.md" --layers 1 --d-model 16 --heads 2 --block-size 8 --batch 4)
for program in train_sequence train_gpt train_seq2seq; do
  extra=()
  [ "$program" = train_gpt ] && extra=("${small_gpt[@]}")
  for steps in 2 1; do
    status=0
    "$build/tools/$program" "${extra[@]}" --steps "$steps" --quiet --log "$program-$steps/metrics.jsonl" \
      --plot "$program-$steps/plot.svg" --save "$program-$steps/ckpt.safetensors" >out.txt 2>err.txt || status=$?
    if [ "$status" -ne 0 ] || ! grep -q "after $steps steps" out.txt; then
      fail "$program --steps $steps exited $status: $(cat err.txt)"
      continue
    fi
    # The configuration copy names the warm-up that was used, and running it again works.
    if ! grep -q '^warmup=0$' "$program-$steps/config.toml"; then
      fail "$program --steps $steps: config.toml says $(grep '^warmup' "$program-$steps/config.toml")"
      continue
    fi
    status=0
    "$build/tools/$program" --config "$program-$steps/config.toml" --quiet --log again/metrics.jsonl \
      --plot again/plot.svg --overwrite >out.txt 2>err.txt || status=$?
    rm -rf again
    if [ "$status" -ne 0 ]; then fail "$program --config of the --steps $steps run: $(cat err.txt)"; continue; fi
    passed=$((passed + 1))
  done
  status=0
  "$build/tools/$program" "${extra[@]}" --steps 2 --warmup 5 --quiet >out.txt 2>err.txt || status=$?
  if [ "$status" -ne 2 ] || ! grep -q -- "--warmup: 5 must be below --steps 2" err.txt; then
    fail "$program --steps 2 --warmup 5: exit $status, $(cat err.txt)"
  else
    passed=$((passed + 1))
  fi
done
echo "$passed passed"
finish
