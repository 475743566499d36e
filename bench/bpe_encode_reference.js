// Encoding speed of npm's GPT-2 tokenizers on a file, as bench/bpe_encode measures ours: the text
// (decoded to a JavaScript string beforehand, not timed) encoded `repeat` times, the median in
// MB/s of UTF-8 input. One warm-up encoding first (WebAssembly compiles lazily, V8 optimises).
//
//   NODE_PATH=~/.cache/attograd/npm/node_modules node bench/bpe_encode_reference.js tiktoken 5 text.txt
//   NODE_PATH=... node bench/bpe_encode_reference.js lenml 5 text.txt tokenizer.json   (@lenml/tokenizers)
'use strict';
const fs = require('fs');
const [which, repeatText, file, tokenizerJson] = process.argv.slice(2);
const bytes = fs.readFileSync(file);
const text = bytes.toString('utf8');
let encode;
if (which === 'tiktoken') {
  const enc = require('tiktoken').get_encoding('gpt2');
  encode = (t) => enc.encode(t, 'all').length;
} else if (which === 'js-tiktoken') {
  const enc = require('js-tiktoken').getEncoding('gpt2');
  encode = (t) => enc.encode(t, 'all').length;
} else if (which === 'lenml') {
  const { TokenizerLoader } = require('@lenml/tokenizers');
  const tok = TokenizerLoader.fromPreTrained({ tokenizerJSON: JSON.parse(fs.readFileSync(tokenizerJson, 'utf8')), tokenizerConfig: {} });
  encode = (t) => tok.encode(t, { add_special_tokens: false }).length;
} else {
  throw new Error(`unknown reference ${which} (tiktoken, js-tiktoken or lenml)`);
}
encode(text);
const seconds = [];
let tokens = 0;
for (let r = 0; r < Number(repeatText); ++r) {
  const start = process.hrtime.bigint();
  tokens = encode(text);
  seconds.push(Number(process.hrtime.bigint() - start) / 1e9);
}
seconds.sort((a, b) => a - b);
const median = seconds[Math.floor(seconds.length / 2)];
console.log(`${which} threads=1 bytes=${bytes.length} tokens=${tokens} median_s=${median.toFixed(4)} MB/s=${(bytes.length / median / 1e6).toFixed(2)}`);
