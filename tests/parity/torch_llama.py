"""A PyTorch twin of attograd's Llama family (models/llama/), written from the architecture's
published definition (Hugging Face's LlamaForCausalLM, Qwen2ForCausalLM and Qwen3ForCausalLM):
RMSNorm, rotary position embedding in the "rotate half" layout with Llama 3's scaling, attention
with fewer key/value heads than query heads, the SwiGLU MLP, the pre-norm decoder layer, and the
model with a tied or untied head. Parameter names are Hugging Face's, so a state_dict is what a
model.safetensors holds. Also reads and writes Hugging Face directories (config.json plus
model.safetensors or an index of shards), independently of attograd's reader.

Used by make_llama_fixtures.py and by the round-trip scripts (development tools; never a runtime
dependency).
"""
import json
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def inverse_frequencies(head_dim, theta, scaling=None):
    """theta^(-2i/head_dim), with Llama 3's blend of slowed long waves and kept short ones."""
    inv = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    if not scaling:
        return inv
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    original = scaling["original_max_position_embeddings"]
    wavelength = 2 * math.pi / inv
    smooth = (original / wavelength - low) / (high - low)
    blended = (1 - smooth) * inv / factor + smooth * inv
    out = torch.where(wavelength > original / low, inv / factor, inv)
    medium = (wavelength >= original / high) & (wavelength <= original / low)
    return torch.where(medium, blended, out)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def rotary(x, inv_freq, offset):
    """x: (B, H, T, D) at positions offset .. offset + T - 1."""
    pos = torch.arange(offset, offset + x.shape[2], dtype=torch.float64)
    angles = torch.outer(pos, inv_freq)
    emb = torch.cat([angles, angles], dim=-1)
    return x * emb.cos().to(x.dtype) + rotate_half(x) * emb.sin().to(x.dtype)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, h, kv, hd = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        bias = c["attention_bias"]
        self.h, self.kv, self.hd = h, kv, hd
        self.q_proj = nn.Linear(d, h * hd, bias=bias)
        self.k_proj = nn.Linear(d, kv * hd, bias=bias)
        self.v_proj = nn.Linear(d, kv * hd, bias=bias)
        self.o_proj = nn.Linear(h * hd, d, bias=False)
        self.qk_norm = c["qk_norm"]
        if self.qk_norm:
            self.q_norm = RMSNorm(hd, c["rms_norm_eps"])
            self.k_norm = RMSNorm(hd, c["rms_norm_eps"])
        self.inv_freq = inverse_frequencies(hd, c["rope_theta"], c.get("rope_scaling"))

    def forward(self, x, cache=None):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.h, self.hd)
        k = self.k_proj(x).view(B, T, self.kv, self.hd)
        v = self.v_proj(x).view(B, T, self.kv, self.hd).transpose(1, 2)
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        past = 0 if cache is None or cache.get("k") is None else cache["k"].shape[2]
        q = rotary(q.transpose(1, 2), self.inv_freq, past)
        k = rotary(k.transpose(1, 2), self.inv_freq, past)
        if cache is not None:
            if cache.get("k") is not None:
                k, v = torch.cat([cache["k"], k], 2), torch.cat([cache["v"], v], 2)
            cache["k"], cache["v"] = k, v
        group = self.h // self.kv
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.hd)
        Tk = k.shape[2]
        seen = torch.ones(T, Tk, dtype=torch.bool).tril(diagonal=Tk - T)
        weights = torch.softmax(scores.masked_fill(~seen, float("-inf")), dim=-1)
        out = (weights @ v).transpose(1, 2).reshape(B, T, self.h * self.hd)
        return self.o_proj(out)


class MLP(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.gate_proj = nn.Linear(d, hidden, bias=False)
        self.up_proj = nn.Linear(d, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.input_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.mlp = MLP(c["hidden_size"], c["intermediate_size"])

    def forward(self, x, cache=None):
        h = x + self.self_attn(self.input_layernorm(x), cache)
        return h + self.mlp(self.post_attention_layernorm(h))


class Body(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList([Block(c) for _ in range(c["num_hidden_layers"])])
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])


class Llama(nn.Module):
    """c: a config.json's keys plus "qk_norm" (Qwen3) and "attention_bias" resolved."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        self.model = Body(c)
        self.tied = c["tie_word_embeddings"]
        if not self.tied:
            self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)

    def head_weight(self):
        return self.model.embed_tokens.weight if self.tied else self.lm_head.weight

    def forward(self, ids, caches=None):
        h = self.model.embed_tokens(ids)
        for i, layer in enumerate(self.model.layers):
            h = layer(h, None if caches is None else caches[i])
        return self.model.norm(h) @ self.head_weight().t()

    def greedy(self, prompt, steps, cached):
        seq = prompt.clone()
        caches = [dict() for _ in self.model.layers] if cached else None
        logits = self(seq, caches)
        for _ in range(steps):
            nxt = logits[:, -1].argmax(-1, keepdim=True)
            seq = torch.cat([seq, nxt], 1)
            logits = self(nxt, caches) if cached else self(seq)
        return seq[:, prompt.shape[1]:]


def resolve(config):
    """config.json's keys with each architecture's defaults, as attograd reads them."""
    c = dict(config)
    kind = c["model_type"]
    c.setdefault("num_key_value_heads", c["num_attention_heads"])
    c.setdefault("head_dim", c["hidden_size"] // c["num_attention_heads"])
    c.setdefault("rms_norm_eps", 1e-6)
    c.setdefault("rope_theta", 10000.0)
    c.setdefault("tie_word_embeddings", False)
    c["attention_bias"] = True if kind == "qwen2" else c.get("attention_bias", False)
    c["qk_norm"] = kind == "qwen3"
    return c


def randomize(model, gen):
    """Every parameter N(0, 0.1) (norm weights around 1), as float32 values."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen, dtype=torch.float64))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen, dtype=torch.float64))
            p.copy_(p.float().double())
    return model


def state_tensors(model):
    return [(n, p.detach()) for n, p in model.named_parameters()]


def load_hf_directory(path, save_safetensors_reader):
    """A twin with the weights of a Hugging Face directory (read with the given safetensors reader)."""
    with open(os.path.join(path, "config.json")) as f:
        config = resolve(json.load(f))
    tensors = {}
    index = os.path.join(path, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) else ["model.safetensors"]
    for name in files:
        tensors.update(save_safetensors_reader(os.path.join(path, name)))
    model = Llama(config).double()
    state = {k: v.double() for k, v in tensors.items()}
    model.load_state_dict(state, strict=True)
    return model
