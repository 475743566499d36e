#!/usr/bin/python3
# Crafts hostile variants of a real train_sequence checkpoint for tests/hostile/sweep.sh.
#
#   craft.py CHECKPOINT OUTDIR     writes OUTDIR/<name>.safetensors and OUTDIR/manifest.tsv
#
# manifest.tsv has one line per variant: name, expectation, words, description (tab-separated).
#   expectation  fail   exit 1 with one stderr line naming the file and every word
#                ok     a valid checkpoint: the resume must succeed
#                either fast success or a clear error (the point is: no hang, no crash)
#                note   documented behaviour worth seeing in the report; success is expected
#   words        '|'-separated strings the error line must hold besides the path ("-" for none)
#
# Variants that change tensor bytes on purpose to reach a VALUE check (NaN weight, negative
# exp_avg_sq, ...) recompute that tensor's CRC-32C, and variants that change metadata recompute
# the metadata values' checksums (the "__metadata__" member of the crc32c entry), so that the
# check under test, not the checksum, is what rejects them.
# Only the standard library is used (json, struct), so /usr/bin/python3 suffices.
import json
import math
import os
import random
import re
import struct
import sys

from crc32c import crc32c  # noqa: E402  (tests/hostile/crc32c.py, beside this file)

# ---------------------------------------------------------------- reading and assembling
src, outdir = sys.argv[1], sys.argv[2]
os.makedirs(outdir, exist_ok=True)
RAW = open(src, "rb").read()
HLEN = struct.unpack("<Q", RAW[:8])[0]
HEADER_TEXT = RAW[8:8 + HLEN]
HEADER = json.loads(HEADER_TEXT)
DATA = RAW[8 + HLEN:]
META = dict(HEADER["__metadata__"])


def base_entries():
    """[name, dtype, shape, bytes] in data order."""
    out = []
    for name, info in HEADER.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        out.append([name, info["dtype"], list(info["shape"]), bytearray(DATA[b:e])])
    out.sort(key=lambda t: HEADER[t[0]]["data_offsets"][0])
    return out


def header_bytes(header_obj):
    text = json.dumps(header_obj, separators=(",", ":")).encode()
    while (8 + len(text)) % 8:
        text += b" "
    return text


def assemble(meta, entries, checksums="recompute", extra_crc=None, metadata_sums=True):
    """A file with offsets back to back. checksums: "recompute" every tensor's CRC-32C (a
    consistent file), "keep" the crc32c string in `meta` as it is, or "none" (drop it).
    metadata_sums=False leaves out the metadata values' checksums (as files written before them)."""
    meta = dict(meta)
    if checksums != "keep":
        meta.pop("crc32c", None)
    header = {}
    sums = {}
    off = 0
    for name, dtype, shape, data in entries:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
        sums[name] = "%08x" % crc32c(bytes(data))
    if extra_crc:
        sums.update(extra_crc)
    # The metadata values' checksums, as the writer stores them since they were introduced.
    if metadata_sums:
        sums["__metadata__"] = {k: "%08x" % crc32c(v.encode()) for k, v in sorted(meta.items()) if isinstance(v, str)}
    if checksums == "recompute":
        meta["crc32c"] = json.dumps(sums, separators=(",", ":"))
    doc = {"__metadata__": meta}
    doc.update(header)
    text = header_bytes(doc)
    return struct.pack("<Q", len(text)) + text + b"".join(bytes(e[3]) for e in entries)


def find(entries, name):
    for e in entries:
        if e[0] == name:
            return e
    raise KeyError(name)


def set_f32(entries, name, index, value):
    e = find(entries, name)
    struct.pack_into("<f", e[3], 4 * index, value)


def set_i64(entries, name, value):
    e = find(entries, name)
    struct.pack_into("<q", e[3], 0, value)


def meta_json(key, **changes):
    """META with the JSON string under `key` changed."""
    m = dict(META)
    obj = json.loads(m[key])
    for k, v in changes.items():
        if v is _DROP:
            obj.pop(k, None)
        else:
            obj[k] = v
    m[key] = json.dumps(obj, separators=(",", ":"))
    return m


_DROP = object()
MANIFEST = []


def emit(name, expect, words, desc, content):
    with open(os.path.join(outdir, name + ".safetensors"), "wb") as f:
        f.write(content)
    MANIFEST.append((name, expect, words or "-", desc))


def flip(raw, pos):
    b = bytearray(raw)
    b[pos] ^= 0x5A
    return bytes(b)


def data_pos(name, within=0):
    """Absolute file offset of byte `within` of tensor `name` in RAW."""
    return 8 + HLEN + HEADER[name]["data_offsets"][0] + within


rng = random.Random(20261124)
W1 = "encoder.blocks.0.ff.linear1.weight"

# ---------------------------------------------------------------- baselines
emit("base", "ok", "", "the real checkpoint, unchanged (baseline: must resume)", RAW)
emit("reassembled", "ok", "", "the checkpoint re-serialised by this script (checks the crafting itself)",
     assemble(META, base_entries()))

# ---------------------------------------------------------------- truncation
n = len(RAW)
for cut, what in [(4, "inside the length prefix"), (8, "right after the length prefix"),
                  (9, "one byte into the header"), (8 + HLEN // 2, "half of the header"),
                  (8 + HLEN - 1, "one byte short of the header"), (8 + HLEN, "header only, no data"),
                  (8 + HLEN + 100, "100 bytes of data"), (n // 2, "half of the file"), (n - 1, "one byte short")]:
    emit("trunc-%d" % cut, "fail", "truncated", "truncated to %d of %d bytes (%s)" % (cut, n, what), RAW[:cut])

# ---------------------------------------------------------------- not a safetensors file at all
emit("random-1m", "fail", "", "1 MiB of random bytes", rng.randbytes(1 << 20))
emit("random-small-header", "fail", "JSON", "length prefix 100, then random bytes",
     struct.pack("<Q", 100) + rng.randbytes(4096))
emit("text-file", "fail", "", "a text file (README-like)", b"# notes\nthis is not a checkpoint\n" * 40)
emit("json-file", "fail", "", "a JSON document, not safetensors", b'{"model": "reverse", "steps": 20}\n')
emit("zeros-4k", "fail", "", "4096 zero bytes (header length 0)", bytes(4096))

# ---------------------------------------------------------------- wrong length prefix
for delta, what in [(1, "+1"), (-1, "-1"), (8, "+8"), (-8, "-8")]:
    emit("hlen%+d" % delta, "fail", "", "header length prefix %s, rest unchanged" % what,
         struct.pack("<Q", HLEN + delta) + RAW[8:])
emit("hlen-0", "fail", "JSON", "header length prefix 0", struct.pack("<Q", 0) + RAW[8:])
emit("hlen-max", "fail", "", "header length prefix 2^64-1", struct.pack("<Q", 2**64 - 1) + RAW[8:])
emit("hlen-2p63", "fail", "", "header length prefix 2^63", struct.pack("<Q", 2**63) + RAW[8:])

# ---------------------------------------------------------------- hostile headers
def small_file(header_obj, data=b""):
    text = header_bytes(header_obj)
    return struct.pack("<Q", len(text)) + text + data


small_meta = {"format": "attograd-checkpoint", "format_version": "2", "crc32c": "{}"}
emit("huge-tensor", "fail", "embed.weight", "1 KB file whose header claims a 2^30 x 2^30 F32 tensor",
     small_file({"__metadata__": small_meta,
                 "embed.weight": {"dtype": "F32", "shape": [2**30, 2**30], "data_offsets": [0, 2**62]}}, bytes(8)))
emit("shape-overflow-0", "fail", "embed.weight", "shape 2^32 x 2^32 (the byte count wraps to 0) with data_offsets [0, 0]",
     small_file({"__metadata__": small_meta,
                 "embed.weight": {"dtype": "F32", "shape": [2**32, 2**32], "data_offsets": [0, 0]}}))
emit("shape-overflow-4", "fail", "embed.weight",
     "shape 2^62+1 x 4 (4 bytes x elements wraps to 16) with data_offsets [0, 16]",
     small_file({"__metadata__": small_meta,
                 "embed.weight": {"dtype": "F32", "shape": [2**62 + 1, 4], "data_offsets": [0, 16]}}, bytes(16)))
emit("shape-negative", "fail", "embed.weight", "shape [-1, 4]",
     small_file({"__metadata__": small_meta,
                 "embed.weight": {"dtype": "F32", "shape": [-1, 4], "data_offsets": [0, 16]}}, bytes(16)))
emit("shape-float", "fail", "embed.weight", "shape [2.5, 4]",
     small_file({"__metadata__": small_meta,
                 "embed.weight": {"dtype": "F32", "shape": [2.5, 4], "data_offsets": [0, 40]}}, bytes(40)))
emit("offsets-reversed", "fail", "embed.weight", "data_offsets [16, 0]",
     small_file({"__metadata__": small_meta,
                 "embed.weight": {"dtype": "F32", "shape": [4], "data_offsets": [16, 0]}}, bytes(16)))
emit("offsets-negative", "fail", "embed.weight", "data_offsets [-16, 0]",
     small_file({"__metadata__": small_meta,
                 "embed.weight": {"dtype": "F32", "shape": [4], "data_offsets": [-16, 0]}}, bytes(16)))
emit("offsets-overlap", "fail", "overlaps", "two tensors sharing bytes",
     small_file({"__metadata__": small_meta,
                 "a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                 "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}}, bytes(24)))
emit("offsets-hole", "fail", "", "a hole between two tensors",
     small_file({"__metadata__": small_meta,
                 "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                 "b": {"dtype": "F32", "shape": [2], "data_offsets": [16, 24]}}, bytes(24)))
emit("dtype-f16", "fail", "embed.weight", "a tensor of dtype F16 (read widened) of another shape",
     small_file({"__metadata__": small_meta,
                 "embed.weight": {"dtype": "F16", "shape": [4], "data_offsets": [0, 8]}}, bytes(8)))
emit("dtype-missing", "fail", "embed.weight", "a tensor entry without dtype",
     small_file({"__metadata__": small_meta,
                 "embed.weight": {"shape": [4], "data_offsets": [0, 16]}}, bytes(16)))
emit("entry-not-object", "fail", "embed.weight", "a tensor entry that is a string",
     small_file({"__metadata__": small_meta, "embed.weight": "F32"}))
for kind, text in [("array", b"[]"), ("string", b'"checkpoint"'), ("null", b"null"), ("number", b"12345678")]:
    emit("header-" + kind, "fail", "not an object", "the header is JSON %s" % kind,
         struct.pack("<Q", len(text)) + text)
deep = b"[" * 200000 + b"]" * 200000
emit("deep-array", "fail", "", "header of 200k nested arrays (stack exhaustion)", struct.pack("<Q", len(deep)) + deep)
deep_obj = b'{"__metadata__":{"x":' + b'{"a":' * 100000 + b"1" + b"}" * 100000 + b"}}"
emit("deep-object", "fail", "", "__metadata__ value nested 100k objects deep",
     struct.pack("<Q", len(deep_obj)) + deep_obj)
bad_utf8 = b'{"\xff\xfe":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'
emit("bad-utf8-key", "fail", "", "a tensor name that is not UTF-8", struct.pack("<Q", len(bad_utf8)) + bad_utf8 + bytes(4))
garbage = HEADER_TEXT.rstrip(b" ") + b"garbage"
garbage += b" " * ((8 - (8 + len(garbage)) % 8) % 8)
emit("header-trailing-garbage", "fail", "JSON", "valid header JSON followed by 'garbage'",
     struct.pack("<Q", len(garbage)) + garbage + DATA)
nul = bytearray(HEADER_TEXT)
nul[len(nul) // 2] = 0
emit("header-nul", "fail", "JSON", "a NUL byte in the middle of the header", struct.pack("<Q", HLEN) + bytes(nul) + DATA)
dup = HEADER_TEXT.rstrip(b" ")
assert dup.endswith(b"}")
dup = dup[:-1] + b',"head.bias":{"dtype":"F32","shape":[16],"data_offsets":[0,64]}}'
dup += b" " * ((8 - (8 + len(dup)) % 8) % 8)
emit("duplicate-tensor", "fail", "duplicate", "the tensor 'head.bias' listed twice in the header",
     struct.pack("<Q", len(dup)) + dup + DATA)

# 200k metadata keys: an otherwise valid file (extra metadata is allowed), and one with a repeat.
many = dict(META)
for i in range(200000):
    many["k%06d" % i] = "v"
emit("meta-200k-keys", "either", "", "200k extra __metadata__ keys, otherwise valid (must not hang)",
     assemble(many, base_entries()))
text = json.dumps({"__metadata__": many}, separators=(",", ":"))
text = text[:-2] + ',"k000000":"again"}}'
emit("meta-200k-dup", "fail", "duplicate", "200k __metadata__ keys, the first one repeated at the end",
     struct.pack("<Q", len(text)) + text.encode())

# 150k tensor entries that are objects (the shape that reached the JSON library's slow path).
# Without data they are more than the data section can hold, refused by their count; with one
# F32 each (600 KB of data) the whole header is read, and the checkpoint refused by name.
empty_entries = ",".join('"t%06d":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}' % i for i in range(150000))
emit("entries-150k-empty", "fail", "150000 tensors", "150k empty tensor entries (objects), no data section",
     small_file(json.loads("{" + empty_entries + "}")))
emit("entries-150k-f32", "fail", "missing tensor", "150k tensor entries of one F32 each, otherwise the checkpoint's metadata",
     assemble(META, [["t%06d" % i, "F32", [1], bytearray(4)] for i in range(150000)]))

# ---------------------------------------------------------------- bytes changed after writing (checksum)
emit("flip-data-first", "fail", "embed.weight", "one byte flipped: the first byte of the data section",
     flip(RAW, data_pos("embed.weight")))
emit("flip-data-mid", "fail", W1, "one byte flipped in the middle of %s" % W1,
     flip(RAW, data_pos(W1, 20001)))
emit("flip-opt-step", "fail", "optimizer/head.weight/step", "one byte flipped in an Adam step counter",
     flip(RAW, data_pos("optimizer/head.weight/step", 0)))
emit("flip-data-last", "fail", "optimizer/head.bias/exp_avg_sq", "the last byte of the file flipped",
     flip(RAW, len(RAW) - 1))
old_sum = json.loads(META["crc32c"])["embed.weight"]
new_sum = ("0" if old_sum[0] != "0" else "1") + old_sum[1:]
# In the file the checksums are a JSON string inside the header: \"embed.weight\":\"<hex>\".
needle = ('embed.weight\\":\\"' + old_sum).encode()
assert RAW.count(needle) == 1
emit("flip-crc-text", "fail", "embed.weight", "one hex digit of embed.weight's stored CRC-32C changed",
     RAW.replace(needle, ('embed.weight\\":\\"' + new_sum).encode()))
# Two same-size tensors: swap their data_offsets in the header text (same length, same header size).
qa, ka = HEADER["encoder.blocks.1.attn.w_q.weight"]["data_offsets"], HEADER["encoder.blocks.1.attn.w_k.weight"]["data_offsets"]
sq, sk = ("[%d,%d]" % tuple(qa)).encode(), ("[%d,%d]" % tuple(ka)).encode()
assert len(sq) == len(sk) and HEADER_TEXT.count(sq) == 1 and HEADER_TEXT.count(sk) == 1
swapped = HEADER_TEXT.replace(sq, b"@@Q@@").replace(sk, sq).replace(b"@@Q@@", sk)
emit("swap-offsets", "fail", "encoder.blocks.1.attn.w_", "encoder.blocks.1 w_q.weight and w_k.weight (same size) swapped in the header",
     RAW[:8] + swapped + DATA)
# The same two tensors: swap their bytes in the data section, header untouched.
d = bytearray(DATA)
d[qa[0]:qa[1]], d[ka[0]:ka[1]] = DATA[ka[0]:ka[1]], DATA[qa[0]:qa[1]]
emit("swap-data", "fail", "encoder.blocks.1.attn.w_", "the bytes of w_q.weight and w_k.weight swapped",
     RAW[:8 + HLEN] + bytes(d))
# A tensor's bytes zeroed (a hole punched by a bad disk).
d = bytearray(DATA)
b0, e0 = HEADER["head.weight"]["data_offsets"]
d[b0:e0] = bytes(e0 - b0)
emit("zeroed-tensor", "fail", "head.weight", "head.weight's bytes zeroed", RAW[:8 + HLEN] + bytes(d))

# ---------------------------------------------------------------- values (checksums recomputed)
for nm, tensor, idx, value, desc in [
        ("nan-weight", "embed.weight", 0, float("nan"), "NaN"),
        ("inf-weight", "head.bias", 3, float("inf"), "+inf"),
        ("neginf-weight", W1, 777, float("-inf"), "-inf"),
        ("big-weight", "encoder.norm.weight", 5, 1e30, "1e30"),
        ("over-limit-weight", "pos.weight", 9, 2e20, "2e20 (just over the 1e20 limit)"),
        ("neg-big-weight", "head.weight", 1, -1e21, "-1e21")]:
    es = base_entries()
    set_f32(es, tensor, idx, value)
    emit(nm, "fail", tensor, "%s written into %s[%d]" % (desc, tensor, idx), assemble(META, es))

for nm, tensor, idx, value, desc in [
        ("neg-exp-avg-sq", "optimizer/head.weight/exp_avg_sq", 3, -1.0, "-1 in"),
        ("nan-exp-avg-sq", "optimizer/pos.weight/exp_avg_sq", 0, float("nan"), "NaN in"),
        ("nan-exp-avg", "optimizer/head.bias/exp_avg", 2, float("nan"), "NaN in"),
        ("inf-exp-avg", "optimizer/embed.weight/exp_avg", 2, float("inf"), "+inf in"),
        ("big-exp-avg", "optimizer/encoder.norm.bias/exp_avg", 1, 1e25, "1e25 in")]:
    es = base_entries()
    set_f32(es, tensor, idx, value)
    param = tensor.split("/")[1]
    emit(nm, "fail", param, "%s %s[%d]" % (desc, tensor, idx), assemble(META, es))

for nm, value, desc in [("adam-step-max", 2**63 - 1, "2^63-1"), ("adam-step-2p53", 2**53 + 1, "2^53+1"),
                        ("adam-step-0", 0, "0"), ("adam-step-neg", -5, "-5")]:
    es = base_entries()
    set_i64(es, "optimizer/head.weight/step", value)
    emit(nm, "fail", "head.weight", "Adam step of head.weight set to %s" % desc, assemble(META, es))

es = base_entries()
e = find(es, "optimizer/head.bias/step")
e[1], e[3] = "F64", bytearray(struct.pack("<d", 20.0))
emit("step-f64", "fail", "optimizer/head.bias/step", "an Adam step stored as F64", assemble(META, es))

# ---------------------------------------------------------------- tensors missing, extra, reshaped
es = [e for e in base_entries() if not e[0].startswith("optimizer/")]
emit("no-optimizer", "fail", "optimizer", "all optimizer/ tensors removed (metadata kept)", assemble(META, es))
es = [e for e in base_entries() if not e[0].startswith("optimizer/head.bias/")]
emit("no-optimizer-one", "fail", "optimizer", "the optimizer state of head.bias removed (all three tensors)",
     assemble(META, es))
es = [e for e in base_entries() if e[0] != "optimizer/head.weight/exp_avg_sq"]
emit("no-exp-avg-sq", "fail", "head.weight", "optimizer/head.weight/exp_avg_sq removed", assemble(META, es))
es = [e for e in base_entries() if e[0] != "optimizer/head.weight/step"]
emit("no-step", "fail", "head.weight", "optimizer/head.weight/step removed", assemble(META, es))
es = base_entries() + [["optimizer/head.bias/momentum_buffer", "F32", [16], bytearray(64)]]
emit("extra-slot", "fail", "head.bias", "a momentum_buffer slot added to Adam's state of head.bias", assemble(META, es))
es = base_entries() + [["optimizer/head.bias/velocity", "F32", [16], bytearray(64)]]
emit("unknown-slot", "fail", "velocity", "an unknown optimizer slot 'velocity'", assemble(META, es))
es = base_entries() + [["optimizer/ghost.weight/step", "I64", [], bytearray(struct.pack("<q", 3))]]
emit("ghost-opt-param", "fail", "ghost.weight", "optimizer state for a parameter the model lacks", assemble(META, es))
es = base_entries() + [["extra.weight", "F32", [4], bytearray(16)]]
emit("extra-tensor", "fail", "extra.weight", "an extra tensor 'extra.weight'", assemble(META, es))
es = [e for e in base_entries() if e[0] != "head.bias"]
emit("missing-param", "fail", "head.bias", "the parameter head.bias removed", assemble(META, es))
es = base_entries()
find(es, "head.bias")[2] = [4, 4]
emit("reshaped-param", "fail", "head.bias", "head.bias stored as (4, 4) instead of (16)", assemble(META, es))
es = base_entries()
e = find(es, "head.bias")
e[1], e[3] = "F64", bytearray(b"".join(struct.pack("<d", v) for (v,) in struct.iter_unpack("<f", bytes(e[3]))))
emit("f64-param", "fail", "head.bias", "head.bias stored as F64 instead of F32", assemble(META, es))
es = base_entries()
e = find(es, "head.bias")
e[1], e[2], e[3] = "I64", [8], e[3]
emit("i64-param", "fail", "head.bias", "head.bias's bytes declared I64 (8 elements)", assemble(META, es))

# ---------------------------------------------------------------- checksum metadata
m = dict(META)
m.pop("crc32c")
emit("no-crc", "fail", "crc32c", "the crc32c metadata removed (format_version %s)" % META["format_version"],
     assemble(m, base_entries(), "none"))
# A value edited and the metadata's checksums deleted: as the file is version 3, that is no file
# from before those checksums, and it must not load with the edit.
emit("meta-sums-removed", "fail", "no checksums of the metadata values",
     "rng_seed edited and the metadata's checksums removed (tensor checksums recomputed)",
     assemble({**META, "rng_seed": "7"}, base_entries(), metadata_sums=False))
m = dict(META)
m["crc32c"] = "{not json"
emit("crc-not-json", "fail", "crc32c", "crc32c metadata that is not JSON", assemble(m, base_entries(), "keep"))
sums = json.loads(META["crc32c"])
sums.pop("head.bias")
m = dict(META)
m["crc32c"] = json.dumps(sums)
emit("crc-missing-one", "fail", "head.bias", "no checksum for head.bias", assemble(m, base_entries(), "keep"))
emit("crc-extra-name", "fail", "nosuch.tensor", "a checksum for a tensor the file lacks",
     assemble(META, base_entries(), extra_crc={"nosuch.tensor": "00000000"}))
sums = json.loads(META["crc32c"])
sums["head.bias"] = "xyz"
m = dict(META)
m["crc32c"] = json.dumps(sums)
emit("crc-not-hex", "fail", "head.bias", "head.bias's checksum is 'xyz'", assemble(m, base_entries(), "keep"))

# One bit flipped in a saved setting (the header keeps its length): the metadata checksums.
def flip_bit_in_header(needle, at, bit):
    pos = RAW.index(needle, 8, 8 + HLEN)
    b = bytearray(RAW)
    b[pos + at] ^= bit
    return bytes(b)


lr_text = re.search(rb'\\"lr\\":([0-9.e-]+)', HEADER_TEXT)
assert lr_text, "no lr in the trainer metadata"
emit("flip-bit-lr", "fail", "'trainer'|CRC-32C", "one bit of the saved lr flipped (%s)" % lr_text.group(1).decode(),
     flip_bit_in_header(lr_text.group(0), len(lr_text.group(0)) - 1, 0x01))
emit("flip-bit-seed", "fail", "'rng_seed'|CRC-32C", "one bit of rng_seed flipped (\"0\" -> \"1\")",
     flip_bit_in_header(b'"rng_seed":"0"', 12, 0x01))
emit("flip-bit-steps", "fail", "'trainer'|CRC-32C", "one bit of the trainer's steps flipped (20 -> 22)",
     flip_bit_in_header(b'\\"steps\\":20', 11, 0x02))
# Not strict JSON: a byte order mark before the header, NUL bytes after it followed by garbage.
def with_header(text):
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + DATA


emit("header-bom", "fail", "byte order mark", "a UTF-8 byte order mark before the header",
     with_header(b"\xef\xbb\xbf" + HEADER_TEXT.rstrip(b" ")))
emit("header-nul-garbage", "fail", "NUL byte", "the header followed by NUL bytes and garbage",
     with_header(HEADER_TEXT.rstrip(b" ") + b"\0\0\0\0garbage"))

# ---------------------------------------------------------------- checkpoint metadata (header kept consistent)
def meta_variant(nm, words, desc, meta, expect="fail"):
    emit(nm, expect, words, desc, assemble(meta, base_entries()))


meta_variant("fmt-version-4", "format_version", "format_version 4", {**META, "format_version": "4"})
meta_variant("fmt-version-text", "format_version", "format_version '2.0'", {**META, "format_version": "2.0"})
meta_variant("fmt-other", "format", "format 'pytorch'", {**META, "format": "pytorch"})
meta_variant("fmt-missing", "format", "format and format_version removed",
             {k: v for k, v in META.items() if k not in ("format", "format_version")})
meta_variant("meta-not-string", "data_position", "data_position stored as a JSON number",
             {**META, "data_position": 20})
meta_variant("rng-seed-text", "rng_seed", "rng_seed 'abc'", {**META, "rng_seed": "abc"})
meta_variant("rng-step-neg", "rng_step", "rng_step '-1'", {**META, "rng_step": "-1"})
meta_variant("data-position-off", "data_position", "data_position 19, loop step 20", {**META, "data_position": "19"})
meta_variant("optimizer-missing", "optimizer", "the 'optimizer' metadata removed, state tensors kept",
             {k: v for k, v in META.items() if k != "optimizer"})
meta_variant("optimizer-sgd-state", "SGD", "'optimizer' says SGD for Adam's state", {**META, "optimizer": "SGD"})
meta_variant("state-count-off", "37", "optimizer_state_params 37 (file has 38)",
             {**META, "optimizer_state_params": "37"})
meta_variant("model-missing", "model", "the 'model' metadata removed", {k: v for k, v in META.items() if k != "model"})
meta_variant("model-not-json", "model", "'model' metadata is '{'", {**META, "model": "{"})
meta_variant("model-unknown-key", "colour", "'model' has an unknown key 'colour'", meta_json("model", colour="red"))
meta_variant("d-model-100000", "d_model", "model d_model 100000", meta_json("model", d_model=100000))
meta_variant("d-model-neg", "d_model", "model d_model -64", meta_json("model", d_model=-64))
meta_variant("vocab-2p62", "vocab", "model vocab 2^62", meta_json("model", vocab=2**62))
meta_variant("heads-3", "n_head", "model n_head 3 (does not divide d_model 64)", meta_json("model", n_head=3))
meta_variant("layers-2000", "n_layers", "model n_layers 2000", meta_json("model", n_layers=2000))
meta_variant("dropout-2", "dropout", "model dropout 2.0", meta_json("model", dropout=2.0))
meta_variant("d-model-32", "embed.weight", "model d_model 32 (valid, but the tensors are 64 wide)", meta_json("model", d_model=32))
meta_variant("d-model-65536", "memory", "model d_model 65536 (within the limits, far beyond memory)",
             meta_json("model", d_model=65536))
m = meta_json("task", batch_size=65536, seq_len=4096)
m["model"] = m["model"].replace('"max_len":16', '"max_len":4096')
assert '"max_len":4096' in m["model"]
meta_variant("batch-65536-len-4096", "memory", "task batch 65536 x length 4096 (activations beyond memory)", m)
meta_variant("task-seq-len-5000", "seq_len", "task seq_len 5000", meta_json("task", seq_len=5000))
meta_variant("task-batch-0", "batch_size", "task batch_size 0", meta_json("task", batch_size=0))
meta_variant("task-bogus", "bogus", "task name 'bogus'", meta_json("task", task="bogus"))
meta_variant("task-vocab-2p62", "vocab_size", "task vocab_size 2^62", meta_json("task", vocab_size=2**62))
meta_variant("trainer-steps-10", "step", "trainer steps 10, below the loop step 20", meta_json("trainer", steps=10))
meta_variant("trainer-lr-neg", "lr", "trainer lr -1", meta_json("trainer", lr=-1.0))
meta_variant("trainer-lr-1e308", "lr", "trainer lr 1e308", meta_json("trainer", lr=1e308))
meta_variant("trainer-sgd", "Adam", "trainer optimizer 'sgd' with Adam's state in the file", meta_json("trainer", optimizer="sgd"))
meta_variant("trainer-steps-str", "steps", "trainer steps \"20\" (a string)", meta_json("trainer", steps="20"))
m = meta_json("loop", step=10**12)
m["data_position"] = str(10**12)
meta_variant("loop-step-1e12", "step", "loop step 10^12 (data_position too)", m)
m = meta_json("loop", step=-1)
m["data_position"] = "18446744073709551615"
meta_variant("loop-step-neg", "step", "loop step -1 (data_position 2^64-1)", m)
meta_variant("elapsed-neg", "elapsed_s", "loop elapsed_s -5", meta_json("loop", elapsed_s=-5.0))
m = dict(META)
m["loop"] = re.sub(r'"elapsed_s":[^,}]*', '"elapsed_s":1e999', m["loop"])
assert "1e999" in m["loop"]
meta_variant("elapsed-1e999", "loop|1e999", "loop elapsed_s 1e999 (overflows to inf)", m)
meta_variant("window-steps-over", "window_steps", "loop window_steps 30 > step 20", meta_json("loop", window_steps=30))
meta_variant("first-loss-neg", "first_loss", "loop first_loss -1", meta_json("loop", first_loss=-1.0))
meta_variant("loop-missing", "loop", "the 'loop' metadata removed", {k: v for k, v in META.items() if k != "loop"})

# ---------------------------------------------------------------- version 1 (documented: no checksums, no count)
m = {**META, "format_version": "1"}
m.pop("optimizer_state_params")
emit("v1-intact", "ok", "", "format_version 1, no crc32c, tensors intact (documented: version 1 still loads)",
     assemble(m, base_entries(), checksums="none"))
emit("v1-no-optimizer", "note", "",
     "format_version 1 without crc32c and with every optimizer/ tensor removed (version 1 has no count to check)",
     assemble(m, [e for e in base_entries() if not e[0].startswith("optimizer/")], checksums="none"))
es = base_entries()
find(es, W1)[3][100] ^= 0x5A
emit("v1-flip", "note", "", "format_version 1 without crc32c, one byte of %s flipped (no checksum to catch it)" % W1,
     assemble(m, es, checksums="none"))

with open(os.path.join(outdir, "manifest.tsv"), "w") as f:
    for row in MANIFEST:
        f.write("\t".join(row) + "\n")
print(len(MANIFEST))
