#!/usr/bin/env bash
# docs/check.sh holds documented figures to what the commands print now: pages built from the
# real docs' own annotated rows and blocks pass as they are, and fail, naming the line, when one
# figure is changed by hand. Usage: a_changed_figure_fails_the_check.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
source=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# The check-table of docs/tasks.md's defaults, cut to its two quickest rows (copy, reverse).
{
  echo "# rows"
  echo
  awk '/^<!-- check-table/ && !done { on = 1 } on { print } on && /^\| reverse/ { done = 1; on = 0 }' \
    "$source/docs/tasks.md" | grep -v '^| sort\|^| shift'
} >"$work/table.md"
grep -q '^| copy ' "$work/table.md" && grep -q '^| reverse ' "$work/table.md" ||
  fail "docs/tasks.md no longer has the copy and reverse rows this test uses: $(cat "$work/table.md")"
# The block of a run repeated from its configuration copy (docs/programs/common.md; two short runs).
awk '/^<!-- check short: build\/tools\/train_sequence --quiet/ { on = 1 } on { print } on && /^```$/ && ++fences == 2 { exit }' \
  "$source/docs/programs/common.md" >"$work/block.md"
grep -q 'exact-sequence accuracy' "$work/block.md" ||
  fail "docs/programs/common.md's configuration block was not found: $(cat "$work/block.md")"

check() {  # check EXPECTED-STATUS FILE WORDS...
  local want=$1 file=$2 status=0 w
  shift 2
  "$source/docs/check.sh" --build "$build" "$file" >"$work/out" 2>&1 || status=$?
  [ "$status" = "$want" ] || { fail "docs/check.sh $(basename "$file"): exit $status, not $want: $(cat "$work/out")"; return; }
  for w in "$@"; do grep -q -- "$w" "$work/out" || fail "docs/check.sh $(basename "$file") does not say '$w': $(cat "$work/out")"; done
  echo "ok: $(basename "$file") -> exit $status $(tail -n 1 "$work/out")"
}

check 0 "$work/table.md" "2 checked, 0 differ"
check 0 "$work/block.md" "1 checked, 0 differ"

# One figure changed by hand in each: the steps of a row, its exact-match rate, a block's accuracy.
steps=$(awk -F'|' '/^\| reverse/ { gsub(/ /, "", $4); print $4 }' "$work/table.md")
sed "/^| reverse/ s/| $steps |/| $((steps + 10)) |/" "$work/table.md" >"$work/steps.md"
check 1 "$work/steps.md" "steps: documented $((steps + 10)), measured $steps" "steps.md:"
sed '/^| copy/ s/| 100.0% |/| 99.9% |/' "$work/table.md" >"$work/exact.md"
cmp -s "$work/exact.md" "$work/table.md" && fail "the copy row has no 100.0% to change"
check 1 "$work/exact.md" "exact: documented 99.9%, measured 100.0%"
sed 's/exact-sequence accuracy \([0-9.]*\)%/exact-sequence accuracy 12.5%/' "$work/block.md" >"$work/accuracy.md"
check 1 "$work/accuracy.md" "documented line not printed" "exact-sequence accuracy 12.5%"
# Times are not figures of the run: a changed time still passes.
sed 's/in [0-9.]*s (/in 99.9s (/' "$work/block.md" >"$work/time.md"
check 0 "$work/time.md" "1 checked, 0 differ"

[ "$failures" = 0 ] && echo "all ok" || { echo "$failures failures"; exit 1; }
