# Group 9 of tests/hostile/sweep.sh (sourced by it; uses its bookkeeping): the programs of the
# GPT-2 workflow (train_bpe, export_gpt, tokenize, generate, train_gpt --init-from and
# bench/gpt2_load) given what a careless script or a hostile file gives them. Each case here was
# a crash, a data loss or garbage accepted before it was fixed (the reliability issue of the
# GPT-2 workflow): outputs that are devices or inputs, outputs another run holds, a LoRA export
# that wrote the base, weight files of every broken kind, vocabularies that describe tokens too
# large to build, SIGHUP to a run started under nohup, token shards of another tokenizer or of
# none. The Llama family's directories and training checkpoints go through the same programs.
start_group 9 "the GPT-2 workflow's programs: outputs, weight files, vocabularies, signals"
BPE=$work/bin/tools/train_bpe
EXPORT=$work/bin/tools/export_gpt
TOKENIZE=$work/bin/tools/tokenize
G9=$fix/gpt2
mkdir -p "$G9/D" "$G9/B"
text=$G9/text.txt
for i in $(seq 1 300); do echo "line $i: the cat sat on the mat and the dog ran after $((i * 7 % 13)) birds."; done >"$text"
MODEL=(--data "$text" --tokenizer byte --layers 1 --d-model 16 --heads 2 --block-size 16 --activation gelu_tanh
  --warmup 1 --eval-windows 1 --batch 2 --quiet)
TINY=("${MODEL[@]}" --steps 2 --eval-every 2)
(cd "$G9" && timeout 60 "$GPT" "${TINY[@]}" --save D/model.safetensors >make.out 2>make.err &&
  cp D/model.safetensors B/model.safetensors &&
  timeout 60 "$GPT" --data "$text" --steps 2 --warmup 1 --eval-every 2 --eval-windows 1 --batch 2 --quiet \
    --init-from B/model.safetensors --lora-rank 2 --save-adapter-only \
    --save adapter.safetensors >>make.out 2>>make.err) ||
  die "could not make the GPT-2 workflow's checkpoints: $(cat "$G9/make.err")"

# A character device (or, where mknod is not allowed, a FIFO): never replaced by a regular file.
# PROTECT hashes regular files only, so a device reads "missing" before and a hash after if lost.
dev=$G9/full
mknod "$dev" c 1 7 2>/dev/null || mkfifo "$dev"
PROTECT=("$dev" "$G9/D/model.safetensors" "$G9/B/model.safetensors") MAYCHANGE=()
BIN=$BPE run usage "full|not a regular file" "train_bpe --out <a device> --overwrite" \
  --data "$text" --vocab-size 300 --out "$dev" --overwrite
BIN=$EXPORT run usage "full|not a regular file" "export_gpt --format llmc --out <a device> --overwrite" \
  --checkpoint "$G9/D/model.safetensors" --format llmc --out "$dev" --overwrite
[[ -c $dev || -p $dev ]] || report DATA-LOSS "the device node is still one after both" 0
BIN=$EXPORT run usage "model.safetensors|--checkpoint reads" \
  "export_gpt --format hf --out D --overwrite, the checkpoint being D/model.safetensors" \
  --checkpoint "$G9/D/model.safetensors" --format hf --out "$G9/D" --overwrite
BIN=$EXPORT run usage "model.safetensors|base weights" \
  "export_gpt of an adapter-only checkpoint --format hf --out <its base's directory> --overwrite" \
  --checkpoint "$G9/adapter.safetensors" --format hf --out "$G9/B" --overwrite
BIN=$BPE run usage "--data" "train_bpe --data ''" --data '' --vocab-size 300 --out "$G9/empty.bpe"

# Two runs on one output: a lock held by another live process (what a second run meets while the
# first one writes) is refused naming its pid, with nothing written.
held_out() {  # held_out PATH: holds PATH's output lock in a background process; sets holder
  local lock=$1.lock
  (
    exec 9>"$lock"
    flock -n 9 || exit 1
    printf 'attograd output lock held by pid %s\n' "$BASHPID" >&9
    exec sleep 30
  ) &
  holder=$!
  for _ in $(seq 1 100); do grep -q "held by pid" "$lock" 2>/dev/null && return 0; sleep 0.05; done
}
PROTECT=("$G9/D/model.safetensors") MAYCHANGE=()
held_out "$G9/busy.bin"
BIN=$EXPORT run usage "busy.bin|in use|pid $holder" "export_gpt --out <a file another export is writing>" \
  --checkpoint "$G9/D/model.safetensors" --format llmc --out "$G9/busy.bin"
[[ -e $G9/busy.bin ]] && report DATA-LOSS "the refused export left busy.bin" 0
kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
held_out "$G9/busy.bpe"
BIN=$BPE run usage "busy.bpe|in use|pid $holder" "train_bpe --out <a file another train_bpe is writing>" \
  --data "$text" --vocab-size 300 --out "$G9/busy.bpe"
kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
rm -f "$G9"/busy.*

# A LoRA export writes the fine-tuned function (tests/parity/lora_export_matches_torch.sh holds
# its perplexity to an independent PyTorch GPT-2): here, that the adapters are merged at all.
PROTECT=() MAYCHANGE=()
BIN=$EXPORT run ok "" "export_gpt of an adapter-only checkpoint --format hf" \
  --checkpoint "$G9/adapter.safetensors" --format hf --out "$G9/lora-hf"
lora_out=$work/cases/$(printf '%d.%02d' "$group" "$case_no")/out
# The base exported the same way: an export that wrote the base's weights would equal it.
"$EXPORT" --checkpoint "$G9/B/model.safetensors" --format hf --out "$G9/base-hf" >/dev/null 2>&1
new_case
if grep -q "LoRA adapters merged" "$lora_out" && [[ -s $G9/base-hf/model.safetensors ]] &&
  ! cmp -s "$G9/lora-hf/model.safetensors" "$G9/base-hf/model.safetensors"; then
  report ok "the export holds the merged weights and says so" 0
else
  report EXIT0-ON-GARBAGE "the export holds the merged weights and says so" 0 "it wrote the base's weights"
fi

# Weight files of every broken kind: train_gpt --init-from (and bench/gpt2_load) end with one
# line naming the file, exit 1, never std::terminate.
W=$G9/weights
mkdir -p "$W"
"$python" - "$W" <<'PY'
import json, os, struct, sys
d = sys.argv[1]
def put(name, data):
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)
def st(header, data=b"", length=None):
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text) if length is None else length) + text + data
f32 = struct.pack("<4f", 1, 2, 3, 4)
put("empty.bin", b"")
put("four-bytes.bin", b"\x01\x02\x03\x04")
put("zeros.bin", bytes(100))
put("header-length-0.safetensors", struct.pack("<Q", 0) + b"{}")
put("header-length-2^62.safetensors", struct.pack("<Q", 1 << 62) + b"{}")
put("header-not-json.safetensors", struct.pack("<Q", 8) + b"not json")
put("header-array.safetensors", st([1, 2, 3]))
put("offsets-past-data.safetensors", st({"wte.weight": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 64]}}, f32))
put("overlapping.safetensors", st({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                   "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, f32))
put("negative-shape.safetensors", st({"wte.weight": {"dtype": "F32", "shape": [-2, -2], "data_offsets": [0, 16]}}, f32))
for dtype in ["F16", "BF16", "I32", "Q7"]:
    put("dtype-%s.safetensors" % dtype, st({"wte.weight": {"dtype": dtype, "shape": [2, 2], "data_offsets": [0, 16]}}, f32))
put("one-unrelated-tensor.safetensors", st({"x": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, f32))
header = [20240327, 3, 16, 256, 1, 2, 16, 256] + [0] * 248
put("llmc-wrong-magic.bin", struct.pack("<256i", *header) + bytes(4096))
header[0], header[1] = 20240326, 99
put("llmc-version-99.bin", struct.pack("<256i", *header) + bytes(4096))
header[1] = 3
put("llmc-no-parameters.bin", struct.pack("<256i", *header))
put("llmc-header-cut.bin", struct.pack("<8i", *header[:8]))
put("text.txt.bin", b"The quick brown fox jumps over the lazy dog.\n" * 40)
put("config.json", json.dumps({"n_layer": 1, "n_head": 2, "n_embd": 16, "vocab_size": 256}).encode())
PY
mkdir -p "$W/a-directory"
mkfifo "$W/fifo.bin"
PROTECT=() MAYCHANGE=()
for f in "$W"/*; do
  name=$(basename "$f")
  # A directory is read as a Hugging Face model's: one without model.safetensors is a bad flag.
  expect=error
  [[ -d $f ]] && expect=usage
  BIN=$GPT run "$expect" "$name" "train_gpt --init-from $name" --init-from "$f" --data "$text" --tokenizer byte --steps 1
done
# Weights that are not the model's: a NaN, an infinity or 3e38 in a Hugging Face file (PyTorch's
# hf_byte_f32 fixture), one tensor under both of its names, llm.c's weights (the tanh GELU's) for
# a model of the exact GELU. Each must be refused naming the file and the tensor.
HF=(--tokenizer byte --layers 2 --heads 4 --block-size 64 --d-model 32 --activation gelu_tanh --data "$text" --steps 1)
"$python" - "$root/tests/parity/fixtures/gpt2/hf_byte_f32.safetensors" "$W" <<'PY'
import json, math, os, struct, sys
src, d = sys.argv[1], sys.argv[2]
blob = open(src, "rb").read()
(n,) = struct.unpack("<Q", blob[:8])
header = json.loads(blob[8:8 + n])
data = bytearray(blob[8 + n:])
def write(name, header, data):
    text = json.dumps(header).encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + bytes(data))
for label, value in [("nan", math.nan), ("inf", math.inf), ("3e38", 3e38)]:
    bad = bytearray(data)
    begin = header["h.1.mlp.c_proj.weight"]["data_offsets"][0]
    struct.pack_into("<f", bad, begin + 4 * 77, value)
    write("hf-%s.safetensors" % label, header, bad)
twice = dict(header)
entry = header["ln_f.bias"]
end = len(data)
twice["transformer.ln_f.bias"] = {"dtype": "F32", "shape": entry["shape"], "data_offsets": [end, end + 4 * entry["shape"][0]]}
write("hf-two-names.safetensors", twice, data + struct.pack("<%df" % entry["shape"][0], *([1.0] * entry["shape"][0])))
PY
for label in nan inf 3e38; do
  BIN=$GPT run error "hf-$label.safetensors|h.1.mlp.c_proj.weight" "train_gpt --init-from <a Hugging Face file holding $label>" \
    "${HF[@]}" --init-from "$W/hf-$label.safetensors"
done
BIN=$GPT run error "hf-two-names.safetensors|transformer.ln_f.bias|two names" \
  "train_gpt --init-from <a Hugging Face file holding ln_f.bias under both names, with other values>" \
  "${HF[@]}" --init-from "$W/hf-two-names.safetensors"
BIN=$EXPORT run ok "" "export_gpt --format llmc (a tanh-GELU model)" \
  --checkpoint "$G9/D/model.safetensors" --format llmc --out "$W/tiny.bin"
BIN=$GPT run error "tiny.bin|tanh GELU|--activation gelu_tanh" "train_gpt --init-from <llm.c weights> --activation gelu" \
  --data "$text" --tokenizer byte --layers 1 --d-model 16 --heads 2 --block-size 16 --activation gelu --steps 1 \
  --init-from "$W/tiny.bin"

if [[ -x $build/bench/gpt2_load ]]; then
  mkdir -p "$work/bin/bench" && cp -p "$build/bench/gpt2_load" "$work/bin/bench/" 2>/dev/null
  BIN=$work/bin/bench/gpt2_load run error "zeros.bin" "bench/gpt2_load on 100 zero bytes" --weights "$W/zeros.bin"
fi

# Vocabularies whose tokens cannot be built: 40 merges that each double the previous token (a
# token of 2^40 bytes), as a file and inside a checkpoint's tokenizer entry; an empty pattern.
V=$G9/vocab
mkdir -p "$V"
"$python" - "$V" "$G9/D/model.safetensors" "$here" <<'PY'
import json, os, struct, sys
d, ck = sys.argv[1], sys.argv[2]
merges = [[97, 97]] + [[255 + i, 255 + i] for i in range(1, 40)]
doubling = {"kind": "bpe", "pattern": "\\S+", "byte_order": "natural", "specials": [], "merges": merges}
with open(os.path.join(d, "d40.bpe"), "w") as f:
    json.dump(doubling, f)
with open(os.path.join(d, "nopattern.bpe"), "w") as f:
    json.dump({**doubling, "pattern": "", "merges": []}, f)
# The same vocabulary as a checkpoint's tokenizer, with every checksum made consistent again.
sys.path.insert(0, sys.argv[3])
from crc32c import crc32c  # noqa: E402
blob = open(ck, "rb").read()
(n,) = struct.unpack("<Q", blob[:8])


def with_metadata(name, **values):
    """The checkpoint with metadata values replaced and every checksum made consistent again."""
    header = json.loads(blob[8:8 + n])
    meta = header["__metadata__"]
    meta.update(values)
    sums = json.loads(meta["crc32c"])
    sums["__metadata__"] = {k: "%08x" % crc32c(v.encode()) for k, v in meta.items() if k != "crc32c"}
    meta["crc32c"] = json.dumps(sums, separators=(",", ":"))
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(os.path.join(d, name), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + blob[8 + n:])


with_metadata("d40-tokenizer.safetensors", tokenizer=json.dumps(doubling, separators=(",", ":")))
# A model entry that describes a model of 8192 wide, 16 layers (about 13 billion parameters) over
# the tiny model's tensors: what the programs build comes from that entry.
model = json.loads(json.loads(blob[8:8 + n])["__metadata__"]["model"])
model.update({"d_model": 8192, "n_layers": 16, "n_head": 16})
with_metadata("huge-model-entry.safetensors", model=json.dumps(model, separators=(",", ":")))
PY
# Each inference program refuses it with an estimate, before it allocates (quickly, and under an
# address-space limit of 2 GiB that building the model would exceed many times over).
MAXMS=3000 VMEM_KB=$((2 * 1024 * 1024))
huge=$V/huge-model-entry.safetensors
BIN=$GEN run error "huge-model-entry|needs about|model entry" "generate --checkpoint <a model entry of 13 billion parameters>" \
  --checkpoint "$huge" --prompt "a" --tokens 2
BIN=$work/bin/tools/evaluate run error "huge-model-entry|needs about" "evaluate --checkpoint <the same>" \
  --checkpoint "$huge" --data "$text" --stride 8
BIN=$EXPORT run error "huge-model-entry|needs about" "export_gpt --checkpoint <the same>" \
  --checkpoint "$huge" --format hf --out "$G9/huge-hf"
MAXMS=0 VMEM_KB=""
VMEM_KB=$((2 * 1024 * 1024))  # 2 GiB: a vocabulary built without a bound would end in bad_alloc, not a pass
BIN=$TOKENIZE run fail "d40.bpe|131072 bytes" "tokenize --tokenizer <40 doubling merges>" --tokenizer "$V/d40.bpe" "$text"
BIN=$GEN run error "131072 bytes" "generate --checkpoint <its tokenizer entry: 40 doubling merges>" \
  --checkpoint "$V/d40-tokenizer.safetensors" --prompt "a" --tokens 2
VMEM_KB=""
BIN=$TOKENIZE run fail "nopattern.bpe|pattern is empty" "tokenize --tokenizer <a vocabulary with an empty pattern>" \
  --tokenizer "$V/nopattern.bpe" "$text"

# nohup: SIGHUP, ignored when the run started, must not stop it; SIGINT still does, with a save.
new_case
t0=$(now_ns)
(
  cd "$case_dir" || exit 99
  exec timeout 60 nohup "$GPT" "${MODEL[@]}" --steps 100000 --eval-every 50 --save ck.safetensors \
    >out 2>err </dev/null
) &
job=$!
for _ in $(seq 1 200); do [[ -s $case_dir/out ]] && grep -q "step" "$case_dir/out" && break; sleep 0.05; done
gpt_pid=$(pgrep -f -n "$GPT.*--steps 100000" || true)
[[ -n $gpt_pid ]] && kill -HUP "$gpt_pid" 2>/dev/null
sleep 1
if [[ -n $gpt_pid ]] && alive "$gpt_pid"; then
  kill -INT "$gpt_pid"
  wait "$job"
  rc=$?
  ms=$((($(now_ns) - t0) / 1000000))
  if ((rc == 130)) && [[ -s $case_dir/ck.safetensors ]]; then
    report ok "nohup train_gpt: SIGHUP ignored, then SIGINT stops and saves" "$ms"
  else
    report UNCLEAR "nohup train_gpt: SIGHUP ignored, then SIGINT stops and saves" "$ms" \
      "after SIGINT: exit $rc, checkpoint $([[ -s $case_dir/ck.safetensors ]] && echo saved || echo missing)"
  fi
else
  wait "$job"
  rc=$?
  ms=$((($(now_ns) - t0) / 1000000))
  report DATA-LOSS "nohup train_gpt: SIGHUP ignored, then SIGINT stops and saves" "$ms" \
    "the run ended on SIGHUP (exit $rc): nohup's choice was overridden"
fi
PROTECT=() MAYCHANGE=()

# Messages that named nothing, and inputs that never ended.
PREPARE=$work/bin/tools/prepare_text
PROTECT=() MAYCHANGE=()
BIN=$PREPARE run usage "--chunk-bytes|nan" "prepare_text --chunk-bytes nan" \
  --data "$text" --tokenizer byte --out "$G9/p-nan" --chunk-bytes nan
BIN=$BPE run usage "special token|UTF-8" "train_bpe --special <bytes that are not UTF-8> (refused before training)" \
  --data "$text" --vocab-size 300 --special $'\xff\xfe' --out "$G9/bad-special.bpe"
"$BIN" --write-config "$G9/sequence.toml" >/dev/null 2>&1
BIN=$GPT run usage "sequence.toml|train_sequence's configuration" "train_gpt --config <a configuration train_sequence wrote>" \
  --config "$G9/sequence.toml"
BIN=$GPT run ok "" "train_gpt --data /proc/self/status (a file that says it is empty)" \
  --data /proc/self/status --tokenizer byte --layers 1 --d-model 16 --heads 2 --block-size 16 --steps 1 --eval-every 1 \
  --eval-windows 1 --batch 2 --quiet --run-name proc
new_case
t0=$(now_ns)
(cd "$case_dir" && ulimit -v $((2 * 1024 * 1024)) && exec timeout 20 "$TOKENIZE" - </dev/zero >out 2>err)
rc=$?
ms=$((($(now_ns) - t0) / 1000000))
classify error "$rc" "standard input|more than" "$case_dir/err" ""
report "$outcome" "tokenize - </dev/zero (an endless standard input, 2 GiB address space)" "$ms" "${detail[@]}"

# evaluate --batch far above what fits: refused with an estimate and the batch that fits (a model
# of GPT-2's vocabulary and context, one layer of 16; needs GPT-2's files, as --tokenizer gpt2 does).
if (cd "$G9" && timeout 60 "$GPT" --data "$root/README.md" --tokenizer gpt2 --layers 1 --d-model 16 --heads 2 \
  --block-size 1024 --batch 1 --steps 1 --eval-every 1 --eval-windows 1 --quiet --save wide.safetensors \
  >wide.out 2>wide.err); then
  BIN=$work/bin/tools/evaluate run usage "--batch 65536|need about|fits" "evaluate --batch 65536 (logits of terabytes)" \
    --checkpoint "$G9/wide.safetensors" --data "$root/README.md" --stride 1 --batch 65536
else
  echo "   (skipped evaluate --batch: no GPT-2 vocabulary here: $(head -c 200 "$G9/wide.err"))"
fi

# prepare_text: a shards' directory a killed run left is removed by the next run on --out; a
# SIGTERM is answered between shards, not after a block of thousands.
mkdir -p "$G9/shards/.prepare_text-999999999.partial"
printf 'x' >"$G9/shards/.prepare_text-999999999.partial/train_000000.bin"
BIN=$PREPARE run ok "" "prepare_text on an --out holding a killed run's shards' directory" \
  --data "$text" --tokenizer byte --out "$G9/shards"
new_case
if compgen -G "$G9/shards/.prepare_text-*.partial" >/dev/null; then
  report DATA-LOSS "the killed run's directory is gone after the next run" 0 "still there: $(ls -a "$G9/shards")"
else
  report ok "the killed run's directory is gone after the next run" 0
fi
head -c 3000000 /dev/zero | tr '\0' 'x' | fold -w 79 >"$G9/big.txt"
new_case
(cd "$case_dir" && exec timeout 30 "$PREPARE" --data "$G9/big.txt" --tokenizer byte --out stopped --shard-tokens 1 \
  >out 2>err </dev/null) &
job=$!
for _ in $(seq 1 400); do
  [[ $(ls "$case_dir"/stopped/.prepare_text-*.partial 2>/dev/null | head -n 200 | wc -l) -ge 200 ]] && break
  sleep 0.01
done
pid=$(pgrep -n -f "$PREPARE.*--shard-tokens 1" || true)
t0=$(now_ns)
[[ -n $pid ]] && kill -TERM "$pid"
wait "$job"
rc=$?
ms=$((($(now_ns) - t0) / 1000000))
if ((rc == 143 && ms < 5000)) && [[ ! -e $case_dir/stopped ]]; then
  report ok "prepare_text --shard-tokens 1, SIGTERM while writing: exit 143 at once, --out as it was" "$ms"
else
  report UNCLEAR "prepare_text --shard-tokens 1, SIGTERM while writing: exit 143 at once, --out as it was" "$ms" \
    "exit $rc after $ms ms; --out: $(ls -A "$case_dir/stopped" 2>/dev/null | head -c 200)"
fi
PROTECT=() MAYCHANGE=()

# The tokenizer's complaints about several --data texts name the file and the offset in it, and on
# a resume the texts the checkpoint's run read.
for i in $(seq 1 200); do echo "hello world line $i"; done >"$G9/a.txt"
printf 'ok \xff bad\n' >"$G9/not-utf8.txt"
printf 'caf\xc3\xa9\n' >"$G9/accents.txt"
CHAR=(--tokenizer char --layers 1 --d-model 16 --heads 2 --block-size 4 --steps 2 --eval-every 2 --quiet)
BIN=$GPT run error "not-utf8.txt|byte offset 3" "train_gpt --data a.txt not-utf8.txt (invalid UTF-8 in the second)" \
  --data "$G9/a.txt" "$G9/not-utf8.txt" "${CHAR[@]}"
(cd "$G9" && "$GPT" --data a.txt "${CHAR[@]}" --save char.ck >/dev/null 2>&1) || die "could not make char.ck"
BIN=$GPT run error "accents.txt|byte offset 0|checkpoint's run read a.txt" \
  "train_gpt --resume <a char run on a.txt> --data a.txt accents.txt (a character it never saw)" \
  --resume "$G9/char.ck" --data "$G9/a.txt" "$G9/accents.txt"

# Token shards say which tokenizer made them: shards of one tokenizer under another, two
# tokenizers in one set, files that are not shards at all (text, zeros, a damaged magic, a
# dangling link) and a resume on a shard edited in its middle are refused, not trained on.
S9=$G9/shards9
mkdir -p "$S9"
SH=(--layers 1 --d-model 16 --heads 2 --block-size 16 --batch 2 --steps 2 --eval-every 2 --eval-windows 1 --quiet)
(cd "$S9" && "$PREPARE" --data "$text" --tokenizer byte --out byte >/dev/null 2>&1 &&
  "$BPE" --data "$text" --vocab-size 300 --out own.bpe >/dev/null 2>&1 &&
  "$PREPARE" --data "$text" --tokenizer own.bpe --out own >/dev/null 2>&1 &&
  "$PREPARE" --data "$G9/big.txt" --tokenizer byte --out long --val-tokens 100000 >/dev/null 2>&1) ||
  die "could not make the shards of group 9"
BIN=$GPT run ok "" "train_gpt --data <byte shards>, no --tokenizer (the shards name theirs)" --data "$S9/byte" "${SH[@]}"
BIN=$GPT run error "made by a byte tokenizer|own.bpe" "train_gpt --data <byte shards> --tokenizer <a BPE file>" \
  --data "$S9/byte" --tokenizer "$S9/own.bpe" "${SH[@]}"
mkdir -p "$S9/mixed" && cp "$S9/byte/train_000000.bin" "$S9/mixed/a.bin" && cp "$S9/own/train_000000.bin" "$S9/mixed/b.bin"
BIN=$GPT run error "different tokenizers|a.bin|b.bin" "train_gpt --data <a byte shard beside a BPE shard>" \
  --data "$S9/mixed" "${SH[@]}"
gpt2_dir=${ATTOGRAD_CACHE:+$ATTOGRAD_CACHE/gpt2}
gpt2_dir=${gpt2_dir:-${XDG_CACHE_HOME:-$HOME/.cache}/attograd/gpt2}
if [[ -f $gpt2_dir/encoder.json && -f $gpt2_dir/vocab.bpe ]]; then
  BIN=$GPT run error "made by a bpe tokenizer of 300 ids|--tokenizer gpt2" "train_gpt --data <own-BPE shards> --tokenizer gpt2" \
    --data "$S9/own" --tokenizer gpt2 "${SH[@]}"
  BIN=$GPT run error "made by a byte tokenizer|--preset" "train_gpt --data <byte shards> --preset gpt2-tiny" \
    --data "$S9/byte" --preset gpt2-tiny --steps 1 --eval-every 1 --eval-windows 1 --batch 1 --quiet
fi
printf 'Notes for Monday: call the bank, buy bread.\n' >"$S9/notes.bin"
BIN=$GPT run error "notes.bin|no attograd or llm.c header|--shard-format nanogpt" "train_gpt --data notes.bin (UTF-8 text)" \
  --data "$S9/notes.bin" --tokenizer byte "${SH[@]}"
head -c 65536 /dev/zero >"$S9/zeros.bin"
BIN=$GPT run error "zeros.bin|no attograd or llm.c header" "train_gpt --data <64 KiB of NULs>.bin" \
  --data "$S9/zeros.bin" --tokenizer byte "${SH[@]}"
cp "$S9/byte/train_000000.bin" "$S9/damaged.bin" && printf 'X' | dd of="$S9/damaged.bin" bs=1 seek=0 conv=notrunc status=none
BIN=$GPT run error "damaged.bin|wrong magic|agtokens" "train_gpt --data <a shard with a damaged magic> --shard-format nanogpt" \
  --data "$S9/damaged.bin" --tokenizer byte --shard-format nanogpt "${SH[@]}"
python3 -c 'import sys; sys.stdout.buffer.write(bytes(b for c in open(sys.argv[1], "rb").read(20000) for b in (c, 0)))' \
  "$text" >"$S9/raw.bin"
BIN=$GPT run ok "" "train_gpt --data <raw uint16 tokens> --shard-format nanogpt --tokenizer byte (asked for)" \
  --data "$S9/raw.bin" --shard-format nanogpt --tokenizer byte "${SH[@]}"
mkdir -p "$S9/dangling" && cp "$S9/byte/"*.bin "$S9/dangling/" && ln -sf "$S9/nowhere.bin" "$S9/dangling/zz.bin"
BIN=$GPT run error "zz.bin|symbolic link|does not exist" "train_gpt --data <a folder with a dangling zz.bin link>" \
  --data "$S9/dangling" "${SH[@]}"
(cd "$S9" && "$GPT" --data long "${SH[@]}" --save long.ck >long.out 2>&1) || die "could not train on the long shard: $(cat "$S9/long.out")"
size=$(stat -c %s "$S9/long/train_000000.bin")
# 64 byte tokens 'y' (uint16: 'y' then a zero byte) where the text had 'x'.
for _ in $(seq 1 64); do printf 'y\0'; done |
  dd of="$S9/long/train_000000.bin" bs=1 seek=$(((size / 2) & ~1)) conv=notrunc status=none
BIN=$GPT run error "'data' entry|crc32c" "train_gpt --resume after 64 tokens changed in the middle of a 6 MB shard" \
  --data "$S9/long" --resume "$S9/long.ck" --steps 4 --quiet

# train_seq2seq keeps its held-out set for the whole run: 2^20 sequences of 1024 tokens are
# estimated (and refused) before they are made.
VMEM_KB=$((8 * 1024 * 1024)) BIN=$work/bin/tools/train_seq2seq run error "held-out set|--eval-sequences" \
  "train_seq2seq --eval-sequences 1048576 --max-len 1024 --batch 1 (a held-out set of 32 GiB)" \
  --eval-sequences 1048576 --max-len 1024 --batch 1 --steps 2 --quiet

# generate, evaluate and export_gpt read other tools' weights directly (models/gpt/gpt_load.h): a file
# that is no weights, a folder without model.safetensors, what a file does not say left out, a
# tokenizer of another size, and hints beside a checkpoint that says it all are refused by name.
GENERATE=$work/bin/tools/generate
EVALUATE=$work/bin/tools/evaluate
PROTECT=() MAYCHANGE=()
BIN=$GENERATE run error "zeros.bin|neither a safetensors file" "generate --checkpoint <100 zero bytes>" \
  --checkpoint "$W/zeros.bin" --prompt x --tokens 2
mkdir -p "$G9/empty-hf"
BIN=$EVALUATE run error "empty-hf|without model.safetensors" "evaluate --checkpoint <a folder without model.safetensors>" \
  --checkpoint "$G9/empty-hf" --data "$text" --stride 8
"$EXPORT" --checkpoint "$G9/D/model.safetensors" --format hf --out "$G9/hf-export" >/dev/null 2>&1 ||
  die "could not export the HF directory of group 9"
mkdir -p "$G9/alone" && cp "$G9/hf-export/model.safetensors" "$G9/alone/"
BIN=$GENERATE run error "give --heads" "generate --checkpoint <model.safetensors of d_model 16 without config.json>" \
  --checkpoint "$G9/alone/model.safetensors" --tokenizer byte --prompt x --tokens 2
BIN=$GENERATE run error "give --tokenizer|256" "generate --checkpoint <an HF directory of 256 tokens>, no --tokenizer" \
  --checkpoint "$G9/hf-export" --prompt x --tokens 2
BIN=$GENERATE run error "its model and tokenizer are its own" "generate --checkpoint <a checkpoint> --heads 2" \
  --checkpoint "$G9/D/model.safetensors" --heads 2 --prompt x --tokens 2
BIN=$GENERATE run error "contradicts|n_head is 2" "generate --checkpoint <an HF directory> --heads 4 (config.json says 2)" \
  --checkpoint "$G9/hf-export" --tokenizer byte --heads 4 --prompt x --tokens 2
BIN=$GENERATE run ok "" "generate --checkpoint <an HF directory> --tokenizer byte (the shape from config.json)" \
  --checkpoint "$G9/hf-export" --tokenizer byte --prompt x --tokens 2
# A Llama-family Hugging Face directory (the PyTorch twin's byte-vocabulary Llama), whole and broken:
# each broken copy is refused naming the file and what is wrong, never a crash.
L9=$G9/llama
llama_copy() { rm -rf "$L9/$1" && mkdir -p "$L9" && cp -r "$root/tests/parity/fixtures/llama/byte_llama" "$L9/$1"; }
llama_copy good
BIN=$GENERATE run ok "" "generate --checkpoint <a Llama directory> --tokenizer byte" \
  --checkpoint "$L9/good" --tokenizer byte --prompt x --tokens 2 --temperature 0
BIN=$GENERATE run usage "has no tokenizer.json" "generate --checkpoint <a Llama directory without tokenizer.json>" \
  --checkpoint "$L9/good" --prompt x --tokens 2
llama_copy short
truncate -s -100 "$L9/short/model.safetensors"
BIN=$GENERATE run error "model.safetensors" "generate --checkpoint <a Llama directory, its weights cut short by 100 bytes>" \
  --checkpoint "$L9/short" --tokenizer byte --prompt x --tokens 2
llama_copy yarn
sed -i 's/"rope_type": "llama3"/"rope_type": "yarn"/' "$L9/yarn/config.json"
BIN=$GENERATE run error "config.json|yarn" "generate --checkpoint <a Llama directory whose rope_scaling is yarn>" \
  --checkpoint "$L9/yarn" --tokenizer byte --prompt x --tokens 2
llama_copy gelu
sed -i 's/"hidden_act": "silu"/"hidden_act": "gelu"/' "$L9/gelu/config.json"
BIN=$GENERATE run error "config.json|hidden_act" "generate --checkpoint <a Llama directory whose hidden_act is gelu>" \
  --checkpoint "$L9/gelu" --tokenizer byte --prompt x --tokens 2
llama_copy shards
mv "$L9/shards/model.safetensors" "$L9/shards/model-00001-of-00002.safetensors"
printf '{"weight_map": {"model.norm.weight": "model-00002-of-00002.safetensors"}}' \
  >"$L9/shards/model.safetensors.index.json"
BIN=$GENERATE run error "model.safetensors.index.json|missing" \
  "generate --checkpoint <a Llama directory whose index names a missing shard>" \
  --checkpoint "$L9/shards" --tokenizer byte --prompt x --tokens 2
EVALUATE=$work/bin/tools/evaluate
BIN=$EVALUATE run ok "" "evaluate --checkpoint <a Llama directory> --tokenizer byte" \
  --checkpoint "$L9/good" --tokenizer byte --data "$text" --block-size 32 --stride 16
BIN=$EVALUATE run error "model.safetensors" "evaluate --checkpoint <a Llama directory, its weights cut short>" \
  --checkpoint "$L9/short" --tokenizer byte --data "$text" --stride 16
BIN=$EVALUATE run usage "--block-size|longer than the model's context, 256 tokens" \
  "evaluate --checkpoint <a Llama directory of context 256> --block-size 512" \
  --checkpoint "$L9/good" --tokenizer byte --data "$text" --block-size 512 --stride 16
BIN=$EVALUATE run ok "" "evaluate --checkpoint <a Llama directory> --quantize q4_0" \
  --checkpoint "$L9/good" --tokenizer byte --data "$text" --block-size 32 --stride 16 --quantize q4_0
# train_gpt's early checks are the job's own (check_long_enough, check_against_model), named by flag.
printf 'too short' >"$G9/short.txt"
BIN=$GPT run usage "--data|short.txt|9 tokens, fewer than block_size + 1 = 17" \
  "train_gpt --data <a text of 9 bytes> --block-size 16" \
  --data "$G9/short.txt" --tokenizer byte --layers 1 --d-model 16 --heads 2 --block-size 16 --steps 1
BIN=$GPT run usage "--eval-stride|eval_stride 17 is longer than the window, block_size 16" \
  "train_gpt --eval-stride 17 --block-size 16" "${TINY[@]}" --eval-stride 17
# A Llama-family run of train_gpt (--preset llama-tiny): its checkpoint whole, cut short and with a
# flipped byte, given to the programs that read it, and the family's own refusals.
LT=$G9/llama-run
mkdir -p "$LT"
LLAMA=(--data "$text" --preset llama-tiny --block-size 16 --warmup 1 --eval-windows 1 --batch 2 --quiet)
(cd "$LT" && timeout 120 "$GPT" "${LLAMA[@]}" --steps 2 --eval-every 2 --save ck.safetensors >make.out 2>make.err) ||
  die "could not make a llama-tiny checkpoint: $(cat "$LT/make.err")"
cp "$LT/ck.safetensors" "$LT/short.safetensors" && truncate -s -100 "$LT/short.safetensors"
cp "$LT/ck.safetensors" "$LT/flipped.safetensors"
size=$(stat -c %s "$LT/flipped.safetensors")
printf '\x5a' | dd of="$LT/flipped.safetensors" bs=1 seek=$((size - 50)) conv=notrunc status=none
PROTECT=("$LT/ck.safetensors") MAYCHANGE=()
BIN=$GENERATE run ok "" "generate --checkpoint <a llama-tiny checkpoint>" \
  --checkpoint "$LT/ck.safetensors" --prompt x --tokens 2
BIN=$GENERATE run error "short.safetensors" "generate --checkpoint <a llama-tiny checkpoint cut short by 100 bytes>" \
  --checkpoint "$LT/short.safetensors" --prompt x --tokens 2
BIN=$EVALUATE run error "flipped.safetensors|CRC-32C" "evaluate --checkpoint <a llama-tiny checkpoint, one byte changed>" \
  --checkpoint "$LT/flipped.safetensors" --data "$text" --stride 8 --block-size 16
BIN=$GPT run error "short.safetensors" "train_gpt --resume <a llama-tiny checkpoint cut short>" \
  --resume "$LT/short.safetensors" --quiet
BIN=$EXPORT run usage "only the Hugging Face layout" "export_gpt --format llmc --checkpoint <a llama-tiny checkpoint>" \
  --checkpoint "$LT/ck.safetensors" --format llmc --out "$LT/x.bin"
BIN=$GENERATE run usage "--tokenizer|says all of them" "generate --checkpoint <a llama-tiny checkpoint> --tokenizer byte" \
  --checkpoint "$LT/ck.safetensors" --tokenizer byte --prompt x --tokens 2
BIN=$GPT run usage "--heads shapes a GPT" "train_gpt --preset llama-tiny --heads 2" "${LLAMA[@]}" --heads 2 --steps 2
BIN=$GPT run error "freeze|'embed' names no parameter of the Llama|model.embed_tokens.weight" \
  "train_gpt --preset llama-tiny --freeze embed (a GPT's name)" "${LLAMA[@]}" --freeze embed --steps 2
# Fine-tuning a Llama-family directory: one without tokenizer.json, one with a shard cut short, a
# LoRA rank wider than a projection, a GPT's LoRA target, a preset beside the base.
LD=$G9/llama-dir
cp -r "$root/tests/parity/fixtures/llama/byte_llama" "$LD"
cp -r "$LD" "$G9/llama-short" && truncate -s -100 "$G9/llama-short/model.safetensors"
TUNE=(--data "$text" --block-size 16 --batch 2 --eval-windows 1 --steps 1 --quiet)
BIN=$GPT run usage "--init-from|llama-dir' has no tokenizer.json; name one with --tokenizer" \
  "train_gpt --init-from <a Llama directory without tokenizer.json>" --init-from "$LD" "${TUNE[@]}"
BIN=$GPT run error "llama-short/model.safetensors|truncated" "train_gpt --init-from <a Llama directory, its tensors cut short>" \
  --init-from "$G9/llama-short" --tokenizer byte "${TUNE[@]}"
BIN=$GPT run error "LoRA rank 17|[1, 16]|k_proj" "train_gpt --init-from <a Llama directory> --lora-rank 17" \
  --init-from "$LD" --tokenizer byte --lora-rank 17 "${TUNE[@]}"
BIN=$GPT run error "no Linear is named 'w_q'|q_proj" "train_gpt --init-from <a Llama directory> --lora-targets w_q" \
  --init-from "$LD" --tokenizer byte --lora-rank 2 --lora-targets w_q "${TUNE[@]}"
BIN=$GPT run usage "--preset cannot go with --init-from|config.json" "train_gpt --init-from <a Llama directory> --preset llama-tiny" \
  --init-from "$LD" --tokenizer byte --preset llama-tiny "${TUNE[@]}"
BIN=$GPT run usage "--data|short.txt|9 tokens, fewer than block_size + 1 = 17" \
  "train_gpt --preset llama-tiny --data <a text of 9 bytes> --block-size 16" \
  --preset llama-tiny --data "$G9/short.txt" --block-size 16 --steps 1
BIN=$GPT run usage "--preset qwen3-0.6b reads 151936 tokens" "train_gpt --preset qwen3-0.6b (no tokenizer)" \
  --preset qwen3-0.6b --data "$text" --steps 1
(cd "$LT" && timeout 60 "$work/bin/tools/prepare_text" --data "$text" --tokenizer byte --out shards >prep.out 2>&1) ||
  die "could not make shards for the Llama cases: $(cat "$LT/prep.out")"
BIN=$GPT run usage "--data|names token shards: a character tokenizer is built from a text" \
  "train_gpt --preset llama-tiny --data <token shards> --tokenizer char" \
  --preset llama-tiny --data "$LT/shards" --tokenizer char --steps 2
