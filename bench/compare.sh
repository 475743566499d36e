#!/usr/bin/env bash
# attograd against PyTorch on this machine, in the same run: full training steps per
# configuration (processes interleaved, several each, medians of medians, plus the ratio of the
# fastest steps) and the whole-process time to 99% exact-sequence accuracy on the reverse task
# (tiny model).
#
#   bench/compare.sh                 all configurations, 3 processes each
#   ROUNDS=5 CONFIGS="tiny small" bench/compare.sh
#   BUILD=build-release bench/compare.sh   another build directory (default build/)
# Needs a release build in build/ (./bootstrap.sh && ninja -C build) and /usr/bin/python3 with torch.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
CONFIGS=${CONFIGS:-"tiny small medium large"}
PY=/usr/bin/python3
BUILD=${BUILD:-build}
ours=$BUILD/bench/train_step
[ -x "$ours" ] || { echo "compare.sh: $ours is missing: run ./bootstrap.sh && ninja -C build" >&2; exit 2; }
"$PY" -c 'import torch' 2>/dev/null || { echo "compare.sh: /usr/bin/python3 cannot import torch (apt-get install python3-torch)" >&2; exit 2; }

steps_for() { case $1 in tiny) echo 200 ;; small) echo 40 ;; medium) echo 10 ;; large) echo 5 ;; esac; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(date -u +%Y-%m-%d)"
echo "load average at start: $(load) (a busy machine slows both sides, PyTorch's per-op overhead more)"
for cfg in $CONFIGS; do
  steps=$(steps_for "$cfg")
  for r in $(seq "$ROUNDS"); do
    "$ours" --config "$cfg" --steps "$steps" --json >>"$tmp/ours_$cfg.jsonl"
    "$PY" bench/torch_reference.py --config "$cfg" --steps "$steps" --threads 1 --blas-threads 2 --json >>"$tmp/torch_$cfg.jsonl"
  done
done

"$PY" - "$tmp" $CONFIGS <<'PYEOF'
import json, statistics, sys
tmp, configs = sys.argv[1], sys.argv[2:]
def load(path):
    return [json.loads(l) for l in open(path) if l.strip()]
print(f"{'config':<8} {'attograd ms':>12} {'pytorch ms':>11} {'ratio':>6} {'min ratio':>9} {'ours GFLOP/s':>13} {'torch GFLOP/s':>14} {'ours RSS MB':>12} {'torch RSS MB':>13}")
for c in configs:
    o, t = load(f"{tmp}/ours_{c}.jsonl"), load(f"{tmp}/torch_{c}.jsonl")
    om = statistics.median(r["median_ms"] for r in o)
    tm = statistics.median(r["median_ms"] for r in t)
    # The fastest step each side managed: less sensitive to a noisy machine than the medians.
    best = min(r["min_ms"] for r in o) / min(r["min_ms"] for r in t)
    print(f"{c:<8} {om:>12.3f} {tm:>11.3f} {om / tm:>6.2f} {best:>9.2f} {statistics.median(r['gflops'] for r in o):>13.1f} "
          f"{statistics.median(r['gflops'] for r in t):>14.1f} {max(r['peak_rss_mb'] for r in o):>12.1f} "
          f"{max(r['peak_rss_mb'] for r in t):>13.1f}")
PYEOF

echo
echo "time to 99% exact-sequence accuracy on reverse (tiny model, whole process, wall seconds)"
tiny_flags=(--task reverse --vocab 16 --length 16 --batch 32 --d-model 32 --heads 2 --d-ff 64 --layers 2 --post-norm)
for r in $(seq "$ROUNDS"); do
  s=$(date +%s.%N); "$BUILD"/examples/train_sequence "${tiny_flags[@]}" --quiet >/dev/null; e=$(date +%s.%N)
  echo "attograd $(echo "$e - $s" | bc)" >>"$tmp/reach.txt"
  s=$(date +%s.%N); "$PY" bench/torch_reference.py --config tiny --train-reverse --json >/dev/null; e=$(date +%s.%N)
  echo "pytorch $(echo "$e - $s" | bc)" >>"$tmp/reach.txt"
done
"$PY" - "$tmp/reach.txt" <<'PYEOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
ours = statistics.median(float(v) for k, v in rows if k == "attograd")
torch = statistics.median(float(v) for k, v in rows if k == "pytorch")
print(f"attograd {ours:.2f} s   pytorch {torch:.2f} s   ratio {ours / torch:.2f}")
PYEOF
echo "load average at end: $(load)"
