#!/usr/bin/env bash
# Hugging Face tokenizer.json encoding against npm's @lenml/tokenizers (transformers.js's
# tokenizers, JavaScript) on this machine, in the same run: MB/s on the King James bible + every
# fortune (~7 MB) with Llama 3's and Qwen3's tokenizer.json, ours on one thread and on two
# (bench/bpe_encode), the reference on one (bench/bpe_encode_reference.js lenml). Each round runs
# one process of each, one after the other, so a change of load hits all alike; each process
# reports the median of REPEAT encodings (the file's loading is not timed), the table the median
# of the processes. The ids are the reference's (tests/data/hf_tokenizers_match_the_reference.sh);
# the token counts printed agree.
#
#   bench/compare_hf_bpe.sh                 3 rounds, 3 encodings per process
#   ROUNDS=5 REPEAT=5 BUILD=build bench/compare_hf_bpe.sh
# Needs a release build of bench/bpe_encode in $BUILD, the references
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
for model in llama3 qwen3; do
  file=$NODE_PATH/@lenml/tokenizer-$model/models/tokenizer.json
  out=$work/$model.txt
  for ((r = 1; r <= ROUNDS; r++)); do
    "$BUILD/bench/bpe_encode" --tokenizer "$file" --threads 1 --repeat "$REPEAT" "$work/text.txt" | sed 's/^attograd/attograd-1/' >>"$out"
    "$BUILD/bench/bpe_encode" --tokenizer "$file" --threads 2 --repeat "$REPEAT" "$work/text.txt" | sed 's/^attograd/attograd-2/' >>"$out"
    node bench/bpe_encode_reference.js lenml "$REPEAT" "$work/text.txt" "$file" >>"$out"
  done
  echo "encoding, $model's tokenizer.json: median MB/s over $ROUNDS processes (each the median of $REPEAT encodings)"
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
      for (k = 1; k <= names; k++) {
        name = order[k]; med[name] = median(name); line = ""
        for (i = 1; i <= n[name]; i++) line = line sprintf(" %.2f", v[name, i])
        printf "%-12s %8.2f %10s  %s\n", name, med[name], tokens[name], line
      }
      printf "attograd-1 / lenml = %.2f, attograd-2 / lenml = %.2f\n", med["attograd-1"] / med["lenml"], med["attograd-2"] / med["lenml"]
    }' "$out"
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
