#!/usr/bin/env bash
# Every run gets its own directory, runs/<program>/<task>/<n>, with a `latest` link: two runs
# of one task with other settings leave two complete directories, and nothing of an earlier run
# is replaced unless --overwrite asks for it. A resumed run goes on in its checkpoint's
# directory. Run from a scratch directory, as a user would.
#   every_run_has_its_own_directory.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/../in_scratch_directory.sh" "$@"
seq=("$build/tools/train_sequence" --steps 4 --eval-every 2 --quiet)
complete() {  # complete DIR: the log, the plot and the configuration are there
  for f in metrics.jsonl plot.svg config.toml; do [ -s "$1/$f" ] || { fail "$1/$f is missing"; return 1; }; done
}

"${seq[@]}" --lr 1e-3 >one.out 2>&1 || fail "first run: $(cat one.out)"
"${seq[@]}" --lr 3e-3 >two.out 2>&1 || fail "second run: $(cat two.out)"
d=runs/train_sequence/reverse
complete $d/1 && complete $d/2
grep -q '^lr=1e-3$' $d/1/config.toml || fail "run 1's configuration was replaced: $(grep '^lr' $d/1/config.toml)"
grep -q '^lr=3e-3$' $d/2/config.toml || fail "run 2's configuration: $(grep '^lr' $d/2/config.toml)"
[ "$(readlink $d/latest)" = 2 ] || fail "latest points at '$(readlink $d/latest)', not 2"
grep -qx "run    $d/2" two.out || fail "the second run does not name its directory: $(head -3 two.out)"
[ "$(wc -l <$d/1/metrics.jsonl)" = 3 ] || fail "run 1's log has $(wc -l <$d/1/metrics.jsonl) rows, not 3"

# A chosen name: taken once; a second run on it is refused and leaves it as it was, unless
# --overwrite.
"${seq[@]}" --run-name first-try >named.out 2>&1 || fail "--run-name first-try: $(cat named.out)"
complete $d/first-try
before=$(sha256sum $d/first-try/metrics.jsonl)
status=0
"${seq[@]}" --run-name first-try --lr 1e-2 >again.out 2>&1 || status=$?
[ "$status" = 1 ] && grep -q -- "--run-name: '$d/first-try' already holds a run" again.out ||
  fail "a second --run-name first-try: exit $status, $(cat again.out)"
[ "$(sha256sum $d/first-try/metrics.jsonl)" = "$before" ] || fail "the refused run changed first-try's log"
"${seq[@]}" --run-name first-try --lr 1e-2 --overwrite >over.out 2>&1 || fail "--overwrite: $(cat over.out)"
grep -q '^lr=1e-2$' $d/first-try/config.toml || fail "--overwrite did not replace first-try's configuration"
for bad in latest .. a/b; do
  status=0
  "${seq[@]}" --run-name "$bad" >bad.out 2>&1 || status=$?
  [ "$status" -ne 0 ] && grep -q -- "--run-name" bad.out || fail "--run-name $bad: exit $status, $(cat bad.out)"
done

# Named explicitly, an earlier run's log and plot are no less its own: kept unless --overwrite.
for flag in --log --plot; do
  file=$d/first-try/metrics.jsonl
  [ "$flag" = --plot ] && file=$d/first-try/plot.svg
  before=$(sha256sum "$file")
  status=0
  "${seq[@]}" "$flag" "$file" --lr 2e-2 >explicit.out 2>&1 || status=$?
  [ "$status" = 1 ] && grep -q -- "$flag '$file': already holds a .* of an earlier run" explicit.out ||
    fail "$flag to an earlier run's file: exit $status, $(cat explicit.out)"
  [ "$(sha256sum "$file")" = "$before" ] || fail "the refused run changed $file"
  "${seq[@]}" "$flag" "$file" --lr 2e-2 --overwrite >explicit.out 2>&1 || fail "$flag --overwrite: $(cat explicit.out)"
  [ "$(sha256sum "$file")" != "$before" ] || fail "$flag --overwrite did not replace $file"
done

# Resumed: the log goes on in the checkpoint's directory, no new one is made.
"${seq[@]}" --run-name saved --save $d/saved/ckpt.safetensors >saved.out 2>&1 || fail "a saved run: $(cat saved.out)"
n=$(ls $d | wc -l)
"$build/tools/train_sequence" --resume $d/saved/ckpt.safetensors --quiet >resumed.out 2>&1 ||
  fail "resume: $(cat resumed.out)"
[ "$(ls $d | wc -l)" = "$n" ] || fail "a resumed run made a new directory: $(ls $d)"
grep -qx "run    $d/saved" resumed.out || fail "the resumed run does not go on in $d/saved: $(head -3 resumed.out)"

# The GPT's directory is named for its text, and its checkpoint is there by default.
"$build/tools/train_gpt" --data "$source/README.md" --layers 1 --d-model 16 --heads 2 --block-size 8 --batch 4 \
  --steps 2 --quiet >gpt.out 2>&1 || fail "train_gpt: $(cat gpt.out)"
[ -s runs/train_gpt/README/1/ckpt.safetensors ] || fail "train_gpt's checkpoint is not in runs/train_gpt/README/1"
finish
