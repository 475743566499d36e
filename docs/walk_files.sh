#!/usr/bin/env bash
# How many of the project's files a reader follows through one GPT update and one generated token:
# the files holding code that runs (functions of headers included, nothing inlined), counted by
# callgrind over a build without optimisation. docs/design.md quotes these counts, before and
# after the split into framework and tooling.
#
#   docs/walk_files.sh                      configures build-walk/ (buildtype=debug, programs only)
#   docs/walk_files.sh SOURCE_ROOT BUILD    another tree, e.g. an older commit's clone and its build
#
# Needs valgrind. The run: train_gpt for 2 updates of a one-block GPT on the fortunes (saving a
# checkpoint), then generate 3 tokens from it. Counted: the files of everything that runs inside
# Trainer::train_step (one update: batch, forward, loss, backward, clipping, optimizer), inside
# GPTDecoder::feed and sample_token (one token), and in the whole of each program (main to the
# checkpoint written; main to the tokens printed).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
src=$(cd "${1:-$here}" && pwd)
build=${2:-$src/build-walk}
command -v valgrind >/dev/null || { echo "walk_files.sh: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" "$src" -Dbuildtype=debug -Dtests=false -Dbench=false >/dev/null
fi
dir=tools
[ -f "$src/tools/train_gpt.cpp" ] || dir=examples  # a tree from before the programs moved
ninja -C "$build" -j2 "$dir/train_gpt" "$dir/generate" >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
small=(--layers 1 --heads 2 --d-model 32 --block-size 16 --batch 4 --steps 2 --eval-every 2 --eval-windows 4
       --warmup 0 --threads 1 --quiet --save ck.safetensors)
count() {  # count OUT LABEL: the project's files with code that ran, from a callgrind output
  callgrind_annotate --inclusive=no --threshold=100 --auto=no "$1" 2>/dev/null |
    python3 -c '
import os, re, sys
src, build = sys.argv[1], os.path.realpath(sys.argv[2])
files = set()
for line in sys.stdin:
    # "1,234 (0.5%)  /path/of/file.cpp:function [object]", one line per function that ran
    m = re.match(r"\s*[\d,]+\s+\([^)]*\)\s+(/\S+?):", line)
    # a file whose only code that ran is its static initialisation (at load) is not followed
    if not m or "__static_initialization_and_destruction" in line or "_GLOBAL__sub_I_" in line:
        continue
    path = os.path.realpath(m.group(1))  # include roots are links to the sources
    if path.startswith(src + "/") and not path.startswith(build + "/") and os.path.isfile(path):
        files.add(os.path.relpath(path, src))
folders = {}
for f in files:
    parts = f.split("/")
    key = "/".join(parts[:2]) if parts[0] in ("models", "train") and len(parts) > 2 else parts[0]
    folders[key] = folders.get(key, 0) + 1
print(len(files), "(" + ", ".join(f"{k} {v}" for k, v in sorted(folders.items())) + ")")
if "-v" in sys.argv:
    print(" ".join(sorted(files)))
' "$src" "$build" ${VERBOSE:+-v}
}
valgrind --tool=callgrind --callgrind-out-file=step.out --collect-atstart=no \
  --toggle-collect='ag::Trainer::train_step()' "$build/$dir/train_gpt" "${small[@]}" >/dev/null 2>valgrind.txt ||
  { cat valgrind.txt >&2; exit 1; }
echo "one update (Trainer::train_step): $(count step.out) files"
rm -f ck.safetensors
valgrind --tool=callgrind --callgrind-out-file=main.out "$build/$dir/train_gpt" "${small[@]}" >/dev/null 2>valgrind.txt
echo "train_gpt, main to the checkpoint: $(count main.out) files"
valgrind --tool=callgrind --callgrind-out-file=token.out --collect-atstart=no \
  --toggle-collect='ag::GPTDecoder::feed*' --toggle-collect='ag::sample_token*' \
  "$build/$dir/generate" --checkpoint ck.safetensors --prompt "A" --tokens 3 --threads 1 >/dev/null 2>valgrind.txt
echo "one generated token (GPTDecoder::feed, sample_token): $(count token.out) files"
valgrind --tool=callgrind --callgrind-out-file=gen.out \
  "$build/$dir/generate" --checkpoint ck.safetensors --prompt "A" --tokens 3 --threads 1 >/dev/null 2>valgrind.txt
echo "generate, main to the tokens: $(count gen.out) files"
