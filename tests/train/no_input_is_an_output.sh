#!/usr/bin/env bash
# No input is ever an output: --data, --resume and --config are refused as --save, --log, --plot,
# the configuration copy or --write-config, also through symlinks and hard links, with or
# without --overwrite, and the file is left as it was. What carries an input on still works: a
# resumed run saves over its own checkpoint, and a run repeated from its configuration copy
# writes that copy again. A user's file named like a temporary of a killed save survives the
# next save. Run from a scratch directory, as a user would.
#   no_input_is_an_output.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/../in_scratch_directory.sh" "$@"
gpt=(--steps 2 --warmup 1 --eval-every 2 --d-model 8 --heads 1 --layers 1 --block-size 8 --quiet)
seq=(--steps 2 --warmup 1 --eval-every 2 --d-model 8 --heads 1 --d-ff 8 --layers 1 --eval-sequences 8 --quiet)

# expect PROGRAM STATUS WORDS FILE ARGS...: PROGRAM exits with STATUS, its stderr holds every
# |-separated word (STATUS 1 and 2), and FILE is unchanged.
expect() {
  local program=$1 want=$2 words=$3 file=$4 status=0 before w ok=1
  shift 4
  before=$(sha256sum <"$file")
  "$build/tools/$program" "$@" >out.txt 2>err.txt || status=$?
  [ "$status" -eq "$want" ] || ok=0
  if [ "$want" -ne 0 ]; then
    IFS='|' read -ra ws <<<"$words"
    for w in "${ws[@]}"; do grep -q -- "$w" err.txt || ok=0; done
  fi
  [ "$(sha256sum <"$file")" = "$before" ] || { ok=0; echo "  $file was changed"; }
  if [ "$ok" -eq 1 ]; then
    echo "ok: $program $* -> exit $status $(head -c 160 err.txt)"
  else
    fail "$program $* (status $status, expected $want with: ${words//|/, })"
    cat err.txt
  fi
}

cp "$source/README.md" text.txt
ln -s text.txt soft.txt
ln text.txt hard.txt
expect train_gpt 1 "--save|--data|text.txt" text.txt --data text.txt --save text.txt --overwrite "${gpt[@]}"
expect train_gpt 1 "--save|--data" text.txt --data text.txt --save soft.txt --overwrite "${gpt[@]}"
expect train_gpt 1 "--log|--data" text.txt --data soft.txt --log text.txt --overwrite "${gpt[@]}"
expect train_gpt 1 "--plot|--data" text.txt --data hard.txt --plot text.txt --overwrite "${gpt[@]}"
expect train_gpt 1 "--write-config|--data" text.txt --data text.txt --write-config ./text.txt --overwrite "${gpt[@]}"
# A text kept where a log goes is not replaced by the new log (no --overwrite needed to replace
# a log, so only the input check stands in the way).
mkdir -p logs
cp text.txt logs/metrics.jsonl
expect train_gpt 1 "--log|--data|metrics.jsonl" logs/metrics.jsonl --data logs/metrics.jsonl --log logs/metrics.jsonl --save g.ck "${gpt[@]}"

# --config against the outputs: a user's configuration is never replaced.
printf '# my settings\nsteps = 2\nwarmup = 1\n' >mine.toml
expect train_sequence 1 "--log|--config|mine.toml" mine.toml --config mine.toml --log mine.toml --overwrite "${seq[@]}"
expect train_sequence 1 "--save|--config" mine.toml --config mine.toml --save mine.toml --overwrite "${seq[@]}"
expect train_sequence 1 "--write-config|--config" mine.toml --config mine.toml --write-config mine.toml --overwrite
mkdir -p proj
ln -s ../mine.toml proj/config.toml
expect train_sequence 1 "configuration copy|--config" mine.toml --config proj/config.toml --log proj/metrics.jsonl --overwrite \
  "${seq[@]}"

# --resume against the outputs, and what still works: a resumed run saves over its checkpoint.
expect train_sequence 0 "" text.txt "${seq[@]}" --save run.ck --log run/m.jsonl
cp run.ck kept.ck
expect train_sequence 1 "--log|checkpoint being resumed" run.ck --resume run.ck --save other.ck --log run.ck --overwrite \
  --quiet
expect train_sequence 1 "--write-config|checkpoint being resumed" run.ck --resume run.ck --write-config run.ck --overwrite
expect train_sequence 0 "" text.txt --resume run.ck --save run.ck --log run/m.jsonl --quiet
cmp -s run.ck kept.ck || fail "a resume of a finished run changed its checkpoint"
# A run repeated from its own configuration copy writes the copy again (README, "one change");
# when that configuration names its log, the earlier run's log is kept unless --overwrite.
expect train_sequence 0 "" text.txt "${seq[@]}" --log again/metrics.jsonl
expect train_sequence 1 "--log|metrics log of an earlier run|--overwrite" again/metrics.jsonl --config again/config.toml --steps 3
expect train_sequence 0 "" text.txt --config again/config.toml --steps 3 --overwrite
grep -q '^steps=3$' again/config.toml || fail "again/config.toml was not rewritten"
# Beside a log of another name, the configuration copy takes the log's name: two runs logging
# into one folder keep one each.
expect train_sequence 0 "" text.txt "${seq[@]}" --log side/lr1.jsonl --lr 1e-3
expect train_sequence 0 "" text.txt "${seq[@]}" --log side/lr2.jsonl --lr 2e-3
grep -q '^lr=1e-3$' side/lr1.config.toml || fail "side/lr1.config.toml does not hold the first run's lr"
grep -q '^lr=2e-3$' side/lr2.config.toml || fail "side/lr2.config.toml does not hold the second run's lr"

# The temporary sweep of a save leaves a user's file named like a killed save's temporary.
dead=$(sh -c 'echo $$')
printf 'my notes\n' >"k.ck.tmp-$dead-0"
expect train_sequence 0 "" "k.ck.tmp-$dead-0" "${seq[@]}" --save k.ck --log k/m.jsonl
[ -f "k.ck.tmp-$dead-0" ] || fail "k.ck.tmp-$dead-0 was removed"

finish
