// A naive reference for train_bpe, written for the test and sharing no code with it: JavaScript's
// own regular expressions for GPT-2's pattern, and every pair counted again from scratch before
// each merge (no index, no heap, no incremental update).
//
//   node bpe_train_reference.js corpus OUT BYTES FILE...   the first BYTES of the FILEs (whole
//                                                          lines, valid UTF-8) as one text
//   node bpe_train_reference.js compare CORPUS VOCAB OURS  trains VOCAB tokens on CORPUS and
//                                                          compares the merges with OURS (a file
//                                                          written by train_bpe)
//
// The rule (docs/tokenizers.md): the chunks of the text are counted; each step merges the
// adjacent pair with the highest count over all chunks, ties going to the smallest left id, then
// the smallest right id; the merged token is id 256 + step; bytes are ids 0..255 by value.
'use strict';
const fs = require('fs');

const GPT2_PATTERN = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;

function writeCorpus(out, bytes, files) {
  let text = '';
  for (const f of files) {
    text += fs.readFileSync(f, 'utf8');
    if (Buffer.byteLength(text) >= bytes) break;
  }
  let cut = Buffer.from(text).subarray(0, bytes);
  cut = cut.subarray(0, cut.lastIndexOf(10) + 1);  // whole lines, so no character is split
  new TextDecoder('utf-8', { fatal: true }).decode(cut);  // throws unless valid UTF-8
  fs.writeFileSync(out, cut);
  console.log(`bpe_train_reference: ${cut.length} bytes of text in ${out}`);
}

function train(text, vocab) {
  const chunkCounts = new Map();
  for (const [chunk] of text.matchAll(GPT2_PATTERN)) chunkCounts.set(chunk, (chunkCounts.get(chunk) || 0) + 1);
  const words = [...chunkCounts].map(([chunk, count]) => ({ ids: Array.from(Buffer.from(chunk, 'utf8')), count }));
  const merges = [];
  while (256 + merges.length < vocab) {
    const counts = new Map();
    for (const { ids, count } of words) {
      for (let i = 0; i + 1 < ids.length; ++i) {
        const key = ids[i] * 1048576 + ids[i + 1];
        counts.set(key, (counts.get(key) || 0) + count);
      }
    }
    let best = -1, bestCount = 0;
    for (const [key, count] of counts) {
      if (count > bestCount || (count === bestCount && key < best)) best = key, bestCount = count;
    }
    if (best < 0) break;
    const left = Math.floor(best / 1048576), right = best % 1048576, merged = 256 + merges.length;
    merges.push([left, right]);
    for (const w of words) {
      const out = [];
      for (let i = 0; i < w.ids.length; ++i) {
        if (i + 1 < w.ids.length && w.ids[i] === left && w.ids[i + 1] === right) {
          out.push(merged);
          ++i;
        } else {
          out.push(w.ids[i]);
        }
      }
      w.ids = out;
    }
  }
  return merges;
}

function compare(corpus, vocab, oursFile) {
  const ours = JSON.parse(fs.readFileSync(oursFile, 'utf8'));
  const want = train(fs.readFileSync(corpus, 'utf8'), vocab);
  const got = ours.merges;
  let same = 0;
  while (same < want.length && same < got.length && want[same][0] === got[same][0] && want[same][1] === got[same][1]) ++same;
  console.log(`bpe_train_reference: ${want.length} reference merges, ${got.length} in ${oursFile}, the first ${same} identical`);
  if (same === want.length && same === got.length) return 0;
  console.log(`  first difference at merge ${same}: reference ${JSON.stringify(want[same])}, ours ${JSON.stringify(got[same])}`);
  return 1;
}

const [mode, ...rest] = process.argv.slice(2);
if (mode === 'corpus') {
  writeCorpus(rest[0], Number(rest[1]), rest.slice(2));
} else if (mode === 'compare') {
  process.exitCode = compare(rest[0], Number(rest[1]), rest[2]);
} else {
  console.error('usage: node bpe_train_reference.js corpus OUT BYTES FILE... | compare CORPUS VOCAB OURS');
  process.exitCode = 2;
}
