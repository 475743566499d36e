#!/usr/bin/env python3
"""The PyTorch twin of tools/train_gpt: the same text, vocabulary, split, model,
initialisation scheme, optimizer, schedule, clipping and validation windows, so that the two
final validation losses can be compared (bench/quality_gpt.sh). A development tool only (run it
with Debian's /usr/bin/python3, PyTorch 1.13).

  /usr/bin/python3 bench/torch_gpt_train.py                         # train_gpt's defaults
  /usr/bin/python3 bench/torch_gpt_train.py --steps 20 --eval-every 10 --json

What is the same as train_gpt (text/corpus.h, models/gpt/gpt_job.h, train/trainer.h, tools/train_gpt_cli.h):
  * corpus: every regular file (not a symlink, not *.dat) directly under
    /usr/share/games/fortunes, in sorted path order, each with its lines that are exactly "%"
    removed, joined by "\\n"; or the bytes of --data;
  * tokens: one per UTF-8 character, vocabulary the sorted distinct characters of the whole text;
  * split: the first floor(0.9 n) tokens train, the rest validate;
  * model: bench/torch_gpt.py's define_gpt (attograd's GPT and its N(0, 0.02) init, residual
    projections 0.02 / sqrt(2 layers), biases 0, LayerNorms 1 and 0, tied head);
  * a step: B windows of block + 1 tokens at starts uniform in [0, n_train - block - 1],
    mean cross-entropy over B*T, backward, clip the global norm to --clip, AdamW (betas --beta1 /
    --beta2, eps 1e-8, decoupled weight decay on the parameters attograd's decays() names) at the
    rate of update n: warm-up lr (n+1)/W, then cosine from lr to min_lr at --steps;
  * validation: at step 0, every --eval-every steps and at the last, the mean cross-entropy
    over the same min(eval_windows, ...) windows at evenly spaced starts of the validation text
    (rounded down to whole batches), in eval mode;
  * train loss: the mean of the step losses since the previous evaluation.
What differs: the random numbers (torch's generator for the initial weights and the batch
starts, attograd's counter-based one there), so the two runs see different batches and start
from different weights of the same distribution; the float32 kernels; no text samples.
"""
import argparse
import json
import math
import os
import stat
import sys
import time

FORTUNES_DIR = "/usr/share/games/fortunes"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # Defaults: tools/train_gpt_cli.h (TrainGPTArgs).
    p.add_argument("--data", default="", help="text file (default: every fortune under " + FORTUNES_DIR + ")")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--block-size", type=int, default=64)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--min-lr", type=float, default=3e-4)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--decay-params", choices=["all", "matrices"], default="matrices",
                   help="what the weight decay applies to (train/trainer.h decays())")
    p.add_argument("--beta1", type=float, default=0.9)
    p.add_argument("--beta2", type=float, default=0.99)
    p.add_argument("--clip", type=float, default=1.0, help="max gradient norm, 0 = off")
    p.add_argument("--seed", type=int, default=0, help="torch's generator: initial weights, dropout, batches")
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--eval-windows", type=int, default=64)
    p.add_argument("--train-fraction", type=float, default=0.9)
    p.add_argument("--threads", type=int, default=1, help="PyTorch intra-op threads (default 1)")
    p.add_argument("--blas-threads", type=int, default=2, help="OpenBLAS threads (default 2)")
    p.add_argument("--json", action="store_true",
                   help="end with one JSON line of the results (the vocabulary too, for a check against attograd's)")
    args = p.parse_args()
    if args.d_model % args.heads != 0:
        p.error(f"--heads {args.heads} does not divide --d-model {args.d_model}")
    if not 0 <= args.warmup < args.steps:
        p.error(f"--warmup {args.warmup} must lie in [0, --steps {args.steps})")
    return args


def drop_separator_lines(data):
    """The bytes with every line that is exactly b"%" left out (text/corpus.cpp)."""
    lines = data.split(b"\n")
    out = [line + b"\n" for line in lines[:-1] if line != b"%"]
    if lines[-1] not in (b"", b"%"):  # a last line without a newline
        out.append(lines[-1])
    return b"".join(out)


def read_corpus(path):
    if path:
        with open(path, "rb") as f:
            return f.read()
    files = []
    for name in os.listdir(FORTUNES_DIR):
        full = os.path.join(FORTUNES_DIR, name)
        # lstat: the *.u8 names are symlinks to the plain files.
        if stat.S_ISREG(os.lstat(full).st_mode) and not name.endswith(".dat"):
            files.append(full)
    files.sort(key=os.fsencode)  # attograd sorts the paths by their bytes
    parts = []
    for full in files:
        with open(full, "rb") as f:
            parts.append(drop_separator_lines(f.read()))
    return b"\n".join(parts)


def lr_at(step, a):
    """The rate of update number `step` (0-based), train/schedule.h with cosine decay."""
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    progress = min(1.0, (step - a.warmup) / (a.steps - a.warmup))
    return a.min_lr + (a.lr - a.min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))


def eval_starts(n_val, block, batch, max_windows):
    """text/corpus.cpp eval_batches: evenly spaced starts, the first at 0, the last at the end."""
    last_start = n_val - block - 1
    windows = min(max_windows, last_start + 1)
    if windows >= batch:
        windows -= windows % batch
    return [0] if windows == 1 else [i * last_start // (windows - 1) for i in range(windows)]


def main():
    args = parse_args()
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.blas_threads)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import torch  # noqa: E402  (after the thread settings)
    from torch.nn import functional as F

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from torch_gpt import define_gpt  # noqa: E402

    torch.set_num_threads(args.threads)
    t_start = time.perf_counter()

    text = read_corpus(args.data).decode("utf-8")  # strict, as the char tokenizer
    symbols = sorted(set(text))  # code point order is UTF-8 byte order
    index = {c: i for i, c in enumerate(symbols)}
    tokens = torch.tensor([index[c] for c in text], dtype=torch.long)
    n = len(tokens)
    cut = min(n, math.floor(n * args.train_fraction))
    train, val = tokens[:cut], tokens[cut:]
    vocab, block, B = len(symbols), args.block_size, args.batch
    for part, size in (("training", len(train)), ("validation", len(val))):
        if size < block + 1:
            sys.exit(f"torch_gpt_train: the {part} text has {size} tokens, fewer than block_size + 1 = {block + 1}")

    torch.manual_seed(args.seed)
    model = define_gpt(args.layers, args.heads, args.d_model, block, vocab, args.dropout)
    params = sum(p.numel() for p in model.parameters())
    # attograd's decays(): with "matrices", the parameters of rank >= 2 but the token and
    # position tables (embed, pos); with "all", every one.
    def decays(name, p):
        table = name in ("embed.weight", "pos.weight")
        return args.decay_params == "all" or (p.dim() >= 2 and not table)
    named = list(model.named_parameters())
    groups = [{"params": [p for n, p in named if decays(n, p)], "weight_decay": args.weight_decay},
              {"params": [p for n, p in named if not decays(n, p)], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=args.lr, betas=(args.beta1, args.beta2), eps=1e-8)
    batch_gen = torch.Generator().manual_seed(args.seed)
    offsets = torch.arange(block + 1)

    def windows(data, starts):  # (len(starts), block + 1) -> inputs, targets (., block)
        rows = data[starts[:, None] + offsets]
        return rows[:, :-1], rows[:, 1:]

    starts = torch.tensor(eval_starts(len(val), block, B, args.eval_windows))
    eval_batches = [windows(val, starts[i:i + B]) for i in range(0, len(starts), B)]

    def evaluate():
        model.eval()
        total, rows = 0.0, 0
        with torch.no_grad():
            for x, y in eval_batches:
                loss = F.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1))
                total += loss.item() * len(x)
                rows += len(x)
        model.train()
        return total / rows

    print(f"data   {args.data or FORTUNES_DIR}: {n} tokens ({len(train)} train, {len(val)} validation), "
          f"char tokenizer, vocab {vocab}")
    print(f"model  GPT {args.layers} layers, {args.heads} heads, d_model {args.d_model}, context {block}, "
          f"dropout {args.dropout:g}, {params} parameters")
    print(f"train  AdamW lr {args.lr:g} (warm-up {args.warmup}, cosine to {args.min_lr:g}), weight decay "
          f"{args.weight_decay:g}, clip {args.clip:g}, batch {B}, {args.steps} steps, seed {args.seed}, "
          f"torch {torch.__version__}, {torch.get_num_threads()} intra-op threads, OpenBLAS {args.blas_threads}",
          flush=True)

    val_loss = evaluate()
    print(f"step 0: validation loss {val_loss:.4f}", flush=True)
    curve = [{"step": 0, "val_loss": val_loss}]
    train_loss = float("nan")
    window_sum, window_steps = 0.0, 0
    t_train = time.perf_counter()
    model.train()
    for step in range(args.steps):
        x, y = windows(train, torch.randint(0, len(train) - block, (B,), generator=batch_gen))
        for group in opt.param_groups:
            group["lr"] = lr_at(step, args)
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1))
        loss.backward()
        if args.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        opt.step()
        window_sum += loss.item()
        window_steps += 1
        done = step + 1
        if done % args.eval_every == 0 or done == args.steps:
            val_loss = evaluate()
            train_loss = window_sum / window_steps
            window_sum, window_steps = 0.0, 0
            curve.append({"step": done, "val_loss": val_loss, "train_loss": train_loss})
            print(f"step {done}: validation loss {val_loss:.4f}, train loss {train_loss:.4f} "
                  f"({time.perf_counter() - t_start:.1f}s)", flush=True)
    train_s = time.perf_counter() - t_train
    wall_s = time.perf_counter() - t_start
    print(f"\ndone after {args.steps} steps in {wall_s:.1f}s ({args.steps * B * block / train_s:.0f} tokens/s)")
    print(f"final train loss {train_loss:.4f}, validation loss {val_loss:.4f} (nats per token)")
    if args.json:
        print(json.dumps({"framework": "pytorch", "steps": args.steps, "val_loss": val_loss, "train_loss": train_loss,
                          "wall_s": wall_s, "train_s": train_s, "parameters": params, "vocab": vocab,
                          "tokens": n, "symbols": "".join(symbols), "curve": curve}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
