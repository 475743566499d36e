#!/usr/bin/env python3
"""The PyTorch twin of build/bench/train_step: the same post-norm encoder, optimizer, data and
flags, the same JSON. A development tool only (run it with Debian's /usr/bin/python3).

  /usr/bin/python3 bench/torch_reference.py --config tiny --threads 1 --blas-threads 2 --json
  /usr/bin/python3 bench/torch_reference.py --config tiny --train-reverse   # time to 99%

Thread settings are pinned before torch is imported and reported: PyTorch's intra-op pool and
OpenBLAS's pool are separate here, and two pools spinning on two cores slow each other down.
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time

# (vocab, d_model, heads, d_ff, layers, T, B), the same table as bench/train_step.cpp.
CONFIGS = {
    "tiny": (16, 32, 2, 64, 2, 16, 32),
    "small": (32, 128, 4, 512, 2, 32, 32),
    "medium": (64, 256, 8, 1024, 4, 64, 32),
    "large": (256, 512, 8, 2048, 4, 128, 16),
}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", choices=sorted(CONFIGS), default="tiny")
    p.add_argument("--threads", type=int, default=1, help="PyTorch intra-op threads (default 1)")
    p.add_argument("--blas-threads", type=int, default=2, help="OpenBLAS threads (default 2)")
    p.add_argument("--steps", type=int, default=20, help="timed steps (default 20)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--train-reverse", action="store_true",
                   help="instead of timing steps, train the reverse task to 99%% exact-sequence accuracy")
    p.add_argument("--max-steps", type=int, default=20000)
    return p.parse_args()


def step_flops(vocab, d, heads, dff, layers, T, B):
    """Matrix-product flops of one training step: forward x 3 (backward costs two products)."""
    tokens = B * T
    per_layer = 2 * tokens * d * (3 * d) + 2 * tokens * d * d + 2 * 2 * B * T * T * d + 2 * 2 * tokens * d * dff
    forward = layers * per_layer + 2 * tokens * d * vocab
    return 3 * forward


def main():
    args = parse_args()
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.blas_threads)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import torch  # noqa: E402  (after the thread settings)
    from torch import nn

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    vocab, d, heads, dff, layers, T, B = CONFIGS[args.config]

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(T, d)
            layer = nn.TransformerEncoderLayer(d, heads, dff, dropout=0.0, activation="relu",
                                               batch_first=True, norm_first=False)
            self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.head = nn.Linear(d, vocab)

        def forward(self, ids):
            x = self.tok(ids) + self.pos(torch.arange(ids.shape[1]))
            return self.head(self.blocks(x))

    model = Encoder()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(args.seed + 1)

    def batch():
        ids = torch.randint(0, vocab, (B, T), generator=gen)
        return ids, ids.flip(1)  # the reverse task

    def step(ids, target):
        opt.zero_grad(set_to_none=True)
        logits = model(ids)
        loss = loss_fn(logits.reshape(-1, vocab), target.reshape(-1))
        loss.backward()
        opt.step()
        return loss

    settings = {"torch_threads": torch.get_num_threads(), "blas_threads": args.blas_threads,
                "torch_version": torch.__version__}

    if args.train_reverse:
        eval_gen = torch.Generator().manual_seed(12345)
        eval_ids = torch.randint(0, vocab, (1024, T), generator=eval_gen)
        start = time.perf_counter()
        reached = None
        for s in range(1, args.max_steps + 1):
            step(*batch())
            if s % 50 == 0:
                with torch.no_grad():
                    pred = model(eval_ids).argmax(-1)
                    seq_acc = (pred == eval_ids.flip(1)).all(1).float().mean().item()
                if seq_acc >= 0.99:
                    reached = s
                    break
        result = {"framework": "pytorch", "task": "reverse", "config": args.config, "steps": reached,
                  "seconds": time.perf_counter() - start, "seq_acc": seq_acc, **settings}
        print(json.dumps(result) if args.json else result)
        return 0 if reached else 1

    for _ in range(args.warmup):
        step(*batch())
    times = []
    for _ in range(args.steps):
        ids, target = batch()
        t0 = time.perf_counter()
        step(ids, target)
        times.append((time.perf_counter() - t0) * 1e3)
    median = statistics.median(times)
    result = {
        "framework": "pytorch", "config": args.config, "steps": args.steps,
        "median_ms": median, "min_ms": min(times), "max_ms": max(times),
        "tokens_per_s": B * T / (median / 1e3),
        "gflops": step_flops(vocab, d, heads, dff, layers, T, B) / (median / 1e3) / 1e9,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        **settings,
    }
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:>14}: {v:.3f}" if isinstance(v, float) else f"{k:>14}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
