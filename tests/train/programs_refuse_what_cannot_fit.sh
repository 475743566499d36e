#!/usr/bin/env bash
# Every training program estimates its memory from the flags before it builds anything: a model
# far too large is refused at once, naming the breakdown and the flags that drive the size,
# instead of allocating for minutes and failing (or waking the OOM killer). Run from a scratch
# directory, as a user would; exit status 1 and the message are what is checked.
#   programs_refuse_what_cannot_fit.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/../in_scratch_directory.sh" "$@"
expect_refusal() {
  local name=$1 flag=$2
  shift 2
  local status=0
  "$build/tools/$name" "$@" --quiet >out.txt 2>err.txt || status=$?
  if [ "$status" -ne 1 ] || ! grep -q "parameters" err.txt || ! grep -q -- "$flag" err.txt || [ -e runs ]; then
    fail "$name $* (status $status, expected 1 with a breakdown naming $flag and nothing written)"
    cat err.txt
  else
    echo "ok: $name $* -> $(head -c 160 err.txt)"
  fi
  rm -rf runs
}
expect_refusal train_sequence --d-model --d-model 65536 --heads 4
expect_refusal train_gpt --d-model --d-model 16384 --heads 16 --data "$source/README.md"
expect_refusal train_gpt --batch --batch 65536 --data "$source/README.md"
expect_refusal train_seq2seq --d-ff --d-model 16384 --d-ff 65536 --heads 8
# The seq2seq job keeps its held-out set for the whole run: 2^20 sequences of 1024 tokens are
# about 32 GiB of it, more than the step and the evaluation together (an 8 GiB address space
# turns a missed estimate into a quick failure here rather than a machine swapping; not under
# AddressSanitizer, whose shadow memory alone needs terabytes of address space).
(
  # ldd's whole output first: grep -q stops reading at the first match, and under pipefail the
  # SIGPIPE that ends ldd would read as "no libasan".
  linked=$(ldd "$build/tools/train_seq2seq" 2>/dev/null || true)
  grep -q libasan <<<"$linked" || ulimit -v $((8 * 1024 * 1024))
  before=$failures
  expect_refusal train_seq2seq "held-out set" --batch 1 --max-len 1024 --eval-sequences 1048576
  [ "$failures" -eq "$before" ]
) || failures=$((failures + 1))
finish
