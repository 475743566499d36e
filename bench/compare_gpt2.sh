#!/usr/bin/env bash
# GPT-2 124M from files, attograd against PyTorch on this machine, in the same run:
#  1. the files: bench/gpt2_files.py writes a GPT-2 124M with seeded random weights as Hugging
#     Face's model.safetensors, nanoGPT's state_dict (safetensors) and llm.c's gpt2_124M.bin in
#     $DIR (about 500 MB each; skipped when they are there);
#  2. loading: build/bench/gpt2_load reads each file ROUNDS times under /usr/bin/time -v (the page
#     cache warm after a first untimed read): build and import seconds, wall time, peak RSS;
#  3. parity: the float32 logits of ids 0..63 from the Hugging Face file, attograd against PyTorch;
#  4. generation: greedy tokens/s at batch 1 with the KV cache, GEN_TOKENS tokens from the prompt
#     [0], best of REPEATS per process, ROUNDS processes of each framework interleaved, both on
#     THREADS threads.
#
#   bench/compare_gpt2.sh                       everything, 3 rounds
#   ROUNDS=5 GEN_TOKENS=100 DIR=/tmp/gpt2-bench bench/compare_gpt2.sh
# Needs a release build of bench/gpt2_load in $BUILD (default build/) and /usr/bin/python3 with torch.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
REPEATS=${REPEATS:-3}
GEN_TOKENS=${GEN_TOKENS:-100}
THREADS=${THREADS:-2}
DIR=${DIR:-/tmp/gpt2-bench}
BUILD=${BUILD:-build}
PY=/usr/bin/python3
ours=$BUILD/bench/gpt2_load
[ -x "$ours" ] || { echo "compare_gpt2.sh: $ours is missing: build it (ninja -C $BUILD bench/gpt2_load)" >&2; exit 2; }
[ -f "$DIR/gpt2_124M.bin" ] || $PY bench/gpt2_files.py "$DIR"

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load:$(uptime | sed 's/.*load average://')"
weights_mb=$(( $(stat -c %s "$DIR/model.safetensors") / 1000000 ))
echo "## loading (weights file $weights_mb MB; peak RSS target <= 1.2x)"
printf '%-22s %8s %9s %8s %9s\n' layout build_s import_s wall_s rss_MB
for f in model.safetensors nanogpt.safetensors gpt2_124M.bin; do
  cat "$DIR/$f" > /dev/null  # warm the page cache
  for r in $(seq "$ROUNDS"); do
    json=$(/usr/bin/time -v -o /tmp/compare_gpt2.time "$ours" --weights "$DIR/$f" --threads "$THREADS")
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s}' /tmp/compare_gpt2.time)
    rss=$(awk -F': ' '/Maximum resident/ {printf "%.0f", $2 / 1024}' /tmp/compare_gpt2.time)
    $PY -c "import json,sys; j=json.loads(sys.argv[1]); print('%-22s %8.3f %9.3f %8s %9s' % (j['layout'] + ' ' + sys.argv[4], j['build_s'], j['import_s'], sys.argv[2], sys.argv[3]))" \
      "$json" "$wall" "$rss" "$f"
  done
done

echo "## float32 logits of ids 0..63 (Hugging Face file)"
"$ours" --weights "$DIR/model.safetensors" --threads "$THREADS" --logits /tmp/compare_gpt2.ours > /dev/null
$PY bench/torch_gpt2.py --weights "$DIR/model.safetensors" --threads "$THREADS" --logits /tmp/compare_gpt2.torch > /dev/null
$PY -c "
import numpy as np
a = np.fromfile('/tmp/compare_gpt2.ours', dtype=np.float32).astype(np.float64)
b = np.fromfile('/tmp/compare_gpt2.torch', dtype=np.float32).astype(np.float64)
print(f'max |diff| {abs(a - b).max():.3g}, logits scale {abs(b).max():.3g}, relative {abs(a - b).max() / abs(b).max():.3g}; '
      f'argmax equal at {int((a.reshape(64, -1).argmax(1) == b.reshape(64, -1).argmax(1)).sum())}/64 positions')"

echo "## cached greedy generation, batch 1, $GEN_TOKENS tokens, $THREADS threads (best of $REPEATS per process)"
ours_tps=() torch_tps=()
for r in $(seq "$ROUNDS"); do
  o=$("$ours" --weights "$DIR/model.safetensors" --threads "$THREADS" --generate "$GEN_TOKENS" --repeats "$REPEATS")
  t=$($PY bench/torch_gpt2.py --weights "$DIR/model.safetensors" --threads "$THREADS" --generate "$GEN_TOKENS" --repeats "$REPEATS")
  ot=$($PY -c "import json,sys; j=json.loads(sys.argv[1]); print(j['tokens_per_s'], j['fingerprint'])" "$o")
  tt=$($PY -c "import json,sys; j=json.loads(sys.argv[1]); print(j['tokens_per_s'], j['fingerprint'], j['torch_version'])" "$t")
  echo "round $r: attograd $ot | pytorch $tt"
  ours_tps+=("${ot%% *}") torch_tps+=("${tt%% *}")
done
$PY -c "
import statistics, sys
o = [float(x) for x in sys.argv[1].split()]
t = [float(x) for x in sys.argv[2].split()]
print(f'median tokens/s: attograd {statistics.median(o):.1f}, pytorch {statistics.median(t):.1f}, ratio {statistics.median(o) / statistics.median(t):.2f}x')
" "${ours_tps[*]}" "${torch_tps[*]}"
