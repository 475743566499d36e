#!/usr/bin/env bash
# GPT-2 124M training with gradient accumulation, as one process with 2 threads and as
# `mpirun -np 2` with 1 thread each, the same global batch: train_gpt itself on the fortunes
# corpus, interleaved, ROUNDS runs of each. Prints each run's training tokens/s (the summary
# line's, which leaves out model building and evaluation) and the medians' ratio.
#
#   bench/mpi_gpt2.sh                         batch 32 x 64 tokens, --grad-accum 8, 3 updates
#   ROUNDS=3 STEPS=4 bench/mpi_gpt2.sh
#   OPENBLAS_CORETYPE=Haswell bench/mpi_gpt2.sh
# Needs a build with MPI in $BUILD (default build/), mpirun, and the fortunes package.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-2}
STEPS=${STEPS:-3}
BUILD=${BUILD:-build}
gpt=$(pwd)/$BUILD/tools/train_gpt
[ -x "$gpt" ] || { echo "mpi_gpt2.sh: $gpt is missing: build it" >&2; exit 2; }
command -v mpirun >/dev/null || { echo "mpi_gpt2.sh: no mpirun (apt-get install openmpi-bin)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
flags=(--preset gpt2 --data fortunes --block-size 64 --batch 32 --grad-accum 8 --steps "$STEPS" --eval-every "$STEPS"
       --eval-windows 2 --quiet --overwrite)
rate() { grep -o '([0-9.]*k\? tokens/s)' "$1" | tr -d '()' | sed 's/ tokens\/s//'; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "machine: $(nproc) cores, $(date -u '+%Y-%m-%d %H:%M UTC'), OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset)}"
echo "train_gpt ${flags[*]}"
echo "load average at start: $(load)"
for r in $(seq "$ROUNDS"); do
  "$gpt" "${flags[@]}" --threads 2 --run-name "one-$r" >"one-$r.out" 2>&1 || { cat "one-$r.out"; exit 1; }
  mpirun --oversubscribe -np 2 "$gpt" "${flags[@]}" --threads 1 --run-name "two-$r" >"two-$r.out" 2>&1 ||
    { cat "two-$r.out"; exit 1; }
  echo "round $r: 1 process x 2 threads $(rate "one-$r.out") tokens/s | 2 processes x 1 thread $(rate "two-$r.out") tokens/s"
  grep -h "data parallel" "two-$r.out" || true
done
echo "load average at end: $(load)"
/usr/bin/python3 - "$ROUNDS" <<'PY'
import re, statistics, sys
def rate(path):
    text = open(path).read()
    value = re.search(r"\(([0-9.]+)(k?) tokens/s\)", text)
    return float(value.group(1)) * (1000 if value.group(2) else 1)
rounds = int(sys.argv[1])
one = statistics.median(rate(f"one-{r}.out") for r in range(1, rounds + 1))
two = statistics.median(rate(f"two-{r}.out") for r in range(1, rounds + 1))
print(f"median tokens/s: 1 process x 2 threads {one:.1f}, 2 processes x 1 thread {two:.1f}, ratio {two / one:.2f}")
PY
