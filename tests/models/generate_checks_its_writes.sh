#!/usr/bin/env bash
# generate checks every write to stdout: a closed stdout or a full disk is an error (exit 1 and
# a message), and with SIGPIPE ignored, as under many service managers, a reader that goes away
# ends generation at once instead of letting it run into a closed pipe for 10^8 tokens (the
# `timeout` only keeps a failure from hanging the suite). --seed takes what train_gpt's does.
# Run from a scratch directory, as a user would.
#   generate_checks_its_writes.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/../in_scratch_directory.sh" "$@"
"$build/tools/train_gpt" --data "$source/README.md" --steps 2 --warmup 1 --eval-every 2 --d-model 8 --heads 1 \
  --layers 1 --block-size 8 --save g.ck --quiet >train.out 2>&1 || { cat train.out; exit 1; }
generate=("$build/tools/generate" --checkpoint g.ck --prompt "The ")

# check DESCRIPTION STATUS EXPECTED_STATUS [WORDS]: the status, and a stderr line with WORDS.
check() {
  if [ "$2" -eq "$3" ] && { [ -z "${4-}" ] || grep -q -- "$4" err.txt; }; then
    echo "ok: $1 -> exit $2: $(head -c 160 err.txt)"
  else
    fail "$1 (status $2, expected $3 and '${4-}')"
    cat err.txt
  fi
}

status=0
"${generate[@]}" --tokens 20 >/dev/full 2>err.txt || status=$?
check "stdout is /dev/full" "$status" 1 "cannot write to standard output: No space left on device"
status=0
"${generate[@]}" --tokens 20 >&- 2>err.txt || status=$?
check "stdout is closed" "$status" 1 "cannot write to standard output"
status=0
(
  trap '' PIPE
  timeout 120 "${generate[@]}" --tokens 100000000 2>err.txt | head -c 10 >head.txt
  exit "${PIPESTATUS[0]}"
) || status=$?
check "SIGPIPE ignored, | head -c 10 with --tokens 100000000" "$status" 1 "cannot write to standard output: Broken pipe"
[ "$(wc -c <head.txt)" -eq 10 ] || fail "head read $(wc -c <head.txt) bytes"
for seed in -1 18446744073709551616; do
  status=0
  "${generate[@]}" --tokens 5 --seed "$seed" >out.txt 2>err.txt || status=$?
  check "--seed $seed" "$status" 2 "--seed: '$seed' is not an unsigned 64-bit integer"
done
status=0
"${generate[@]}" --tokens 5 --seed 18446744073709551615 >out.txt 2>err.txt || status=$?
check "--seed 2^64-1 (the largest)" "$status" 0

finish
