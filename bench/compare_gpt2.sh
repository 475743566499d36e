#!/usr/bin/env bash
# GPT-2 124M from files, attograd against PyTorch on this machine, in the same run:
#  1. the files: bench/gpt2_files.py writes a GPT-2 124M with seeded random weights as Hugging
#     Face's model.safetensors, nanoGPT's state_dict (safetensors) and llm.c's gpt2_124M.bin in
#     $DIR (about 500 MB each; skipped when they are there);
#  2. loading: build/bench/gpt2_load reads each file ROUNDS times under /usr/bin/time -v (the page
#     cache warm after a first untimed read): build and import seconds, wall time, peak RSS;
#  3. parity: the float32 logits of ids 0..63 from the Hugging Face file, attograd against PyTorch;
#  4. int8 and q4_0 against float32 (one process each, gpt2_load --quality): the logits of ids
#     0..63 and the GEN_TOKENS greedy tokens of the float model and of the same model after
#     GPT::quantize (random weights: near-uniform logits, so the token agreement says little;
#     docs/quantization.md measures a trained model);
#  5. generation: the machine's read bandwidth on THREADS threads (bench/machine_peak), then greedy
#     tokens/s at batch 1 with the KV cache, GEN_TOKENS tokens from the prompt [0], best of
#     REPEATS per process, ROUNDS processes of each interleaved: attograd float32, int8 and q4_0
#     (--quantize) and PyTorch float32, all on THREADS threads; each attograd figure also as a
#     share of its memory roofline (the bytes a token reads / the bandwidth); with TORCH_INT8=1
#     also PyTorch's dynamic int8 (bench/torch_gpt2.py --quantize int8, on oneDNN: this Debian's
#     torch 1.13 lacks fbgemm; off by default, its rounds vary from 1 to 21 tokens/s here).
#
#   bench/compare_gpt2.sh                       everything, 3 rounds
#   ROUNDS=5 GEN_TOKENS=100 DIR=/tmp/gpt2-bench bench/compare_gpt2.sh
#   GEN_ONLY=1 bench/compare_gpt2.sh            steps 4 and 5 only (no loading, no parity)
# Needs a release build of bench/gpt2_load in $BUILD (default build/) and /usr/bin/python3 with torch.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
REPEATS=${REPEATS:-3}
GEN_TOKENS=${GEN_TOKENS:-100}
THREADS=${THREADS:-2}
DIR=${DIR:-/tmp/gpt2-bench}
BUILD=${BUILD:-build}
GEN_ONLY=${GEN_ONLY:-0}
TORCH_INT8=${TORCH_INT8:-0}
PY=/usr/bin/python3
ours=$BUILD/bench/gpt2_load
[ -x "$ours" ] || { echo "compare_gpt2.sh: $ours is missing: build it (ninja -C $BUILD bench/gpt2_load)" >&2; exit 2; }
[ -f "$DIR/gpt2_124M.bin" ] || $PY bench/gpt2_files.py "$DIR"

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load:$(uptime | sed 's/.*load average://')"
if [ "$GEN_ONLY" != 1 ]; then
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

fi

echo "## quantized weights against float32 (attograd, one process each; logits of ids 0..63, $GEN_TOKENS greedy tokens)"
for q in int8 q4_0; do
  "$ours" --weights "$DIR/model.safetensors" --threads "$THREADS" --quality $q --generate "$GEN_TOKENS"
done

peak=$("$BUILD/bench/machine_peak" --threads "$THREADS")
echo "$peak" | grep -E "bandwidth"
bandwidth=$(sed -n 's/^memory read bandwidth.* threads \([0-9.]*\) GB\/s$/\1/p' <<<"$peak")
[ -n "$bandwidth" ] || bandwidth=$(sed -n 's/^memory read bandwidth.*: 1 thread \([0-9.]*\) GB\/s$/\1/p' <<<"$peak")

echo "## cached greedy generation, batch 1, $GEN_TOKENS tokens, $THREADS threads (best of $REPEATS per process)"
field() { $PY -c "import json,sys; j=json.loads(sys.argv[1]); print(' '.join(str(j[k]) for k in sys.argv[2:]))" "$@"; }
f32_tps=() int8_tps=() q4_tps=() torch_tps=() torch_int8_tps=() bytes=()
for r in $(seq "$ROUNDS"); do
  o=$(field "$("$ours" --weights "$DIR/model.safetensors" --threads "$THREADS" --generate "$GEN_TOKENS" --repeats "$REPEATS")" \
        tokens_per_s fingerprint bytes_per_token)
  q=$(field "$("$ours" --weights "$DIR/model.safetensors" --threads "$THREADS" --generate "$GEN_TOKENS" --repeats "$REPEATS" --quantize int8)" \
        tokens_per_s fingerprint bytes_per_token)
  q4=$(field "$("$ours" --weights "$DIR/model.safetensors" --threads "$THREADS" --generate "$GEN_TOKENS" --repeats "$REPEATS" --quantize q4_0)" \
        tokens_per_s fingerprint bytes_per_token)
  t=$(field "$($PY bench/torch_gpt2.py --weights "$DIR/model.safetensors" --threads "$THREADS" --generate "$GEN_TOKENS" --repeats "$REPEATS")" \
        tokens_per_s fingerprint torch_version)
  line="round $r: attograd f32 ${o% *} | attograd int8 ${q% *} | attograd q4_0 ${q4% *} | pytorch f32 $t"
  if [ "$TORCH_INT8" = 1 ]; then
    ti=$(field "$($PY bench/torch_gpt2.py --weights "$DIR/model.safetensors" --threads "$THREADS" --generate "$GEN_TOKENS" --repeats "$REPEATS" --quantize int8 2>/dev/null)" \
         tokens_per_s fingerprint quantized)
    line="$line | pytorch int8 $ti"
    torch_int8_tps+=("${ti%% *}")
  fi
  echo "$line"
  f32_tps+=("${o%% *}") int8_tps+=("${q%% *}") q4_tps+=("${q4%% *}") torch_tps+=("${t%% *}")
  bytes=("${o##* }" "${q##* }" "${q4##* }")
done
$PY -c "
import statistics, sys
o, q, q4, t = ([float(x) for x in a.split()] for a in sys.argv[1:5])
m = statistics.median
line = f'median tokens/s: attograd f32 {m(o):.1f}, attograd int8 {m(q):.1f}, attograd q4_0 {m(q4):.1f}, pytorch f32 {m(t):.1f}'
if sys.argv[5]:
    line += f', pytorch int8 {m([float(x) for x in sys.argv[5].split()]):.1f}'
print(line)
print(f'ratios: int8 / pytorch f32 {m(q) / m(t):.2f}x, int8 / attograd f32 {m(q) / m(o):.2f}x, attograd f32 / pytorch f32 {m(o) / m(t):.2f}x')
bandwidth = float(sys.argv[6]) * 1e9
for name, tps, per_token in zip(('f32', 'int8', 'q4_0'), (o, q, q4), (float(b) for b in sys.argv[7].split())):
    limit = bandwidth / per_token
    print(f'roofline {name}: {per_token / 1e6:.1f} MB per token at {bandwidth / 1e9:.1f} GB/s = {limit:.1f} tokens/s; '
          f'attograd {m(tps):.1f} = {m(tps) / limit:.0%} of it')
" "${f32_tps[*]}" "${int8_tps[*]}" "${q4_tps[*]}" "${torch_tps[*]}" "${torch_int8_tps[*]}" "$bandwidth" "${bytes[*]}"
echo "# end $(date -u '+%H:%M UTC'), load:$(uptime | sed 's/.*load average://')"
