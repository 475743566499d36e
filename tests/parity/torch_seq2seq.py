"""PyTorch twins of the encoder-decoder pieces, for make_fixtures.py.

Seq2Seq: torch.nn.Transformer (batch_first) with token tables, a learned positional table and
a head around it, the model of attograd's models/seq2seq/seq2seq.h; attograd_named exports its
parameters (or their gradients) under attograd's names.

SeedsDecoderLayer: a hand-written decoder layer in the style of the implementations attograd's
attention came from (separate d_k and d_v per head, projections with or without bias), its
children named as attograd's TransformerDecoderLayer, so its state_dict maps 1:1; checked here
against nn.TransformerDecoderLayer where the two can agree.

SeedsSeq2Seq: the seeds' whole model composed by hand from torch_reference.TransformerBlock and
SeedsDecoderLayer (each checked against PyTorch's built-in layer), named as attograd's Seq2Seq
with the seed's options, so its state_dict (the positional table included) maps 1:1.
"""
import math

import torch
from torch import nn

from torch_reference import MultiHeadAttention, PositionwiseFeedForward, TransformerBlock, close, decoder_layer_named


def padding(lengths, T):
    """Boolean (B, T), True at padded positions (PyTorch's key_padding_mask convention)."""
    return torch.arange(T).reshape(1, T) >= torch.tensor(lengths).reshape(-1, 1)


class Seq2Seq(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, max_len, d_model, n_head, d_ff, n_encoder_layers, n_decoder_layers,
                 dropout, norm_first=False, share_embeddings=False, tie_head=False):
        super().__init__()
        self.d_model, self.tie_head = d_model, tie_head
        self.src_embed = nn.Embedding(src_vocab, d_model)
        self.tgt_embed = self.src_embed if share_embeddings else nn.Embedding(tgt_vocab, d_model)
        self.pos = nn.Parameter(torch.zeros(max_len, d_model))
        self.transformer = nn.Transformer(d_model, n_head, n_encoder_layers, n_decoder_layers, d_ff, dropout,
                                          batch_first=True, norm_first=norm_first)
        self.head = None if tie_head else nn.Linear(d_model, tgt_vocab)

    def embed(self, table, ids):
        return table(ids) * math.sqrt(self.d_model) + self.pos[:ids.shape[1]]

    def forward(self, src, src_lengths, tgt, tgt_lengths):
        S, T = src.shape[1], tgt.shape[1]
        src_pad, tgt_pad = padding(src_lengths, S), padding(tgt_lengths, T)
        causal = torch.ones(T, T, dtype=torch.bool).triu(1)  # True = not allowed
        h = self.transformer(self.embed(self.src_embed, src), self.embed(self.tgt_embed, tgt), tgt_mask=causal,
                             src_key_padding_mask=src_pad, tgt_key_padding_mask=tgt_pad,
                             memory_key_padding_mask=src_pad)
        return h @ self.tgt_embed.weight.t() if self.tie_head else self.head(h)


def _value(p, grads):
    if not grads:
        return p.detach()
    return p.grad if p.grad is not None else torch.zeros_like(p)


def attograd_named(model, share_embeddings, grads=False):
    """(name, tensor) pairs under attograd's Seq2Seq names: encoder.blocks.<i>.attn.w_q (rows of
    in_proj), ff.linear1, norm1, ...; decoder.layers.<i>.* as decoder_layer_named; encoder.norm,
    decoder.norm; embed or src_embed / tgt_embed; pos; head unless tied."""
    v = lambda p: _value(p, grads)  # noqa: E731
    out = []
    if share_embeddings:
        out.append(("embed.weight", v(model.src_embed.weight)))
    else:
        out += [("src_embed.weight", v(model.src_embed.weight)), ("tgt_embed.weight", v(model.tgt_embed.weight))]
    out.append(("pos.weight", v(model.pos)))
    for i, layer in enumerate(model.transformer.encoder.layers):
        prefix = f"encoder.blocks.{i}."
        attn = layer.self_attn
        for proj, w, b in zip(("w_q", "w_k", "w_v"), v(attn.in_proj_weight).chunk(3), v(attn.in_proj_bias).chunk(3)):
            out += [(prefix + f"attn.{proj}.weight", w), (prefix + f"attn.{proj}.bias", b)]
        out += [(prefix + "attn.w_o.weight", v(attn.out_proj.weight)), (prefix + "attn.w_o.bias", v(attn.out_proj.bias))]
        for mine, theirs in (("ff.linear1", layer.linear1), ("ff.linear2", layer.linear2), ("norm1", layer.norm1),
                             ("norm2", layer.norm2)):
            out += [(prefix + mine + ".weight", v(theirs.weight)), (prefix + mine + ".bias", v(theirs.bias))]
    norm = model.transformer.encoder.norm
    out += [("encoder.norm.weight", v(norm.weight)), ("encoder.norm.bias", v(norm.bias))]
    for i, layer in enumerate(model.transformer.decoder.layers):
        out += [(f"decoder.layers.{i}." + k, t) for k, t in decoder_layer_named(layer, grads)]
    norm = model.transformer.decoder.norm
    out += [("decoder.norm.weight", v(norm.weight)), ("decoder.norm.bias", v(norm.bias))]
    if model.head is not None:
        out += [("head.weight", v(model.head.weight)), ("head.bias", v(model.head.bias))]
    return out


class SeedsDecoderLayer(nn.Module):
    def __init__(self, d_model, n_head, d_ff, d_memory=0, d_k=0, d_v=0, attn_bias=True, ff_bias=True,
                 norm_first=False, activation="relu", layer_norm_eps=1e-5):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_head, d_k, d_v, bias=attn_bias)
        self.multihead_attn = MultiHeadAttention(d_model, n_head, d_k, d_v, k_dim=d_memory or d_model,
                                                 v_dim=d_memory or d_model, bias=attn_bias)
        self.ff = PositionwiseFeedForward(d_model, d_ff, activation, ff_bias)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm3 = nn.LayerNorm(d_model, eps=layer_norm_eps)

    def forward(self, x, memory, tgt_keep=None, memory_keep=None):
        """tgt_keep (., ., T, T) and memory_keep (., ., T|1, S): boolean, True = seen."""
        self_attn = lambda y: self.self_attn(y, y, y, tgt_keep)[0]  # noqa: E731
        cross = lambda y: self.multihead_attn(y, memory, memory, memory_keep)[0]  # noqa: E731
        if self.norm_first:
            h = x + self_attn(self.norm1(x))
            c = h + cross(self.norm2(h))
            return c + self.ff(self.norm3(c))
        h = self.norm1(x + self_attn(x))
        c = self.norm2(h + cross(h))
        return self.norm3(c + self.ff(c))


def check_seeds_decoder_against_torch(dtype):
    """With d_k = d_v = d_model / n_head, biases and equal widths, SeedsDecoderLayer is
    nn.TransformerDecoderLayer: copy torch's weights in and compare outputs under every mask."""
    torch.manual_seed(0)
    theirs = nn.TransformerDecoderLayer(8, 2, 12, dropout=0.0, batch_first=True).to(dtype)
    mine = SeedsDecoderLayer(8, 2, 12).to(dtype)
    with torch.no_grad():
        for name, t in decoder_layer_named(theirs):
            mine.get_parameter(name).copy_(t)
    B, T, S = 2, 4, 5
    x, memory = torch.randn(B, T, 8, dtype=dtype), torch.randn(B, S, 8, dtype=dtype)
    tgt_lengths, memory_lengths = [4, 2], [1, 5]
    causal = torch.ones(T, T, dtype=torch.bool).triu(1)
    expected = theirs(x, memory, tgt_mask=causal, tgt_key_padding_mask=padding(tgt_lengths, T),
                      memory_key_padding_mask=padding(memory_lengths, S))
    tgt_keep = (~causal).reshape(1, 1, T, T) & ~padding(tgt_lengths, T).reshape(B, 1, 1, T)
    memory_keep = ~padding(memory_lengths, S).reshape(B, 1, 1, S)
    close(mine(x, memory, tgt_keep, memory_keep), expected, "SeedsDecoderLayer against nn.TransformerDecoderLayer")


def sinusoid_table(max_len, d_model):
    """attograd's SinusoidalPositionalEncoding and the seeds' table: row t holds sin(t w_i) in
    column 2i and cos(t w_i) in column 2i+1, w_i = 10000^(-2i / d_model)."""
    angle = torch.arange(max_len, dtype=torch.float64).reshape(-1, 1) * torch.pow(
        torch.tensor(10000.0, dtype=torch.float64), -torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    table = torch.zeros(max_len, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle[:, :d_model // 2])
    return table


class SinusoidalTable(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.register_buffer("pe", sinusoid_table(max_len, d_model))


class SeedsSeq2Seq(nn.Module):
    """The original Transformer as the seeds build it: one token table for both sides, looked up
    unscaled; sinusoidal positions; dropout, then a LayerNorm on each stack's input; post-norm
    layers whose attention projections have no bias and heads of d_k / d_v; no norm after the
    stacks; the head tied to the table, its logits times d_model^-1/2; eps in every LayerNorm.
    Attention masks are boolean keep-masks (True = seen), as the reference layers take them."""

    def __init__(self, vocab, max_len, d_model, n_head, d_ff, n_encoder_layers, n_decoder_layers, d_k, d_v, dropout,
                 layer_norm_eps=1e-6):
        super().__init__()
        self.d_model = d_model
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = SinusoidalTable(max_len, d_model)
        self.dropout = nn.Dropout(dropout)
        self.src_norm = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.tgt_norm = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.encoder, self.decoder = nn.Module(), nn.Module()
        self.encoder.blocks = nn.ModuleList(
            TransformerBlock(d_model, n_head, d_ff, layer_norm_eps=layer_norm_eps, d_k=d_k, d_v=d_v, attn_bias=False)
            for _ in range(n_encoder_layers))
        self.decoder.layers = nn.ModuleList(
            SeedsDecoderLayer(d_model, n_head, d_ff, d_k=d_k, d_v=d_v, attn_bias=False, layer_norm_eps=layer_norm_eps)
            for _ in range(n_decoder_layers))

    def embedded(self, ids, norm):
        return norm(self.dropout(self.embed(ids) + self.pos.pe[:ids.shape[1]]))

    def forward(self, src, src_lengths, tgt, tgt_lengths):
        S, T = src.shape[1], tgt.shape[1]
        src_keep = ~padding(src_lengths, S).reshape(-1, 1, 1, S)
        tgt_keep = torch.ones(T, T, dtype=torch.bool).tril().reshape(1, 1, T, T) & \
            ~padding(tgt_lengths, T).reshape(-1, 1, 1, T)
        memory = self.embedded(src, self.src_norm)
        for block in self.encoder.blocks:
            memory = block(memory, src_keep)
        h = self.embedded(tgt, self.tgt_norm)
        for layer in self.decoder.layers:
            h = layer(h, memory, tgt_keep, src_keep)
        return (h @ self.embed.weight.t()) * self.d_model ** -0.5
