#!/usr/bin/env bash
# train_gpt's corpora as a user meets them: a few steps on Debian's King James Bible
# (--data bible: every verse, a validation loss in bits per byte in the log and the summary);
# several files joined in order with a newline only where one is missing; each bad file among
# good ones refused by name (missing, empty, a NUL byte); a resume on the same files continues,
# on the same files in another order is refused by its data entry.
#   train_gpt_reads_several_texts_and_the_bible.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/../in_scratch_directory.sh" "$@"
small=(--layers 1 --d-model 16 --heads 2 --block-size 16 --batch 4 --eval-windows 8)
gpt="$build/tools/train_gpt"

# The bible: 31,102 verses, 4,137,850 bytes of ASCII, so as many character tokens.
status=0
"$gpt" --data bible "${small[@]}" --steps 3 --eval-every 3 >out.txt 2>err.txt || status=$?
if [ "$status" -ne 0 ]; then
  fail "train_gpt --data bible exited $status: $(cat err.txt)"
else
  grep -q '^data   bible: 4137850 bytes, 4137850 tokens' out.txt || fail "the bible's data line: $(grep '^data' out.txt)"
  grep -q '^run    runs/train_gpt/bible/1$' out.txt || fail "the bible's run directory: $(grep '^run' out.txt | head -1)"
  grep -Eq '^final train loss [0-9.]+, validation loss [0-9.]+ \(nats per token\), [0-9]+\.[0-9]{4} bits per byte$' out.txt ||
    fail "the summary has no bits per byte: $(grep '^final' out.txt)"
  rows=$(grep -c '"eval_bits_per_byte":[0-9]' runs/train_gpt/bible/1/metrics.jsonl || true)
  [ "$rows" -eq 2 ] || fail "expected 2 metrics rows with bits per byte (steps 0 and 3), got $rows"
fi

# Several files: a.txt has no final newline, so one is put after it; b.txt ends with one.
printf 'the first file, unterminated' >a.txt
printf 'and the second file, whose lines end\nwith a newline each\n' >b.txt
bytes=$(($(wc -c <a.txt) + 1 + $(wc -c <b.txt)))
"$gpt" --data a.txt b.txt --layers 1 --d-model 8 --heads 1 --block-size 4 --batch 2 --steps 2 --quiet \
  --save ab/ckpt.safetensors --log ab/metrics.jsonl --plot ab/plot.svg >out.txt 2>err.txt ||
  fail "train_gpt --data a.txt b.txt: $(cat err.txt)"
grep -q "^data   a.txt + b.txt: $bytes bytes, $bytes tokens" out.txt || fail "two files: $(grep '^data' out.txt)"
# The same again, resumed: it goes on; in the other order it is another text, refused.
"$gpt" --data a.txt b.txt --resume ab/ckpt.safetensors --quiet >out.txt 2>err.txt ||
  fail "resuming on the same files: $(cat err.txt)"
status=0
"$gpt" --data b.txt a.txt --resume ab/ckpt.safetensors --quiet >out.txt 2>err.txt || status=$?
[ "$status" -eq 1 ] && grep -q "'data' entry" err.txt && grep -q '"name":"a.txt"' err.txt ||
  fail "resuming on the files in another order: exit $status, $(cat err.txt)"

# expect_refused WORD... -- ARGS: exit 1, and stderr names each WORD.
expect_refused() {
  local words=() w status=0
  while [ "$1" != "--" ]; do words+=("$1"); shift; done
  shift
  "$gpt" "$@" --steps 2 --quiet >out.txt 2>err.txt || status=$?
  [ "$status" -eq 1 ] || fail "train_gpt $*: exit $status, expected 1"
  for w in "${words[@]}"; do grep -q -- "$w" err.txt || fail "train_gpt $*: stderr does not name '$w': $(cat err.txt)"; done
}
printf 'h\0i\0' >utf16.txt
: >empty.txt
expect_refused missing.txt -- --data a.txt missing.txt
expect_refused empty.txt empty -- --data empty.txt b.txt
expect_refused utf16.txt NUL "offset 1" -- --data a.txt utf16.txt b.txt
finish
