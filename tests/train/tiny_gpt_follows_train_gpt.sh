#!/usr/bin/env bash
# examples/tiny_gpt.cpp, the whole training of a GPT in one file on the framework alone, trains
# the default "baby" GPT on fortunes as train_gpt's default run does: the same number of steps
# gives the same validation loss (within 0.02 nats, the issue's bar; in practice to the last
# printed digit, since both draw the same weights and windows). The file stays short enough to
# read at one sitting (at most 250 lines) and includes nothing but the framework's folders.
#   tiny_gpt_follows_train_gpt.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/../in_scratch_directory.sh" "$@"
file=$source/examples/tiny_gpt.cpp
lines=$(wc -l <"$file")
[ "$lines" -le 250 ] || fail "tiny_gpt.cpp is $lines lines long, more than 250"
if grep -E '#include "attograd/(train/(data|io|dist|report)|models|text|tools)/' "$file" ||
  grep -E '#include "attograd/train/[a-z_]*job' "$file"; then
  fail "tiny_gpt.cpp includes more than the framework (core, autograd, layers, the optimizer, schedule and clipping)"
fi
"$build/examples/tiny_gpt" --steps 100 >tiny.txt 2>&1 || fail "tiny_gpt --steps 100: $(cat tiny.txt)"
"$build/tools/train_gpt" --steps 100 --eval-every 100 --quiet >gpt.txt 2>&1 || fail "train_gpt --steps 100: $(cat gpt.txt)"
tiny=$(sed -n 's/^step *100 | train loss [0-9.]* | validation loss \([0-9.]*\)$/\1/p' tiny.txt)
gpt=$(sed -n 's/^final train loss [0-9.]*, validation loss \([0-9.]*\) .*/\1/p' gpt.txt)
[ -n "$tiny" ] && [ -n "$gpt" ] || fail "no validation loss: tiny_gpt '$(tail -1 tiny.txt)', train_gpt '$(grep final gpt.txt)'"
echo "validation loss after 100 steps: tiny_gpt $tiny, train_gpt $gpt"
awk -v a="$tiny" -v b="$gpt" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.02) }' ||
  fail "tiny_gpt's validation loss $tiny is more than 0.02 from train_gpt's $gpt"
status=0
"$build/examples/tiny_gpt" --steps x >out.txt 2>&1 || status=$?
[ "$status" -eq 2 ] && grep -q "usage: tiny_gpt" out.txt || fail "tiny_gpt --steps x: exit $status, $(cat out.txt)"
finish
