#!/usr/bin/env bash
# Configurations work from any directory: a shipped one is found by its name, paths inside a
# file are relative to the file, and the configuration a run leaves names its paths absolutely,
# so that it repeats the run from anywhere. Run from a scratch directory, as a user would.
#   configs_work_from_anywhere.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/../in_scratch_directory.sh" "$@"
seq="$build/tools/train_sequence"

"$seq" --config sort --steps 2 --quiet >sort.out 2>&1 || fail "--config sort: $(cat sort.out)"
grep -q '^task="sort"$' runs/train_sequence/sort/1/config.toml 2>/dev/null || fail "--config sort did not train sort"
"$build/tools/train_seq2seq" --config seq2seq-addition.toml --steps 2 --warmup 0 --quiet >add.out 2>&1 ||
  fail "--config seq2seq-addition.toml: $(cat add.out)"
[ -d runs/train_seq2seq/addition/1 ] || fail "--config seq2seq-addition did not train addition"
status=0
"$seq" --config no-such-config >none.out 2>&1 || status=$?
[ "$status" = 2 ] && grep -q -- "--config: 'no-such-config' does not exist" none.out || fail "an unknown name: $(cat none.out)"

# Paths in a file are relative to the file.
mkdir -p project/conf
printf '# attograd configuration\nsteps=2\nlog="../out/metrics.jsonl"\nplot="../out/plot.svg"\nsave="../out/ck.st"\n' \
  >project/conf/run.toml
"$seq" --config project/conf/run.toml --quiet >rel.out 2>&1 || fail "a config with relative paths: $(cat rel.out)"
for f in metrics.jsonl plot.svg ck.st config.toml; do [ -s project/out/$f ] || fail "project/out/$f is missing"; done
# The copy names them absolutely: from another directory it means the same files.
grep -q "^save=\"$PWD/project/out/ck.st\"$" project/out/config.toml || fail "the copy's save: $(grep '^save' project/out/config.toml)"
mkdir elsewhere && cd elsewhere
"$seq" --config ../project/out/config.toml --overwrite --quiet >again.out 2>&1 || fail "the copy from elsewhere: $(cat again.out)"
[ ! -e out ] && [ ! -e runs ] || fail "the copy wrote beside the caller, not where it names"
cd ..
# A command-line path stays relative to the caller.
"$seq" --config project/conf/run.toml --log mine.jsonl --plot mine.svg --save mine.st --quiet >cl.out 2>&1 ||
  fail "command-line paths: $(cat cl.out)"
[ -s mine.jsonl ] || fail "--log on the command line was not taken relative to the caller"
finish
