#!/usr/bin/env bash
# Data parallelism on this machine: full training steps of one configuration (default medium)
# with the same global batch, as 1 process x 1 thread, 1 process x 2 threads and 2 processes x 1
# thread (mpirun, train/dist/data_parallel.h). Processes interleaved, several each, medians of their
# median step times, tokens/s, and for the 2-process runs the share of backward during which a
# gradient sum was in flight and the time waited for the sums after backward.
#
#   bench/compare_mpi.sh                     medium, 3 processes of each kind
#   ROUNDS=5 CONFIG=large bench/compare_mpi.sh
#   BUILD=build-release bench/compare_mpi.sh  another build directory (default build/)
# Needs a build with MPI and the benchmarks (meson -Dbench=true), mpirun and /usr/bin/python3.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
CONFIG=${CONFIG:-medium}
BUILD=${BUILD:-build}
STEPS=${STEPS:-10}
PY=/usr/bin/python3
bench=$BUILD/bench/train_step
[ -x "$bench" ] || { echo "compare_mpi.sh: $bench is missing: build with -Dbench=true" >&2; exit 2; }
command -v mpirun >/dev/null || { echo "compare_mpi.sh: no mpirun (apt-get install openmpi-bin)" >&2; exit 2; }
# Root needs OpenMPI's consent; containers forbid its ptrace-based single copy between ranks.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "load average at start: $(load)"
for r in $(seq "$ROUNDS"); do
  "$bench" --config "$CONFIG" --threads 1 --steps "$STEPS" --json >>"$tmp/1x1.jsonl"
  "$bench" --config "$CONFIG" --threads 2 --steps "$STEPS" --json >>"$tmp/1x2.jsonl"
  mpirun --oversubscribe -np 2 "$bench" --config "$CONFIG" --threads 1 --steps "$STEPS" --json >>"$tmp/2x1.jsonl"
done
echo "load average at end: $(load)"

"$PY" - "$tmp" "$CONFIG" <<'PYEOF'
import json, statistics, sys
tmp, config = sys.argv[1], sys.argv[2]
rows = {k: [json.loads(l) for l in open(f"{tmp}/{k}.jsonl") if l.strip()] for k in ("1x1", "1x2", "2x1")}
med = {k: statistics.median(r["median_ms"] for r in v) for k, v in rows.items()}
print(f"config {config}, same global batch; {len(rows['1x1'])} processes of each kind, median of their median steps")
print(f"{'processes x threads':<20} {'ms/step':>9} {'tokens/s':>9} {'vs 1x2':>7} {'overlap':>8} {'waited ms':>10}")
for k, v in rows.items():
    tok = statistics.median(r["tokens_per_s"] for r in v)
    share = f"{100 * statistics.median(r['overlap_share'] for r in v):.0f}%" if k == "2x1" else "-"
    waited = f"{statistics.median(r['exposed_ms'] for r in v):.1f}" if k == "2x1" else "-"
    print(f"{k:<20} {med[k]:>9.1f} {tok:>9.0f} {med[k] / med['1x2']:>7.2f} {share:>8} {waited:>10}")
b = rows["2x1"][0]
print(f"2x1: {b['buckets']} buckets; overlap = share of backward during which a gradient sum was in flight; "
      f"waited = per step, for the sums after backward (includes waiting for the slower rank)")
print(f"target: 2x1 within 10% of 1x2: {'met' if med['2x1'] <= 1.10 * med['1x2'] else 'NOT met'} "
      f"({100 * (med['2x1'] / med['1x2'] - 1):+.1f}%)")
PYEOF
