#!/usr/bin/python3
"""Reference values for tests/autograd/test_nn_ops.cpp, computed with PyTorch in float64.

Run (Debian's python3-torch lives under /usr/bin/python3):   /usr/bin/python3 tests/autograd/reference_nn_ops.py
It rewrites tests/autograd/reference_nn_ops.h. Inputs are closed-form waves,
wave(shape, a, b, amp, shift)[i] = amp * sin(a * i + b) + shift over the row-major index i,
which the C++ test rebuilds with the same formula, so no random numbers cross the language
boundary. Every case backpropagates a fixed upstream gradient (another wave) and records the
output and the gradients of every input.
"""
import math
import os
import textwrap

import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)


def wave(shape, a, b, amp=1.0, shift=0.0, grad=False):
    n = math.prod(shape)
    t = torch.tensor([amp * math.sin(a * i + b) + shift for i in range(n)]).reshape(shape)
    return t.requires_grad_(grad)


def layer_norm_case():
    x = wave((2, 3, 4), 0.37, 0.1, 2.0, 0.5, grad=True)
    w = wave((3, 4), 0.91, 0.2, 0.5, 1.0, grad=True)
    b = wave((3, 4), 0.53, 1.3, 0.3, 0.0, grad=True)
    y = F.layer_norm(x, (3, 4), w, b, eps=1e-5)
    y.backward(wave((2, 3, 4), 0.29, 0.4))
    return {"LayerNormY": y, "LayerNormDx": x.grad, "LayerNormDweight": w.grad, "LayerNormDbias": b.grad}


CE_TARGETS = [1, 3, 4, 0, 3, 2]  # (2, 3); 3 is the ignore_index


def cross_entropy_case():
    out = {}
    for name, reduction in (("Mean", "mean"), ("Sum", "sum"), ("None", "none")):
        logits = wave((2, 3, 5), 0.47, 0.3, 3.0, 0.0, grad=True)
        targets = torch.tensor(CE_TARGETS).reshape(2, 3)
        # PyTorch wants the class axis second: (N, C, d1) for (N, d1, C) logits.
        loss = F.cross_entropy(logits.permute(0, 2, 1), targets, ignore_index=3, label_smoothing=0.2,
                               reduction=reduction)
        loss.backward(wave((2, 3), 0.61, 0.7) if reduction == "none" else None)
        out["CrossEntropyLoss" + name] = loss
        out["CrossEntropyDlogits" + name] = logits.grad
    return out


def attention_case():
    q = wave((2, 2, 3, 4), 0.31, 0.2, 1.0, 0.0, grad=True)
    k = wave((2, 2, 5, 4), 0.23, 0.9, 1.0, 0.0, grad=True)
    v = wave((2, 2, 5, 3), 0.17, 0.5, 1.0, 0.0, grad=True)
    bias = wave((1, 2, 3, 5), 0.41, 0.6, 0.5, 0.0, grad=True)
    lengths = [5, 3]  # key padding: batch 1 sees only its first 3 keys
    keep = torch.tensor([[1.0 if j < n else 0.0 for j in range(5)] for n in lengths]).reshape(2, 1, 1, 5)
    scores = q @ k.transpose(-2, -1) / math.sqrt(4) + bias
    weights = torch.softmax(scores.masked_fill(keep == 0, float("-inf")), dim=-1)
    out = weights @ v
    out.backward(wave((2, 2, 3, 3), 0.37, 1.1))
    return {"AttentionOut": out, "AttentionWeights": weights, "AttentionDq": q.grad, "AttentionDk": k.grad,
            "AttentionDv": v.grad, "AttentionDbias": bias.grad}


def rms_norm_case():
    # Llama's RMSNorm: x / sqrt(mean(x^2) + eps) * weight over the last axis.
    x = wave((2, 3, 4), 0.43, 0.2, 2.0, 0.3, grad=True)
    w = wave((4,), 0.77, 0.5, 0.5, 1.0, grad=True)
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    y.backward(wave((2, 3, 4), 0.31, 0.6))
    return {"RmsNormY": y, "RmsNormDx": x.grad, "RmsNormDweight": w.grad}


def rotary_tables(positions, head_dim, theta):
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2) / head_dim)
    angles = torch.outer(torch.arange(positions).double(), inv_freq)
    return angles.cos(), angles.sin()


def rotary_case():
    # x (B, T, H, D) = (2, 3, 2, 4) at positions 5, 6, 7 (an offset of 5), theta 10000, in the
    # "rotate half" layout: y = x * cos + rotate_half(x) * sin with the tables' halves repeated.
    x = wave((2, 3, 2, 4), 0.29, 0.4, 1.0, 0.0, grad=True)
    cos, sin = rotary_tables(8, 4, 10000.0)
    c = torch.cat([cos, cos], -1)[5:8].reshape(1, 3, 1, 4)
    s = torch.cat([sin, sin], -1)[5:8].reshape(1, 3, 1, 4)
    rotated = torch.cat([-x[..., 2:], x[..., :2]], -1)
    y = x * c + rotated * s
    y.backward(wave((2, 3, 2, 4), 0.53, 0.9))
    return {"RotaryY": y, "RotaryDx": x.grad}


def swiglu_case():
    gate = wave((3, 5), 0.61, 0.2, 3.0, 0.0, grad=True)
    up = wave((3, 5), 0.37, 0.8, 1.0, 0.0, grad=True)
    y = F.silu(gate) * up
    y.backward(wave((3, 5), 0.47, 0.1))
    return {"SwigluY": y, "SwigluDgate": gate.grad, "SwigluDup": up.grad}


def grouped_attention_case():
    # 4 query heads over 2 key/value heads (each serves query heads 2h and 2h + 1), causal.
    q = wave((2, 4, 3, 4), 0.31, 0.2, 1.0, 0.0, grad=True)
    k = wave((2, 2, 3, 4), 0.23, 0.9, 1.0, 0.0, grad=True)
    v = wave((2, 2, 3, 3), 0.17, 0.5, 1.0, 0.0, grad=True)
    kk = k.repeat_interleave(2, dim=1)
    vv = v.repeat_interleave(2, dim=1)
    scores = q @ kk.transpose(-2, -1) / math.sqrt(4)
    causal = torch.ones(3, 3).tril()
    weights = torch.softmax(scores.masked_fill(causal == 0, float("-inf")), dim=-1)
    out = weights @ vv
    out.backward(wave((2, 4, 3, 3), 0.37, 1.1))
    return {"GroupedOut": out, "GroupedDq": q.grad, "GroupedDk": k.grad, "GroupedDv": v.grad}


def main():
    values = {**layer_norm_case(), **cross_entropy_case(), **attention_case(), **rms_norm_case(), **rotary_case(),
              **swiglu_case(), **grouped_attention_case()}
    lines = [
        "// Generated by tests/autograd/reference_nn_ops.py (PyTorch %s, float64); do not edit by hand." % torch.__version__,
        "// Each array is one tensor in row-major order; the script documents the inputs.",
        "#pragma once",
        "",
        "#include <vector>",
        "",
        "namespace ag::testing::torch_reference {",
        "",
    ]
    for name, t in values.items():
        flat = t.detach().reshape(-1).tolist()
        body = textwrap.wrap(", ".join(repr(float(x)) for x in flat), 108)
        lines.append("// shape %s" % (tuple(t.shape),))
        lines.append("inline const std::vector<double> k%s = {" % name)
        lines += ["    " + chunk for chunk in body]
        lines.append("};")
    lines += ["", "}  // namespace ag::testing::torch_reference", ""]
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference_nn_ops.h")
    with open(path, "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
