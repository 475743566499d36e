#!/usr/bin/env bash
# attograd's encoder-decoder against its PyTorch twin (bench/torch_seq2seq_train.py) on this
# machine, in the same run: for each task, both train the same model with the same settings
# until greedy decoding is exact on 99% of the held-out sources (or the step budget ends), the
# two frameworks' processes interleaved, ROUNDS of each. Then each decodes the held-out set of
# its trained model, greedy (batched) and with beam search (BEAM wide, source by source), both
# with their KV caches.
#
#   bench/compare_seq2seq.sh                          reverse-var and addition, 1 process each
#   ROUNDS=3 TASKS=reverse-var bench/compare_seq2seq.sh
#   THREADS=1 bench/compare_seq2seq.sh                both frameworks on one thread (default 2)
#   BUILD=build-bench bench/compare_seq2seq.sh        another build directory (default build/)
#   BASELINE=../attograd-old/build bench/compare_seq2seq.sh
#                                                     also run that build's tools/train_seq2seq,
#                                                     same flags, in the same rounds (a "before"
#                                                     for a change: build the old commit there)
# Reports, per task and framework: the steps and the seconds to the target (the whole process,
# start to exit, and the training loop alone with its evaluations), and the decoding speed in
# sequences/s. Ratios are attograd / PyTorch: below 1 is attograd faster for times, above 1 for
# speeds. With BASELINE, each round runs attograd, the baseline and PyTorch one after the other,
# and each task gains a "baseline" row and an "attograd / baseline" row, read the same way, with
# the ratio of the steps too (not 1: the new build trains differently, so its times to the
# target measure other work).
# Needs a release build of tools/train_seq2seq in $BUILD and /usr/bin/python3 with
# torch.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-1}
TASKS=${TASKS:-"reverse-var addition"}
THREADS=${THREADS:-2}
BEAM=${BEAM:-4}
BASELINE=${BASELINE:-}
PY=/usr/bin/python3
BUILD=${BUILD:-build}
ours=$BUILD/tools/train_seq2seq
[ -x "$ours" ] || { echo "compare_seq2seq.sh: $ours is missing: build it (ninja -C $BUILD tools/train_seq2seq)" >&2; exit 2; }
base=$BASELINE/tools/train_seq2seq
if [ -n "$BASELINE" ] && [ ! -x "$base" ]; then
  echo "compare_seq2seq.sh: BASELINE=$BASELINE has no tools/train_seq2seq: build it there first (ninja -C $BASELINE tools/train_seq2seq)" >&2
  exit 2
fi
"$PY" -c 'import torch' 2>/dev/null || { echo "compare_seq2seq.sh: /usr/bin/python3 cannot import torch (apt-get install python3-torch)" >&2; exit 2; }

# The documented settings of each task (docs/tasks.md), passed in full to both programs so that
# neither side's defaults decide anything.
settings_for() {
  local common="--d-model 64 --heads 4 --d-ff 256 --encoder-layers 2 --decoder-layers 2 --dropout 0 --clip 1 --eval-sequences 512 --seed 0"
  case $1 in
    reverse-var) echo "--task reverse-var --symbols 10 --min-len 1 --max-len 8 --batch 64 --lr 1e-3 --min-lr 1e-4 --warmup 100 --steps 4000 --eval-every 100 $common" ;;
    sort-var)    echo "--task sort-var --symbols 10 --min-len 1 --max-len 8 --batch 64 --lr 1e-3 --min-lr 1e-4 --warmup 100 --steps 4000 --eval-every 100 $common" ;;
    dedup)       echo "--task dedup --symbols 10 --min-len 1 --max-len 8 --batch 64 --lr 1e-3 --min-lr 1e-4 --warmup 100 --steps 4000 --eval-every 100 $common" ;;
    addition)    echo "--task addition --min-len 1 --max-len 8 --batch 64 --lr 2e-3 --min-lr 2e-4 --warmup 200 --steps 14000 --eval-every 200 $common" ;;
    *) echo "compare_seq2seq.sh: unknown task '$1'" >&2; exit 2 ;;
  esac
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
load() { cut -d' ' -f1-3 /proc/loadavg; }
now() { date +%s.%N; }
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(date -u +%Y-%m-%d)"
echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo ' (working tree has changes)')"
echo "load average at start: $(load)"
echo "threads: attograd --threads $THREADS; pytorch torch.set_num_threads($THREADS)"

for task in $TASKS; do
  # shellcheck disable=SC2207  # the settings are flags without spaces
  flags=($(settings_for "$task"))
  echo "settings of $task: ${flags[*]}"
  for r in $(seq "$ROUNDS"); do
    t0=$(now)
    "$ours" "${flags[@]}" --target-acc 0.99 --beam "$BEAM" --threads "$THREADS" --quiet --json \
      --log "$tmp/log_$task.jsonl" --plot "$tmp/plot_$task.svg" --overwrite | tail -n 1 >"$tmp/line"
    echo "{\"process_s\": $(awk -v a="$(now)" -v b="$t0" 'BEGIN { printf "%.3f", a - b }'), \"result\": $(cat "$tmp/line")}" >>"$tmp/ours_$task.jsonl"
    if [ -n "$BASELINE" ]; then
      t0=$(now)
      "$base" "${flags[@]}" --target-acc 0.99 --beam "$BEAM" --threads "$THREADS" --quiet --json \
        --log "$tmp/base_log_$task.jsonl" --plot "$tmp/base_plot_$task.svg" --overwrite | tail -n 1 >"$tmp/line"
      echo "{\"process_s\": $(awk -v a="$(now)" -v b="$t0" 'BEGIN { printf "%.3f", a - b }'), \"result\": $(cat "$tmp/line")}" >>"$tmp/base_$task.jsonl"
    fi
    t0=$(now)
    "$PY" bench/torch_seq2seq_train.py "${flags[@]}" --target 0.99 --beam "$BEAM" --threads "$THREADS" --quiet --json \
      | tail -n 1 >"$tmp/line"
    echo "{\"process_s\": $(awk -v a="$(now)" -v b="$t0" 'BEGIN { printf "%.3f", a - b }'), \"result\": $(cat "$tmp/line")}" >>"$tmp/torch_$task.jsonl"
  done
done
echo "load average at the end: $(load)"

"$PY" - "$tmp" "$TASKS" "$BEAM" <<'EOF'
import json, os, statistics, sys
tmp, tasks, beam = sys.argv[1], sys.argv[2].split(), sys.argv[3]
def rows(name):
    with open(f"{tmp}/{name}.jsonl") as f:
        return [json.loads(line) for line in f if line.strip()]
# The baseline's files exist only when BASELINE was set; without them the table is as before.
base = all(os.path.exists(f"{tmp}/base_{task}.jsonl") for task in tasks)
def med(rs, key):
    return statistics.median(r["result"][key] if key != "process_s" else r[key] for r in rs)
print()
print(f"| task | framework | reached 99% | steps | process s | training s | greedy exact | greedy seq/s | beam {beam} seq/s |")
print("|---|---|---|---|---|---|---|---|---|")
for task in tasks:
    o, t = rows(f"ours_{task}"), rows(f"torch_{task}")
    b = rows(f"base_{task}") if base else []
    sides = [("attograd", o, "beam_seq_per_s"), ("pytorch", t, "beam4_seq_per_s" if beam == "4" else "beam_seq_per_s")]
    if base:
        sides.append(("baseline", b, "beam_seq_per_s"))
    for name, rs, beam_key in sides:
        reached = sum(1 for r in rs if r["result"]["reached"])
        print(f"| {task} | {name} | {reached}/{len(rs)} | {med(rs, 'steps'):.0f} | {med(rs, 'process_s'):.1f} | "
              f"{med(rs, 'train_s'):.1f} | {100 * med(rs, 'seq_acc'):.1f}% | {med(rs, 'greedy_seq_per_s'):.0f} | "
              f"{med(rs, beam_key):.0f} |")
    ob = "beam_seq_per_s"
    tb = "beam4_seq_per_s" if beam == "4" else "beam_seq_per_s"
    print(f"| {task} | attograd / pytorch | | | {med(o, 'process_s') / med(t, 'process_s'):.2f} | "
          f"{med(o, 'train_s') / med(t, 'train_s'):.2f} | | {med(o, 'greedy_seq_per_s') / med(t, 'greedy_seq_per_s'):.2f} | "
          f"{med(o, ob) / med(t, tb):.2f} |")
    if base:
        # Three decimals: the question here is a few percent, not a factor. The steps ratio is
        # 1 when the new build trains along the same path; otherwise the times compare different
        # amounts of work.
        print(f"| {task} | attograd / baseline | | {med(o, 'steps') / med(b, 'steps'):.3f} | {med(o, 'process_s') / med(b, 'process_s'):.3f} | "
              f"{med(o, 'train_s') / med(b, 'train_s'):.3f} | | {med(o, 'greedy_seq_per_s') / med(b, 'greedy_seq_per_s'):.3f} | "
              f"{med(o, ob) / med(b, ob):.3f} |")
EOF
