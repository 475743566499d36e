#!/usr/bin/env bash
# evaluate on a terminal shows how far it is (windows done, tokens/s, time, ETA) on stderr while
# the windows run, and erases the line before the results; piped, it prints the results alone.
# The terminal is a pseudo-terminal made by util-linux's script(1).
#   evaluate_shows_progress_on_a_terminal.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/../in_scratch_directory.sh" "$@"
command -v script >/dev/null || { echo "skipped: no script(1) (util-linux)"; exit 77; }
"$build/tools/train_gpt" --data "$source/README.md" --tokenizer byte --layers 1 --d-model 16 --heads 2 \
  --block-size 32 --batch 2 --steps 2 --eval-every 2 --eval-windows 1 --quiet --save ck.safetensors >train.txt 2>&1 ||
  fail "could not train the model: $(cat train.txt)"
evaluate=("$build/tools/evaluate" --checkpoint ck.safetensors --data "$source/README.md" --stride 16 --batch 4)
"${evaluate[@]}" >piped.txt 2>piped.err || fail "evaluate, piped: $(cat piped.err)"
[ ! -s piped.err ] || fail "evaluate wrote to a piped stderr: $(head -c 300 piped.err)"
windows=$(sed -n 's/^windows *\([0-9]*\) of.*/\1/p' piped.txt)
[ -n "$windows" ] && [ "$windows" -gt 100 ] || fail "the windows line: $(grep windows piped.txt)"
script -qec "$(printf '%q ' "${evaluate[@]}")" terminal.txt >/dev/null 2>&1 || fail "evaluate on a terminal: $(cat terminal.txt)"
grep -q "evaluate: scoring $windows windows" terminal.txt || fail "no opening line on the terminal: $(head -c 300 terminal.txt)"
grep -aq "evaluate: window $windows/$windows 100% | .* tok/s | .* | ETA" terminal.txt ||
  fail "no progress line on the terminal: $(head -c 400 terminal.txt | cat -v)"
# The results are those of the piped run, after the line was erased.
tr -d '\r' <terminal.txt | sed 's/\x1b\[K//g; s/^.*evaluate: window [^|]*|[^|]*|[^|]*| ETA [^ ]*//' |
  grep -v '^evaluate: scoring' | grep -v '^Script ' >results.txt
grep -q "^perplexity $(sed -n 's/^perplexity //p' piped.txt)" results.txt ||
  fail "the results differ on a terminal: $(cat -v results.txt | head -20)"
finish
