"""PyTorch reference modules for the parity fixtures, named exactly like attograd's layers.

PyTorch has no exact twin for several of attograd's configurations (d_k != d_v, different query,
key and value sizes, projections without bias, separate w_q / w_k / w_v / w_o Linear children),
so the references are written by hand here, and checked against nn.MultiheadAttention and
nn.TransformerEncoderLayer wherever those have the same configuration. Also: a dependency-free
safetensors writer. Used by make_fixtures.py; a development tool only.
"""
import json
import math
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

# ---------------------------------------------------------------- safetensors writer

def save_safetensors(path, tensors, metadata):
    """tensors: list of (name, tensor) in file order; metadata: dict of str -> str."""
    codes = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64", torch.float16: "F16", torch.bfloat16: "BF16"}
    header = {"__metadata__": metadata}
    blobs = []
    offset = 0
    for name, t in tensors:
        t = t.detach().contiguous().cpu()
        if t.dtype == torch.bfloat16:  # numpy has no bfloat16: its bits, as 16-bit integers
            data = t.view(torch.int16).numpy().astype("<i2", copy=False).tobytes()
        else:
            data = t.numpy().astype(t.numpy().dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": codes[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)  # the data section starts 8-byte aligned
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


# ---------------------------------------------------------------- reference modules

def gelu_tanh(x):
    """GPT-2's GELU, the tanh approximation (attograd's Activation::gelu_tanh)."""
    return F.gelu(x, approximate="tanh")


# Hand-written where PyTorch has no exact twin; child and parameter names are attograd's.

def documented_softmax(scores, keep):
    """softmax over the last axis restricted to `keep` (bool, broadcastable); a row that keeps
    nothing gives zeros (attograd's documented value) instead of PyTorch's NaN."""
    if keep is None:
        return F.softmax(scores, dim=-1), None
    keep = keep.expand(scores.shape)
    has_key = keep.any(dim=-1, keepdim=True)
    scores = scores.masked_fill(~(keep | ~has_key), float("-inf"))
    return F.softmax(scores, dim=-1) * has_key, has_key


class ScaledDotProductAttention(nn.Module):
    def __init__(self, scale=0.0, temperature=0.0):
        super().__init__()
        self.scale, self.temperature = scale, temperature

    def factor(self, d_k):
        if self.scale > 0:
            return self.scale
        if self.temperature > 0:
            return 1.0 / self.temperature
        return 1.0 / math.sqrt(d_k)

    def forward(self, q, k, v, keep=None, bias=None):
        # q: (B, H, Tq, d_k), k: (B, H, Tk, d_k), v: (B, H, Tk, d_v)
        scores = (q @ k.transpose(-2, -1)) * self.factor(q.shape[-1])
        if bias is not None:
            scores = scores + bias
        weights, _ = documented_softmax(scores, keep)
        return weights @ v, weights


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_head, d_k=0, d_v=0, q_dim=0, k_dim=0, v_dim=0, bias=True, scale=0.0,
                 temperature=0.0):
        super().__init__()
        self.n_head = n_head
        self.d_k = d_k or d_model // n_head
        self.d_v = d_v or d_model // n_head
        self.w_q = nn.Linear(q_dim or d_model, n_head * self.d_k, bias=bias)
        self.w_k = nn.Linear(k_dim or d_model, n_head * self.d_k, bias=bias)
        self.w_v = nn.Linear(v_dim or d_model, n_head * self.d_v, bias=bias)
        self.w_o = nn.Linear(n_head * self.d_v, d_model, bias=bias)
        self.attention = ScaledDotProductAttention(scale, temperature)

    def split(self, x, d):
        return x.reshape(x.shape[0], x.shape[1], self.n_head, d).transpose(1, 2)

    def forward(self, query, key, value, keep=None, bias=None):
        B, Tq = query.shape[0], query.shape[1]
        q = self.split(self.w_q(query), self.d_k)
        k = self.split(self.w_k(key), self.d_k)
        v = self.split(self.w_v(value), self.d_v)
        heads, weights = self.attention(q, k, v, keep, bias)
        out = self.w_o(heads.transpose(1, 2).reshape(B, Tq, self.n_head * self.d_v))
        if keep is not None:
            # A query that sees no key in any head gets a zero row, not w_o's bias.
            seen = keep.expand(B, self.n_head, Tq, key.shape[1]).any(dim=-1).any(dim=1)  # (B, Tq)
            out = out * seen.unsqueeze(-1)
        return out, weights


class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model, d_hidden, activation="relu", bias=True):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_hidden, bias=bias)
        self.linear2 = nn.Linear(d_hidden, d_model, bias=bias)
        self.activation = {"relu": F.relu, "gelu": F.gelu, "gelu_tanh": gelu_tanh}[activation]

    def forward(self, x):
        return self.linear2(self.activation(self.linear1(x)))


class TransformerBlock(nn.Module):
    def __init__(self, d_model, n_head, d_ff, activation="relu", norm_first=False, layer_norm_eps=1e-5, d_k=0,
                 d_v=0, attn_bias=True, ff_bias=True, scale=0.0, temperature=0.0):
        super().__init__()
        self.norm_first = norm_first
        self.attn = MultiHeadAttention(d_model, n_head, d_k, d_v, bias=attn_bias, scale=scale,
                                       temperature=temperature)
        self.ff = PositionwiseFeedForward(d_model, d_ff, activation, ff_bias)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)

    def forward(self, x, keep=None):
        if self.norm_first:
            y = self.norm1(x)
            h = x + self.attn(y, y, y, keep)[0]
            return h + self.ff(self.norm2(h))
        h = self.norm1(x + self.attn(x, x, x, keep)[0])
        return self.norm2(h + self.ff(h))


class TransformerEncoder(nn.Module):
    def __init__(self, n_layers, block):
        super().__init__()
        self.blocks = nn.ModuleList([TransformerBlock(**block) for _ in range(n_layers)])
        self.norm = nn.LayerNorm(block["d_model"], eps=block.get("layer_norm_eps", 1e-5)) \
            if block.get("norm_first") else None

    def forward(self, x, keep=None):
        for b in self.blocks:
            x = b(x, keep)
        return self.norm(x) if self.norm is not None else x


class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(max_len, d_model))

    def forward(self, x):
        return x + self.weight[: x.shape[1]]


class SequenceModel(nn.Module):
    """models/toy/sequence_model.h: embed -> + learned positions -> encoder -> head, dropout 0."""

    def __init__(self, vocab, max_len, d_model, n_head, d_ff, n_layers, norm_first, dropout, positional):
        super().__init__()
        assert dropout == 0.0 and positional == "learned"
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = LearnedPositionalEmbedding(max_len, d_model)
        self.encoder = TransformerEncoder(n_layers, {"d_model": d_model, "n_head": n_head, "d_ff": d_ff,
                                                     "norm_first": norm_first})
        self.head = nn.Linear(d_model, vocab)

    def forward(self, ids, keep=None):
        return self.head(self.encoder(self.pos(self.embed(ids)), keep))


def cross_entropy(logits, targets, loss):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), **loss)


BLOCK_KEYS = ("d_model", "n_head", "d_ff", "activation", "norm_first", "layer_norm_eps", "d_k", "d_v", "attn_bias",
              "ff_bias", "scale", "temperature")


def block_args(config):
    return {k: config[k] for k in BLOCK_KEYS if k in config}


def close(a, b, what):
    tol = 1e-12 if a.dtype == torch.float64 else 1e-5
    err = (a - b).abs().max().item()
    if not err <= tol:
        sys.exit(f"make_fixtures: the hand-written {what} differs from PyTorch's built-in by {err}")


# ---------------------------------------------------------------- cross-checks against built-ins

def check_mha_against_torch(ref, query, key, value, keep):
    """nn.MultiheadAttention holds w_q, w_k, w_v stacked in in_proj_weight; same numbers expected."""
    d_model = ref.w_o.out_features
    bias = ref.w_o.bias is not None
    mha = nn.MultiheadAttention(d_model, ref.n_head, bias=bias, batch_first=True).to(query.dtype)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([ref.w_q.weight, ref.w_k.weight, ref.w_v.weight]))
        mha.out_proj.weight.copy_(ref.w_o.weight)
        if bias:
            mha.in_proj_bias.copy_(torch.cat([ref.w_q.bias, ref.w_k.bias, ref.w_v.bias]))
            mha.out_proj.bias.copy_(ref.w_o.bias)
    B, Tq, Tk = query.shape[0], query.shape[1], key.shape[1]
    hidden = None if keep is None else ~keep.expand(B, ref.n_head, Tq, Tk).reshape(B * ref.n_head, Tq, Tk)
    out, weights = mha(query, key, value, attn_mask=hidden, need_weights=True, average_attn_weights=False)
    mine, my_weights = ref(query, key, value, keep)
    close(out, mine, "MultiHeadAttention output")
    close(weights, my_weights, "MultiHeadAttention weights")


def check_block_against_torch(ref, x, keep, config):
    layer = nn.TransformerEncoderLayer(config["d_model"], config["n_head"], config["d_ff"], dropout=0.0,
                                       activation=config.get("activation", "relu"),
                                       layer_norm_eps=config.get("layer_norm_eps", 1e-5), batch_first=True,
                                       norm_first=config.get("norm_first", False)).to(x.dtype)
    a = ref.attn
    with torch.no_grad():
        layer.self_attn.in_proj_weight.copy_(torch.cat([a.w_q.weight, a.w_k.weight, a.w_v.weight]))
        layer.self_attn.in_proj_bias.copy_(torch.cat([a.w_q.bias, a.w_k.bias, a.w_v.bias]))
        layer.self_attn.out_proj.weight.copy_(a.w_o.weight)
        layer.self_attn.out_proj.bias.copy_(a.w_o.bias)
        for mine, theirs in ((ref.ff.linear1, layer.linear1), (ref.ff.linear2, layer.linear2),
                             (ref.norm1, layer.norm1), (ref.norm2, layer.norm2)):
            theirs.weight.copy_(mine.weight)
            theirs.bias.copy_(mine.bias)
    B, T = x.shape[0], x.shape[1]
    hidden = None if keep is None else ~keep.expand(B, config["n_head"], T, T).reshape(B * config["n_head"], T, T)
    close(layer(x, src_mask=hidden), ref(x, keep), "TransformerBlock output")


# ---------------------------------------------------------------- PyTorch's decoder layer under attograd's names

def decoder_layer_named(layer, grads=False):
    """(name, tensor) pairs of an nn.TransformerDecoderLayer under attograd's TransformerDecoderLayer
    names, in attograd's order: in_proj_* rows [0, E), [E, 2E), [2E, 3E) are w_q, w_k, w_v,
    out_proj is w_o, linear1 / linear2 are ff.linear1 / ff.linear2. With grads, their gradients."""
    def value(p):
        if not grads:
            return p.detach()
        return p.grad if p.grad is not None else torch.zeros_like(p)

    out = []
    for attn in ("self_attn", "multihead_attn"):
        mha = getattr(layer, attn)
        weights = value(mha.in_proj_weight).chunk(3)
        biases = value(mha.in_proj_bias).chunk(3)
        for proj, w, b in zip(("w_q", "w_k", "w_v"), weights, biases):
            out += [(f"{attn}.{proj}.weight", w), (f"{attn}.{proj}.bias", b)]
        out += [(f"{attn}.w_o.weight", value(mha.out_proj.weight)), (f"{attn}.w_o.bias", value(mha.out_proj.bias))]
    for mine, theirs in (("ff.linear1", layer.linear1), ("ff.linear2", layer.linear2), ("norm1", layer.norm1),
                         ("norm2", layer.norm2), ("norm3", layer.norm3)):
        out += [(mine + ".weight", value(theirs.weight)), (mine + ".bias", value(theirs.bias))]
    return out
