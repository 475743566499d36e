#!/usr/bin/env bash
# GPT-2's tokenizer, ours against npm's tiktoken and js-tiktoken: the same ids for the hand-picked
# hard cases, 10,000 random byte strings, every file of Debian's fortunes and the King James
# bible (Debian's bible-kjv prints it), each decoding back to its own bytes (tests/data/bpe_cases.cpp,
# tests/data/gpt2_reference.js).
#
#   tests/data/gpt2_matches_tiktoken.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
. "$src/tests/data/references_present.sh"
require_node_packages tiktoken js-tiktoken
command -v bible >/dev/null || references_missing "the bible program (Debian's bible-kjv) is not installed"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bible -f 'Gen1:1-Rev22:21' >"$work/bible-kjv.txt"
mapfile -t fortunes < <(find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' | sort)
[ ${#fortunes[@]} -gt 10 ] || { echo "gpt2_matches_tiktoken: no fortunes (apt-get install fortunes)" >&2; exit 1; }
node "$src/tests/data/gpt2_reference.js" cases "$work/all.cases" "${fortunes[@]}" "$work/bible-kjv.txt"
"$build/tests/data/bpe_cases" "$work/all.cases" gpt2 >"$work/ours.txt"
node "$src/tests/data/gpt2_reference.js" compare "$work/all.cases" "$work/ours.txt"
