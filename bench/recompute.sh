#!/usr/bin/env bash
# Activation recompute (--recompute) against the plain step on one GPT shape: bench/gpt_step
# with and without it, the two interleaved, ROUNDS processes each. Prints the medians of the
# per-process median step times, the peak RSS of each, the most tensor bytes live at once and,
# of those, what is not the parameters, their gradients and AdamW's two moments (16 bytes per
# parameter): the activations and the step's temporaries, which recompute is about. Then
# recompute / plain for each.
#
#   bench/recompute.sh                                   GPT-2 124M at batch 2 x context 1024
#   CONFIG=gpt2-8x1024 ROUNDS=2 bench/recompute.sh       8 rows: the activations outweigh the state
#   OPENBLAS_CORETYPE=Haswell bench/recompute.sh         OpenBLAS's kernels chosen by hand (see README)
# Needs a release build of bench/gpt_step in $BUILD (default build/).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
CONFIG=${CONFIG:-gpt2-2x1024}
STEPS=${STEPS:-2}
WARMUP=${WARMUP:-1}
THREADS=${THREADS:-2}
BUILD=${BUILD:-build}
ours=$BUILD/bench/gpt_step
[ -x "$ours" ] || { echo "recompute.sh: $ours is missing: build it (ninja -C $BUILD bench/gpt_step)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "machine: $(nproc) cores, $(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD)"
echo "config $CONFIG, $STEPS timed steps after $WARMUP, threads $THREADS, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset)}"
echo "load average at start: $(load)"
for r in $(seq "$ROUNDS"); do
  "$ours" --config "$CONFIG" --steps "$STEPS" --warmup "$WARMUP" --threads "$THREADS" --json >>"$tmp/plain.jsonl"
  "$ours" --config "$CONFIG" --steps "$STEPS" --warmup "$WARMUP" --threads "$THREADS" --json --recompute >>"$tmp/recompute.jsonl"
done
echo "load average at end: $(load)"
/usr/bin/python3 - "$tmp" <<'PY'
import json, statistics, sys
rows = {k: [json.loads(l) for l in open(f"{sys.argv[1]}/{k}.jsonl")] for k in ("plain", "recompute")}
med = {k: statistics.median(r["median_ms"] for r in v) for k, v in rows.items()}
rss = {k: max(r["peak_rss_mb"] for r in v) for k, v in rows.items()}
live = {k: max(r["peak_live_mb"] for r in v) for k, v in rows.items()}
state = rows["plain"][0]["parameters"] * 16 / 2**20
act = {k: live[k] - state for k in live}
tok = {k: statistics.median(r["tokens_per_s"] for r in v) for k, v in rows.items()}
print(f"{'':10} {'ms/step':>10} {'tokens/s':>9} {'peak RSS MB':>12} {'peak live MB':>13} {'beyond state MB':>16}"
      "   per-process medians (ms)")
for k in ("plain", "recompute"):
    per = " ".join(f"{r['median_ms']:.0f}" for r in rows[k])
    print(f"{k:10} {med[k]:10.0f} {tok[k]:9.1f} {rss[k]:12.0f} {live[k]:13.0f} {act[k]:16.0f}   {per}")
print(f"recompute / plain: time {med['recompute'] / med['plain']:.2f}x, peak RSS {rss['recompute'] / rss['plain']:.2f}x, "
      f"beyond the state {act['recompute'] / act['plain']:.2f}x (state: {state:.0f} MB)")
PY
