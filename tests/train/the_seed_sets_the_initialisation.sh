#!/usr/bin/env bash
# --seed decides a fresh model's initial weights in every training program: the untrained model's
# held-out loss (the metrics log's row 0, before any update) is the same for the same seed and
# differs for another. A program that built its model before seeding the generator would give
# every seed the same row 0.
#   the_seed_sets_the_initialisation.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/../in_scratch_directory.sh" "$@"
seq 1 3000 | tr '\n' ' ' >text.txt
declare -A flags=(
  [train_gpt]="--data text.txt --layers 1 --d-model 16 --heads 2 --block-size 8 --batch 4 --eval-windows 4"
  [train_sequence]="--d-model 16 --heads 2 --d-ff 32 --layers 1 --batch 4 --eval-sequences 8"
  [train_seq2seq]="--d-model 16 --heads 2 --d-ff 32 --encoder-layers 1 --decoder-layers 1 --batch 4 --eval-sequences 8"
)
row0() {  # row0 PROGRAM SEED [TAG]: the eval_loss of the log's first row
  local tag=${3:-}
  local log="$1-$2$tag.jsonl"
  # shellcheck disable=SC2086
  "$build/tools/$1" ${flags[$1]} --steps 1 --warmup 0 --eval-every 1 --seed "$2" --quiet --log "$log" \
    --run-name "$1-$2$tag" >/dev/null 2>err.txt || { fail "$1 --seed $2: $(cat err.txt)"; return; }
  head -1 "$log" | grep -o '"eval_loss":[^,]*'
}
for program in train_gpt train_sequence train_seq2seq; do
  a=$(row0 "$program" 0) b=$(row0 "$program" 0 again) c=$(row0 "$program" 3)
  if [ -z "$a" ] || [ "$a" != "$b" ]; then
    fail "$program: the same seed gave row 0 '$a' and '$b'"
  elif [ "$a" = "$c" ]; then
    fail "$program: --seed 0 and --seed 3 gave the same untrained model ($a)"
  else
    echo "ok: $program: seed 0 $a, seed 3 $c"
  fi
done
finish
