// The reference for GPT-2's tokenizer: the npm packages tiktoken (OpenAI's Rust core compiled to
// WebAssembly) and js-tiktoken (a pure JavaScript port), run on the same cases as our encoder.
//
//   node gpt2_reference.js cases OUT.cases [FILE...]   the hand-picked hard cases, 10,000 random
//                                                      byte strings and every FILE, as one file
//   node gpt2_reference.js compare CASES OURS          our ids (bpe_cases: one line of ids per
//                                                      case) against both references
//
// A cases file is a sequence of records: a name line, the byte count as a decimal line, the bytes
// and a newline. NODE_PATH (or ATTOGRAD_NPM) must name the node_modules that hold both packages.
//
// Both packages take JavaScript strings, so neither can be given bytes that are not UTF-8. For a
// case holding such bytes the reference is built from the rule bpe.h states: the text is cut at
// each special token and at each run of invalid bytes; the valid pieces go to the package as
// strings; each invalid run is merged on its own by the naive rule, repeatedly joining the
// adjacent pair whose joined bytes have the lowest rank in tiktoken's table (its ids are its
// ranks), until no join is a token. That loop is written here, independently of ours.
'use strict';
const fs = require('fs');
const path = require('path');

const npmDir = process.env.ATTOGRAD_NPM || path.join(process.env.HOME || '', '.cache', 'attograd', 'npm');
const need = (name) => require(require.resolve(name, { paths: [path.join(npmDir, 'node_modules'), ...module.paths] }));

const END_OF_TEXT = Buffer.from('<|endoftext|>');

// ---- cases ------------------------------------------------------------------------------------

// A small seeded generator (xorshift64*), so the random cases are the same on every run.
function generator(seed) {
  let s = BigInt(seed) || 1n;
  const mask = (1n << 64n) - 1n;
  return () => {
    s ^= s >> 12n; s ^= (s << 25n) & mask; s ^= s >> 27n;
    return Number(((s * 2685821657736338717n) & mask) >> 33n);  // 31 random bits
  };
}

function hardCases() {
  const b = (...xs) => Buffer.from(xs);
  const s = (text) => Buffer.from(text, 'utf8');
  return [
    ['empty', s('')],
    ['contractions', s("I'm sure it's what we'd've done: they're, you'll, he's, I've, don't")],
    ['upper-case contractions', s("IT'S WE'D THEY'RE YOU'LL I'M I'VE DON'T 'S 'T")],
    ['apostrophes alone', s("' '' ''' 's's 'ss rock'n'roll")],
    ['digits', s('0 1 12 123 1234 12345 3.14159 1,000,000 2024-01-01 x1y2z3 ١٢٣ ⅷ')],
    ['runs of spaces', s('a  b   c    d     e      f')],
    ['runs of newlines', s('a\n\nb\n\n\nc\r\n\r\nd\n \n \ne')],
    ['trailing spaces', s('trailing spaces   ')],
    ['trailing newlines', s('line\n\n\n')],
    ['leading spaces', s('   leading')],
    ['only spaces', s('     ')],
    ['tabs and mixed whitespace', s('a\tb\t\tc \t d\u000b\u000ce')],
    ['unicode spaces', s('a\u00a0b\u2003c\u3000d\u2028e\u2029f\u0085g\ufeffh\u200bi')],
    ['emoji', s('I ❤️ 🦀 and 👩‍👩‍👧‍👦 and 🇩🇪 and 👍🏽!')],
    ['CJK', s('你好，世界。日本語のテキスト、한국어 텍스트')],
    ['combining marks', s('e\u0301 n\u0303 a\u030a\u0323 Zalgo: Z\u0336\u0351a\u0335l\u0334g\u0337o\u0338')],
    ['accents and Greek', s('naïve café résumé Ελληνικά Кириллица')],
    ['punctuation runs', s('Wait... what?!?! --- (yes) [no] {maybe} <html> "quoted" `code` @#$%^&*')],
    ['code', s('for (int i = 0; i < n; ++i) {\n    x += y[i];\n}\n')],
    ['endoftext inside text', s('before<|endoftext|>after <|endoftext|> <|endoftext|><|endoftext|>end')],
    ['endoftext fragments', s('<|endoftext| <|endoftext <|endoftext|>|> <|endo')],
    ['endoftext alone', s('<|endoftext|>')],
    ['invalid: lone continuation bytes', b(0x80, 0x81, 0xbf, 0x41)],
    ['invalid: truncated sequences', Buffer.concat([s('ab'), b(0xe2, 0x82), s(' cd'), b(0xf0, 0x9f, 0x98)])],
    ['invalid: overlong and surrogates', Buffer.concat([b(0xc0, 0xaf), s(' x '), b(0xed, 0xa0, 0x80), s('y'), b(0xe0, 0x80, 0xaf)])],
    ['invalid: above U+10FFFF', Buffer.concat([b(0xf4, 0x90, 0x80, 0x80), s(' z'), b(0xf5, 0xff, 0xfe)])],
    ['invalid: between spaces', Buffer.concat([s('a   '), b(0xff), s('   b  '), b(0xfe), s('\n\n')])],
    ['invalid: next to endoftext', Buffer.concat([b(0xff), s('<|endoftext|>'), b(0xc3), s('<|endoftext|>x')])],
    ['all 256 bytes', Buffer.from(Array.from({ length: 256 }, (_, i) => i))],
    ['NUL and controls', b(0, 1, 2, 0x1b, 0x5b, 0x33, 0x31, 0x6d, 0x7f, 0x0a, 0)],
  ];
}

// Random byte strings: half uniform bytes (mostly invalid UTF-8), half pieces drawn from a pool
// of what makes pre-tokenisation interesting, glued at random.
function randomCases(count) {
  const next = generator(20240229);
  const pool = ['a', 'Z', 'the', ' ', '  ', '\n', '\n\n', '\t', "'s", "'S", "'ll", "'", '1', '42', '.', '!?', ',',
    'é', 'ß', 'Ж', '中', '文', '😀', '👍🏽', '\u0301', '\u00a0', '\u3000', '<|endoftext|>', '<|', '|>', '\r\n', '٣']
    .map((p) => Buffer.from(p, 'utf8'));
  const cases = [];
  for (let i = 0; i < count; ++i) {
    const parts = [];
    const length = next() % 40;
    if (i % 2 === 0) {
      parts.push(Buffer.from(Array.from({ length }, () => next() % 256)));
    } else {
      for (let k = 0; k < length; ++k) {
        parts.push(next() % 8 === 0 ? Buffer.from([0x80 + (next() % 128)]) : pool[next() % pool.length]);
      }
    }
    cases.push([`random ${i}`, Buffer.concat(parts)]);
  }
  return cases;
}

function writeCases(out, files) {
  const cases = [...hardCases(), ...randomCases(10000)];
  for (const f of files) cases.push([f, fs.readFileSync(f)]);
  const chunks = [];
  for (const [name, bytes] of cases) {
    chunks.push(Buffer.from(`${name}\n${bytes.length}\n`), bytes, Buffer.from('\n'));
  }
  fs.writeFileSync(out, Buffer.concat(chunks));
  console.log(`gpt2_reference: ${cases.length} cases (${files.length} files) in ${out}`);
}

function readCases(file) {
  const data = fs.readFileSync(file);
  const cases = [];
  for (let pos = 0; pos < data.length;) {
    const nameEnd = data.indexOf(10, pos);
    const sizeEnd = data.indexOf(10, nameEnd + 1);
    const name = data.subarray(pos, nameEnd).toString();
    const size = Number(data.subarray(nameEnd + 1, sizeEnd).toString());
    cases.push([name, data.subarray(sizeEnd + 1, sizeEnd + 1 + size)]);
    pos = sizeEnd + 1 + size + 1;
  }
  return cases;
}

// ---- the reference ids ------------------------------------------------------------------------

const strict = new TextDecoder('utf-8', { fatal: true });

// The length of the valid UTF-8 character at bytes[pos], or 0, as the platform's strict decoder
// judges it.
function charLength(bytes, pos) {
  const lead = bytes[pos];
  const want = lead < 0x80 ? 1 : lead >= 0xc2 && lead < 0xe0 ? 2 : lead >= 0xe0 && lead < 0xf0 ? 3 : lead >= 0xf0 && lead < 0xf5 ? 4 : 0;
  if (want === 0 || pos + want > bytes.length) return 0;
  try {
    strict.decode(bytes.subarray(pos, pos + want));
    return want;
  } catch {
    return 0;
  }
}

// [valid, bytes] runs covering `bytes`.
function utf8Runs(bytes) {
  const runs = [];
  let start = 0, valid = null;
  for (let pos = 0; pos < bytes.length;) {
    const n = charLength(bytes, pos);
    const isValid = n > 0;
    if (valid !== null && isValid !== valid) {
      runs.push([valid, bytes.subarray(start, pos)]);
      start = pos;
    }
    valid = isValid;
    pos += isValid ? n : 1;
  }
  if (valid !== null) runs.push([valid, bytes.subarray(start)]);
  return runs;
}

// tiktoken's rank table, bytes (as hex) -> rank, read token by token from the package (its
// encode_single_token throws for a non-token, and a WebAssembly instance that threw many times
// refuses further calls).
function rankTable(enc) {
  const ranks = new Map();
  for (let id = 0; id < 50256; ++id) ranks.set(Buffer.from(enc.decode_single_token_bytes(id)).toString('hex'), id);
  return ranks;
}

// The naive byte-pair rule on raw bytes, with tiktoken's ranks.
function mergeBytes(ranks, bytes) {
  const rank = (b) => ranks.get(b.toString('hex')) ?? Infinity;
  let parts = Array.from(bytes, (x) => Buffer.from([x]));
  for (;;) {
    let best = Infinity, at = -1;
    for (let i = 0; i + 1 < parts.length; ++i) {
      const r = rank(Buffer.concat([parts[i], parts[i + 1]]));
      if (r < best) best = r, at = i;
    }
    if (at < 0) break;
    parts = [...parts.slice(0, at), Buffer.concat([parts[at], parts[at + 1]]), ...parts.slice(at + 2)];
  }
  return parts.map((p) => rank(p));
}

// The ids of `bytes` by `encodeText` (a package's encode of a string, specials allowed), with
// invalid bytes handled as described at the top.
function referenceIds(bytes, encodeText, ranks) {
  if (utf8Runs(bytes).every(([valid]) => valid)) return encodeText(bytes.toString('utf8'));
  const ids = [];
  let pos = 0;
  for (;;) {
    const at = bytes.indexOf(END_OF_TEXT, pos);
    const piece = bytes.subarray(pos, at < 0 ? bytes.length : at);
    for (const [valid, run] of utf8Runs(piece)) {
      ids.push(...(valid ? encodeText(run.toString('utf8')) : mergeBytes(ranks, run)));
    }
    if (at < 0) break;
    ids.push(50256);
    pos = at + END_OF_TEXT.length;
  }
  return ids;
}

function compare(casesFile, oursFile) {
  const { get_encoding } = need('tiktoken');
  const { getEncoding } = need('js-tiktoken');
  const wasm = get_encoding('gpt2');
  const js = getEncoding('gpt2');
  const ranks = rankTable(wasm);
  const references = [
    ['tiktoken', (text) => Array.from(wasm.encode(text, 'all'))],
    ['js-tiktoken', (text) => js.encode(text, 'all')],
  ];
  const cases = readCases(casesFile);
  const ours = fs.readFileSync(oursFile, 'utf8').split('\n');
  if (ours.length < cases.length) throw new Error(`${oursFile} has ${ours.length} lines for ${cases.length} cases`);
  let failed = 0;
  for (const [label, encodeText] of references) {
    let same = 0, tokens = 0, bytes = 0;
    cases.forEach(([name, caseBytes], i) => {
      const want = referenceIds(caseBytes, encodeText, ranks).join(' ');
      tokens += want ? want.split(' ').length : 0;
      bytes += caseBytes.length;
      if (ours[i] === want) return ++same;
      ++failed;
      if (failed <= 10) {
        console.log(`MISMATCH with ${label}: case "${name}"\n  ${label}: ${want.slice(0, 400)}\n  ours:     ${ours[i].slice(0, 400)}`);
      }
    });
    console.log(`${label}: ${same} of ${cases.length} cases identical (${bytes} bytes, ${tokens} tokens)`);
  }
  return failed === 0 ? 0 : 1;
}

const [mode, ...rest] = process.argv.slice(2);
if (mode === 'cases') {
  writeCases(rest[0], rest.slice(1));
} else if (mode === 'compare') {
  process.exitCode = compare(rest[0], rest[1]);
} else {
  console.error('usage: node gpt2_reference.js cases OUT.cases [FILE...] | compare CASES OURS');
  process.exitCode = 2;
}
