#!/usr/bin/env bash
# The byte-pair encoder against npm's GPT-2 tokenizers on this machine, in the same run:
#  1. encoding MB/s with GPT-2's vocabulary on the King James bible + every fortune (~7 MB):
#     ours on one thread and on two (bench/bpe_encode), tiktoken (OpenAI's Rust core as
#     WebAssembly) and js-tiktoken (JavaScript) (bench/bpe_encode_reference.js); each round runs
#     one process of each, one after the other, so a change of load hits all alike; each process
#     reports the median of REPEAT encodings, the table the median of the processes;
#  2. training a 4,096-token vocabulary on all of the fortunes (tools/train_bpe, whole
#     process, wall seconds, on one thread and two), ROUNDS times.
#
#   bench/compare_bpe.sh                 3 rounds, 3 encodings per process
#   ROUNDS=5 REPEAT=5 BUILD=build bench/compare_bpe.sh
# Needs a release build of bench/bpe_encode and tools/train_bpe in $BUILD, the references
# (tests/data/install_references.sh --apt) and the bible program (bible-kjv).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
REPEAT=${REPEAT:-3}
BUILD=${BUILD:-build}
export NODE_PATH=${ATTOGRAD_NPM:-$HOME/.cache/attograd/npm}/node_modules
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bible -f 'Gen1:1-Rev22:21' >"$work/text.txt"
find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' | sort | xargs cat >>"$work/text.txt"

echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "text: King James bible + every fortune file, $(wc -c <"$work/text.txt") bytes"
for ((r = 1; r <= ROUNDS; r++)); do
  "$BUILD/bench/bpe_encode" --threads 1 --repeat "$REPEAT" "$work/text.txt" | sed 's/^attograd/attograd-1/' >>"$work/encode.txt"
  "$BUILD/bench/bpe_encode" --threads 2 --repeat "$REPEAT" "$work/text.txt" | sed 's/^attograd/attograd-2/' >>"$work/encode.txt"
  node bench/bpe_encode_reference.js tiktoken "$REPEAT" "$work/text.txt" >>"$work/encode.txt"
  node bench/bpe_encode_reference.js js-tiktoken "$REPEAT" "$work/text.txt" >>"$work/encode.txt"
done
echo "encoding, GPT-2's vocabulary: median MB/s over $ROUNDS processes (each the median of $REPEAT encodings)"
awk '
  { name = $1; for (i = 2; i <= NF; i++) if ($i ~ /^MB\/s=/) { split($i, kv, "="); v[name, ++n[name]] = kv[2] }
    if (!(name in seen)) { seen[name] = 1; order[++names] = name }
    for (i = 2; i <= NF; i++) if ($i ~ /^tokens=/) { split($i, kv, "="); tokens[name] = kv[2] } }
  function median(name,   i, j, t, a, m) {
    m = n[name]; for (i = 1; i <= m; i++) a[i] = v[name, i]
    for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
  }
  END {
    printf "%-12s %8s %10s   %s\n", "encoder", "MB/s", "tokens", "per process"
    best = 0
    for (k = 1; k <= names; k++) {
      name = order[k]; med[name] = median(name); line = ""
      for (i = 1; i <= n[name]; i++) line = line sprintf(" %.2f", v[name, i])
      printf "%-12s %8.2f %10s  %s\n", name, med[name], tokens[name], line
      if (name !~ /^attograd/ && med[name] > best) { best = med[name]; bestname = name }
    }
    printf "attograd-1 / %s = %.2f, attograd-2 / %s = %.2f\n", bestname, med["attograd-1"] / best, bestname, med["attograd-2"] / best
  }' "$work/encode.txt"

echo "training a 4096-token vocabulary on every fortune (train_bpe, whole process, wall s)"
for threads in 1 2; do
  times=()
  for ((r = 1; r <= ROUNDS; r++)); do
    start=$(date +%s.%N)
    "$BUILD/tools/train_bpe" --vocab-size 4096 --out "$work/fortunes.bpe" --overwrite --threads "$threads" >"$work/train.txt"
    times+=("$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')")
  done
  echo "threads $threads: ${times[*]}   ($(head -1 "$work/train.txt"))"
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
