"""Records the reference values of tests/train/test_optim.cpp from PyTorch (1.13, float64).

Run:  /usr/bin/python3 tests/train/reference_optim.py
and paste the printed C++ initialisers into test_optim.cpp.

The problem: loss = mean((x @ W + b - y)^2) with fixed x, y and starting W, b; a third
parameter `unused` never takes part in the loss, so its grad stays None and every optimizer
must skip it. Each configuration runs 10 steps of zero_grad / backward / (clip) / step and
records the loss before each step and W, b after the last one.
"""
import torch

torch.set_default_dtype(torch.float64)

X = [[0.5, -1.0, 2.0], [1.5, 0.25, -0.5], [-2.0, 1.0, 0.75], [0.1, -0.3, 1.2]]
Y = [[1.0, -0.5], [0.0, 2.0], [-1.5, 0.5], [0.7, 0.3]]
W0 = [[0.2, -0.4], [0.6, 0.1], [-0.3, 0.8]]
B0 = [0.05, -0.1]
UNUSED0 = [1.0, -2.0]

CONFIGS = [
    ("sgd_plain", lambda p: torch.optim.SGD(p, lr=0.1), None),
    ("sgd_momentum_dampening_wd",
     lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01), None),
    ("sgd_nesterov_wd", lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01), None),
    ("sgd_momentum_clipped", lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), 0.5),
    ("adam_wd", lambda p: torch.optim.Adam(p, lr=0.05, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.01), None),
    ("adamw", lambda p: torch.optim.AdamW(p, lr=0.05, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.1), None),
    # Two parameter groups, the second without decay: what no_decay = {"b", "unused"} means.
    ("adamw_betas_bias_not_decayed",
     lambda p: torch.optim.AdamW([{"params": p[:1]}, {"params": p[1:], "weight_decay": 0.0}],
                                 lr=0.05, betas=(0.8, 0.95), eps=1e-8, weight_decay=0.5), None),
    ("sgd_momentum_bias_not_decayed",
     lambda p: torch.optim.SGD([{"params": p[:1]}, {"params": p[1:], "weight_decay": 0.0}],
                               lr=0.05, momentum=0.9, weight_decay=0.5), None),
]


def cpp(values):
    return "{" + ", ".join(repr(float(v)) for v in values) + "}"


for name, make, clip in CONFIGS:
    x = torch.tensor(X)
    y = torch.tensor(Y)
    w = torch.tensor(W0, requires_grad=True)
    b = torch.tensor(B0, requires_grad=True)
    unused = torch.tensor(UNUSED0, requires_grad=True)
    opt = make([w, b, unused])
    losses = []
    for _ in range(10):
        opt.zero_grad()
        loss = ((x @ w + b - y) ** 2).mean()
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_([w, b, unused], clip)
        opt.step()
        losses.append(loss.item())
    assert unused.grad is None and unused.tolist() == UNUSED0
    print(f"// {name}")
    print(f"losses = {cpp(losses)},")
    print(f"weight = {cpp(w.detach().flatten().tolist())},")
    print(f"bias = {cpp(b.detach().tolist())},")
