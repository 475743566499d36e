"""GPT-2 in PyTorch as Hugging Face's GPT2LMHeadModel lays it out, and writers of its weights in
the three layouts attograd imports, for the GPT-2 fixtures (make_gpt2_fixtures.py) and the
benchmark (bench/gpt2_files.py). A development tool only: attograd never needs Python.

The module uses Hugging Face's names (transformer.wte, transformer.h.N.attn.c_attn, ...) and its
Conv1D orientation: a Conv1D's weight is (in, out) and computes x @ weight + bias, with q, k
and v side by side along out in c_attn. GELU is the tanh approximation ("gelu_new"), LayerNorm
eps 1e-5, the head tied to wte. Written from GPT-2's published description, not copied.

Writers, each independent of attograd's code:
  write_hf        safetensors under Hugging Face's names, Conv1D orientation (optionally with the
                  "transformer." prefix, the causal-mask buffers and lm_head.weight)
  write_nanogpt   safetensors under nanoGPT's state_dict names, nn.Linear orientation (out, in)
  write_llmc      llm.c's .bin: 256 int32 of header (magic 20240326, version 3, max_seq_len,
                  vocab_size, num_layers, num_heads, channels, padded_vocab_size), then float32
                  parameters in llm.c's order, the table padded with zero rows to a multiple of 128
"""
import math
import struct

import torch
import torch.nn.functional as F
from torch import nn

from torch_reference import save_safetensors


class Conv1D(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        return x @ self.weight + self.bias


class Attention(nn.Module):
    def __init__(self, C, n_head):
        super().__init__()
        self.n_head = n_head
        self.c_attn = Conv1D(C, 3 * C)
        self.c_proj = Conv1D(C, C)

    def forward(self, x, cache=None):
        """cache: None, or a dict holding this layer's keys and values so far (KV-cached decoding)."""
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))  # (B, H, T, D)
        past = 0
        if cache is not None:
            if "k" in cache:
                past = cache["k"].shape[2]
                k, v = torch.cat([cache["k"], k], dim=2), torch.cat([cache["v"], v], dim=2)
            cache["k"], cache["v"] = k, v
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.shape[-1])
        S = k.shape[2]
        allowed = torch.ones(T, S, dtype=torch.bool).tril(diagonal=past)
        att = att.masked_fill(~allowed, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    def __init__(self, C):
        super().__init__()
        self.c_fc = Conv1D(C, 4 * C)
        self.c_proj = Conv1D(4 * C, C)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, C, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(C, eps=1e-5)
        self.attn = Attention(C, n_head)
        self.ln_2 = nn.LayerNorm(C, eps=1e-5)
        self.mlp = MLP(C)

    def forward(self, x, cache=None):
        x = x + self.attn(self.ln_1(x), cache)
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    def __init__(self, vocab, block_size, d_model, n_head, n_layers):
        super().__init__()
        self.config = dict(vocab=vocab, block_size=block_size, d_model=d_model, n_head=n_head, n_layers=n_layers)
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, d_model), wpe=nn.Embedding(block_size, d_model),
            h=nn.ModuleList([Block(d_model, n_head) for _ in range(n_layers)]), ln_f=nn.LayerNorm(d_model, eps=1e-5)))

    def forward(self, idx, caches=None, past=0):
        T = idx.shape[1]
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(past, past + T))
        for i, block in enumerate(self.transformer.h):
            x = block(x, None if caches is None else caches[i])
        return self.transformer.ln_f(x) @ self.transformer.wte.weight.t()  # the tied head

    @torch.no_grad()
    def greedy(self, prompt, n):
        """n tokens continuing prompt (a list), argmax at each step, the whole sequence recomputed."""
        seq = list(prompt)
        for _ in range(n):
            logits = self(torch.tensor([seq]))[0, -1]
            seq.append(int(logits.argmax()))
        return seq[len(prompt):]

    @torch.no_grad()
    def greedy_margin(self, prompt, n):
        """The smallest gap between the two largest logits over the steps of greedy(prompt, n)."""
        seq, margin = list(prompt), float("inf")
        for _ in range(n):
            top = self(torch.tensor([seq]))[0, -1].topk(2).values
            margin = min(margin, float(top[0] - top[1]))
            seq.append(int(self(torch.tensor([seq]))[0, -1].argmax()))
        return margin


def randomize(model, gen):
    """Seeded weights of a visible size (not GPT-2's init: every parameter moves the logits), each
    value a float32 so that float32 and float64 copies of the model hold the same numbers."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".ln_" in name or name.startswith("transformer.ln_f"):
                v = torch.randn(p.shape, generator=gen, dtype=torch.float64) * 0.2 + (1.0 if name.endswith("weight") else 0.0)
            elif name.endswith("bias"):
                v = torch.randn(p.shape, generator=gen, dtype=torch.float64) * 0.1
            elif "wte" in name or "wpe" in name:
                v = torch.randn(p.shape, generator=gen, dtype=torch.float64) * 0.5
            else:
                v = torch.randn(p.shape, generator=gen, dtype=torch.float64) / math.sqrt(p.shape[0])
            p.copy_(v.float().double())
    return model


def hf_tensors(model, prefix=True, buffers=False, head=False):
    """(name, tensor) in Hugging Face's order: the state_dict of GPT2LMHeadModel."""
    out = []
    pre = "transformer." if prefix else ""
    for name, p in model.named_parameters():
        out.append((pre + name[len("transformer."):], p.detach()))
        if buffers and name.endswith("attn.c_attn.weight"):
            layer = name[len("transformer."):].split(".attn.")[0]
            T = model.config["block_size"]
            out.append((pre + layer + ".attn.bias", torch.ones(T, T).tril().view(1, 1, T, T).to(p.dtype)))
            out.append((pre + layer + ".attn.masked_bias", torch.tensor(-1e4, dtype=p.dtype)))
    if head:
        out.append(("lm_head.weight", model.transformer.wte.weight.detach()))
    return out


def write_hf(path, model, dtype, **layout):
    save_safetensors(path, [(n, t.to(dtype)) for n, t in hf_tensors(model, **layout)], {"format": "pt"})


def write_nanogpt(path, model, dtype):
    """nanoGPT's GPT.state_dict(): the same names, nn.Linear weights (out, in), lm_head.weight tied."""
    tensors = []
    for name, t in hf_tensors(model, prefix=True, head=True):
        is_linear = any(name.endswith(k + ".weight") for k in ("c_attn", "c_proj", "c_fc"))
        tensors.append((name, (t.t() if is_linear else t).to(dtype)))
    save_safetensors(path, tensors, {})


def llmc_order(model):
    """llm.c's parameter tensors in file order, (L, ...) stacks of every layer, Linear orientation."""
    h = model.transformer.h
    stack = lambda f: torch.stack([f(b).detach() for b in h])  # noqa: E731
    return [
        stack(lambda b: b.ln_1.weight), stack(lambda b: b.ln_1.bias),
        stack(lambda b: b.attn.c_attn.weight.t()), stack(lambda b: b.attn.c_attn.bias),
        stack(lambda b: b.attn.c_proj.weight.t()), stack(lambda b: b.attn.c_proj.bias),
        stack(lambda b: b.ln_2.weight), stack(lambda b: b.ln_2.bias),
        stack(lambda b: b.mlp.c_fc.weight.t()), stack(lambda b: b.mlp.c_fc.bias),
        stack(lambda b: b.mlp.c_proj.weight.t()), stack(lambda b: b.mlp.c_proj.bias),
        model.transformer.ln_f.weight.detach(), model.transformer.ln_f.bias.detach()]


def write_llmc(path, model, magic=20240326, version=3, truncate=0):
    c = model.config
    V, C = c["vocab"], c["d_model"]
    Vp = (V + 127) // 128 * 128
    header = [0] * 256
    header[:8] = [magic, version, c["block_size"], V, c["n_layers"], c["n_head"], C, Vp]
    wte = torch.zeros(Vp, C, dtype=torch.float32)
    wte[:V] = model.transformer.wte.weight.detach().float()
    body = [wte, model.transformer.wpe.weight.detach()] + llmc_order(model)
    data = struct.pack("<256i", *header) + b"".join(t.float().contiguous().numpy().astype("<f4").tobytes() for t in body)
    with open(path, "wb") as f:
        f.write(data[:len(data) - truncate])
