"""Sliding-window perplexity of an attograd GPT checkpoint, computed by PyTorch: the reference
that tools/evaluate is held to (tests/parity/evaluate_matches_torch.sh).

    /usr/bin/python3 tests/parity/perplexity_reference.py CKPT TEXT STRIDE [WINDOW]

The checkpoint must use the byte tokenizer (token id = byte), so that the text's ids need no
tokenizer here. The weights are read with a small safetensors reader (8-byte little-endian
header length, JSON header, raw little-endian data) into tests/parity/torch_gpt.py's GPT, in
float64. The windows follow Hugging Face's "perplexity of fixed-length models" loop as written
there: labels of the tokens the previous window already covered are masked with -100, and the
model's shifted loss skips each window's first token. Prints "tokens NATS_SUM BYTES" and the
nats per token, perplexity and bits per byte, one per line.
"""
import json
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gpt import GPT  # noqa: E402

DTYPES = {"F32": torch.float32, "F64": torch.float64}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    body = data[8 + n:]
    tensors = {}
    for name, e in header.items():
        if e["dtype"] not in DTYPES:
            continue  # optimizer step counters (I64)
        begin, end = e["data_offsets"]
        t = torch.frombuffer(bytearray(body[begin:end]), dtype=DTYPES[e["dtype"]])
        tensors[name] = t.reshape(e["shape"]).clone()
    return tensors, meta


def load_model(path):
    tensors, meta = read_safetensors(path)
    o = json.loads(meta["model"])
    if json.loads(meta["tokenizer"]).get("kind") != "byte":
        sys.exit("perplexity_reference: the checkpoint must use the byte tokenizer")
    model = GPT(o["vocab"], o["block_size"], o["d_model"], o["n_head"], o["n_layers"], bias=o["bias"]).double()
    named = {
        "transformer.wte.weight": "embed.weight",
        "transformer.wpe.weight": "pos.weight",
        "transformer.ln_f.weight": "norm.weight",
        "transformer.ln_f.bias": "norm.bias",
    }
    inner = {"ln_1": "norm1", "ln_2": "norm2", "attn.c_proj": "attn.w_o", "mlp.c_fc": "ff.linear1",
             "mlp.c_proj": "ff.linear2"}
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name in named:
                src = tensors[named[name]]
            else:
                _, _, i, rest = name.split(".", 3)
                part, leaf = rest.rsplit(".", 1)
                if part == "attn.c_attn":
                    src = torch.cat([tensors[f"blocks.{i}.attn.{w}.{leaf}"] for w in ("w_q", "w_k", "w_v")], 0)
                else:
                    src = tensors[f"blocks.{i}.{inner[part]}.{leaf}"]
            if src.shape != p.shape:
                sys.exit(f"perplexity_reference: {name} has shape {tuple(src.shape)}, expected {tuple(p.shape)}")
            p.copy_(src.double())
    model.eval()
    return model, o["block_size"]


def sliding_window_nats(model, ids, stride, window):
    """The summed nats and the number of tokens scored: each window scores the tokens the
    previous one did not (labels -100 elsewhere), its first token never."""
    n = ids.numel()
    nats, scored, prev_end = 0.0, 0, 0
    with torch.no_grad():
        for begin in range(0, n, stride):
            end = min(begin + window, n)
            trg_len = end - prev_end
            inp = ids[begin:end]
            labels = inp.clone()
            labels[:-trg_len] = -100
            logits = model(inp[None])[0]
            shifted = labels[1:]
            keep = shifted != -100
            if keep.any():
                nats += F.cross_entropy(logits[:-1][keep], shifted[keep], reduction="sum").item()
                scored += int(keep.sum())
            prev_end = end
            if end == n:
                break
    return nats, scored


def main():
    path, text_path, stride = sys.argv[1], sys.argv[2], int(sys.argv[3])
    model, block_size = load_model(path)
    window = int(sys.argv[4]) if len(sys.argv) > 4 else block_size
    with open(text_path, "rb") as f:
        ids = torch.tensor(list(f.read()), dtype=torch.long)
    print_figures(*sliding_window_nats(model, ids, stride, window))


def print_figures(nats, scored):
    """What evaluate prints, in full precision (the byte tokenizer: a token is a byte)."""
    per_token = nats / scored
    print(f"tokens {scored} nats {nats!r} bytes {scored}")
    print(f"nats/token {per_token!r}")
    print(f"perplexity {math.exp(per_token)!r}")
    print(f"bits/byte {nats / math.log(2) / scored!r}")


if __name__ == "__main__":
    main()
