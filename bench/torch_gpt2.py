#!/usr/bin/python3
"""GPT-2 in PyTorch for bench/compare_gpt2.sh: loads a Hugging Face layout model.safetensors (read
by hand: this Debian has no safetensors package) into tests/parity/torch_gpt2.py's GPT2, then
times greedy generation at batch 1 with a preallocated KV cache, as bench/gpt2_load does.

  /usr/bin/python3 bench/torch_gpt2.py --weights DIR/model.safetensors --generate 100 --repeats 3
  /usr/bin/python3 bench/torch_gpt2.py --weights DIR/model.safetensors --logits out.bin
  /usr/bin/python3 bench/torch_gpt2.py --weights DIR/model.safetensors --generate 100 --quantize int8

Prints one JSON line: load seconds (build + read), tokens/s (best of the repeats) and the tokens'
FNV-1a fingerprint. --logits writes the float32 logits of ids 0..63. --threads sets torch's
threads (default 2, the machine's cores; gpt2_load uses as many). --quantize int8 times PyTorch's
own dynamic int8 quantization instead (torch.ao.quantization.quantize_dynamic on nn.Linear): every
Conv1D and the tied head become nn.Linear layers first (the twin's Conv1D is not an nn.Linear),
weights int8 per output row, activations quantized on the fly; generation only.
"""
import argparse
import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "parity"))
sys.dont_write_bytecode = True


def read_safetensors(path):
    """name -> float32 tensor, sharing the file's pages (no copy until used)."""
    import numpy as np
    import torch
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = {"F32": np.float32, "F64": np.float64}[info["dtype"]]
        out[name] = torch.from_numpy(np.frombuffer(data[begin:end], dtype=dtype).reshape(info["shape"]).copy())
    return out


def quantized_dynamic(model, C, vocab):
    """Every Conv1D of `model` as an nn.Linear, and the tied head as one (returned), quantized in
    place by PyTorch's dynamic int8 quantization."""
    import torch
    from torch import nn
    engines = torch.backends.quantized.supported_engines
    torch.backends.quantized.engine = "fbgemm" if "fbgemm" in engines else "onednn"

    def as_linear(conv):
        n_in, n_out = conv.weight.shape
        lin = nn.Linear(n_in, n_out)
        lin.weight.data = conv.weight.data.t().contiguous()
        lin.bias.data = conv.bias.data
        return lin

    for b in model.transformer.h:
        b.attn.c_attn, b.attn.c_proj = as_linear(b.attn.c_attn), as_linear(b.attn.c_proj)
        b.mlp.c_fc, b.mlp.c_proj = as_linear(b.mlp.c_fc), as_linear(b.mlp.c_proj)
    head = nn.Linear(C, vocab, bias=False)
    head.weight.data = model.transformer.wte.weight.data
    model.head = head
    torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8, inplace=True)
    return model.head


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--weights", required=True)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--generate", type=int, default=0)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--logits", default="")
    p.add_argument("--quantize", choices=["none", "int8"], default="none")
    args = p.parse_args()
    import torch
    torch.set_num_threads(args.threads)
    from torch_gpt2 import GPT2

    t0 = time.perf_counter()
    tensors = read_safetensors(args.weights)
    vocab, C = tensors["wte.weight"].shape
    block = tensors["wpe.weight"].shape[0]
    model = GPT2(vocab, block, C, args.heads, args.layers)
    model.load_state_dict({"transformer." + k: v for k, v in tensors.items()})
    model.eval()
    load_s = time.perf_counter() - t0
    result = {"framework": "pytorch", "torch_version": torch.__version__, "threads": torch.get_num_threads(),
              "load_s": round(load_s, 3)}

    if args.logits:
        with torch.inference_mode():
            logits = model(torch.arange(64).view(1, 64))
        logits.float().numpy().tofile(args.logits)

    head = None
    if args.quantize == "int8":
        quantize_s = time.perf_counter()
        head = quantized_dynamic(model, C, vocab)
        result.update({"quantized": "int8 dynamic (" + torch.backends.quantized.engine + ")",
                       "quantize_s": round(time.perf_counter() - quantize_s, 3)})

    if args.generate:
        H, D = args.heads, C // args.heads
        h = model.transformer

        def step(token, pos, kc, vc):
            """One position through the model with preallocated caches kc, vc (L, 1, H, block, D)."""
            x = h.wte.weight[token].view(1, 1, C) + h.wpe.weight[pos]
            for i, b in enumerate(h.h):
                a = b.ln_1(x)
                q, k, v = b.attn.c_attn(a).split(C, dim=2)
                q, k, v = (t.view(1, 1, H, D).transpose(1, 2) for t in (q, k, v))
                kc[i, :, :, pos] = k[:, :, 0]
                vc[i, :, :, pos] = v[:, :, 0]
                att = (q @ kc[i, :, :, :pos + 1].transpose(-2, -1)) / math.sqrt(D)
                y = torch.softmax(att, dim=-1) @ vc[i, :, :, :pos + 1]
                x = x + b.attn.c_proj(y.transpose(1, 2).reshape(1, 1, C))
                x = x + b.mlp(b.ln_2(x))
            if head is not None:
                return head(h.ln_f(x)[0])[0]
            return h.ln_f(x)[0, 0] @ h.wte.weight.t()

        def generate():
            kc = torch.empty(args.layers, 1, H, block, D)
            vc = torch.empty(args.layers, 1, H, block, D)
            out, token = [], 0
            with torch.inference_mode():
                for pos in range(args.generate):
                    token = int(step(token, pos, kc, vc).argmax())
                    out.append(token)
            return out

        best = 0.0
        for _ in range(args.repeats):
            t = time.perf_counter()
            out = generate()
            best = max(best, args.generate / (time.perf_counter() - t))
        fp = 1469598103934665603
        for t in out:
            fp = ((fp ^ t) * 1099511628211) % (1 << 64)
        result.update({"tokens_per_s": round(best, 2), "fingerprint": f"{fp:016x}"})
    print(json.dumps(result))


if __name__ == "__main__":
    main()
