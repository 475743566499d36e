// The reference for Hugging Face tokenizer.json files: npm's @lenml/tokenizers (transformers.js's
// tokenizers without the rest, pure JavaScript), loading the same tokenizer.json as ours.
//
//   node hf_reference.js cases OUT.cases        the cases particular to these tokenizers (their
//                                              added tokens, NFC, Llama 3's splits), appended to
//                                              gpt2_reference.js's set by the caller
//   node hf_reference.js gpt2-file OURS.json OUT.json
//                                              GPT-2's tokenizer.json as Hugging Face ships it,
//                                              from the one ours writes: merges as "a b" strings,
//                                              a ByteLevel pre-tokenizer with its own regex, and
//                                              <|endoftext|> in the vocabulary as well
//   node hf_reference.js compare TOKENIZER.json CASES OURS.ids OURS.decoded [--tiktoken]
//                                              our ids and decoded bytes (tokenizer_cases) against
//                                              the reference's; --tiktoken also holds the ids of
//                                              the valid UTF-8 cases to tiktoken's GPT-2
//
// The reference takes strings. Each case's bytes become one as its callers make one, with
// TextDecoder (invalid UTF-8 becomes U+FFFD, one per maximal subpart; a leading BOM is kept), and
// that is what ours does to bytes (text/hf_tokenizer.h). Ours decodes a token sequence to bytes;
// the reference to a string, which is compared as its UTF-8.
'use strict';
const fs = require('fs');
const path = require('path');

const npmDir = process.env.ATTOGRAD_NPM || path.join(process.env.HOME || '', '.cache', 'attograd', 'npm');
const need = (name) => require(require.resolve(name, { paths: [path.join(npmDir, 'node_modules'), ...module.paths] }));

function generator(seed) {  // xorshift64*, as gpt2_reference.js: the same cases on every run
  let s = BigInt(seed) || 1n;
  const mask = (1n << 64n) - 1n;
  return () => {
    s ^= s >> 12n; s ^= (s << 25n) & mask; s ^= s >> 27n;
    return Number(((s * 2685821657736338717n) & mask) >> 33n);
  };
}

function hfCases() {
  const s = (text) => Buffer.from(text, 'utf8');
  const cases = [
    ['llama 3 specials', s('<|begin_of_text|>Hello<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi!<|reserved_special_token_7|>')],
    ['qwen chat', s('<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\n你好<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHi')],
    ['specials back to back and broken', s('<|im_end|><|im_end|><|endoftext|><|end_of_text|> <|im_end| <|im_star|> <think></think><tool_call>')],
    ['specials inside words', s('abc<|im_start|>def<|begin_of_text|>123<|endoftext|>\u00e9')],
    ['NFC: combining marks', s('e\u0301 A\u030a o\u0308\u0304 \u1100\u1161\u11a8 \u212b \u0344 \u1e9b\u0323 \u00c5 ê\u0301')],
    ['NFC: already composed', s('é Å ö 각 Ω')],
    ['NFC: a mark after a special', s('<|im_end|>\u0338 <|endoftext|>\u0301x')],
    ['digit runs', s('1 12 123 1234 12345 1234567890 3.14159265 ١٢٣٤٥ 一二三 ⅷⅸ 2²³')],
    ['contractions in case', s("I'M YOU'LL WE'D THEY'RE it'S 'Ve 'LL 'dD")],
    ['letters after punctuation', s('$hello #world @you (x) "quoted" -dash _under ¿qué? ¡sí!')],
    ['newlines after punctuation', s('end.\n\nNext!!!\r\n\r\n...\n \n\t\nx')],
    ['spaces before newlines', s('a   \n   b \t \r\n c\n\n\n   ')],
    ['long space run', s(' '.repeat(300) + 'x' + '\n'.repeat(100))],
    ['emoji and joiners', s('👩‍💻 🏳️‍🌈 ❤️‍🔥 1️⃣ 🇯🇵🇰🇷')],
    ['mixed scripts', s('Hello世界Привет مرحبا नमस्ते สวัสดี ሰላም')],
    ['BOM and zero widths', s('\ufeffstart \u200b\u200c\u200d end\ufeff')],
  ];
  // Random strings from pieces these tokenizers treat specially, glued at random.
  const next = generator(20250601);
  const pool = ['<|begin_of_text|>', '<|eot_id|>', '<|im_start|>', '<|im_end|>', '<|endoftext|>', '<think>', '</think>',
    '<|', '|>', 'a', 'The', ' ', '   ', '\n', '\r\n', '\t', "'s", "'LL", '1', '123', '4567', '.', '!?', 'e', '\u0301',
    '\u0308', 'é', '中文', '😀', '\u00a0', '\u3000', 'Ж', '\u1100', '\u1161']
    .map((p) => Buffer.from(p, 'utf8'));
  for (let i = 0; i < 3000; ++i) {
    const parts = [];
    const length = next() % 30;
    for (let k = 0; k < length; ++k) {
      parts.push(next() % 10 === 0 ? Buffer.from([0x80 + (next() % 128)]) : pool[next() % pool.length]);
    }
    cases.push([`hf random ${i}`, Buffer.concat(parts)]);
  }
  return cases;
}

function writeCases(out) {
  const chunks = [];
  for (const [name, bytes] of hfCases()) chunks.push(Buffer.from(`${name}\n${bytes.length}\n`), bytes, Buffer.from('\n'));
  fs.writeFileSync(out, Buffer.concat(chunks));
}

function readCases(file) {
  const data = fs.readFileSync(file);
  const cases = [];
  for (let pos = 0; pos < data.length;) {
    const nameEnd = data.indexOf(10, pos);
    const sizeEnd = data.indexOf(10, nameEnd + 1);
    const size = Number(data.subarray(nameEnd + 1, sizeEnd).toString());
    cases.push([data.subarray(pos, nameEnd).toString(), data.subarray(sizeEnd + 1, sizeEnd + 1 + size)]);
    pos = sizeEnd + 1 + size + 1;
  }
  return cases;
}

function gpt2File(oursFile, outFile) {
  const j = JSON.parse(fs.readFileSync(oursFile, 'utf8'));
  j.model.merges = j.model.merges.map(([a, b]) => `${a} ${b}`);
  j.pre_tokenizer = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true };
  for (const t of j.added_tokens) j.model.vocab[t.content] = t.id, t.normalized = true;
  fs.writeFileSync(outFile, JSON.stringify(j));
}

function load(file) {
  const { TokenizerLoader } = need('@lenml/tokenizers');
  return TokenizerLoader.fromPreTrained({ tokenizerJSON: JSON.parse(fs.readFileSync(file, 'utf8')), tokenizerConfig: {} });
}

function compare(tokenizerFile, casesFile, idsFile, decodedFile, withTiktoken) {
  const tok = load(tokenizerFile);
  const hasNormalizer = JSON.parse(fs.readFileSync(tokenizerFile, 'utf8')).normalizer !== null;
  const wasm = withTiktoken ? need('tiktoken').get_encoding('gpt2') : null;
  const asString = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });
  const strict = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  const cases = readCases(casesFile);
  const ours = fs.readFileSync(idsFile, 'utf8').split('\n');
  const decoded = readCases(decodedFile);
  if (ours.length < cases.length || decoded.length !== cases.length) {
    throw new Error(`${idsFile} has ${ours.length} lines and ${decodedFile} ${decoded.length} cases for ${cases.length} cases`);
  }
  let failed = 0, same = 0, tokens = 0, exact = 0, tiktokenSame = 0, valid = 0;
  const report = (what) => { if (++failed <= 10) console.log(what); };
  const startedAt = Date.now();
  cases.forEach(([name, bytes], i) => {
    const text = asString.decode(bytes);
    const ids = tok.encode(text, { add_special_tokens: false });
    const want = ids.join(' ');
    tokens += ids.length;
    if (ours[i] === want) ++same;
    else report(`MISMATCH: case "${name}"\n  reference: ${want.slice(0, 300)}\n  ours:      ${ours[i].slice(0, 300)}`);
    // Decoding: the reference's string of its ids, as UTF-8, is our bytes; without a
    // normalizer (or where it changes nothing) that is the text itself, byte for byte.
    const ourBytes = decoded[i][1];
    const refText = ids.length === 0 ? '' : tok.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false });
    if (!Buffer.from(refText, 'utf8').equals(ourBytes)) report(`DECODE MISMATCH with the reference: case "${name}"`);
    if (!hasNormalizer || text.normalize('NFC') === text) {
      if (Buffer.from(text, 'utf8').equals(ourBytes)) ++exact;
      else report(`DECODE MISMATCH: case "${name}" does not decode to its text`);
    }
    if (wasm) {
      let isValid = true;
      try { strict.decode(bytes); } catch { isValid = false; }
      if (isValid) {
        ++valid;
        if (Array.from(wasm.encode(text, 'all')).join(' ') === ours[i]) ++tiktokenSame;
        else report(`MISMATCH with tiktoken: case "${name}"`);
      }
    }
  });
  const seconds = (Date.now() - startedAt) / 1000;
  console.log(`${tokenizerFile.split('/').slice(-3).join('/')}: ${same} of ${cases.length} cases ` +
              `identical (${tokens} tokens), ${exact} decoding to their exact bytes` +
              (wasm ? `, ${tiktokenSame} of ${valid} valid UTF-8 cases as tiktoken's` : '') + ` (reference ${seconds.toFixed(1)} s)`);
  return failed === 0 ? 0 : 1;
}

const [mode, ...rest] = process.argv.slice(2);
if (mode === 'cases') {
  writeCases(rest[0]);
} else if (mode === 'gpt2-file') {
  gpt2File(rest[0], rest[1]);
} else if (mode === 'compare') {
  try {
    process.exitCode = compare(rest[0], rest[1], rest[2], rest[3], rest[4] === '--tiktoken');
  } catch (e) {  // the package is minified: its source line would fill the screen
    console.error(`hf_reference: ${e.message}`);
    process.exitCode = 1;
  }
} else {
  console.error('usage: node hf_reference.js cases OUT | gpt2-file OURS.json OUT.json | compare TOKENIZER.json CASES IDS DECODED [--tiktoken]');
  process.exitCode = 2;
}
