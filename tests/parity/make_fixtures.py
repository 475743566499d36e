#!/usr/bin/python3
"""Writes the PyTorch parity fixtures under tests/parity/fixtures/ (format: docs/parity.md).

Run from anywhere:   /usr/bin/python3 tests/parity/make_fixtures.py

Every case builds a PyTorch module whose parameters are named exactly like attograd's (so the
state_dict keys map 1:1), draws its parameters and inputs from a generator seeded by the case
name, runs forward and backward with a random upstream gradient and stores parameters, inputs,
masks, the upstream gradient and every expected result in one safetensors file. Where PyTorch
has a built-in twin (nn.MultiheadAttention, nn.TransformerEncoderLayer) the hand-written
reference is checked against it here before anything is written.

The output is deterministic: running the script twice gives the same bytes (one thread, seeded
generators, a fixed tensor order and a header written without sorting or whitespace).
A development tool only: attograd never needs Python at run time.
"""
import copy
import json
import math
import os
import sys
import zlib

# Before torch is imported: one thread, so that reductions always run in the same order.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.dont_write_bytecode = True  # no __pycache__ next to the committed fixtures

import torch  # noqa: E402
from torch import nn  # noqa: E402

from torch_reference import (  # noqa: E402
    MultiHeadAttention, PositionwiseFeedForward, ScaledDotProductAttention, SequenceModel, TransformerBlock,
    TransformerEncoder, block_args, check_block_against_torch, check_mha_against_torch, cross_entropy,
    decoder_layer_named, save_safetensors)
from torch_gpt import GPT as TorchGPT, attograd_named, check_gpt_against_torch  # noqa: E402
from torch_seq2seq import (  # noqa: E402
    Seq2Seq as TorchSeq2Seq, SeedsDecoderLayer, SeedsSeq2Seq, attograd_named as seq2seq_named,
    check_seeds_decoder_against_torch)

torch.set_num_threads(1)

FORMAT = "attograd-parity/1"
HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.join(HERE, "fixtures")

ALL_MASKED_NOTE = (
    "Some query rows see no key at all. PyTorch's softmax over a row of -inf gives NaN there; "
    "attograd documents a zero attention row, a zero output row (no output-projection bias) and "
    "zero, finite gradients. make_fixtures.py computes exactly that (the row is softmaxed "
    "unmasked and then multiplied by zero), so the expectations are attograd's documented values.")


# ---------------------------------------------------------------- case helpers

class Case:
    """Collects one fixture's tensors in file order."""

    def __init__(self, name, module, config, dtype, mode="eval", **metadata):
        self.name, self.module, self.config, self.dtype, self.mode = name, module, config, dtype, mode
        self.metadata = {k: str(v) for k, v in metadata.items()}
        self.gen = torch.Generator().manual_seed(zlib.crc32(name.encode()))
        self.tensors = []

    def randn(self, *shape, scale=1.0, shift=0.0):
        return torch.randn(tuple(shape), generator=self.gen, dtype=torch.float64).mul(scale).add(shift).to(self.dtype)

    def leaf(self, *shape, scale=1.0, shift=0.0):
        return self.randn(*shape, scale=scale, shift=shift).requires_grad_(True)

    def randomize(self, module):
        """Fresh, seeded values for every parameter: no parameter keeps an init that hides a
        mistake (LayerNorm's ones and zeros, a bias of zeros)."""
        norms = {id(m.weight) for m in module.modules() if isinstance(m, nn.LayerNorm) and m.weight is not None}
        with torch.no_grad():
            for p in module.parameters():
                if id(p) in norms:
                    p.copy_(self.randn(*p.shape, scale=0.2, shift=1.0))
                else:
                    fan_in = p.shape[-1] if p.dim() > 1 else p.shape[0]
                    p.copy_(self.randn(*p.shape, scale=1.0 / math.sqrt(fan_in)))
        return module.to(self.dtype)

    def add(self, name, tensor):
        # A snapshot: the training run updates its parameters after they are recorded.
        self.tensors.append((name, tensor.detach().clone()))

    def params(self, module):
        for name, p in module.named_parameters():
            self.add("param." + name, p)

    def backward(self, output, module, inputs):
        """Backpropagates a random upstream gradient (ones when the case's metadata says
        upstream=ones); records it and every gradient."""
        if self.metadata.get("upstream") == "ones":
            grad = torch.ones(output.shape, dtype=self.dtype)
        else:
            grad = self.randn(*output.shape)
        output.backward(grad)
        self.add("grad.output", grad)
        self.add("expect.output", output)
        return grad

    def expect_grads(self, module, inputs):
        for name, p in module.named_parameters():
            self.add("expect.grad.param." + name, p.grad if p.grad is not None else torch.zeros_like(p))
        for name, x in inputs:
            self.add("expect.grad.input." + name, x.grad)

    def write(self):
        metadata = {"format": FORMAT, "module": self.module, "config": json.dumps(self.config, separators=(",", ":")),
                    "dtype": {torch.float32: "float32", torch.float64: "float64"}[self.dtype], "mode": self.mode,
                    "case": self.name, "generator": "tests/parity/make_fixtures.py",
                    "torch_version": torch.__version__.split("a")[0]}
        metadata.update(self.metadata)
        path = os.path.join(OUT_DIR, self.name + ".safetensors")
        save_safetensors(path, self.tensors, metadata)
        return path


def standard_case(case, module, inputs, forward, extra=None):
    """Parameters, inputs, forward, backward and expectations of an ordinary module."""
    case.params(module)
    for name, x in inputs:
        case.add("input." + name, x)
    for name, t in (extra or []):
        case.add(name, t)
    out = forward()
    weights = None
    if isinstance(out, tuple):
        out, weights = out
    case.backward(out, module, inputs)
    if weights is not None:
        case.add("expect.attn_weights", weights)
    case.expect_grads(module, inputs)
    return out, weights


def reference_case(case, module, inputs, forward):
    """A float32 case that carries its float64 reference: standard_case in float32, then the same
    module, parameters, inputs and upstream gradient converted to float64 (exactly: every float32
    is a float64) and run again. reference.<name> stands beside every expect.<name>, so the tool
    can measure attograd's float32 error and PyTorch's against the same float64 answer.
    forward(module, *inputs) runs either copy."""
    assert case.dtype == torch.float32
    module64 = copy.deepcopy(module).double()
    inputs64 = [(name, x.detach().double().requires_grad_(True)) for name, x in inputs]
    standard_case(case, module, inputs, lambda: forward(module, *[x for _, x in inputs]))
    out64 = forward(module64, *[x for _, x in inputs64])
    out64.backward(dict(case.tensors)["grad.output"].double())
    case.add("reference.output", out64)
    for name, p in module64.named_parameters():
        case.add("reference.grad.param." + name, p.grad if p.grad is not None else torch.zeros_like(p))
    for name, x in inputs64:
        case.add("reference.grad.input." + name, x.grad)


def keep_from(case, causal=False, lengths=None, keep=None, B=1, Tq=1, Tk=1):
    """The boolean keep-mask (B|1, 1|H, Tq|1, Tk) the fixture's masks describe, recording them."""
    mask = None
    if causal:
        case.metadata["causal"] = "true"
        mask = torch.ones(Tq, Tk, dtype=torch.bool).tril().reshape(1, 1, Tq, Tk)
    if lengths is not None:
        case.add("mask.key_padding_lengths", torch.tensor(lengths, dtype=torch.int64))
        pad = (torch.arange(Tk).reshape(1, Tk) < torch.tensor(lengths).reshape(-1, 1)).reshape(len(lengths), 1, 1, Tk)
        mask = pad if mask is None else mask & pad
    if keep is not None:
        case.add("mask.keep", keep.to(case.dtype))
        k = keep.bool()
        while k.dim() < 4:
            k = k.unsqueeze(0)
        mask = k if mask is None else mask & k
    return mask


# ---------------------------------------------------------------- the cases

def linear_cases():
    for name, dtype, cfg, shape, mode in (
            ("linear_f64", torch.float64, {"in_features": 5, "out_features": 4, "bias": True}, (2, 3, 5), "eval"),
            ("linear_nobias_f32", torch.float32, {"in_features": 6, "out_features": 3, "bias": False}, (4, 6),
             "train")):
        case = Case(name, "Linear", cfg, dtype, mode)
        m = case.randomize(nn.Linear(cfg["in_features"], cfg["out_features"], bias=cfg["bias"]))
        x = case.leaf(*shape)
        standard_case(case, m, [("x", x)], lambda: m(x))
        yield case


def layer_norm_cases():
    for name, dtype, cfg, shape in (
            ("layer_norm_f64", torch.float64, {"normalized_shape": [6], "eps": 1e-5, "elementwise_affine": True},
             (2, 3, 6)),
            ("layer_norm_2d_f32", torch.float32, {"normalized_shape": [3, 4], "eps": 1e-6,
                                                  "elementwise_affine": True}, (2, 3, 4)),
            ("layer_norm_no_affine_f64", torch.float64, {"normalized_shape": [5], "eps": 1e-5,
                                                         "elementwise_affine": False}, (4, 5))):
        case = Case(name, "LayerNorm", cfg, dtype)
        m = case.randomize(nn.LayerNorm(cfg["normalized_shape"], eps=cfg["eps"],
                                        elementwise_affine=cfg["elementwise_affine"]))
        x = case.leaf(*shape, scale=2.0, shift=0.5)
        standard_case(case, m, [("x", x)], lambda: m(x))
        yield case


def softmax_cases():
    for name, dtype, dim, shape in (("softmax_f64", torch.float64, -1, (2, 3, 5)),
                                    ("softmax_dim1_f32", torch.float32, 1, (2, 4, 3))):
        case = Case(name, "Softmax", {"dim": dim}, dtype)
        m = nn.Softmax(dim=dim)
        x = case.leaf(*shape, scale=2.0)
        standard_case(case, m, [("x", x)], lambda: m(x))
        yield case


def embedding_cases():
    for name, dtype, cfg in (
            ("embedding_padding_f64", torch.float64, {"num_embeddings": 7, "embedding_dim": 4, "padding_idx": 0}),
            ("embedding_f32", torch.float32, {"num_embeddings": 9, "embedding_dim": 5, "padding_idx": None})):
        case = Case(name, "Embedding", cfg, dtype)
        m = case.randomize(nn.Embedding(cfg["num_embeddings"], cfg["embedding_dim"], padding_idx=cfg["padding_idx"]))
        # Repeated ids (their gradients add up) and, with padding, the padding id itself.
        ids = torch.tensor([[1, 0, 3, 3], [6, 0, 2, 1], [4, 5, 6, 6]], dtype=torch.int64)
        case.add("input.ids", ids)
        standard_case(case, m, [], lambda: m(ids))
        yield case


def feed_forward_cases():
    for name, dtype, cfg, mode in (
            ("feed_forward_relu_f64", torch.float64,
             {"d_model": 6, "d_hidden": 10, "activation": "relu", "dropout": 0.0, "bias": True}, "train"),
            ("feed_forward_gelu_f32", torch.float32,
             {"d_model": 8, "d_hidden": 12, "activation": "gelu", "dropout": 0.1, "bias": True}, "eval"),
            ("feed_forward_gelu_nobias_f64", torch.float64,
             {"d_model": 5, "d_hidden": 7, "activation": "gelu", "dropout": 0.1, "bias": False}, "eval"),
            ("feed_forward_gelu_tanh_f64", torch.float64,
             {"d_model": 6, "d_hidden": 10, "activation": "gelu_tanh", "dropout": 0.0, "bias": True}, "train")):
        case = Case(name, "PositionwiseFeedForward", cfg, dtype, mode)
        m = case.randomize(PositionwiseFeedForward(cfg["d_model"], cfg["d_hidden"], cfg["activation"], cfg["bias"]))
        x = case.leaf(2, 3, cfg["d_model"])
        standard_case(case, m, [("x", x)], lambda: m(x))
        yield case


def sdpa_cases():
    case = Case("sdpa_scale_bias_keep_f64", "ScaledDotProductAttention", {"scale": 0.3, "temperature": 0.0,
                                                                         "dropout": 0.0}, torch.float64, "train")
    m = ScaledDotProductAttention(scale=0.3)
    q, k, v = case.leaf(2, 2, 3, 4), case.leaf(2, 2, 5, 4), case.leaf(2, 2, 5, 3)
    bias = case.leaf(1, 2, 3, 5, scale=0.5)
    keep_t = (torch.rand(2, 1, 3, 5, generator=case.gen) < 0.7).to(torch.float64)
    keep_t[..., 0] = 1.0  # every query sees a key
    keep = keep_from(case, keep=keep_t)
    standard_case(case, m, [("q", q), ("k", k), ("v", v), ("attn_bias", bias)], lambda: m(q, k, v, keep, bias))
    yield case

    case = Case("sdpa_temperature_f32", "ScaledDotProductAttention", {"scale": 0.0, "temperature": 1.7,
                                                                     "dropout": 0.2}, torch.float32, "eval")
    m = ScaledDotProductAttention(temperature=1.7)
    q, k, v = case.leaf(1, 3, 4, 2), case.leaf(1, 3, 6, 2), case.leaf(1, 3, 6, 5)
    standard_case(case, m, [("q", q), ("k", k), ("v", v)], lambda: m(q, k, v))
    yield case


MHA_DEFAULTS = {"d_k": 0, "d_v": 0, "q_dim": 0, "k_dim": 0, "v_dim": 0, "bias": True, "dropout": 0.0, "scale": 0.0,
                "temperature": 0.0}


def mha_case(name, dtype, cfg, B, Tq, Tk=None, mode="eval", causal=False, lengths=None, keep=None, cross=False,
             bias_input=None, check_builtin=False, note=None, **metadata):
    cfg = {**MHA_DEFAULTS, **cfg}
    case = Case(name, "MultiHeadAttention", cfg, dtype, mode, **metadata)
    if note:
        case.metadata["note"] = note
    args = {k: cfg[k] for k in ("d_k", "d_v", "q_dim", "k_dim", "v_dim", "bias", "scale", "temperature")}
    m = case.randomize(MultiHeadAttention(cfg["d_model"], cfg["n_head"], **args))
    Tk = Tk or Tq
    if cross:
        query = case.leaf(B, Tq, cfg["q_dim"] or cfg["d_model"])
        key = case.leaf(B, Tk, cfg["k_dim"] or cfg["d_model"])
        value = case.leaf(B, Tk, cfg["v_dim"] or cfg["d_model"])
        inputs = [("query", query), ("key", key), ("value", value)]
    else:
        x = case.leaf(B, Tq, cfg["d_model"])
        query = key = value = x
        inputs = [("x", x)]
    bias = None
    if bias_input is not None:
        bias = case.leaf(*bias_input, scale=0.5)
        inputs.append(("attn_bias", bias))
    mask = keep_from(case, causal, lengths, keep, B, Tq, Tk)
    if check_builtin:
        with torch.no_grad():
            check_mha_against_torch(m, query, key, value, mask)
    standard_case(case, m, inputs, lambda: m(query, key, value, mask, bias))
    return case


def attention_cases():
    # (a) self-attention d_model / n_head, scores masked where a 0/1 mask is 0.
    for dtype, suffix in ((torch.float64, "f64"), (torch.float32, "f32")):
        g = torch.Generator().manual_seed(11)
        keep = (torch.rand(2, 1, 6, 6, generator=g) < 0.6).to(torch.float64)
        keep[..., torch.arange(6), torch.arange(6)] = 1.0  # each query sees itself
        yield mha_case("mha_a_keep_mask_" + suffix, dtype, {"d_model": 16, "n_head": 4}, B=2, Tq=6, keep=keep,
                       check_builtin=True, flavour="(a) self-attention, 0/1 mask")
    # (b) causal self-attention, (128, 64, 512) with 8 heads scaled down to (3, 12, 32) with 8 heads.
    yield mha_case("mha_b_causal_f32", torch.float32, {"d_model": 32, "n_head": 8}, B=3, Tq=12, causal=True,
                   check_builtin=True, flavour="(b) causal self-attention, 8 heads (scaled down from (128, 64, 512))")
    yield mha_case("mha_b_causal_f64", torch.float64, {"d_model": 16, "n_head": 8}, B=2, Tq=5, causal=True,
                   check_builtin=True, flavour="(b) causal self-attention, 8 heads (scaled down)")
    # (d) d_k != d_v per head, returning the attention weights; with a causal mask and a
    # trained additive bias; and a case with an explicit scale.
    yield mha_case("mha_d_dk_dv_f64", torch.float64, {"d_model": 12, "n_head": 3, "d_k": 5, "d_v": 7}, B=2, Tq=4,
                   causal=True, bias_input=(1, 3, 4, 4), flavour="(d) d_k != d_v, attention weights returned")
    yield mha_case("mha_d_dk_dv_scale_f32", torch.float32,
                   {"d_model": 10, "n_head": 2, "d_k": 3, "d_v": 6, "scale": 0.25}, B=2, Tq=5,
                   flavour="(d) d_k != d_v, explicit scale")
    # (e) query, key, value of different input sizes (64, 128, 256) -> 256 over 4 heads, scaled
    # down to (6, 10, 14) -> 16 over 4 heads; key padding, dropout (eval), with and without bias.
    for dtype, suffix, bias in ((torch.float64, "bias_f64", True), (torch.float32, "nobias_f32", False),
                                (torch.float64, "nobias_f64", False)):
        yield mha_case("mha_e_cross_" + suffix, dtype,
                       {"d_model": 16, "n_head": 4, "q_dim": 6, "k_dim": 10, "v_dim": 14, "bias": bias,
                        "dropout": 0.1}, B=2, Tq=5, Tk=7, lengths=[7, 4], cross=True,
                       flavour="(e) cross-attention, q/k/v sizes differ, key padding, T_q != T_k")
    # Standard cross-attention against nn.MultiheadAttention, T_q != T_k, in train mode.
    yield mha_case("mha_cross_padding_train_f64", torch.float64, {"d_model": 8, "n_head": 2}, B=3, Tq=3, Tk=5,
                   mode="train", lengths=[5, 2, 4], cross=True, check_builtin=True)
    # Rows with all keys masked: a length-0 sequence and an all-zero row of a keep mask.
    keep = torch.ones(2, 1, 4, 6)
    keep[1, 0, 2, :] = 0.0
    yield mha_case("mha_all_masked_rows_f64", torch.float64, {"d_model": 8, "n_head": 2}, B=2, Tq=4, Tk=6,
                   cross=True, lengths=[0, 5], keep=keep, note=ALL_MASKED_NOTE)
    keep = torch.ones(1, 2, 5, 5)
    keep[0, 1, 3, :] = 0.0  # head 1 of query 3 sees nothing, head 0 does: only that head's weights vanish
    keep[0, :, 1, :] = 0.0  # query 1 sees nothing in any head: a zero output row
    yield mha_case("mha_all_masked_heads_f32", torch.float32, {"d_model": 8, "n_head": 2}, B=2, Tq=5, keep=keep,
                   note=ALL_MASKED_NOTE)


BLOCK_DEFAULTS = {"dropout": 0.0, "attn_dropout": -1.0, "activation": "relu", "norm_first": False,
                  "layer_norm_eps": 1e-5, "d_k": 0, "d_v": 0, "attn_bias": True, "ff_bias": True, "scale": 0.0,
                  "temperature": 0.0}


def block_case(name, dtype, cfg, B, T, mode="eval", causal=False, lengths=None, keep=None, check_builtin=False,
               note=None, **metadata):
    cfg = {**BLOCK_DEFAULTS, **cfg}
    case = Case(name, "TransformerBlock", cfg, dtype, mode, **metadata)
    if note:
        case.metadata["note"] = note
    m = case.randomize(TransformerBlock(**block_args(cfg)))
    x = case.leaf(B, T, cfg["d_model"])
    mask = keep_from(case, causal, lengths, keep, B, T, T)
    if check_builtin:
        with torch.no_grad():
            check_block_against_torch(m, x, mask, cfg)
    standard_case(case, m, [("x", x)], lambda: m(x, mask))
    return case


def block_cases():
    # (c) temperature sqrt(d_k), dropout on the weights, post-norm residual + LayerNorm, a ReLU
    # feed-forward with its own residual and LayerNorm, projections without bias (eval mode).
    yield block_case("block_c_post_norm_f64", torch.float64,
                     {"d_model": 16, "n_head": 2, "d_ff": 24, "temperature": math.sqrt(8), "attn_dropout": 0.1,
                      "dropout": 0.1, "attn_bias": False}, B=2, T=5,
                     flavour="(c) temperature sqrt(d_k), attention dropout, post-norm, ReLU FF, no projection bias")
    yield block_case("block_c_post_norm_f32", torch.float32,
                     {"d_model": 16, "n_head": 2, "d_ff": 24, "temperature": math.sqrt(8), "attn_dropout": 0.1,
                      "dropout": 0.1, "attn_bias": False}, B=2, T=5, lengths=[5, 3],
                     flavour="(c) with a key-padding mask")
    yield block_case("block_post_norm_builtin_f64", torch.float64, {"d_model": 12, "n_head": 3, "d_ff": 20}, B=2,
                     T=4, lengths=[4, 2], check_builtin=True)
    yield block_case("block_pre_norm_causal_f64", torch.float64,
                     {"d_model": 12, "n_head": 2, "d_ff": 16, "norm_first": True, "activation": "gelu"}, B=2, T=5,
                     causal=True, check_builtin=True)
    yield block_case("block_pre_norm_padding_train_f32", torch.float32,
                     {"d_model": 16, "n_head": 4, "d_ff": 32, "norm_first": True}, B=3, T=6, mode="train",
                     lengths=[6, 4, 1], check_builtin=True)
    yield block_case("block_pre_norm_dk_dv_f64", torch.float64,
                     {"d_model": 10, "n_head": 2, "d_ff": 14, "norm_first": True, "d_k": 3, "d_v": 4,
                      "ff_bias": False, "layer_norm_eps": 1e-6}, B=2, T=4, causal=True)
    # GPT-2's block: pre-norm, causal, biases everywhere, LayerNorm eps 1e-5, the tanh GELU, d_ff 4 d_model.
    for dtype, suffix in ((torch.float64, "f64"), (torch.float32, "f32")):
        yield block_case(f"block_gpt2_{suffix}", dtype,
                         {"d_model": 16, "n_head": 4, "d_ff": 64, "norm_first": True, "activation": "gelu_tanh",
                          "layer_norm_eps": 1e-5, "attn_bias": True, "ff_bias": True}, B=2, T=6, causal=True)
    yield block_case("block_post_norm_all_masked_f64", torch.float64, {"d_model": 8, "n_head": 2, "d_ff": 12}, B=2,
                     T=4, lengths=[0, 3], note=ALL_MASKED_NOTE)
    yield block_case("block_pre_norm_all_masked_f32", torch.float32,
                     {"d_model": 8, "n_head": 2, "d_ff": 12, "norm_first": True}, B=2, T=4, lengths=[4, 0],
                     note=ALL_MASKED_NOTE)


def encoder_cases():
    for name, dtype, block, mode in (
            ("encoder_pre_norm_f64", torch.float64, {"d_model": 8, "n_head": 2, "d_ff": 12, "norm_first": True},
             "eval"),
            ("encoder_post_norm_f32", torch.float32, {"d_model": 8, "n_head": 2, "d_ff": 12, "norm_first": False},
             "train")):
        block = {**BLOCK_DEFAULTS, **block}
        cfg = {"n_layers": 2, "block": block}
        case = Case(name, "TransformerEncoder", cfg, dtype, mode)
        m = case.randomize(TransformerEncoder(2, block_args(block)))
        x = case.leaf(2, 5, 8)
        mask = keep_from(case, lengths=[5, 3], B=2, Tq=5, Tk=5)
        standard_case(case, m, [("x", x)], lambda: m(x, mask))
        yield case


def decoder_layer_cases():
    """nn.TransformerDecoderLayer itself (post-norm, batch_first), exported under attograd's names:
    a causal target mask with the target's padding, the memory's padding for cross-attention,
    lengths from 1 to the maximum on both sides. Every query sees a key, so no NaN arises."""
    for name, dtype, mode, dropout in (("decoder_layer_post_norm_f64", torch.float64, "eval", 0.1),
                                       ("decoder_layer_post_norm_f32", torch.float32, "train", 0.0)):
        block = {**BLOCK_DEFAULTS, "d_model": 8, "n_head": 2, "d_ff": 12, "dropout": dropout}
        cfg = {"block": block, "d_memory": 0}
        case = Case(name, "TransformerDecoderLayer", cfg, dtype, mode,
                    twin="torch.nn.TransformerDecoderLayer(batch_first=True); in_proj rows are w_q, w_k, w_v")
        layer = case.randomize(nn.TransformerDecoderLayer(8, 2, 12, dropout=dropout, batch_first=True))
        layer.train(mode == "train")
        B, T, S = 3, 5, 6
        tgt, memory = case.leaf(B, T, 8), case.leaf(B, S, 8)
        tgt_lengths, memory_lengths = [5, 1, 3], [2, 6, 1]
        keep_from(case, causal=True, lengths=tgt_lengths, B=B, Tq=T, Tk=T)  # records causal + lengths
        case.add("mask.memory_key_padding_lengths", torch.tensor(memory_lengths, dtype=torch.int64))
        causal = torch.ones(T, T, dtype=torch.bool).triu(1)  # True = not allowed
        tgt_pad = torch.arange(T).reshape(1, T) >= torch.tensor(tgt_lengths).reshape(-1, 1)
        memory_pad = torch.arange(S).reshape(1, S) >= torch.tensor(memory_lengths).reshape(-1, 1)
        for k, v in decoder_layer_named(layer):
            case.add("param." + k, v)
        case.add("input.tgt", tgt)
        case.add("input.memory", memory)
        out = layer(tgt, memory, tgt_mask=causal, tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=memory_pad)
        if not torch.isfinite(out).all():
            sys.exit(f"make_fixtures: {name} has a query that sees no key")
        case.backward(out, layer, [])
        for k, v in decoder_layer_named(layer, grads=True):
            case.add("expect.grad.param." + k, v)
        case.add("expect.grad.input.tgt", tgt.grad)
        case.add("expect.grad.input.memory", memory.grad)
        yield case



def seeds_decoder_cases():
    """The hand-written decoder layer in the seeds' style (separate d_k / d_v, no bias), first
    checked against nn.TransformerDecoderLayer where they can agree: memory of another width
    (6) than the target (8), causal target mask with padding, memory padding."""
    for dtype in (torch.float64, torch.float32):
        check_seeds_decoder_against_torch(dtype)
    for name, dtype, mode, dropout, norm_first in (("decoder_layer_seeds_pre_norm_f64", torch.float64, "eval", 0.1, True),
                                                   ("decoder_layer_seeds_post_norm_f32", torch.float32, "train", 0.0,
                                                    False)):
        block = {**BLOCK_DEFAULTS, "d_model": 8, "n_head": 2, "d_ff": 12, "dropout": dropout, "norm_first": norm_first,
                 "d_k": 3, "d_v": 5, "attn_bias": False, "ff_bias": False}
        cfg = {"block": block, "d_memory": 6}
        case = Case(name, "TransformerDecoderLayer", cfg, dtype, mode,
                    twin="tests/parity/torch_seq2seq.py SeedsDecoderLayer")
        layer = case.randomize(SeedsDecoderLayer(8, 2, 12, d_memory=6, d_k=3, d_v=5, attn_bias=False, ff_bias=False,
                                                 norm_first=norm_first))
        B, T, S = 3, 5, 4
        tgt, memory = case.leaf(B, T, 8), case.leaf(B, S, 6)
        memory_lengths = [4, 1, 2]
        tgt_keep = keep_from(case, causal=True, lengths=[1, 5, 3], B=B, Tq=T, Tk=T)
        case.add("mask.memory_key_padding_lengths", torch.tensor(memory_lengths, dtype=torch.int64))
        memory_keep = (torch.arange(S).reshape(1, S) < torch.tensor(memory_lengths).reshape(-1, 1)).reshape(B, 1, 1, S)
        standard_case(case, layer, [("tgt", tgt), ("memory", memory)],
                      lambda: layer(tgt, memory, tgt_keep, memory_keep))
        yield case


def seq2seq_cases():
    """torch.nn.Transformer (post-norm, batch_first) inside embeddings, a learned positional table
    and a head: the whole Seq2Seq, logits and every gradient. Source lengths 1 to the maximum,
    target lengths 1 to the maximum; f64 in eval mode with dropout set, f32 in train mode with
    one shared table and a tied head."""
    for name, dtype, mode, dropout, share in (("seq2seq_post_norm_f64", torch.float64, "eval", 0.1, False),
                                              ("seq2seq_post_norm_shared_tied_f32", torch.float32, "train", 0.0,
                                               True)):
        cfg = {"src_vocab": 9, "tgt_vocab": 9 if share else 7, "max_len": 8, "d_model": 8, "n_head": 2, "d_ff": 12,
               "n_encoder_layers": 2, "n_decoder_layers": 2, "dropout": dropout, "norm_first": False,
               "positional": "learned", "share_embeddings": share, "tie_head": share, "scale_embeddings": True}
        case = Case(name, "Seq2Seq", cfg, dtype, mode,
                    twin="torch.nn.Transformer(batch_first=True) with embeddings * sqrt(d_model) + a learned table, "
                         "and a head (tests/parity/torch_seq2seq.py)")
        model = case.randomize(TorchSeq2Seq(cfg["src_vocab"], cfg["tgt_vocab"], cfg["max_len"], 8, 2, 12, 2, 2, dropout,
                                            share_embeddings=share, tie_head=share))
        model.train(mode == "train")
        B, S, T = 3, 6, 5
        src_lengths, tgt_lengths = [1, 6, 3], [5, 1, 3]
        src = torch.randint(0, cfg["src_vocab"], (B, S), generator=case.gen)
        tgt = torch.randint(0, cfg["tgt_vocab"], (B, T), generator=case.gen)
        for k, v in seq2seq_named(model, share):
            case.add("param." + k, v)
        case.add("input.src", src)
        case.add("input.tgt", tgt)
        case.add("input.src_lengths", torch.tensor(src_lengths, dtype=torch.int64))
        case.add("input.tgt_lengths", torch.tensor(tgt_lengths, dtype=torch.int64))
        logits = model(src, src_lengths, tgt, tgt_lengths)
        if not torch.isfinite(logits).all():
            sys.exit(f"make_fixtures: {name} has a query that sees no key")
        case.backward(logits, model, [])
        for k, v in seq2seq_named(model, share, grads=True):
            case.add("expect.grad.param." + k, v)
        yield case


def seq2seq_seeds_cases():
    """The seeds' whole model (SeedsSeq2Seq, composed by hand) against attograd's Seq2Seq with the
    seed's options: input norms and no final norms, LayerNorm eps 1e-6, attention without bias and
    with d_k = 3, d_v = 5 per head, one unscaled table for both sides, sinusoidal positions (the
    table stored as param.pos.pe) and a tied head scaled by d_model^-1/2. Lengths as in
    seq2seq_cases; f64 in eval mode with dropout set, f32 in train mode with dropout 0 (the twin's
    layers have no dropout of their own)."""
    for name, dtype, mode, dropout in (("seq2seq_seeds_f64", torch.float64, "eval", 0.1),
                                       ("seq2seq_seeds_f32", torch.float32, "train", 0.0)):
        cfg = {"src_vocab": 9, "tgt_vocab": 9, "max_len": 8, "d_model": 8, "n_head": 2, "d_ff": 12,
               "n_encoder_layers": 1, "n_decoder_layers": 1, "dropout": dropout, "norm_first": False,
               "positional": "sinusoidal", "share_embeddings": True, "tie_head": True, "scale_embeddings": False,
               "input_norm": True, "final_norm": False, "layer_norm_eps": 1e-6, "attn_bias": False, "d_k": 3,
               "d_v": 5, "scale_logits": True}
        case = Case(name, "Seq2Seq", cfg, dtype, mode,
                    twin="the seeds' model composed by hand (tests/parity/torch_seq2seq.py SeedsSeq2Seq)")
        model = case.randomize(SeedsSeq2Seq(9, 8, 8, 2, 12, 1, 1, d_k=3, d_v=5, dropout=dropout))
        model.train(mode == "train")
        B, S, T = 3, 6, 5
        src_lengths, tgt_lengths = [1, 6, 3], [5, 1, 3]
        src = torch.randint(0, 9, (B, S), generator=case.gen)
        tgt = torch.randint(0, 9, (B, T), generator=case.gen)
        case.params(model)
        case.add("param.pos.pe", model.pos.pe)
        case.add("input.src", src)
        case.add("input.tgt", tgt)
        case.add("input.src_lengths", torch.tensor(src_lengths, dtype=torch.int64))
        case.add("input.tgt_lengths", torch.tensor(tgt_lengths, dtype=torch.int64))
        logits = model(src, src_lengths, tgt, tgt_lengths)
        case.backward(logits, model, [])
        case.expect_grads(model, [])
        yield case


def float64_reference_cases():
    """d_model 512 in float32 with unit upstream gradients, each carrying its float64 reference
    (docs/parity.md, "float32 against a float64 reference"). The Linear's inputs have scale 20
    (a residual stream that has grown), so its weight gradient, a sum over the 8 tokens, reaches
    about 200, where one float32 rounding is 1.5e-5: the scale at which a fixed 1e-5 atol stops
    fitting. The other sizes stay small to keep the files small (under 160 KB each)."""
    case = Case("linear_d512_reference_f32", "Linear", {"in_features": 512, "out_features": 8, "bias": True},
                torch.float32, "eval", upstream="ones")
    m = case.randomize(nn.Linear(512, 8))
    x = case.leaf(2, 4, 512, scale=20.0)
    reference_case(case, m, [("x", x)], lambda module, x: module(x))
    yield case

    case = Case("layer_norm_d512_reference_f32", "LayerNorm",
                {"normalized_shape": [512], "eps": 1e-5, "elementwise_affine": True}, torch.float32, "eval",
                upstream="ones")
    m = case.randomize(nn.LayerNorm([512], eps=1e-5))
    x = case.leaf(1, 4, 512, scale=2.0, shift=0.5)
    reference_case(case, m, [("x", x)], lambda module, x: module(x))
    yield case


def model_config(**overrides):
    cfg = {"vocab": 7, "max_len": 6, "d_model": 8, "n_head": 2, "d_ff": 12, "n_layers": 2, "norm_first": True,
           "dropout": 0.0, "positional": "learned"}
    cfg.update(overrides)
    return cfg


def model_cases():
    """The whole model with its output head and cross-entropy loss: the output is the loss."""
    for name, dtype, cfg, mode, lengths, loss in (
            ("model_pre_norm_padding_f64", torch.float64, model_config(), "eval", [5, 3],
             {"ignore_index": -100, "label_smoothing": 0.1}),
            ("model_post_norm_f32", torch.float32, model_config(norm_first=False, vocab=9), "train", None,
             {"ignore_index": -100, "label_smoothing": 0.0})):
        case = Case(name, "SequenceModel", cfg, dtype, mode, loss=json.dumps(loss, separators=(",", ":")))
        m = case.randomize(SequenceModel(**cfg))
        B, T = 2, 5
        ids = torch.randint(0, cfg["vocab"], (B, T), generator=case.gen)
        targets = torch.randint(0, cfg["vocab"], (B, T), generator=case.gen)
        targets[1, 2] = -100  # an ignored position: no loss, no gradient
        case.add("input.ids", ids)
        case.add("input.targets", targets)
        mask = keep_from(case, lengths=lengths, B=B, Tq=T, Tk=T) if lengths else None
        case.params(m)
        logits = m(ids, mask)
        loss_value = cross_entropy(logits, targets, loss)
        case.backward(loss_value, m, [])
        case.add("expect.logits", logits)
        case.expect_grads(m, [])
        yield case


def training_cases():
    """The golden run: PyTorch's initial weights, the same reverse-task batches, 20 AdamW steps;
    expect.loss[s] is the loss before update s."""
    steps, B, T = 20, 8, 6
    for name, dtype in (("training_adamw_f32", torch.float32), ("training_adamw_f64", torch.float64)):
        model = model_config(vocab=8, max_len=T, d_model=16, d_ff=32)
        optimizer = {"name": "AdamW", "lr": 0.03, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.01}
        case = Case(name, "TrainingRun", {"model": model, "optimizer": optimizer, "steps": steps}, dtype, "train",
                    task="reverse: targets are the input sequence reversed")
        # PyTorch's own initialisation and the same batches in both dtypes.
        torch.manual_seed(zlib.crc32(b"training_adamw"))
        case.gen.manual_seed(zlib.crc32(b"training_adamw"))
        m = SequenceModel(**model).to(dtype)
        ids = torch.randint(0, model["vocab"], (steps, B, T), generator=case.gen)
        targets = ids.flip(-1)
        case.params(m)
        case.add("input.ids", ids)
        case.add("input.targets", targets)
        opt = torch.optim.AdamW(m.parameters(), lr=optimizer["lr"], betas=(optimizer["beta1"], optimizer["beta2"]),
                                eps=optimizer["eps"], weight_decay=optimizer["weight_decay"])
        losses = []
        for s in range(steps):
            opt.zero_grad()
            loss = cross_entropy(m(ids[s]), targets[s], {})
            losses.append(loss.item())
            loss.backward()
            opt.step()
        if not losses[-1] < losses[0]:
            sys.exit(f"make_fixtures: {name} does not learn ({losses[0]} -> {losses[-1]})")
        case.add("expect.loss", torch.tensor(losses, dtype=dtype))
        yield case


def gpt_config(**overrides):
    cfg = {"vocab": 11, "block_size": 8, "d_model": 12, "n_head": 3, "n_layers": 2, "dropout": 0.0, "bias": True}
    cfg.update(overrides)
    return cfg


GPT_TWIN = "nanoGPT-style, tests/parity/torch_gpt.py; its tied lm_head.weight is param.embed.weight"


def gpt_cases():
    """models/gpt/gpt.h against the nanoGPT-style twin: the output is the logits, so every logit and
    the gradient of every parameter (the tied table's is the sum of its two uses) are compared."""
    for name, dtype, cfg, mode, B, T in (
            ("gpt_f64", torch.float64, gpt_config(dropout=0.1), "eval", 2, 8),  # dropout set, inactive
            ("gpt_f32", torch.float32, gpt_config(), "train", 3, 5),  # T < block_size
            ("gpt_nobias_f64", torch.float64, gpt_config(bias=False, vocab=9, d_model=8, n_head=2), "train", 2, 6),
            # GPT-2's activation (the rest of its shape is the default GPT's)
            ("gpt2_tanh_gelu_f64", torch.float64, gpt_config(activation="gelu_tanh"), "eval", 2, 8),
            ("gpt2_tanh_gelu_f32", torch.float32, gpt_config(activation="gelu_tanh"), "eval", 2, 8)):
        case = Case(name, "GPT", cfg, dtype, mode, twin=GPT_TWIN)
        m = case.randomize(TorchGPT(**cfg))
        ids = torch.randint(0, cfg["vocab"], (B, T), generator=case.gen)
        with torch.no_grad():
            check_gpt_against_torch(m, ids)
        for k, v in attograd_named(m):
            case.add("param." + k, v)
        case.add("input.ids", ids)
        case.backward(m(ids), m, [])
        for k, v in attograd_named(m, grads=True):
            case.add("expect.grad.param." + k, v)
        yield case


def gpt_training_cases():
    """The GPT's golden run: the twin's nanoGPT init, 20 AdamW steps of next-token prediction on
    stored batches; expect.loss[s] is the loss before update s."""
    steps, B, T = 20, 8, 8
    for name, dtype in (("gpt_training_adamw_f32", torch.float32), ("gpt_training_adamw_f64", torch.float64)):
        model = gpt_config(vocab=10, block_size=T, d_model=16, n_head=2)
        optimizer = {"name": "AdamW", "lr": 0.01, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.01}
        case = Case(name, "GPTTrainingRun", {"model": model, "optimizer": optimizer, "steps": steps}, dtype, "train",
                    task="next token of (start + stride * t) mod vocab, stride in 1..3", twin=GPT_TWIN)
        torch.manual_seed(zlib.crc32(b"gpt_training_adamw"))
        case.gen.manual_seed(zlib.crc32(b"gpt_training_adamw"))
        m = TorchGPT(**model).to(dtype)
        start = torch.randint(0, model["vocab"], (steps, B, 1), generator=case.gen)
        stride = torch.randint(1, 4, (steps, B, 1), generator=case.gen)
        seq = (start + stride * torch.arange(T + 1)) % model["vocab"]
        ids, targets = seq[..., :T].contiguous(), seq[..., 1:].contiguous()
        for k, v in attograd_named(m):
            case.add("param." + k, v)
        case.add("input.ids", ids)
        case.add("input.targets", targets)
        opt = torch.optim.AdamW(m.parameters(), lr=optimizer["lr"], betas=(optimizer["beta1"], optimizer["beta2"]),
                                eps=optimizer["eps"], weight_decay=optimizer["weight_decay"])
        losses = []
        for s in range(steps):
            opt.zero_grad()
            loss = cross_entropy(m(ids[s]), targets[s], {})
            losses.append(loss.item())
            loss.backward()
            opt.step()
        if not losses[-1] < losses[0] - 0.1:
            sys.exit(f"make_fixtures: {name} does not learn ({losses[0]} -> {losses[-1]})")
        case.add("expect.loss", torch.tensor(losses, dtype=dtype))
        yield case


def seq2seq_training_cases():
    """The encoder-decoder's golden run: torch.nn.Transformer's own initialisation inside the
    Seq2Seq twin, 20 AdamW steps on stored padded batches of a reverse-var task (sources of 1 to
    6 tokens, each batch padded to its longest source and target, padded targets ignored);
    expect.loss[s] is the loss before update s."""
    steps, B, S = 20, 6, 6
    PAD, BOS, EOS, FIRST, IGNORE = 0, 1, 2, 3, -100
    for name, dtype in (("seq2seq_training_adamw_f32", torch.float32),
                        ("seq2seq_training_adamw_f64", torch.float64)):
        vocab = 9
        model = {"src_vocab": vocab, "tgt_vocab": vocab, "max_len": S + 1, "d_model": 16, "n_head": 2, "d_ff": 32,
                 "n_encoder_layers": 1, "n_decoder_layers": 1, "dropout": 0.0, "norm_first": False,
                 "positional": "learned", "share_embeddings": False, "tie_head": False, "scale_embeddings": True}
        optimizer = {"name": "AdamW", "lr": 0.01, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.01}
        case = Case(name, "Seq2SeqTrainingRun", {"model": model, "optimizer": optimizer, "steps": steps}, dtype,
                    "train", task="reverse-var: the source reversed, bos before the decoder input, eos after the "
                                  "target; batches padded, pads ignored by the loss",
                    twin="tests/parity/torch_seq2seq.py (nn.Transformer inside)")
        torch.manual_seed(zlib.crc32(b"seq2seq_training_adamw"))
        case.gen.manual_seed(zlib.crc32(b"seq2seq_training_adamw"))
        m = TorchSeq2Seq(vocab, vocab, S + 1, 16, 2, 32, 1, 1, 0.0).to(dtype)
        lengths = torch.randint(1, S + 1, (steps, B), generator=case.gen)
        # Every batch pads to its own longest source, so the stored stack is as wide as the widest.
        src = torch.full((steps, B, S), PAD, dtype=torch.int64)
        tgt = torch.full((steps, B, S + 1), PAD, dtype=torch.int64)
        targets = torch.full((steps, B, S + 1), IGNORE, dtype=torch.int64)
        for s in range(steps):
            for b in range(B):
                n = int(lengths[s, b])
                x = torch.randint(FIRST, vocab, (n,), generator=case.gen)
                src[s, b, :n] = x
                tgt[s, b, 0] = BOS
                tgt[s, b, 1:n + 1] = x.flip(0)
                targets[s, b, :n] = x.flip(0)
                targets[s, b, n] = EOS
        for k, v in seq2seq_named(m, False):
            case.add("param." + k, v)
        case.add("input.src", src)
        case.add("input.src_lengths", lengths)
        case.add("input.tgt", tgt)
        case.add("input.tgt_lengths", lengths + 1)
        case.add("input.targets", targets)
        opt = torch.optim.AdamW(m.parameters(), lr=optimizer["lr"], betas=(optimizer["beta1"], optimizer["beta2"]),
                                eps=optimizer["eps"], weight_decay=optimizer["weight_decay"])
        losses = []
        for s in range(steps):
            opt.zero_grad()
            src_len, tgt_len = lengths[s].tolist(), (lengths[s] + 1).tolist()
            logits = m(src[s], src_len, tgt[s], tgt_len)
            loss = cross_entropy(logits, targets[s], {"ignore_index": IGNORE})
            losses.append(loss.item())
            loss.backward()
            opt.step()
        if not losses[-1] < losses[0] - 0.1:
            sys.exit(f"make_fixtures: {name} does not learn ({losses[0]} -> {losses[-1]})")
        case.add("expect.loss", torch.tensor(losses, dtype=dtype))
        yield case


CASES = [linear_cases, layer_norm_cases, softmax_cases, embedding_cases, feed_forward_cases, sdpa_cases,
         attention_cases, block_cases, encoder_cases, decoder_layer_cases, seeds_decoder_cases, seq2seq_cases,
         seq2seq_seeds_cases, model_cases, training_cases, gpt_cases, gpt_training_cases, seq2seq_training_cases,
         float64_reference_cases]


def main():
    """Every case, or with arguments only the cases whose names start with one of them (and then
    nothing else is touched: another CPU may round old fixtures differently in the last bit)."""
    prefixes = sys.argv[1:]
    os.makedirs(OUT_DIR, exist_ok=True)
    written = []
    for make in CASES:
        for case in make():
            if not prefixes or any(case.name.startswith(p) for p in prefixes):
                written.append(case.write())
    if prefixes:
        print(f"make_fixtures: wrote {len(written)} fixtures: " + ", ".join(os.path.basename(p) for p in written))
        return
    stale = set(os.listdir(OUT_DIR)) - {os.path.basename(p) for p in written}
    for name in sorted(stale):
        if name.endswith(".safetensors"):
            os.remove(os.path.join(OUT_DIR, name))
    total = sum(os.path.getsize(p) for p in written)
    print(f"make_fixtures: wrote {len(written)} fixtures to {os.path.relpath(OUT_DIR)} ({total / 1024:.0f} KiB)")


if __name__ == "__main__":
    main()
