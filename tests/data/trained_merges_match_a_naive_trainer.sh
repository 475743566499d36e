#!/usr/bin/env bash
# train_bpe against a naive trainer written in JavaScript for the test (tests/data/
# bpe_train_reference.js: its own regular expression, every pair recounted before each merge):
# the same merges, in the same order, on the first 400 KB of the fortunes for 1,000 tokens. And
# the same file on one thread and two.
#
#   tests/data/trained_merges_match_a_naive_trainer.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
. "$src/tests/data/references_present.sh"
require_node_packages
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mapfile -t fortunes < <(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' | sort)
node "$src/tests/data/bpe_train_reference.js" corpus "$work/corpus.txt" 400000 "${fortunes[@]}"
"$build/tools/train_bpe" --data "$work/corpus.txt" --vocab-size 1000 --out "$work/one.bpe" --threads 1
"$build/tools/train_bpe" --data "$work/corpus.txt" --vocab-size 1000 --out "$work/two.bpe" --threads 2
cmp "$work/one.bpe" "$work/two.bpe"
echo "trained_merges_match_a_naive_trainer: the same file on one thread and two"
node "$src/tests/data/bpe_train_reference.js" compare "$work/corpus.txt" 1000 "$work/one.bpe"
