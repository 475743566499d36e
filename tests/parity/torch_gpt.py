"""A nanoGPT-style GPT in PyTorch, the twin of attograd's models/gpt/gpt.h, for the parity fixtures.

Written the way nanoGPT writes it (one fused c_attn projection, attention by hand with a
causal tril buffer, since PyTorch 1.13 has no scaled_dot_product_attention; nn.GELU's exact erf
form, as attograd's GELU; lm_head tied to wte), and exported under attograd's names by
`attograd_named`, which also splits c_attn into w_q, w_k and w_v. The LayerNorms always have a
bias (attograd's `bias` option switches the linear layers' biases only). Dropout is left out:
fixtures compare in eval mode or with dropout 0. A development tool only.
"""
import math
import sys

import torch
import torch.nn.functional as F
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_head, block_size, bias):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.c_proj = nn.Linear(d_model, d_model, bias=bias)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))  # (B, H, T, D)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.shape[-1]))
        att = att.masked_fill(self.tril[:, :, :T, :T] == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    def __init__(self, d_model, bias, activation="gelu"):
        super().__init__()
        self.c_fc = nn.Linear(d_model, 4 * d_model, bias=bias)
        self.gelu = nn.GELU(approximate="tanh" if activation == "gelu_tanh" else "none")
        self.c_proj = nn.Linear(4 * d_model, d_model, bias=bias)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, d_model, n_head, block_size, bias, activation="gelu"):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_head, block_size, bias)
        self.ln_2 = nn.LayerNorm(d_model)
        self.mlp = MLP(d_model, bias, activation)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """config: attograd's GPTOptions keys (vocab, block_size, d_model, n_head, n_layers, dropout, bias,
    activation: gelu, nn.GELU's exact form, or gelu_tanh, GPT-2's)."""

    def __init__(self, vocab, block_size, d_model, n_head, n_layers, dropout=0.0, bias=True, activation="gelu"):
        super().__init__()
        del dropout  # compared in eval mode or with dropout 0 only
        self.block_size = block_size
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, d_model),
            wpe=nn.Embedding(block_size, d_model),
            h=nn.ModuleList([Block(d_model, n_head, block_size, bias, activation) for _ in range(n_layers)]),
            ln_f=nn.LayerNorm(d_model)))
        self.lm_head = nn.Linear(d_model, vocab, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying, as nanoGPT
        # nanoGPT's init: N(0, 0.02), residual projections scaled by 1/sqrt(2 n_layers).
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * n_layers))
            elif name.endswith(".bias") and "ln_" not in name:
                nn.init.zeros_(p)
            elif p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(T))
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


# nanoGPT name (after "transformer.h.<i>.") -> attograd name (after "blocks.<i>.").
BLOCK_NAMES = {"ln_1": "norm1", "ln_2": "norm2", "attn.c_proj": "attn.w_o", "mlp.c_fc": "ff.linear1",
               "mlp.c_proj": "ff.linear2"}


def attograd_named(model, grads=False):
    """(attograd name, tensor) for every parameter of `model` (or its gradient), in nanoGPT's
    order; the tied table appears once, as embed.weight; c_attn splits into w_q, w_k, w_v."""
    out = []
    for name, p in model.named_parameters():  # the tied lm_head.weight is listed once, as wte
        t = p.grad if grads else p
        if t is None:
            t = torch.zeros_like(p)
        t = t.detach()
        if name == "transformer.wte.weight":
            out.append(("embed.weight", t))
        elif name == "transformer.wpe.weight":
            out.append(("pos.weight", t))
        elif name.startswith("transformer.ln_f."):
            out.append(("norm." + name.rsplit(".", 1)[1], t))
        elif name.startswith("transformer.h."):
            _, _, i, rest = name.split(".", 3)
            inner, leaf = rest.rsplit(".", 1)
            if inner == "attn.c_attn":
                for part, chunk in zip(("w_q", "w_k", "w_v"), t.chunk(3, dim=0)):
                    out.append((f"blocks.{i}.attn.{part}.{leaf}", chunk))
            else:
                out.append((f"blocks.{i}.{BLOCK_NAMES[inner]}.{leaf}", t))
        else:
            sys.exit(f"torch_gpt: no attograd name for parameter {name}")
    return out


def check_gpt_against_torch(model, idx):
    """The hand-written twin against PyTorch's own nn.TransformerEncoderLayer (pre-norm, GELU,
    causal mask) carrying the same weights: guards the hand-written attention and the export."""
    C = model.transformer.wte.weight.shape[1]
    T = idx.shape[1]
    x = model.transformer.wte(idx) + model.transformer.wpe(torch.arange(T))
    hidden = ~torch.ones(T, T, dtype=torch.bool).tril()  # True = not allowed
    for block in model.transformer.h:
        if block.attn.c_attn.bias is None:
            return  # PyTorch 1.13's layer always has biases: only a biased twin can be compared
        tanh = block.mlp.gelu.approximate == "tanh"
        layer = nn.TransformerEncoderLayer(C, block.attn.n_head, 4 * C, dropout=0.0,
                                           activation=(lambda x: F.gelu(x, approximate="tanh")) if tanh else "gelu",
                                           batch_first=True, norm_first=True)
        layer = layer.to(x.dtype)
        with torch.no_grad():
            layer.self_attn.in_proj_weight.copy_(block.attn.c_attn.weight)
            layer.self_attn.in_proj_bias.copy_(block.attn.c_attn.bias)
            layer.self_attn.out_proj.weight.copy_(block.attn.c_proj.weight)
            layer.self_attn.out_proj.bias.copy_(block.attn.c_proj.bias)
            for mine, theirs in ((block.mlp.c_fc, layer.linear1), (block.mlp.c_proj, layer.linear2),
                                 (block.ln_1, layer.norm1), (block.ln_2, layer.norm2)):
                theirs.weight.copy_(mine.weight)
                theirs.bias.copy_(mine.bias)
        want = layer(x, src_mask=hidden)
        x = block(x)
        tol = 1e-12 if x.dtype == torch.float64 else 1e-5
        err = (want - x).abs().max().item()
        if not err <= tol:
            sys.exit(f"make_fixtures: the hand-written GPT block differs from nn.TransformerEncoderLayer by {err}")
