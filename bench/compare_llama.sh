#!/usr/bin/env bash
# The Llama family against its PyTorch twin on this machine, interleaved: ROUNDS rounds, each one
# process of bench/llama_step and one of bench/torch_llama_step.py, for the training step of
# SmolLM2-135M's shape at 4 x 256 and for its batch-1 greedy generation (64 tokens with the KV
# cache). Prints each run's JSON, the medians, the ratios, this machine's FMA peak and memory
# read bandwidth (bench/machine_peak), the generation's share of the bandwidth's limit (the bytes
# a token reads: every weight and the cache), and the load average before and after.
#   bench/compare_llama.sh [BUILD_DIR]        ROUNDS=2 STEPS=3 TOKENS=64 THREADS=2 by default
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
rounds=${ROUNDS:-2} steps=${STEPS:-3} tokens=${TOKENS:-64} threads=${THREADS:-2}
python=/usr/bin/python3
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)   $(date -u +%FT%TZ)   $(lscpu | sed -n 's/^Model name: *//p')"
runs=$(mktemp)
trap 'rm -f "$runs"' EXIT
for round in $(seq "$rounds"); do
  "$build/bench/llama_step" --config smollm2-4x256 --steps "$steps" --threads "$threads" --json | tee -a "$runs"
  "$python" "$here/torch_llama_step.py" --config smollm2-4x256 --steps "$steps" --threads "$threads" --json | tee -a "$runs"
  "$build/bench/llama_step" --config smollm2-4x256 --generate "$tokens" --threads "$threads" --json | tee -a "$runs"
  "$python" "$here/torch_llama_step.py" --config smollm2-4x256 --generate "$tokens" --threads "$threads" --json | tee -a "$runs"
done
peak=$("$build/bench/machine_peak" --threads "$threads" --config baby 2>&1)
echo "$peak" | grep -E "FMA peak|bandwidth"
bandwidth=$(sed -n 's/^memory read bandwidth.* threads \([0-9.]*\) GB\/s$/\1/p' <<<"$peak")
"$python" - "$runs" "$bandwidth" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
bandwidth = float(sys.argv[2]) * 1e9
def med(fw, mode, key):
    return statistics.median(r[key] for r in rows if r["framework"] == fw and r["mode"] == mode)
for mode, key, unit in (("train", "median_ms", "ms/step"), ("generate", "tokens_per_s", "tokens/s")):
    a, t = med("attograd", mode, key), med("pytorch", mode, key)
    ra, rt = med("attograd", mode, "peak_rss_mb"), med("pytorch", mode, "peak_rss_mb")
    print(f"{mode}: attograd {a:.1f} {unit}, PyTorch {t:.1f} {unit}, ratio {a / t:.3f}; "
          f"peak RSS {ra:.0f} MB vs {rt:.0f} MB, ratio {ra / rt:.3f}")
per_token = med("attograd", "generate", "bytes_per_token")
limit = bandwidth / per_token
print(f"generation's memory roofline: {per_token / 1e6:.1f} MB read per token at {bandwidth / 1e9:.1f} GB/s = "
      f"{limit:.1f} tokens/s; attograd at {med('attograd', 'generate', 'tokens_per_s') / limit:.0%} of it, "
      f"PyTorch at {med('pytorch', 'generate', 'tokens_per_s') / limit:.0%}")
gf = med("attograd", "train", "gflops")
print(f"attograd's training step: {gf:.1f} GFLOP/s of matrix products")
PY
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
