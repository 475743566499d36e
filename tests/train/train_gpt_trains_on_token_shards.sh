#!/usr/bin/env bash
# Token shards as a user meets them: prepare_text turns texts into shards (the first tenth
# validating), the same with a tiny block size (many cuts) giving the very same files, and with
# GPT-2's tokenizer as many tokens as `tokenize` gives for the whole text; train_gpt trains on the
# directory, a run stopped by a signal and resumed ends with the uninterrupted run's tensors,
# the shards name their tokenizer (no --tokenizer needed, another one refused naming both), and
# a resume on shards changed in the middle, a broken shard, a file without a header and a
# dangling link are refused.
#   train_gpt_trains_on_token_shards.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/../in_scratch_directory.sh" "$@"
prepare="$build/tools/prepare_text"
tensors=$source/tests/train/checkpoint_tensors.py
text=$source/README.md
printf 'a last line without its newline' >tail.txt
bytes=$(($(wc -c <tail.txt) + 1 + $(wc -c <"$text")))  # joined with a newline after tail.txt

"$prepare" --data tail.txt "$text" --tokenizer byte --out shards >out.txt 2>err.txt ||
  fail "prepare_text failed: $(cat err.txt)"
grep -q "^prepare_text: $bytes bytes of text -> $bytes tokens (byte tokenizer, vocab 256, uint16 shards)" out.txt ||
  fail "prepare_text's summary: $(head -1 out.txt)"
val=$(sed -n 's/^  val   \([0-9]*\) tokens.*/\1/p' out.txt)
# (A tenth of the files' bytes, the newline put between them not counted, rounded down.)
tenth=$(((bytes - 1) / 10))
[ -n "$val" ] && [ "$val" -ge $((tenth - 1)) ] && [ "$val" -le $((tenth + 1)) ] ||
  fail "the validation part is not the first tenth: $(cat out.txt)"
grep -q "MB/s" err.txt || fail "no progress on stderr: $(cat err.txt)"
[ "$(ls shards)" = "$(printf 'train_000000.bin\nval_000000.bin')" ] || fail "the shards: $(ls shards)"
# The first validation tokens are the text's first bytes, as uint16 after the 32-byte header and
# the byte tokenizer's description, {"kind":"byte"} (15 bytes, padded to 16).
[ "$(head -c 8 shards/val_000000.bin)" = agtokens ] || fail "no magic in val_000000.bin"
[ "$(head -c 47 shards/val_000000.bin | tail -c 15)" = '{"kind":"byte"}' ] || fail "no description in val_000000.bin"
want=$(od -An -v -N 20 -tu1 tail.txt | tr -s ' \n' ' ')
got=$(od -An -v -j 48 -N 40 -tu2 shards/val_000000.bin | tr -s ' \n' ' ')
[ "$want" = "$got" ] || fail "val_000000.bin does not start with the text: '$got' against '$want'"
"$prepare" --data tail.txt "$text" --tokenizer byte --out small --chunk-bytes 7 --shard-tokens 5000 >out.txt 2>err.txt ||
  fail "prepare_text --chunk-bytes 7 failed: $(cat err.txt)"
cat small/val_*.bin >/dev/null
[ "$(ls small | wc -l)" -gt 3 ] || fail "--shard-tokens 5000 wrote $(ls small | wc -l) files"
if [ -f "${XDG_CACHE_HOME:-$HOME/.cache}/attograd/gpt2/encoder.json" ]; then
  "$prepare" --data "$text" --tokenizer gpt2 --out gpt2 >out.txt 2>err.txt || fail "prepare_text gpt2: $(cat err.txt)"
  "$prepare" --data "$text" --tokenizer gpt2 --out gpt2_cut --chunk-bytes 16 >out.txt 2>err.txt ||
    fail "prepare_text gpt2 --chunk-bytes 16: $(cat err.txt)"
  for f in train_000000.bin val_000000.bin; do cmp -s "gpt2/$f" "gpt2_cut/$f" || fail "gpt2 $f differs with 16-byte chunks"; done
  whole=$("$build/tools/tokenize" --tokenizer gpt2 "$text" | wc -l)
  grep -q -- "-> $whole tokens" out.txt || fail "tokenize gives $whole tokens, prepare_text: $(head -1 out.txt)"
else
  echo "GPT-2's files are not in the cache: the gpt2 part is passed over"
fi

small=(--layers 1 --d-model 16 --heads 2 --block-size 16 --batch 4 --eval-windows 4 --quiet)
gpt() { "$build/tools/train_gpt" --data shards "${small[@]}" "$@"; }
gpt --steps 3 --eval-every 3 >out.txt 2>&1 || fail "train_gpt on shards failed: $(cat out.txt)"
grep -q "^data   shards: token shards, train 1 file (attograd), $((bytes - val)) tokens, validation 1 file (attograd), $val tokens" \
  out.txt || fail "the data line: $(grep '^data' out.txt)"

# Stopped by a signal and resumed: the tensors of the uninterrupted run.
long=(--steps 300 --eval-every 10 --dropout 0.1)
gpt "${long[@]}" --save straight.st --log straight.jsonl --plot straight.svg >straight.txt 2>&1 ||
  fail "the uninterrupted run failed: $(cat straight.txt)"
"$build/tools/train_gpt" --data shards "${small[@]}" "${long[@]}" --save stopped.st --log stopped.jsonl \
  --plot stopped.svg >stopped.txt 2>&1 &
pid=$!
for _ in $(seq 1 300); do
  [ -e stopped.jsonl ] && [ "$(wc -l <stopped.jsonl)" -ge 3 ] && break
  sleep 0.02
done
kill -TERM "$pid" 2>/dev/null || true
wait "$pid" || true
grep -q "interrupted" stopped.txt || fail "the run was not interrupted: $(tail -3 stopped.txt)"
"$build/tools/train_gpt" --data shards --resume stopped.st --eval-windows 4 --quiet >resumed.txt 2>&1 || fail "the resume failed: $(cat resumed.txt)"
[ "$(python3 "$tensors" straight.st stopped.st | grep -c "^same ")" -gt 10 ] && ! python3 "$tensors" straight.st stopped.st | grep -v "^same " ||
  fail "the resumed run differs from the uninterrupted one"
# (The validation loss: the train loss shown is a mean over the steps since the last evaluation,
# which a signal between two evaluations cuts short, on texts as on shards.)
[ "$(grep -o 'validation loss.*' straight.txt)" = "$(grep -o 'validation loss.*' resumed.txt)" ] ||
  fail "the final validation losses differ: $(grep '^final' straight.txt) / $(grep '^final' resumed.txt)"

# Refused: another tokenizer than the shards', a resume on shards changed in the middle, a broken
# shard, a file without a header, a dangling link among the shards.
status=0
gpt --tokenizer char --steps 2 >out.txt 2>&1 || status=$?
[ "$status" -eq 2 ] && grep -q "leave --tokenizer out" out.txt || fail "shards with --tokenizer char: exit $status, $(cat out.txt)"
if [ -d gpt2 ]; then
  status=0
  "$build/tools/train_gpt" --data gpt2 --tokenizer byte --steps 2 >out.txt 2>&1 || status=$?
  [ "$status" -eq 1 ] && grep -q "made by a bpe tokenizer of 50257 ids" out.txt &&
    grep -q "(--tokenizer byte) is a byte tokenizer of 256 ids" out.txt ||
    fail "GPT-2 shards with --tokenizer byte: exit $status, $(cat out.txt)"
  mkdir both && cp gpt2/train_000000.bin both/a.bin && cp shards/train_000000.bin both/b.bin
  status=0
  "$build/tools/train_gpt" --data both --steps 2 >out.txt 2>&1 || status=$?
  [ "$status" -eq 1 ] && grep -q "different tokenizers" out.txt && grep -q "both/a.bin" out.txt &&
    grep -q "both/b.bin" out.txt || fail "GPT-2 and byte shards in one set: exit $status, $(cat out.txt)"
fi
cp -r shards changed
middle=$((($(stat -c %s changed/train_000000.bin) / 2) & ~1))  # a token's low byte: a control character
printf '\001' | dd of=changed/train_000000.bin bs=1 seek=$middle conv=notrunc status=none
status=0
"$build/tools/train_gpt" --data changed --resume stopped.st --quiet >out.txt 2>&1 || status=$?
[ "$status" -eq 1 ] && grep -q "'data' entry" out.txt || fail "a resume on changed shards: exit $status, $(cat out.txt)"
head -c 100 shards/train_000000.bin >broken_train.bin
status=0
gpt --data broken_train.bin --steps 2 >out.txt 2>&1 || status=$?
[ "$status" -eq 1 ] && grep -q "broken_train.bin" out.txt && grep -q "truncated" out.txt ||
  fail "a truncated shard: exit $status, $(cat out.txt)"
printf 'Notes of Tuesday: buy milk\n' >notes.bin
status=0
gpt --data notes.bin --tokenizer byte --steps 2 >out.txt 2>&1 || status=$?
[ "$status" -eq 1 ] && grep -q "notes.bin.*no attograd or llm.c header" out.txt && grep -q -- "--shard-format nanogpt" out.txt ||
  fail "a text named *.bin: exit $status, $(cat out.txt)"
cp -r shards dangling && ln -s nowhere.bin dangling/zz.bin
status=0
gpt --data dangling --steps 2 >out.txt 2>&1 || status=$?
[ "$status" -eq 1 ] && grep -q "zz.bin.*symbolic link.*does not exist" out.txt || fail "a dangling link: exit $status, $(cat out.txt)"
finish
