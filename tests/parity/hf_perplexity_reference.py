"""Sliding-window perplexity of an exported GPT-2, computed by PyTorch from the exported files
alone: the reference that export_gpt's output is held to (tests/parity/lora_export_matches_torch.sh).

    /usr/bin/python3 tests/parity/hf_perplexity_reference.py MODEL TEXT STRIDE [WINDOW]

MODEL is what `export_gpt --format hf` writes (a directory: model.safetensors under Hugging Face's
GPT-2 names in Conv1D (in, out) orientation, and config.json) or what `--format llmc` writes
(llm.c's .bin: 256 int32 of header, then float32 parameters in llm.c's order). Nothing of
attograd's is read but these files, so an export that drops or misplaces a weight shows up as a
different perplexity. The model is tests/parity/torch_gpt2.py's GPT2 in float64; the text is read
as bytes (token id = byte, the byte tokenizer's ids), and the windows are perplexity_reference.py's,
so the numbers compare one for one with tools/evaluate's. Prints the same four lines as
perplexity_reference.py: "tokens N nats SUM bytes N", nats/token, perplexity and bits/byte.
"""
import json
import math
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perplexity_reference import print_figures, read_safetensors, sliding_window_nats  # noqa: E402
from torch_gpt2 import GPT2, llmc_order  # noqa: E402

LLMC_MAGIC, LLMC_FLOAT32 = 20240326, 3


def fail(message):
    sys.exit(f"hf_perplexity_reference: {message}")


def load_hf(directory):
    with open(os.path.join(directory, "config.json")) as f:
        config = json.load(f)
    # torch_gpt2's GPT2 has these fixed; a config that says otherwise describes another model.
    expected = {"activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True}
    for key, want in expected.items():
        if config.get(key, want) != want:
            fail(f"config.json has {key} = {config[key]!r}, this reference computes {want!r}")
    model = GPT2(config["vocab_size"], config["n_positions"], config["n_embd"], config["n_head"],
                 config["n_layer"]).double()
    tensors, _ = read_safetensors(os.path.join(directory, "model.safetensors"))
    # Hugging Face writes the names with or without "transformer."; the head is tied to wte.
    tensors = {name.removeprefix("transformer."): t for name, t in tensors.items() if name != "lm_head.weight"}
    with torch.no_grad():
        for name, p in model.named_parameters():
            key = name.removeprefix("transformer.")
            src = tensors.pop(key, None)
            if src is None:
                fail(f"model.safetensors has no {key}")
            if src.shape != p.shape:
                fail(f"{key} has shape {tuple(src.shape)}, expected {tuple(p.shape)}")
            p.copy_(src.double())
    if tensors:
        fail(f"model.safetensors has tensors GPT-2 does not: {sorted(tensors)}")
    return model


# llm.c's per-layer tensors in file order, each an (L, ...) stack; True where the file holds the
# nn.Linear orientation (out, in), the transpose of the Conv1D weight. torch_gpt2.llmc_order is the
# definition; load_llmc checks that this list agrees with it.
LLMC_LAYER_FIELDS = [
    ("ln_1.weight", False), ("ln_1.bias", False),
    ("attn.c_attn.weight", True), ("attn.c_attn.bias", False),
    ("attn.c_proj.weight", True), ("attn.c_proj.bias", False),
    ("ln_2.weight", False), ("ln_2.bias", False),
    ("mlp.c_fc.weight", True), ("mlp.c_fc.bias", False),
    ("mlp.c_proj.weight", True), ("mlp.c_proj.bias", False),
]


def load_llmc(path):
    with open(path, "rb") as f:
        data = f.read()
    header = struct.unpack("<256i", data[:1024])
    magic, version, max_t, vocab, n_layers, n_head, C, padded_vocab = header[:8]
    if magic != LLMC_MAGIC or version != LLMC_FLOAT32:
        fail(f"{path}: magic {magic} version {version}, expected {LLMC_MAGIC} version {LLMC_FLOAT32} (float32)")
    body = torch.frombuffer(bytearray(data[1024:]), dtype=torch.float32).double()
    model = GPT2(vocab, max_t, C, n_head, n_layers).double()
    offset = 0

    def take(shape):
        nonlocal offset
        n = math.prod(shape)
        if offset + n > body.numel():
            fail(f"{path} ends after {body.numel()} parameters, the header's model needs more")
        t = body[offset:offset + n].reshape(shape)
        offset += n
        return t

    blocks = model.transformer.h
    with torch.no_grad():
        # The token table has padded_vocab rows; the rows past vocab are padding no token reads.
        model.transformer.wte.weight.copy_(take((padded_vocab, C))[:vocab])
        model.transformer.wpe.weight.copy_(take((max_t, C)))
        for field, transposed in LLMC_LAYER_FIELDS:
            params = [b.get_parameter(field) for b in blocks]
            shape = params[0].t().shape if transposed else params[0].shape
            stack = take((n_layers, *shape))
            for p, t in zip(params, stack):
                p.copy_(t.t() if transposed else t)
        model.transformer.ln_f.weight.copy_(take((C,)))
        model.transformer.ln_f.bias.copy_(take((C,)))
    if offset != body.numel():
        fail(f"{path} has {body.numel() - offset} float32 values past the parameters the header describes")
    # Read back in torch_gpt2's order, the tensors must be the file's: a field list out of order
    # with llm.c's would otherwise go unseen wherever two tensors share a shape.
    again = torch.cat([model.transformer.wpe.weight.detach().reshape(-1)] + [t.reshape(-1) for t in llmc_order(model)])
    if not torch.equal(again, body[padded_vocab * C:]):
        fail("LLMC_LAYER_FIELDS disagrees with torch_gpt2.llmc_order")
    return model


def main():
    if len(sys.argv) not in (4, 5):
        fail("usage: hf_perplexity_reference.py MODEL TEXT STRIDE [WINDOW]")
    path, text_path, stride = sys.argv[1], sys.argv[2], int(sys.argv[3])
    model = load_hf(path) if os.path.isdir(path) else load_llmc(path)
    model.eval()
    vocab, block_size = model.config["vocab"], model.config["block_size"]
    window = int(sys.argv[4]) if len(sys.argv) > 4 else block_size
    if not 1 <= stride <= window <= block_size:
        fail(f"need 1 <= stride ({stride}) <= window ({window}) <= the model's context ({block_size})")
    with open(text_path, "rb") as f:
        ids = torch.tensor(list(f.read()), dtype=torch.long)
    if vocab < 256:
        fail(f"the model's vocabulary has {vocab} tokens, fewer than the byte tokenizer's 256")
    print_figures(*sliding_window_nats(model, ids, stride, window))


if __name__ == "__main__":
    main()
