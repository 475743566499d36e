#!/usr/bin/env bash
# tools/evaluate against PyTorch (tests/parity/perplexity_reference.py) on the same windows of
# the same text with the same weights: the tokens scored exactly, the total nats, nats per token
# and bits per byte within 1e-5 relative; with a stride below the window and equal to it, on one
# process and, given MPIRUN, on `mpirun -np 2` (the windows split between the ranks). Bad strides
# and a text too short are refused with exit 2 and a message. Skips (77) without PyTorch.
#   evaluate_matches_torch.sh BUILD_DIR SOURCE_DIR [MPIRUN]
source "$(dirname "$0")/../in_scratch_directory.sh" "$@"
mpirun=${3:-}
/usr/bin/python3 -c "import torch" 2>/dev/null || { echo "SKIP: no PyTorch for /usr/bin/python3"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none

for i in $(seq 1 120); do echo "line $i: the cat sat on the mat, and the dog ran after $((i * 7 % 13)) birds."; done >text.txt
"$build/tools/train_gpt" --data text.txt --tokenizer byte --layers 2 --d-model 32 --heads 2 --block-size 32 \
  --batch 8 --steps 30 --eval-every 30 --quiet --save ckpt.safetensors --log metrics.jsonl --plot plot.svg \
  >train.txt 2>&1 || { cat train.txt; fail "train_gpt failed"; finish; exit 1; }

# value KEY FILE: the number after KEY on its line.
value() { sed -n "s|^$1 *\([-0-9.e+]*\).*|\1|p" "$2" | head -1; }
close() {  # A B: |A - B| <= 1e-5 |B|
  /usr/bin/python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(a - b) <= 1e-5 * abs(b) else 1)" "$1" "$2"
}

check() {  # LABEL STRIDE WINDOW [LAUNCHER...]
  local label=$1 stride=$2 window=$3
  shift 3
  if ! "$@" "$build/tools/evaluate" --checkpoint ckpt.safetensors --data text.txt --stride "$stride" \
      --block-size "$window" --batch 3 >ours.txt 2>err.txt; then
    fail "$label: evaluate failed: $(cat err.txt)"
    return
  fi
  /usr/bin/python3 "$source/tests/parity/perplexity_reference.py" ckpt.safetensors text.txt "$stride" "$window" >torch.txt
  local tokens nats want_tokens want_nats
  tokens=$(sed -n 's/^scored *\([0-9]*\) tokens.*/\1/p' ours.txt)
  nats=$(sed -n 's/^scored .* bytes, \([-0-9.e+]*\) nats$/\1/p' ours.txt)
  want_tokens=$(sed -n 's/^tokens \([0-9]*\) .*/\1/p' torch.txt)
  want_nats=$(sed -n 's/^tokens .* nats \([-0-9.e+]*\) .*/\1/p' torch.txt)
  [ -n "$tokens" ] && [ "$tokens" = "$want_tokens" ] || fail "$label: $tokens tokens scored, PyTorch $want_tokens"
  close "$nats" "$want_nats" || fail "$label: total nats $nats, PyTorch $want_nats"
  close "$(value nats/token ours.txt)" "$(value nats/token torch.txt)" || fail "$label: nats per token differ"
  close "$(value bits/byte ours.txt)" "$(value bits/byte torch.txt)" || fail "$label: bits per byte differ"
  echo "$label: $tokens tokens, nats $nats against PyTorch's $want_nats"
}

if [ -z "$mpirun" ]; then
  check "stride 12 of 32" 12 32
  check "stride = window = 20" 20 20
  # Bad input: a clear message and exit 2.
  for bad in "--stride 0" "--stride 33" "--stride 8 --block-size 40"; do
    status=0
    # shellcheck disable=SC2086
    "$build/tools/evaluate" --checkpoint ckpt.safetensors --data text.txt $bad >out.txt 2>err.txt || status=$?
    [ "$status" -eq 2 ] && grep -q -- "--" err.txt || fail "evaluate $bad: exit $status, $(cat err.txt)"
  done
  printf 'x' >one.txt
  status=0
  "$build/tools/evaluate" --checkpoint ckpt.safetensors --data one.txt --stride 4 >out.txt 2>err.txt || status=$?
  [ "$status" -eq 2 ] && grep -q "1 token" err.txt || fail "a one-token text: exit $status, $(cat err.txt)"
else
  check "2 processes, stride 12 of 32" 12 32 timeout 120 "$mpirun" --oversubscribe -np 2
  check "2 processes, stride = window = 20" 20 20 timeout 120 "$mpirun" --oversubscribe -np 2
fi
finish
