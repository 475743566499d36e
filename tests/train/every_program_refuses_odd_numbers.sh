#!/usr/bin/env bash
# Every program reads its numbers and paths through one set of checks (tools/common/flags.h): a
# number is read whole and finite within its range, a path is not empty. Each case below must
# exit 2 with one message naming the flag, and leave nothing behind. The values are what a typo
# or an unset shell variable gives: NaN passes every range written as two comparisons, "0x10"
# and "1e3" are not the integers a reader would take them for, "" is `--out "$DIR"` with DIR
# unset. Run from a scratch directory, as a user would.
#   every_program_refuses_odd_numbers.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/../in_scratch_directory.sh" "$@"
printf 'a line of text\n%.0s' {1..50} >text.txt
passed=0
# refuses PROGRAM FLAG VALUE ARGS...: PROGRAM ARGS... FLAG VALUE is refused, naming FLAG.
refuses() {
  local program=$1 flag=$2 value=$3
  shift 3
  local status=0
  "$build/tools/$program" "$@" "$flag" "$value" >out.txt 2>err.txt || status=$?
  local left
  left=$(ls -A | grep -v -x -e out.txt -e err.txt -e text.txt || true)
  if [ "$status" -ne 2 ] || ! grep -q -- "$flag" err.txt; then
    fail "$program $flag '$value': exit $status, stderr: $(cat err.txt)"
  elif [ -n "$left" ]; then
    fail "$program $flag '$value': refused, but left behind: $left"
    rm -rf $left
  else
    passed=$((passed + 1))
  fi
}
prep=(--data text.txt --tokenizer byte --out shards)
for v in nan inf -inf 1 -0.5 0.1x; do refuses prepare_text --val-fraction "$v" "${prep[@]}"; done
for v in 1e3 0x10 1.5 -1 ""; do refuses prepare_text --val-tokens "$v" "${prep[@]}"; done
for v in 0x10 0 nan; do refuses prepare_text --shard-tokens "$v" "${prep[@]}"; done
refuses prepare_text --out "" --data text.txt --tokenizer byte
refuses prepare_text --tokenizer "" --data text.txt --out shards
refuses prepare_text --data "" --tokenizer byte --out shards
gen=(--checkpoint missing.safetensors --prompt "a")
for v in nan inf -1 1e7; do refuses generate --temperature "$v" "${gen[@]}"; done
for v in nan 0 1.5; do refuses generate --top-p "$v" "${gen[@]}"; done
for v in -1 2.5 0x10; do refuses generate --top-k "$v" "${gen[@]}"; done
for v in 1e3 -1; do refuses generate --tokens "$v" "${gen[@]}"; done
refuses generate --checkpoint "" --prompt "a"
ev=(--checkpoint missing.safetensors --data text.txt)
for v in 0 nan 1e2 0x10; do refuses evaluate --stride "$v" "${ev[@]}"; done
refuses evaluate --batch 0 "${ev[@]}" --stride 4
refuses evaluate --checkpoint "" --data text.txt --stride 4
refuses evaluate --data "" --checkpoint missing.safetensors --stride 4
for v in 3e2 255 nan; do refuses train_bpe --vocab-size "$v" --data text.txt --out v.json; done
refuses export_gpt --out "" --checkpoint missing.safetensors --format hf
refuses export_gpt --checkpoint "" --out exported --format hf
echo "$passed passed"
finish
