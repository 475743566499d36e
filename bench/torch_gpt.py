#!/usr/bin/env python3
"""The PyTorch twin of build/bench/gpt_step: the same GPT (models/gpt/gpt.h), the same training step
and greedy generation, the same flags and JSON. A development tool only (run it with Debian's
/usr/bin/python3, PyTorch 1.13).

  /usr/bin/python3 bench/torch_gpt.py --config baby --threads 1 --blas-threads 2 --json
  /usr/bin/python3 bench/torch_gpt.py --config large --generate 127 [--no-cache] --json

The model is written out by hand in the nanoGPT manner, with the shapes and parameter names of
attograd's GPT: separate q / k / v projections (w_q, w_k, w_v, not a fused c_attn; the parameter
count is the same either way, and separate ones match attograd's products one for one), biases
in every linear layer, an exact (erf) GELU MLP of 4 * d_model, pre-norm blocks, a final LayerNorm
and a head tied to the token embedding (no bias). Attention is spelled out (scores, causal mask,
softmax, weighted sum): PyTorch 1.13 has no scaled_dot_product_attention, and this is what
nanoGPT runs on such a version.

The model itself is define_gpt(), which bench/torch_gpt_train.py (the twin of train_gpt, for the
validation-loss comparison) imports too.

Thread settings are pinned before torch is imported, as in bench/torch_reference.py: PyTorch's
intra-op pool and OpenBLAS's pool are separate here, and two pools spinning on two cores slow
each other down.
"""
import argparse
import json
import math
import os
import resource
import statistics
import sys
import time

# (layers, heads, d_model, block, batch, vocab), the same table as bench/gpt_step.cpp.
CONFIGS = {
    "baby": (4, 4, 128, 128, 32, 96),
    "large": (6, 6, 384, 256, 8, 96),
    "gpt2-4x64": (12, 12, 768, 64, 4, 50257),
    "gpt2-8x256": (12, 12, 768, 256, 8, 50257),
    "gpt2-2x1024": (12, 12, 768, 1024, 2, 50257),
    "gpt2-8x1024": (12, 12, 768, 1024, 8, 50257),
}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", choices=sorted(CONFIGS), default="baby")
    p.add_argument("--threads", type=int, default=1, help="PyTorch intra-op threads (default 1)")
    p.add_argument("--blas-threads", type=int, default=2, help="OpenBLAS threads (default 2)")
    p.add_argument("--steps", type=int, default=20, help="timed training steps (default 20)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps (or generations) first (default 3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--generate", type=int, default=0, metavar="N",
                   help="instead of training, time greedy generation of N (1..127) tokens")
    p.add_argument("--no-cache", action="store_true", help="with --generate: recompute the whole sequence per token")
    p.add_argument("--repeats", type=int, default=3, help="with --generate: timed generations (default 3)")
    args = p.parse_args()
    if args.generate and not 1 <= args.generate <= 127:
        p.error("--generate must be in 1..127 (the context stays within 128 tokens)")
    return args


def step_flops(layers, heads, d, T, B, vocab):
    """Matrix-product flops of one training step: forward x 3 (backward costs two products)."""
    tokens = B * T
    per_layer = 2 * tokens * d * (3 * d) + 2 * tokens * d * d + 2 * 2 * B * T * T * d + 2 * 2 * tokens * d * (4 * d)
    return 3 * (layers * per_layer + 2 * tokens * d * vocab)


def fingerprint(tokens):
    """The FNV-1a hash gpt_step prints, so that cached and uncached runs can be compared."""
    h = 1469598103934665603
    for t in tokens:
        h = ((h ^ t) * 1099511628211) % (1 << 64)
    return f"{h:016x}"


def define_gpt(layers, heads, d, block, vocab, dropout=0.0):
    """attograd's GPT (models/gpt/gpt.h) in PyTorch, initialised as attograd initialises it, from
    torch's default generator (seed it with torch.manual_seed first). Dropout sits where
    attograd's does: after the embeddings, on the attention weights, on both residual branches
    and between the MLP's two layers; with dropout 0 (the bench's case) none of it runs.

    torch is imported here, not at the top of the file, so that a caller can pin the thread
    settings in the environment before the first import (see main() and torch_gpt_train.py)."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    dh = d // heads

    def drop(x, training):
        return F.dropout(x, dropout, training) if dropout > 0 else x

    class SelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d, d) for _ in range(4))
            self.register_buffer("causal", torch.ones(block, block, dtype=torch.bool).tril(), persistent=False)

        def split(self, x):  # (B, T, C) -> (B, H, T, D)
            b, t, _ = x.shape
            return x.view(b, t, heads, dh).transpose(1, 2)

        def forward(self, x, cache=None):
            b, t, _ = x.shape
            q, k, v = self.split(self.w_q(x)), self.split(self.w_k(x)), self.split(self.w_v(x))
            start = 0
            if cache is not None:
                # The cache holds (B, H, block, D) buffers and a fill length: the new keys and
                # values are written after the ones already there, and attention reads all of them.
                keys, values, start = cache
                keys[:, :, start:start + t] = k
                values[:, :, start:start + t] = v
                k, v = keys[:, :, :start + t], values[:, :, :start + t]
                cache[2] = start + t
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(dh))  # (B, H, T, T_k)
            # Query i sits at position start + i and sees keys 0 .. start + i.
            mask = self.causal[start:start + t, :start + t]
            scores = scores.masked_fill(~mask, float("-inf"))
            y = drop(F.softmax(scores, dim=-1), self.training) @ v  # (B, H, T, D)
            return self.w_o(y.transpose(1, 2).reshape(b, t, d))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.attn = SelfAttention()
            self.linear1, self.linear2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x, cache=None):
            x = x + drop(self.attn(self.norm1(x), cache), self.training)
            mlp = self.linear2(drop(F.gelu(self.linear1(self.norm2(x))), self.training))
            return x + drop(mlp, self.training)

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(block, d)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.norm = nn.LayerNorm(d)
            # attograd's initialisation: N(0, 0.02), residual projections scaled by 1/sqrt(2 L).
            for name, p in self.named_parameters():
                if name.endswith("bias"):
                    nn.init.zeros_(p)
                elif "norm" in name:
                    nn.init.ones_(p)
                elif name.endswith(("w_o.weight", "linear2.weight")):
                    nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * layers))
                else:
                    nn.init.normal_(p, 0.0, 0.02)

        def forward(self, ids, caches=None, start=0):
            t = ids.shape[1]
            x = drop(self.embed(ids) + self.pos(torch.arange(start, start + t)), self.training)
            for i, blk in enumerate(self.blocks):
                x = blk(x, None if caches is None else caches[i])
            return self.norm(x) @ self.embed.weight.t()  # tied head: (B, T, vocab)

    return GPT()


def main():
    args = parse_args()
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.blas_threads)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import torch  # noqa: E402  (after the thread settings)
    from torch.nn import functional as F

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    layers, heads, d, block, B, vocab = CONFIGS[args.config]
    dh = d // heads

    model = define_gpt(layers, heads, d, block, vocab)
    params = sum(p.numel() for p in model.parameters())
    settings = {"torch_threads": torch.get_num_threads(), "blas_threads": args.blas_threads,
                "torch_version": torch.__version__, "parameters": params}

    if args.generate:
        model.eval()

        def generate():
            # Greedy from the one-token prompt [0]; as in attograd, the last token drawn is not fed.
            tokens = [0]
            caches = None
            if not args.no_cache:
                caches = [[torch.empty(1, heads, block, dh), torch.empty(1, heads, block, dh), 0] for _ in range(layers)]
            out = []
            with torch.inference_mode():
                logits = model(torch.tensor([tokens]), caches)
                for n in range(args.generate):
                    token = int(logits[0, -1].argmax())
                    out.append(token)
                    if n + 1 == args.generate:
                        break
                    tokens.append(token)
                    if caches is None:
                        logits = model(torch.tensor([tokens]))
                    else:
                        logits = model(torch.tensor([[token]]), caches, start=len(tokens) - 1)
            return out

        for _ in range(max(args.warmup, 1)):
            out = generate()
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            out = generate()
            times.append((time.perf_counter() - t0) * 1e3)
        median = statistics.median(times)
        result = {
            "framework": "pytorch", "mode": "generate", "config": args.config, "cache": not args.no_cache,
            "new_tokens": args.generate, "repeats": args.repeats, "median_ms": median, "min_ms": min(times),
            "tokens_per_s": args.generate / (median / 1e3), "max_tokens_per_s": args.generate / (min(times) / 1e3),
            "fingerprint": fingerprint(out),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, **settings,
        }
    else:
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)  # weight decay: the default 0.01, as attograd's
        gen = torch.Generator().manual_seed(args.seed + 1)

        def step():
            # Random sequences of block + 1 tokens: inputs the first block, targets the last block.
            seq = torch.randint(0, vocab, (B, block + 1), generator=gen)
            opt.zero_grad(set_to_none=True)
            logits = model(seq[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, vocab), seq[:, 1:].reshape(-1))
            loss.backward()
            opt.step()

        for _ in range(args.warmup):
            step()
        times = []
        for _ in range(args.steps):
            t0 = time.perf_counter()
            step()
            times.append((time.perf_counter() - t0) * 1e3)
        median = statistics.median(times)
        result = {
            "framework": "pytorch", "config": args.config, "steps": args.steps,
            "median_ms": median, "min_ms": min(times), "max_ms": max(times),
            "tokens_per_s": B * block / (median / 1e3),
            "gflops": step_flops(layers, heads, d, block, B, vocab) / (median / 1e3) / 1e9,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
            **settings,
        }
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:>16}: {v:.3f}" if isinstance(v, float) else f"{k:>16}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
