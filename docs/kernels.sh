#!/usr/bin/env bash
# How much the documented figures move with OpenBLAS's kernel set: runs docs/check.sh once per
# x86-64 kernel set this CPU can run (Prescott, Haswell, Zen, and with AVX-512 SkylakeX and
# Cooperlake), each pinned with OPENBLAS_CORETYPE, and prints for each set the figures that differ
# from the text, one line each. docs/reproducibility.md holds its output.
#
#   docs/kernels.sh [--long] [--build DIR] [SET...]     (default: every set this CPU runs)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
args=()
sets=()
while [ $# -gt 0 ]; do
  case $1 in
    --long) args+=(--long) ;;
    --build) args+=(--build "$2"); shift ;;
    -*) echo "usage: docs/kernels.sh [--long] [--build DIR] [SET...]" >&2; exit 2 ;;
    *) sets+=("$1") ;;
  esac
  shift
done
if [ ${#sets[@]} -eq 0 ]; then
  flags=$(grep -m1 '^flags' /proc/cpuinfo)
  has() { for f in "$@"; do [[ " $flags " == *" $f "* ]] || return 1; done; }
  sets=(Prescott)
  if has avx2 fma; then sets+=(Haswell Zen); fi
  if has avx512f avx512cd avx512bw avx512dq avx512vl; then sets+=(SkylakeX); fi
  if has avx512f avx512bw avx512vl avx512_bf16; then sets+=(Cooperlake); fi
fi
echo "# $(date -u '+%F %H:%M') UTC, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores;" \
  "OpenBLAS picks $(OPENBLAS_VERBOSE=2 "${here}/../build/tools/train_sequence" --help 2>&1 | sed -n 's/^Core: //p') here"
for set in "${sets[@]}"; do
  log=$(mktemp)
  status=0
  "$here/check.sh" "${args[@]}" --kernels "$set" >"$log" 2>&1 || status=$?
  echo
  echo "## $set: $(tail -n 1 "$log" | sed 's/^docs\/check: //')"
  # The one-line mismatches (tables, metrics), and for a block its documented line and the
  # printed line closest to it.
  awk '
    / documented [^l]/ { print "  " $0; next }
    /documented line not printed/ { where = $1; getline doc; getline; getline got
      sub(/^ +/, "", doc); sub(/^ +/, "", got)
      print "  " where " documented: " doc; print "  " where " printed:    " got; next }
    / exited with / { print "  " $0 }
  ' "$log"
  rm -f "$log"
  [ "$status" -le 1 ] || exit "$status"
done
