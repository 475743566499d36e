#!/usr/bin/env bash
# attograd's GPT against its PyTorch twin (bench/torch_gpt.py) on this machine, in the same run:
#  1. full training steps (forward, cross-entropy, backward, AdamW) per configuration, the two
#     frameworks' processes interleaved, ROUNDS of each: medians of the per-process medians, the
#     ratio of the fastest steps, and peak RSS;
#  2. greedy generation of GEN_TOKENS tokens from a one-token prompt (batch 1), with the KV
#     cache and without, again interleaved: tokens/s and attograd-cached / PyTorch-cached.
#
#   bench/compare_gpt.sh                                  both configurations, 3 processes each
#   ROUNDS=5 CONFIGS=baby GEN_CONFIGS=baby bench/compare_gpt.sh
#   BUILD=build-bench bench/compare_gpt.sh                another build directory (default build/)
#   TORCH_BLAS_THREADS=1 bench/compare_gpt.sh             PyTorch's OpenBLAS pool (default 2, as compare.sh)
#   CONFIGS=large GEN_CONFIGS= bench/compare_gpt.sh       training steps only (an empty list skips a part)
#   BASELINE=../attograd-old/build bench/compare_gpt.sh
#                                     also run that build's bench/gpt_step, same flags, in the same
#                                     rounds (a "before" for a change: build the old commit there)
#
# With BASELINE, each round runs attograd, the baseline and PyTorch one after the other, so a
# load change hits all three alike. The training table gains the baseline's median, new /
# baseline of the medians and of the fastest steps (below 1 is the new build faster) and the
# baseline's peak RSS, and its per-process line the baseline's medians; the generation table
# gains the baseline's cached and uncached tokens/s, new / baseline for each (above 1 is the new
# build faster) and whether the new build generated the same tokens as the baseline.
# Needs a release build of bench/gpt_step in $BUILD and /usr/bin/python3 with torch.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
CONFIGS=${CONFIGS-"baby large"}
GEN_CONFIGS=${GEN_CONFIGS-"baby large"}  # empty: no generation rows
GEN_TOKENS=${GEN_TOKENS:-127}
GEN_REPEATS=${GEN_REPEATS:-2}
OURS_THREADS=${OURS_THREADS:-2}
TORCH_BLAS_THREADS=${TORCH_BLAS_THREADS:-2}
BASELINE=${BASELINE:-}
PY=/usr/bin/python3
BUILD=${BUILD:-build}
ours=$BUILD/bench/gpt_step
[ -x "$ours" ] || { echo "compare_gpt.sh: $ours is missing: build it (ninja -C $BUILD bench/gpt_step)" >&2; exit 2; }
base=$BASELINE/bench/gpt_step
if [ -n "$BASELINE" ] && [ ! -x "$base" ]; then
  echo "compare_gpt.sh: BASELINE=$BASELINE has no bench/gpt_step: build it there first (ninja -C $BASELINE bench/gpt_step)" >&2
  exit 2
fi
"$PY" -c 'import torch' 2>/dev/null || { echo "compare_gpt.sh: /usr/bin/python3 cannot import torch (apt-get install python3-torch)" >&2; exit 2; }

# Enough steps for a median on a noisy VM, few enough that a round of the large model stays
# within a minute or two per framework.
steps_for() { case $1 in baby) echo 10 ;; large) echo 4 ;; gpt2-4x64) echo 4 ;; gpt2-*) echo 2 ;; esac; }
warmup_for() { case $1 in baby) echo 2 ;; *) echo 1 ;; esac; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
torch_threads=(--threads 1 --blas-threads "$TORCH_BLAS_THREADS")

load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(date -u +%Y-%m-%d)"
echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo ' (working tree has changes)')"
echo "load average at start: $(load) (a busy machine slows both sides, PyTorch's per-op overhead more)"
echo "threads: attograd --threads $OURS_THREADS; pytorch intra-op 1, OpenBLAS $TORCH_BLAS_THREADS"
for cfg in $CONFIGS; do
  steps=$(steps_for "$cfg") warmup=$(warmup_for "$cfg")
  for r in $(seq "$ROUNDS"); do
    "$ours" --config "$cfg" --steps "$steps" --warmup "$warmup" --threads "$OURS_THREADS" --json >>"$tmp/ours_$cfg.jsonl"
    if [ -n "$BASELINE" ]; then
      "$base" --config "$cfg" --steps "$steps" --warmup "$warmup" --threads "$OURS_THREADS" --json >>"$tmp/base_$cfg.jsonl"
    fi
    "$PY" bench/torch_gpt.py --config "$cfg" --steps "$steps" --warmup "$warmup" "${torch_threads[@]}" --json >>"$tmp/torch_$cfg.jsonl"
  done
done
echo "load average after the training steps: $(load)"

for cfg in $GEN_CONFIGS; do
  for r in $(seq "$ROUNDS"); do
    for cache in "" --no-cache; do
      name=$([ -z "$cache" ] && echo cached || echo uncached)
      # shellcheck disable=SC2086  # $cache is empty or one flag
      "$ours" --config "$cfg" --generate "$GEN_TOKENS" $cache --repeats "$GEN_REPEATS" --warmup 1 \
        --threads "$OURS_THREADS" --json >>"$tmp/gen_ours_${name}_$cfg.jsonl"
      if [ -n "$BASELINE" ]; then
        # shellcheck disable=SC2086
        "$base" --config "$cfg" --generate "$GEN_TOKENS" $cache --repeats "$GEN_REPEATS" --warmup 1 \
          --threads "$OURS_THREADS" --json >>"$tmp/gen_base_${name}_$cfg.jsonl"
      fi
      # shellcheck disable=SC2086
      "$PY" bench/torch_gpt.py --config "$cfg" --generate "$GEN_TOKENS" $cache --repeats "$GEN_REPEATS" --warmup 1 \
        "${torch_threads[@]}" --json >>"$tmp/gen_torch_${name}_$cfg.jsonl"
    done
  done
done

"$PY" - "$tmp" "$CONFIGS" "$GEN_CONFIGS" <<'PYEOF'
import json, os, statistics, sys
tmp, configs, gen_configs = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
def load(path):
    return [json.loads(l) for l in open(path) if l.strip()] if os.path.exists(path) else []
med = lambda rows, key: statistics.median(r[key] for r in rows)
# The baseline's files exist only when BASELINE was set; without them the tables are as before.
base = any(load(f"{tmp}/base_{c}.jsonl") for c in configs)
gen_base = any(load(f"{tmp}/gen_base_cached_{c}.jsonl") for c in gen_configs)
if configs:
    print()
    print("training step (medians of per-process medians; min ratio = fastest step / fastest step)")
    print(f"{'config':<7} {'params':>9} {'attograd ms':>12} {'pytorch ms':>11} {'ratio':>6} {'min ratio':>9} "
          f"{'ours GFLOP/s':>13} {'torch GFLOP/s':>14} {'ours RSS MB':>12} {'torch RSS MB':>13} {'RSS ratio':>9}"
          + (f" {'baseline ms':>12} {'new/baseline':>12} {'min new/base':>12} {'base RSS MB':>12}" if base else ""))
for c in configs:
    o, t = load(f"{tmp}/ours_{c}.jsonl"), load(f"{tmp}/torch_{c}.jsonl")
    b = load(f"{tmp}/base_{c}.jsonl") if base else []
    if o[0]["parameters"] != t[0]["parameters"]:
        print(f"warning: parameter counts differ: attograd {o[0]['parameters']}, pytorch {t[0]['parameters']}")
    if base and o[0]["parameters"] != b[0]["parameters"]:
        print(f"warning: parameter counts differ: attograd {o[0]['parameters']}, baseline {b[0]['parameters']}")
    om, tm = med(o, "median_ms"), med(t, "median_ms")
    best = min(r["min_ms"] for r in o) / min(r["min_ms"] for r in t)
    orss, trss = max(r["peak_rss_mb"] for r in o), max(r["peak_rss_mb"] for r in t)
    line = (f"{c:<7} {o[0]['parameters']:>9} {om:>12.1f} {tm:>11.1f} {om / tm:>6.2f} {best:>9.2f} {med(o, 'gflops'):>13.1f} "
            f"{med(t, 'gflops'):>14.1f} {orss:>12.1f} {trss:>13.1f} {orss / trss:>9.2f}")
    if base:
        bm = med(b, "median_ms")
        bbest = min(r["min_ms"] for r in o) / min(r["min_ms"] for r in b)
        line += f" {bm:>12.1f} {om / bm:>12.3f} {bbest:>12.3f} {max(r['peak_rss_mb'] for r in b):>12.1f}"
    print(line)
    # Each process's median, in the order they ran (the sides alternate): shows the spread.
    per = lambda rows: " ".join(f"{r['median_ms']:.0f}" for r in rows)
    print(f"        per process, ms: attograd {per(o)} | pytorch {per(t)}" + (f" | baseline {per(b)}" if base else ""))
if gen_configs:
    print()
    print("greedy generation, batch 1, 1-token prompt, tokens/s (median over processes of each process's median)")
    print(f"{'config':<7} {'ours cached':>12} {'ours uncached':>14} {'torch cached':>13} {'torch uncached':>15} "
          f"{'cached ratio':>12} {'best ratio':>10} {'same tokens':>11}"
          + (f" {'base cached':>12} {'base uncached':>14} {'new/base cached':>15} {'new/base uncached':>17} {'tokens as base':>14}"
             if gen_base else ""))
for c in gen_configs:
    fws = ("ours", "torch", "base") if gen_base else ("ours", "torch")
    rows = {f"{fw}_{k}": load(f"{tmp}/gen_{fw}_{k}_{c}.jsonl") for fw in fws for k in ("cached", "uncached")}
    v = {k: med(r, "tokens_per_s") for k, r in rows.items()}
    best = max(r["max_tokens_per_s"] for r in rows["ours_cached"]) / max(r["max_tokens_per_s"] for r in rows["torch_cached"])
    # Greedy tokens must not depend on the cache (each framework, and the baseline, against
    # itself; the two frameworks' weights differ, so their tokens do too).
    same = all(len({r["fingerprint"] for r in rows[f"{fw}_cached"] + rows[f"{fw}_uncached"]}) == 1 for fw in fws)
    line = (f"{c:<7} {v['ours_cached']:>12.1f} {v['ours_uncached']:>14.1f} {v['torch_cached']:>13.1f} "
            f"{v['torch_uncached']:>15.1f} {v['ours_cached'] / v['torch_cached']:>12.2f} {best:>10.2f} {str(same):>11}")
    if gen_base:
        # Both builds seed the weights alike, so a change that keeps the arithmetic keeps the
        # tokens; False says the initialisation or the arithmetic moved, not that either is wrong.
        as_base = {r["fingerprint"] for r in rows["ours_cached"]} == {r["fingerprint"] for r in rows["base_cached"]}
        line += (f" {v['base_cached']:>12.1f} {v['base_uncached']:>14.1f} {v['ours_cached'] / v['base_cached']:>15.3f} "
                 f"{v['ours_uncached'] / v['base_uncached']:>17.3f} {str(as_base):>14}")
    print(line)
PYEOF
echo "load average at end: $(load)"
