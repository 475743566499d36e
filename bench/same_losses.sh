#!/usr/bin/env bash
# The documented training runs (README.md, docs/tasks.md, docs/seq2seq.md) with two builds of
# attograd, compared row by row: a change that is meant to keep the numerics (a redesign, a
# refactor) must leave every logged loss, accuracy, learning rate and gradient norm identical
# to the last digit. Timing columns are not compared.
#
#   BASELINE=/path/to/old/build bench/same_losses.sh        # this tree's build/ against it
#   LONG=1 BASELINE=... bench/same_losses.sh                # also the 9,800-step addition run
#   BUILD=build-other BASELINE=... bench/same_losses.sh
#
# Each run starts in a scratch directory of its own, as a user would, with the same flags for
# both builds and --threads 2. Prints one line per run and a final "N same, M different";
# exits 1 when any run differs or fails.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
BUILD=${BUILD:-build}
BASELINE=${BASELINE:?set BASELINE to the build directory to compare with}
LONG=${LONG:-0}
PY=/usr/bin/python3
case $BUILD in /*) ;; *) BUILD=$root/$BUILD ;; esac
# A program of build $1: tools/ since the programs moved there, examples/ in a baseline built
# from a commit before that.
program_in() { if [ -x "$1/tools/$2" ]; then echo "$1/tools/$2"; else echo "$1/examples/$2"; fi; }
for b in "$BUILD" "$BASELINE"; do
  for p in train_sequence train_gpt train_seq2seq; do
    [ -x "$(program_in "$b" "$p")" ] || { echo "same_losses.sh: $b/tools/$p is missing: build it first" >&2; exit 2; }
  done
done

runs=(
  "train_sequence"
  "train_sequence --task copy"
  "train_sequence --task sort"
  "train_sequence --task shift"
  "train_sequence --task shift --shift-k 5"
  "train_sequence --length 32 --vocab 32"
  "train_sequence --post-norm"
  "train_sequence --positional sinusoidal"
  "train_sequence --optimizer sgd --lr 0.1"
  "train_sequence --optimizer adamw --weight-decay 0.01"
  "train_sequence --dropout 0.1"
  "train_gpt"
  "train_seq2seq"
  "train_seq2seq --task sort-var"
  "train_seq2seq --task dedup"
)
[ "$LONG" = 1 ] && runs+=("train_seq2seq --config $root/docs/configs/seq2seq-addition.toml")

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
same=0 different=0
for i in "${!runs[@]}"; do
  read -r -a words <<<"${runs[$i]}"
  program=${words[0]}
  for side in new old; do
    bin=$BUILD
    [ "$side" = old ] && bin=$BASELINE
    dir=$tmp/$i-$side
    mkdir -p "$dir"
    if ! (cd "$dir" && "$(program_in "$bin" "$program")" "${words[@]:1}" --threads 2 --quiet --overwrite \
            --log "$dir/metrics.jsonl" --plot "$dir/plot.svg" >"$dir/out.txt" 2>&1); then
      echo "FAILED ($side): ${runs[$i]}"
      tail -n 5 "$dir/out.txt"
    fi
  done
  if verdict=$("$PY" - "$tmp/$i-new/metrics.jsonl" "$tmp/$i-old/metrics.jsonl" <<'EOF'
import json, math, sys
keys = ["step", "train_loss", "eval_loss", "token_acc", "seq_acc", "lr", "grad_norm"]
def rows(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]
new, old = rows(sys.argv[1]), rows(sys.argv[2])
def same(a, b):
    if a is None or b is None:
        return a is None and b is None
    return (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)) or a == b
if len(new) != len(old):
    print(f"{len(new)} rows against {len(old)}")
    sys.exit(1)
for n, o in zip(new, old):
    for k in keys:
        if not same(n.get(k), o.get(k)):
            print(f"step {o.get('step')}: {k} {n.get(k)!r} against {o.get(k)!r}")
            sys.exit(1)
last = old[-1]
print(f"{len(old)} rows, last step {last.get('step')}, eval loss {last.get('eval_loss')}")
EOF
  ); then
    same=$((same + 1))
    echo "same:      ${runs[$i]}  ($verdict)"
  else
    different=$((different + 1))
    echo "DIFFERENT: ${runs[$i]}  ($verdict)"
  fi
done
echo "same_losses: $same same, $different different"
[ "$different" -eq 0 ]
