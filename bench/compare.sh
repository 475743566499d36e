#!/usr/bin/env bash
# attograd against PyTorch on this machine, in the same run: full training steps per
# configuration (processes interleaved, several each, medians of medians, plus the ratio of the
# fastest steps) and the whole-process time to 99% exact-sequence accuracy on the reverse task
# (tiny model).
#
#   bench/compare.sh                 all configurations, 3 processes each
#   ROUNDS=5 CONFIGS="tiny small" bench/compare.sh
#   BUILD=build-release bench/compare.sh   another build directory (default build/)
#   CONTENDED=1 bench/compare.sh     also a second table with one core kept busy (see below)
#   BASELINE=/path/to/other/build bench/compare.sh
#                                    also time that build's train_step in the same rounds (a
#                                    "before" column for a change: build the old commit there),
#                                    and its train_sequence in the time-to-99% rounds
#
# CONTENDED=1: after the quiet table, the script starts a busy loop of its own (one shell
# spinning, ended by the script, and by `timeout` after BUSY_LIMIT seconds whatever happens) and
# times the same steps again while it runs: attograd with 2 threads and with 1 thread, PyTorch,
# and the baseline if given. That is a laptop or shared server where another program holds one
# of the two cores. The time-to-99% part runs on the quiet machine only.
# Needs a release build in build/ (./bootstrap.sh && ninja -C build) and /usr/bin/python3 with torch.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
CONFIGS=${CONFIGS:-"tiny small medium large"}
OURS_THREADS=${OURS_THREADS:-2}
CONTENDED=${CONTENDED:-0}
BUSY_LIMIT=${BUSY_LIMIT:-3600}
BASELINE=${BASELINE:-}
PY=/usr/bin/python3
BUILD=${BUILD:-build}
ours=$BUILD/bench/train_step
[ -x "$ours" ] || { echo "compare.sh: $ours is missing: run ./bootstrap.sh && ninja -C build" >&2; exit 2; }
if [ -n "$BASELINE" ] && [ ! -x "$BASELINE/bench/train_step" ]; then
  echo "compare.sh: BASELINE=$BASELINE has no bench/train_step: build it there first" >&2
  exit 2
fi
"$PY" -c 'import torch' 2>/dev/null || { echo "compare.sh: /usr/bin/python3 cannot import torch (apt-get install python3-torch)" >&2; exit 2; }

steps_for() { case $1 in tiny) echo 200 ;; small) echo 40 ;; medium) echo 10 ;; large) echo 5 ;; esac; }
tmp=$(mktemp -d)
busy_pid=
stop_busy() { if [ -n "$busy_pid" ]; then kill "$busy_pid" 2>/dev/null || true; wait "$busy_pid" 2>/dev/null || true; busy_pid=; fi; }
trap 'stop_busy; rm -rf "$tmp"' EXIT

load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(date -u +%Y-%m-%d)"
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- . 2>/dev/null || echo ' (working tree has changes)')"
echo "threads: attograd --threads $OURS_THREADS; pytorch intra-op 1, OpenBLAS 2"

# One table: for every configuration, ROUNDS rounds of [ours at each thread count, baseline,
# pytorch], one process each, into $tmp/<label>_<who>_<cfg>.jsonl.
run_steps() {
  local label=$1 thread_counts=$2 cfg r t steps
  for cfg in $CONFIGS; do
    steps=$(steps_for "$cfg")
    for r in $(seq "$ROUNDS"); do
      for t in $thread_counts; do
        "$ours" --config "$cfg" --steps "$steps" --threads "$t" --json >>"$tmp/${label}_ours${t}_$cfg.jsonl"
      done
      if [ -n "$BASELINE" ]; then
        "$BASELINE/bench/train_step" --config "$cfg" --steps "$steps" --threads "$OURS_THREADS" --json \
          >>"$tmp/${label}_base_$cfg.jsonl"
      fi
      "$PY" bench/torch_reference.py --config "$cfg" --steps "$steps" --threads 1 --blas-threads 2 --json \
        >>"$tmp/${label}_torch_$cfg.jsonl"
    done
  done
}

print_table() {
  "$PY" - "$tmp" "$1" "$2" "$OURS_THREADS" $CONFIGS <<'PYEOF'
import json, os, statistics, sys
tmp, label, counts, main, configs = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4], sys.argv[5:]
def rows(who, c):
    path = f"{tmp}/{label}_{who}_{c}.jsonl"
    return [json.loads(l) for l in open(path) if l.strip()] if os.path.exists(path) else []
med = lambda rs: statistics.median(r["median_ms"] for r in rs)
base = any(rows("base", c) for c in configs)
head = f"{'config':<8} {'attograd ms':>12} {'pytorch ms':>11} {'ratio':>6} {'min ratio':>9}"
for t in counts:
    if t != main: head += f" {'ours ' + t + 't ms':>12} {main + 't / ' + t + 't':>9}"
if base: head += f" {'before ms':>10} {'after/before':>12}"
head += f" {'ours GFLOP/s':>13} {'torch GFLOP/s':>14} {'ours RSS MB':>12} {'torch RSS MB':>13}"
print(head)
for c in configs:
    o, t = rows("ours" + main, c), rows("torch", c)
    om, tm = med(o), med(t)
    # The fastest step each side managed: less sensitive to a noisy machine than the medians.
    best = min(r["min_ms"] for r in o) / min(r["min_ms"] for r in t)
    line = f"{c:<8} {om:>12.3f} {tm:>11.3f} {om / tm:>6.2f} {best:>9.2f}"
    for n in counts:
        if n != main:
            other = med(rows("ours" + n, c))
            line += f" {other:>12.3f} {om / other:>9.2f}"
    if base:
        b = med(rows("base", c))
        line += f" {b:>10.3f} {om / b:>12.3f}"
    line += (f" {statistics.median(r['gflops'] for r in o):>13.1f} {statistics.median(r['gflops'] for r in t):>14.1f}"
             f" {max(r['peak_rss_mb'] for r in o):>12.1f} {max(r['peak_rss_mb'] for r in t):>13.1f}")
    print(line)
PYEOF
}

echo
echo "quiet machine: load average at start $(load) (a busy machine slows both sides, PyTorch's per-op overhead more)"
run_steps quiet "$OURS_THREADS"
print_table quiet "$OURS_THREADS"
echo "load average after: $(load)"

echo
echo "time to 99% exact-sequence accuracy on reverse (tiny model, whole process, wall seconds)"
tiny_flags=(--task reverse --vocab 16 --length 16 --batch 32 --d-model 32 --heads 2 --d-ff 64 --layers 2 --post-norm)
for r in $(seq "$ROUNDS"); do
  s=$(date +%s.%N); "$BUILD"/tools/train_sequence "${tiny_flags[@]}" --threads 1 --quiet >/dev/null; e=$(date +%s.%N)
  echo "attograd $(echo "$e - $s" | bc)" >>"$tmp/reach.txt"
  s=$(date +%s.%N); "$PY" bench/torch_reference.py --config tiny --train-reverse --json >/dev/null; e=$(date +%s.%N)
  echo "pytorch $(echo "$e - $s" | bc)" >>"$tmp/reach.txt"
  # A baseline built before the programs moved to tools/ has them in examples/.
  base_seq=$BASELINE/tools/train_sequence
  [ -x "$base_seq" ] || base_seq=$BASELINE/examples/train_sequence
  if [ -n "$BASELINE" ] && [ -x "$base_seq" ]; then
    s=$(date +%s.%N); "$base_seq" "${tiny_flags[@]}" --threads 1 --quiet >/dev/null; e=$(date +%s.%N)
    echo "before $(echo "$e - $s" | bc)" >>"$tmp/reach.txt"
  fi
done
"$PY" - "$tmp/reach.txt" <<'PYEOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
ours = statistics.median(float(v) for k, v in rows if k == "attograd")
torch = statistics.median(float(v) for k, v in rows if k == "pytorch")
print(f"attograd {ours:.2f} s   pytorch {torch:.2f} s   ratio {ours / torch:.2f}")
before = [float(v) for k, v in rows if k == "before"]
if before:
    b = statistics.median(before)
    print(f"before (BASELINE) {b:.2f} s   after/before {ours / b:.3f}")
PYEOF
echo "load average at end: $(load)"

if [ "$CONTENDED" = 1 ]; then
  echo
  timeout "$BUSY_LIMIT" bash -c 'while :; do :; done' &
  busy_pid=$!
  sleep 5  # let the load average see it
  echo "contended: one core kept busy by a shell loop (pid $busy_pid); load average at start $(load)"
  run_steps busy "$OURS_THREADS 1"
  print_table busy "$OURS_THREADS 1"
  echo "load average after: $(load)"
  stop_busy
fi
