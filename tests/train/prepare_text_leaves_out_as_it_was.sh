#!/usr/bin/env bash
# prepare_text writes its shards in a directory of its own inside --out and moves them in only
# when the whole text is tokenized, so that --out never holds a part of a corpus that train_gpt
# would read as the whole of it. A run that fails late (a NUL byte in the last file, no training
# tokens left), or that SIGINT, SIGTERM or SIGHUP stops mid-way, leaves --out as it found it: a
# directory it made is gone, a user's own files are untouched, and the same command with the
# mistake mended then runs. A second run on the same --out meanwhile is refused. Run from a
# scratch directory, as a user would.
#   prepare_text_leaves_out_as_it_was.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/../in_scratch_directory.sh" "$@"
prepare="$build/tools/prepare_text"
printf 'a line of text\n%.0s' {1..400} >text.txt
printf 'text, then a NUL\0' >nul.txt

# A failure after shards were written: the directory the run made is removed.
status=0
"$prepare" --data text.txt nul.txt --tokenizer byte --out made --shard-tokens 100 >out.txt 2>err.txt || status=$?
[ "$status" -eq 1 ] && grep -q "NUL byte" err.txt || fail "a NUL byte in the last file: exit $status, $(cat err.txt)"
[ ! -e made ] || fail "the failed run left its --out: $(ls -A made)"

# In a directory the user made, with a file of theirs: only that file is there after.
mkdir mine && echo "my notes" >mine/notes.txt
before=$(sha256sum mine/notes.txt)
status=0
"$prepare" --data text.txt --tokenizer byte --out mine --val-tokens 100000 >out.txt 2>err.txt || status=$?
[ "$status" -eq 1 ] && grep -q "no training tokens" err.txt || fail "every token validating: exit $status, $(cat err.txt)"
[ "$(ls -A mine)" = notes.txt ] && [ "$(sha256sum mine/notes.txt)" = "$before" ] ||
  fail "after the failed run, mine/ holds: $(ls -A mine)"
"$prepare" --data text.txt --tokenizer byte --out mine --val-tokens 100 >out.txt 2>err.txt ||
  fail "the mended command failed: $(cat err.txt)"
[ "$(ls -A mine | tr '\n' ' ')" = "notes.txt train_000000.bin val_000000.bin " ] ||
  fail "after the mended run, mine/ holds: $(ls -A mine)"

# Stopped by a signal once some shards are complete: exit 128 + the signal, nothing left. The
# text is large and is read in small blocks, so that the run is still going when the signal comes.
head -c 40000000 /dev/zero | tr '\0' 'x' | fold -w 79 >big.txt
for signal in INT TERM HUP; do
  interruptible "$prepare" --data big.txt --tokenizer byte --out "stopped-$signal" --shard-tokens 100000 --chunk-bytes 4096 \
    >out.txt 2>err.txt &
  pid=$!
  for _ in $(seq 600); do
    # Two complete shards in the run's own directory.
    [ "$(ls "stopped-$signal"/.prepare_text-*.partial/ 2>/dev/null | grep -c '\.bin$')" -ge 2 ] && break
    sleep 0.05
  done
  kill -s "$signal" "$pid" 2>/dev/null || true  # ended already: the status below says so
  status=0
  wait "$pid" || status=$?
  want=$((128 + $(kill -l "$signal")))
  if [ "$status" -ne "$want" ]; then
    fail "SIG$signal: exit $status (want $want), $(tail -2 err.txt)"
  elif ! grep -q "stopped by signal .* is as it was" err.txt; then
    fail "SIG$signal: no word of the stop: $(tail -2 err.txt)"
  elif [ -e "stopped-$signal" ]; then
    fail "SIG$signal left its --out: $(ls -A "stopped-$signal")"
  fi
done
# Two runs side by side on one --out: the second is refused while the first is writing (they
# would otherwise each check that --out holds no shard, then both move theirs in), and the first
# ends with its own shards alone. (The first is stopped as above once it has written two.)
interruptible "$prepare" --data big.txt --tokenizer byte --out shared --shard-tokens 100000 --chunk-bytes 4096 >out.txt 2>err.txt &
pid=$!
for _ in $(seq 600); do
  [ "$(ls shared/.prepare_text-*.partial/ 2>/dev/null | grep -c '\.bin$')" -ge 2 ] && break
  sleep 0.05
done
status=0
"$prepare" --data text.txt --tokenizer byte --out shared >out2.txt 2>err2.txt || status=$?
[ "$status" -eq 1 ] && grep -q -- "--out .*in use by another run (pid $pid" err2.txt ||
  fail "a second run on the same --out: exit $status, $(cat err2.txt)"
kill -s INT "$pid" 2>/dev/null || true
wait "$pid" || true
[ ! -e shared ] || fail "after the second run was refused and the first stopped, shared/ holds: $(ls -A shared)"
"$prepare" --data text.txt --tokenizer byte --out shared >out2.txt 2>err2.txt ||
  fail "a run on --out after the other ended: $(cat err2.txt)"
finish
