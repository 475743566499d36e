#!/usr/bin/env bash
# train_bpe and tokenize as a user meets them (from a scratch directory, with a vocabulary
# trained there, so GPT-2's files are not needed): a vocabulary is written once and not replaced
# without --overwrite, tokenize --decode gives back the file it encoded, bad ids and a full
# stdout are errors, and generate names a vocabulary file given as its checkpoint.
#
#   tests/data/bpe_programs.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
failures=0
check() {  # check "what" EXPECTED_STATUS COMMAND...: runs it, output in out.txt
  local what=$1 want=$2 status=0
  shift 2
  "$@" >out.txt 2>&1 || status=$?
  if [ "$status" != "$want" ]; then
    echo "FAIL: $what: exit $status, expected $want"; sed 's/^/  | /' out.txt; failures=$((failures + 1))
  else
    echo "ok: $what"
  fi
}
says() {  # says "what" TEXT: the last output holds TEXT
  if grep -qF -- "$2" out.txt; then echo "ok: $1"; else echo "FAIL: $1: no '$2' in"; sed 's/^/  | /' out.txt; failures=$((failures + 1)); fi
}

check "train_bpe writes a vocabulary" 0 "$build/tools/train_bpe" --vocab-size 600 --out fortunes.bpe
says "it prints the merges" "344 merges"
cp fortunes.bpe before.bpe
check "train_bpe refuses to replace it" 2 "$build/tools/train_bpe" --vocab-size 700 --out fortunes.bpe
says "naming the file and --overwrite" "'fortunes.bpe': exists; give --overwrite"
cmp -s fortunes.bpe before.bpe && echo "ok: the file is untouched" || { echo "FAIL: the file changed"; failures=$((failures + 1)); }
check "--overwrite replaces it" 0 "$build/tools/train_bpe" --vocab-size 700 --out fortunes.bpe --overwrite
says "with the new size" "vocabulary 700"
ls fortunes.bpe.tmp-* >/dev/null 2>&1 && { echo "FAIL: a temporary file was left"; failures=$((failures + 1)); }

printf 'It'"'"'s 42 o'"'"'clock\n\tcaf\xc3\xa9 \xff\xfe end  \n' >text.txt
check "tokenize writes ids" 0 "$build/tools/tokenize" --tokenizer fortunes.bpe text.txt
cp out.txt ids.txt
check "tokenize --decode gives the bytes back" 0 "$build/tools/tokenize" --tokenizer fortunes.bpe --decode ids.txt
cmp -s out.txt text.txt && echo "ok: identical bytes" || { echo "FAIL: decode(encode(x)) != x"; failures=$((failures + 1)); }
echo "1 2 seven" >bad.ids
check "an id that is not a number" 2 "$build/tools/tokenize" --tokenizer fortunes.bpe --decode bad.ids
says "named with its file and line" "'bad.ids' line 1: \"seven\""
echo "700" >big.ids
check "an id outside the vocabulary" 2 "$build/tools/tokenize" --tokenizer fortunes.bpe --decode big.ids
says "named" "holds id 700, outside the 700 tokens"
check "a full stdout" 1 sh -c "'$build/tools/tokenize' --tokenizer fortunes.bpe text.txt >/dev/full"
says "is an error" "cannot write to standard output"
check "a missing vocabulary" 1 "$build/tools/tokenize" --tokenizer missing.bpe text.txt
says "names the file" "missing.bpe"
check "a vocabulary file as a checkpoint" 1 "$build/tools/generate" --checkpoint fortunes.bpe --prompt x
says "names the file and says what it is" "'fortunes.bpe': is neither a safetensors file"
printf 'a\0b' >nul.txt
check "text with a NUL byte" 1 "$build/tools/train_bpe" --data nul.txt --out nul.bpe
says "names the file" "'nul.txt' holds a NUL byte at offset 1"
check "a size the text cannot fill" 2 "$build/tools/train_bpe" --data text.txt --vocab-size 5000 --out small.bpe
says "names the file and the largest size" "'text.txt' run out of pairs"
# A vocabulary named in a config file is found beside the config, from any directory, as every
# path in a config is; the names char, byte and gpt2 stay names.
mkdir -p proj elsewhere
cp fortunes.bpe proj/words.bpe
head -c 20000 /usr/share/games/fortunes/fortunes >proj/some.txt
printf 'tokenizer = "words.bpe"\ndata = ["some.txt"]\nsteps = 2\nwarmup = 1\neval-every = 2\nlayers = 1\nd-model = 16\nheads = 2\nblock-size = 8\nbatch = 4\n' >proj/run.toml
(cd elsewhere && "$build/tools/train_gpt" --config ../proj/run.toml --quiet >../out.txt 2>&1) && echo "ok: a config's tokenizer file" ||
  { echo "FAIL: a config's tokenizer file"; sed 's/^/  | /' out.txt; failures=$((failures + 1)); }
says "is read from beside the config" "bpe tokenizer, vocab 700"
grep -q "^tokenizer=\"$work/proj/words.bpe\"" elsewhere/runs/train_gpt/some/1/config.toml && echo "ok: the copy names it absolutely" ||
  { echo "FAIL: the configuration copy: $(grep tokenizer elsewhere/runs/train_gpt/some/*/config.toml)"; failures=$((failures + 1)); }
[ "$failures" -eq 0 ]
