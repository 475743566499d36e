#!/usr/bin/env python3
"""The PyTorch twin of tools/train_seq2seq: the same generated tasks, model, initialisation
scheme, optimizer, schedule, clipping, held-out evaluation and stopping rule, so that the steps
and the seconds to reach a target accuracy can be compared; then the decoding throughput of the
trained model, greedy and beam search, both with a KV cache. A development tool only (run it
with Debian's /usr/bin/python3, PyTorch 1.13).

  /usr/bin/python3 bench/torch_seq2seq_train.py --task reverse-var --json
  /usr/bin/python3 bench/torch_seq2seq_train.py --task addition --min-len 1 --max-len 8 --steps 6000

What is the same as train_seq2seq (train/seq2seq_tasks.h, models/seq2seq/seq2seq.h, models/seq2seq/seq2seq_decode.h,
train/optim.h, train/schedule.h, train/clip.h):
  * tasks: addition ("417+38" -> "455", each operand min_len..max_len digits, no leading zero,
    most significant digit first; digits are tokens 3..12, '+' 13), reverse-var, sort-var and
    dedup (min_len..max_len symbols of --symbols, tokens 3..; dedup repeats the previous symbol
    with probability 1/2); 0 pad, 1 bos, 2 eos; a batch is padded to its longest source and
    target, the decoder reads bos y_1 .. y_n and predicts y_1 .. y_n eos;
  * model: tests/parity/torch_seq2seq.py's Seq2Seq (nn.Transformer, batch first, relu, post-norm
    unless --norm-first, final norms on both sides) with attograd's defaults around it: separate
    source and target tables N(0, d_model^-1/2), looked-up rows times sqrt(d_model) plus the
    sinusoidal table (base 10000), dropout on that sum, an untied head with bias;
  * initialisation: every projection as a PyTorch Linear draws it (weight and bias uniform in
    +-1/sqrt(fan_in)); attograd's attention has four Linear children, so the query, key, value
    and output projections (biases too) start that way here, not with nn.Transformer's xavier
    and zero biases; LayerNorms 1 and 0;
  * a step: --batch examples, mean cross-entropy over the real target tokens (eos included,
    pads ignored), backward, global gradient norm clipped to --clip (factor clip / (norm + 1e-6)),
    Adam (betas 0.9 / 0.999, eps 1e-8, --weight-decay as L2 added to the gradient) at the rate of
    update n: lr (n+1)/W during the warm-up, then cosine from lr to min_lr at --steps;
  * evaluation: after every --eval-every steps (and after the last), greedy decoding of a fixed
    held-out set of --eval-sequences sources (drawn once from a generator of its own, whatever
    --seed says), in batches of 256, at most longest-target + 1 tokens; a sequence is right when
    its tokens equal the target and it ended with eos; training stops at the first evaluation at
    --target or above;
  * decoding (models/seq2seq/seq2seq_decode.cpp): greedy takes the most likely token (the first on a
    tie); beam search keeps --beam hypotheses per source by summed log-probability, looks at the
    best 2 * beam extensions per step (ties to the lower beam, then token), moves those ending in
    eos to the finished set (the best beam kept), stops when beam hypotheses finished and no alive
    one, ending at its present length, would beat the worst of them (at max tokens the alive ones
    count as finished) and returns the best by log_prob / ((5 + n) / 6)^0.6, n counting eos.
    The decoder's self-attention keys and values are cached per layer, the cross-attention's
    computed once per source.
What differs: the random numbers (torch's and numpy's generators for the weights, dropout and
the examples, attograd's counter-based one there), so the runs see other examples of the same
distribution and start from other weights of the same distribution; the float32 kernels;
beam search here encodes each source at its own length rather than padded to the batch's
(the same result: padding is masked); the throughput pass and its timing are this script's.
This script's own flags: --weight-decay (default 0), --beam (the throughput pass's width,
default 4), --quiet.
JSON (--json, the last line): steps, reached, train_s (the training loop with its evaluations),
seq_acc (greedy, of the final model on the held-out set), greedy_seq_per_s, beam4_seq_per_s,
beam4_seq_acc.
"""
import argparse
import json
import math
import os
import sys
import time
import warnings

PAD, BOS, EOS, FIRST = 0, 1, 2, 3
IGNORE = -100  # tgt_out past each target, cross_entropy's ignore_index
TASKS = ("addition", "reverse-var", "sort-var", "dedup")
EVAL_SEED = 0x5EEDE7A1


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", choices=TASKS, default="reverse-var")
    p.add_argument("--symbols", type=int, default=10, help="content symbols (not addition: ten digits)")
    p.add_argument("--min-len", type=int, default=1, help="shortest source (addition: digits per operand)")
    p.add_argument("--max-len", type=int, default=8, help="longest source (addition: digits per operand)")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--d-ff", type=int, default=256)
    p.add_argument("--encoder-layers", type=int, default=2)
    p.add_argument("--decoder-layers", type=int, default=2)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--norm-first", action="store_true", help="pre-norm layers (default post-norm)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--min-lr", type=float, default=1e-4)
    p.add_argument("--weight-decay", type=float, default=0.0, help="Adam's L2 penalty")
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--steps", type=int, default=4000, help="step budget and end of the cosine decay")
    p.add_argument("--clip", type=float, default=1.0, help="max global gradient norm, 0 = off")
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--eval-sequences", type=int, default=512)
    p.add_argument("--target", type=float, default=0.99, help="stop at this held-out exact-match accuracy")
    p.add_argument("--beam", type=int, default=4, help="beam width of the throughput pass")
    p.add_argument("--seed", type=int, default=0, help="weights, dropout and training examples")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    p.add_argument("--json", action="store_true", help="end with one JSON line of the results")
    p.add_argument("--quiet", action="store_true", help="no line per evaluation")
    a = p.parse_args()
    if a.d_model % a.heads != 0:
        p.error(f"--heads {a.heads} does not divide --d-model {a.d_model}")
    if not 1 <= a.min_len <= a.max_len:
        p.error(f"need 1 <= --min-len {a.min_len} <= --max-len {a.max_len}")
    if a.task == "addition" and a.max_len > 18:
        p.error("addition: at most 18 digits per operand")
    if not 0 <= a.warmup < a.steps:
        p.error(f"--warmup {a.warmup} must lie in [0, --steps {a.steps})")
    if a.eval_every < 1 or a.eval_sequences < 1 or a.batch < 1 or a.beam < 1:
        p.error("--eval-every, --eval-sequences, --batch and --beam must be positive")
    return a


# ---------------------------------------------------------------- tasks

class Task:
    """train/seq2seq_tasks.cpp's distributions, drawn from a numpy Generator."""

    def __init__(self, a):
        self.kind, self.symbols, self.min_len, self.max_len = a.task, a.symbols, a.min_len, a.max_len
        self.addition = a.task == "addition"
        self.vocab = FIRST + 11 if self.addition else FIRST + a.symbols
        self.max_source = 2 * a.max_len + 1 if self.addition else a.max_len
        self.max_target = a.max_len + 1 if self.addition else a.max_len

    def number(self, rng):
        """A number of min_len..max_len digits, no leading zero (0 itself has one digit)."""
        digits = int(rng.integers(self.min_len, self.max_len + 1))
        low = 0 if digits == 1 else 10 ** (digits - 1)
        return int(rng.integers(low, 10 ** digits))

    def example(self, rng):
        if self.addition:
            x, y = self.number(rng), self.number(rng)
            src = [FIRST + int(c) for c in str(x)] + [FIRST + 10] + [FIRST + int(c) for c in str(y)]
            return src, [FIRST + int(c) for c in str(x + y)]
        n = int(rng.integers(self.min_len, self.max_len + 1))
        src = [FIRST + int(s) for s in rng.integers(0, self.symbols, n)]
        if self.kind == "dedup":
            repeat = rng.integers(0, 2, n)
            for i in range(1, n):
                if repeat[i]:
                    src[i] = src[i - 1]
        if self.kind == "reverse-var":
            return src, src[::-1]
        if self.kind == "sort-var":
            return src, sorted(src)
        return src, [t for i, t in enumerate(src) if i == 0 or t != src[i - 1]]  # dedup

    def examples(self, rng, n):
        return [self.example(rng) for _ in range(n)]


def pad_batch(torch, examples):
    """-> src (B, S), src_lengths, tgt_in (B, T), tgt_out (B, T), tgt_lengths (T = longest target + 1)."""
    import numpy as np
    B = len(examples)
    src_lengths = [len(s) for s, _ in examples]
    tgt_lengths = [len(t) + 1 for _, t in examples]
    S, T = max(src_lengths), max(tgt_lengths)
    src = np.full((B, S), PAD, dtype=np.int64)
    tgt_in = np.full((B, T), PAD, dtype=np.int64)
    tgt_out = np.full((B, T), IGNORE, dtype=np.int64)
    for b, (s, t) in enumerate(examples):
        src[b, :len(s)] = s
        tgt_in[b, :len(t) + 1] = [BOS] + t
        tgt_out[b, :len(t) + 1] = t + [EOS]
    return (torch.from_numpy(src), src_lengths, torch.from_numpy(tgt_in), torch.from_numpy(tgt_out), tgt_lengths)


# ---------------------------------------------------------------- model

def define_model(torch, a, vocab, max_len):
    """tests/parity/torch_seq2seq.py's Seq2Seq with attograd's defaults: sinusoidal positions,
    dropout after the positioned embeddings, Linear inits everywhere, tables N(0, d^-1/2)."""
    from torch import nn
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "parity"))
    from torch_seq2seq import Seq2Seq  # noqa: E402

    class SinusoidalSeq2Seq(Seq2Seq):
        def __init__(self):
            super().__init__(vocab, vocab, max_len, a.d_model, a.heads, a.d_ff, a.encoder_layers, a.decoder_layers,
                             a.dropout, norm_first=a.norm_first)
            del self.pos  # the learned table: attograd's default is the sinusoidal one, not trained
            d = a.d_model
            pe = torch.zeros(max_len, d, dtype=torch.float64)
            t = torch.arange(max_len, dtype=torch.float64).reshape(-1, 1)
            angle = t * torch.pow(torch.tensor(10000.0, dtype=torch.float64),
                                  -torch.arange(0, d, 2, dtype=torch.float64) / d)
            pe[:, 0::2] = torch.sin(angle)
            pe[:, 1::2] = torch.cos(angle[:, :d // 2])
            self.register_buffer("pe", pe.float())
            self.embed_dropout = nn.Dropout(a.dropout)
            self.reset_like_attograd()

        def reset_like_attograd(self):
            with torch.no_grad():
                for table in (self.src_embed, self.tgt_embed):
                    table.weight.normal_(0.0, self.d_model ** -0.5)
                for m in self.modules():
                    if isinstance(m, nn.Linear):  # out_proj included: its bias is random too
                        m.reset_parameters()
                    elif isinstance(m, nn.MultiheadAttention):  # w_q, w_k, w_v: three Linear(d, d)
                        bound = 1.0 / math.sqrt(self.d_model)
                        m.in_proj_weight.uniform_(-bound, bound)
                        m.in_proj_bias.uniform_(-bound, bound)

        def embed(self, table, ids, start=0):
            T = ids.shape[1]
            return self.embed_dropout(table(ids) * math.sqrt(self.d_model) + self.pe[start:start + T])

    return SinusoidalSeq2Seq()


def lr_at(step, a):
    """The rate of update number `step` (0-based): train/schedule.h, cosine decay."""
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    progress = min(1.0, (step - a.warmup) / (a.steps - a.warmup))
    return a.min_lr + (a.lr - a.min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))


# ---------------------------------------------------------------- decoding

class CachedDecoder:
    """One target position per step over a fixed memory, in eval mode under no_grad: the
    self-attention keys and values of every layer kept in (B, H, max_tokens, dh) buffers, the
    cross-attention's computed once from the memory."""

    def __init__(self, torch, model, memory, src_lengths, max_tokens):
        self.torch, self.model = torch, model
        self.F = torch.nn.functional
        B, S, d = memory.shape
        self.H = model.transformer.decoder.layers[0].self_attn.num_heads
        self.dh = d // self.H
        self.scale = 1.0 / math.sqrt(self.dh)
        self.length = 0
        keep = torch.arange(S).reshape(1, S) < torch.tensor(src_lengths).reshape(-1, 1)
        self.memory_bias = torch.zeros(B, 1, 1, S).masked_fill(~keep.reshape(B, 1, 1, S), float("-inf"))
        self.self_k, self.self_v, self.mem_k, self.mem_v = [], [], [], []
        for layer in model.transformer.decoder.layers:
            self.self_k.append(torch.zeros(B, self.H, max_tokens, self.dh))
            self.self_v.append(torch.zeros(B, self.H, max_tokens, self.dh))
            w, b = layer.multihead_attn.in_proj_weight, layer.multihead_attn.in_proj_bias
            self.mem_k.append(self.heads(self.F.linear(memory, w[d:2 * d], b[d:2 * d])))
            self.mem_v.append(self.heads(self.F.linear(memory, w[2 * d:], b[2 * d:])))

    def heads(self, x):  # (B, T, d) -> (B, H, T, dh)
        return x.reshape(x.shape[0], x.shape[1], self.H, self.dh).transpose(1, 2)

    def attend(self, q, k, v, bias, out_proj):  # q (B, H, 1, dh), k and v (B, H, n, dh)
        scores = (q @ k.transpose(-2, -1)) * self.scale
        if bias is not None:
            scores = scores + bias
        o = scores.softmax(-1) @ v  # (B, H, 1, dh)
        return out_proj(o.transpose(1, 2).reshape(o.shape[0], 1, -1))

    def step(self, tokens):
        """tokens (B,) at position length -> logits (B, vocab) for the next position."""
        F, t, d = self.F, self.length, self.model.d_model
        x = self.model.embed(self.model.tgt_embed, tokens.reshape(-1, 1), start=t)
        self.length += 1
        for i, layer in enumerate(self.model.transformer.decoder.layers):
            sa, ca = layer.self_attn, layer.multihead_attn

            def self_block(y):
                q, k, v = F.linear(y, sa.in_proj_weight, sa.in_proj_bias).split(d, dim=-1)
                self.self_k[i][:, :, t] = k.reshape(-1, self.H, self.dh)
                self.self_v[i][:, :, t] = v.reshape(-1, self.H, self.dh)
                return self.attend(self.heads(q), self.self_k[i][:, :, :t + 1], self.self_v[i][:, :, :t + 1], None,
                                   sa.out_proj)

            def cross_block(y):
                q = self.heads(F.linear(y, ca.in_proj_weight[:d], ca.in_proj_bias[:d]))
                return self.attend(q, self.mem_k[i], self.mem_v[i], self.memory_bias, ca.out_proj)

            def ff(y):
                return layer.linear2(F.relu(layer.linear1(y)))

            if layer.norm_first:
                x = x + self_block(layer.norm1(x))
                x = x + cross_block(layer.norm2(x))
                x = x + ff(layer.norm3(x))
            else:
                x = layer.norm1(x + self_block(x))
                x = layer.norm2(x + cross_block(x))
                x = layer.norm3(x + ff(x))
        x = self.model.transformer.decoder.norm(x)
        return self.model.head(x)[:, 0]

    def reorder(self, rows):
        """Row i becomes the former row rows[i] (a LongTensor)."""
        pick = lambda ts: [u.index_select(0, rows) for u in ts]  # noqa: E731
        self.self_k, self.self_v = pick(self.self_k), pick(self.self_v)
        self.mem_k, self.mem_v = pick(self.mem_k), pick(self.mem_v)
        self.memory_bias = self.memory_bias.index_select(0, rows)


def encode(torch, model, src, src_lengths):
    from torch_seq2seq import padding
    return model.transformer.encoder(model.embed(model.src_embed, src),
                                     src_key_padding_mask=padding(src_lengths, src.shape[1]))


def greedy_decode(torch, model, sources, max_tokens):
    """sources: lists of tokens -> (tokens, ended) per source, one batch."""
    src, src_lengths, _, _, _ = pad_batch(torch, [(s, []) for s in sources])
    dec = CachedDecoder(torch, model, encode(torch, model, src, src_lengths), src_lengths, max_tokens)
    B = len(sources)
    out = [[] for _ in range(B)]
    ended = torch.zeros(B, dtype=torch.bool)
    chosen = []
    nxt = torch.full((B,), BOS, dtype=torch.long)
    for _ in range(max_tokens):
        nxt = torch.where(ended, nxt, dec.step(nxt).argmax(-1))  # finished rows keep their last token
        chosen.append(nxt.clone())
        ended = ended | (nxt == EOS)
        if bool(ended.all()):
            break
    rows = torch.stack(chosen, 1).tolist()
    done = [False] * B
    for b in range(B):
        for tok in rows[b]:
            if tok == EOS:
                done[b] = True
                break
            out[b].append(tok)
    return list(zip(out, done))


def length_penalty(n, alpha):
    return ((5.0 + n) / 6.0) ** alpha


def beam_search_one(torch, model, source, beam, max_tokens, alpha=0.6):
    """models/seq2seq/seq2seq_decode.cpp beam_search_one: the best (tokens, ended)."""
    K = beam
    src = torch.tensor([source])
    memory = encode(torch, model, src, [len(source)]).expand(K, -1, -1)
    dec = CachedDecoder(torch, model, memory, [len(source)] * K, max_tokens)
    dead = float("-inf")
    beams = [([], 0.0)] + [([], dead)] * (K - 1)  # only beam 0 alive at the start
    nxt = torch.full((K,), BOS, dtype=torch.long)
    finished = []  # (score, tokens, ended)

    def finish(tokens, log_prob, ended):
        finished.append((log_prob / length_penalty(len(tokens) + (1 if ended else 0), alpha), tokens, ended))
        if len(finished) > K:  # keep the best K; of equal scores the last one goes
            worst = min(range(len(finished)), key=lambda i: (finished[i][0], -i))
            del finished[worst]

    for t in range(max_tokens):
        lp = torch.log_softmax(dec.step(nxt).double(), -1).tolist()  # (K, V)
        V = len(lp[0])
        candidates = [(beams[k][1] + lp[k][v], k, v) for k in range(K) if beams[k][1] != dead for v in range(V)]
        candidates.sort(key=lambda c: (-c[0], c[1], c[2]))
        alive, rows = [], []
        for log_prob, k, v in candidates[:2 * K]:
            if len(alive) >= K:
                break
            if v == EOS:
                finish(beams[k][0], log_prob, True)
                continue
            alive.append((beams[k][0] + [v], log_prob))
            rows.append(k)
        if not alive:
            break
        # Done when K have finished and no alive one, ending at its present length, beats the worst.
        if len(finished) >= K and min(f[0] for f in finished) >= max(
                log_prob / length_penalty(len(tokens), alpha) for tokens, log_prob in alive):
            break
        while len(alive) < K:  # dead fillers repeating row 0
            alive.append((alive[0][0], dead))
            rows.append(rows[0])
        dec.reorder(torch.tensor(rows))
        beams = alive
        nxt = torch.tensor([b[0][-1] for b in beams])
        if t + 1 == max_tokens:
            for tokens, log_prob in beams:
                if log_prob != dead:
                    finish(tokens, log_prob, False)
    best = max(range(len(finished)), key=lambda i: (finished[i][0], -i))  # the first of the best
    return finished[best][1], finished[best][2]


def exact(hyps, examples):
    return sum(1 for (tokens, ended), (_, tgt) in zip(hyps, examples) if ended and tokens == tgt) / len(examples)


def greedy_all(torch, model, examples, max_tokens, chunk=256):
    hyps = []
    for i in range(0, len(examples), chunk):
        hyps += greedy_decode(torch, model, [s for s, _ in examples[i:i + chunk]], max_tokens)
    return hyps


# ---------------------------------------------------------------- main

def main():
    a = parse_args()
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    import numpy as np
    import torch  # noqa: E402  (after the thread settings)
    from torch.nn import functional as F

    torch.set_num_threads(a.threads)
    warnings.filterwarnings("ignore", message="The PyTorch API of nested tensors")  # the encoder's eval path
    torch.manual_seed(a.seed)
    task = Task(a)
    max_tokens = task.max_target + 1
    model = define_model(torch, a, task.vocab, max(task.max_source, max_tokens))
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.Adam(model.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=a.weight_decay)
    train_rng = np.random.default_rng(a.seed)
    # The held-out set does not move with --seed (attograd's eval_seed default, models/toy/sequence_tasks.h).
    held_out = task.examples(np.random.default_rng(EVAL_SEED), a.eval_sequences)

    def evaluate():
        model.eval()
        with torch.no_grad():
            acc = exact(greedy_all(torch, model, held_out, max_tokens), held_out)
        model.train()
        return acc

    if not a.quiet:
        print(f"task   {a.task}: lengths {a.min_len}..{a.max_len}" +
              ("" if task.addition else f", {a.symbols} symbols") + f", vocab {task.vocab}")
        print(f"model  Seq2Seq d_model {a.d_model}, {a.heads} heads, d_ff {a.d_ff}, layers {a.encoder_layers}+"
              f"{a.decoder_layers}, dropout {a.dropout:g}, {'pre' if a.norm_first else 'post'}-norm, {params} parameters")
        print(f"train  Adam lr {a.lr:g} (warm-up {a.warmup}, cosine to {a.min_lr:g} at {a.steps}), clip {a.clip:g}, "
              f"batch {a.batch}, eval every {a.eval_every} on {a.eval_sequences}, target {a.target:g}, seed {a.seed}, "
              f"torch {torch.__version__}, {torch.get_num_threads()} threads", flush=True)

    t_train = time.perf_counter()
    model.train()
    done, reached, acc, loss_sum, loss_steps = 0, False, 0.0, 0.0, 0
    for step in range(a.steps):
        src, src_lengths, tgt_in, tgt_out, tgt_lengths = pad_batch(torch, task.examples(train_rng, a.batch))
        for group in opt.param_groups:
            group["lr"] = lr_at(step, a)
        opt.zero_grad(set_to_none=True)
        logits = model(src, src_lengths, tgt_in, tgt_lengths)
        loss = F.cross_entropy(logits.reshape(-1, task.vocab), tgt_out.reshape(-1), ignore_index=IGNORE)
        loss.backward()
        if a.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        opt.step()
        loss_sum += loss.item()
        loss_steps += 1
        done = step + 1
        if done % a.eval_every == 0 or done == a.steps:
            acc = evaluate()
            if not a.quiet:
                print(f"step {done}: loss {loss_sum / loss_steps:.4f}, held-out exact match {acc:.4f} "
                      f"({time.perf_counter() - t_train:.1f}s)", flush=True)
            loss_sum, loss_steps = 0.0, 0
            if acc >= a.target:
                reached = True
                break
    train_s = time.perf_counter() - t_train

    model.eval()
    with torch.no_grad():
        t0 = time.perf_counter()
        greedy = greedy_all(torch, model, held_out, max_tokens)
        greedy_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        beamed = [beam_search_one(torch, model, s, a.beam, max_tokens) for s, _ in held_out]
        beam_s = time.perf_counter() - t0
    seq_acc, beam_acc = exact(greedy, held_out), exact(beamed, held_out)
    n = len(held_out)
    if not a.quiet:
        print(f"\n{'reached' if reached else 'did not reach'} {a.target:g} after {done} steps in {train_s:.1f}s")
        print(f"greedy  exact match {seq_acc:.4f}, {n / greedy_s:.0f} sequences/s")
        print(f"beam {a.beam}  exact match {beam_acc:.4f}, {n / beam_s:.1f} sequences/s")
    if a.json:
        print(json.dumps({"steps": done, "reached": reached, "train_s": round(train_s, 3), "seq_acc": seq_acc,
                          "greedy_seq_per_s": round(n / greedy_s, 1), f"beam{a.beam}_seq_per_s": round(n / beam_s, 2),
                          f"beam{a.beam}_seq_acc": beam_acc}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
