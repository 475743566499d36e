#!/usr/bin/env bash
# A resumed run saves over the checkpoint it came from unless --save says otherwise, and says
# where it saves before it trains; in every training program. A first run stops early at a low
# --target-acc (its checkpoint is mid-budget); the resume, given no --save, trains on, and a third
# run finds its steps in the checkpoint. train_gpt has no target: a finished run is resumed and
# must name its checkpoint. Run from a scratch directory, as a user would.
#   resumed_runs_save_where_they_came_from.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/../in_scratch_directory.sh" "$@"

# steps_after FILE: N of the "... after N steps" summary line.
steps_after() { sed -n 's/.* after \([0-9]*\) steps (.*/\1/p' "$1"; }

# continues PROGRAM ARGS...: a fresh run of PROGRAM ARGS --save run.ck stops at its target;
# `--resume run.ck` must save its further steps in run.ck and say so first.
continues() {
  local program=$1
  shift
  mkdir -p "$program" && cd "$program"
  "$build/tools/$program" "$@" --eval-sequences 16 --target-acc 0.01 --save run.ck --quiet >fresh.out 2>&1 ||
    { fail "$program: the fresh run failed: $(cat fresh.out)"; cd ..; return; }
  local first resumed
  first=$(steps_after fresh.out)
  "$build/tools/$program" --resume run.ck --target-acc 1 --eval-sequences 16 --quiet >resumed.out 2>&1 ||
    { fail "$program: the resumed run failed: $(cat resumed.out)"; cd ..; return; }
  resumed=$(steps_after resumed.out)
  # The line before the description: where the steps go.
  if ! sed -n '2,3p' resumed.out | grep -qx 'save   run.ck at every evaluation and at the end'; then
    fail "$program --resume run.ck does not say where it saves before training:"
    head -3 resumed.out
  fi
  "$build/tools/$program" --resume run.ck --target-acc 1 --eval-sequences 16 --quiet >again.out 2>&1 || true
  if [ -z "$first" ] || [ -z "$resumed" ] || [ "$resumed" -le "$first" ] ||
    ! grep -qx "resumed run.ck at step $resumed" again.out; then
    fail "$program: stopped at step ${first:-?}, resumed to ${resumed:-?}, but run.ck then holds: $(head -1 again.out)"
  else
    echo "ok: $program stopped at step $first; --resume run.ck trained to $resumed and saved it in run.ck"
  fi
  cd ..
}

continues train_sequence --task copy --vocab 2 --length 1 --d-model 8 --heads 1 --d-ff 8 --layers 1 --batch 8 \
  --warmup 1 --steps 40 --eval-every 2
continues train_seq2seq --symbols 2 --min-len 1 --max-len 2 --d-model 8 --heads 1 --d-ff 8 --encoder-layers 1 \
  --decoder-layers 1 --batch 8 --warmup 1 --lr 0.01 --steps 400 --eval-every 1

mkdir gpt && cd gpt
"$build/tools/train_gpt" --data "$source/README.md" --steps 2 --warmup 1 --eval-every 2 --d-model 8 --heads 1 \
  --layers 1 --block-size 8 --save run.ck --quiet >fresh.out 2>&1 || fail "train_gpt: the fresh run failed: $(cat fresh.out)"
"$build/tools/train_gpt" --data "$source/README.md" --resume run.ck --quiet >resumed.out 2>&1 ||
  fail "train_gpt: the resumed run failed: $(cat resumed.out)"
if sed -n '2,3p' resumed.out | grep -qx 'save   run.ck at every evaluation and at the end'; then
  echo "ok: train_gpt --resume run.ck says it saves in run.ck"
else
  fail "train_gpt --resume run.ck does not say where it saves before training:"
  head -3 resumed.out
fi
cd ..

finish
