#!/usr/bin/python3
"""Writes the Llama-family fixtures under tests/parity/fixtures/llama/ (read by test_llama_parity.cpp).

Run from anywhere:   /usr/bin/python3 tests/parity/make_llama_fixtures.py

From the twin of torch_llama.py, with seeded weights that are float32 values:
  layers.safetensors    each layer alone in float64 (RMSNorm, rotary, SwiGLU, grouped-query attention
                        as Llama, Qwen2 and Qwen3 have it, the decoder layer): its parameters, an input,
                        an upstream gradient, and PyTorch's output and gradients of input and parameters
  <variant>/            a Hugging Face directory: config.json and model.safetensors, or shards and
                        model.safetensors.index.json
  <variant>.expect.safetensors
                        ids (2, 24) and logits in float64 and float32; prompt (1, 8) and greedy, the
                        next 100 argmax tokens (the same cached and uncached here); perplexity.ids
                        (1, 61) and perplexity.nats, their sum of -ln p scored in sliding windows of
                        24 tokens every 8, in float64; lora.*: 20 AdamW
                        steps of LoRA (rank 4, alpha 8, on q_proj and v_proj; one batch seen every step)
                        from lora.a.<layer> initial A matrices, the loss before each update, in float64
The variants: llama_f32 (untied, 4 query heads over 2, Llama 3 rope scaling whose three regimes
all occur at head_dim 8), llama_bf16 (the same model stored in bfloat16; its expectations use the
rounded weights), qwen2_sharded (q/k/v biases, tied, two shards), qwen3_f32 (q/k norms, tied,
head_dim 16 with hidden_size 32 and 4 heads); and byte_llama/, a Llama of 256 tokens for the programs'
tests (no expectations: its values are the llama_f32 model's kind).
Deterministic (one thread, seeded generators): rerunning rewrites the same bytes.
"""
import json
import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.dont_write_bytecode = True

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import torch_llama as tl  # noqa: E402
from torch_reference import save_safetensors  # noqa: E402

torch.set_num_threads(1)
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures", "llama")

BASE = dict(vocab_size=101, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-5, rope_theta=10000.0,
            hidden_act="silu")
VARIANTS = {
    "llama_f32": dict(BASE, architectures=["LlamaForCausalLM"], model_type="llama", tie_word_embeddings=False,
                      rope_scaling=dict(rope_type="llama3", factor=4.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                        original_max_position_embeddings=64)),
    "qwen2_sharded": dict(BASE, architectures=["Qwen2ForCausalLM"], model_type="qwen2", tie_word_embeddings=True,
                          rope_theta=1000000.0),
    "qwen3_f32": dict(BASE, architectures=["Qwen3ForCausalLM"], model_type="qwen3", tie_word_embeddings=True,
                      head_dim=16, rms_norm_eps=1e-6, rope_theta=1000000.0),
}
LORA = dict(rank=4, alpha=8.0, targets=("q_proj", "v_proj"), steps=20, B=4, T=16)
ADAMW = dict(lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)


def write_directory(path, config, model, dtype, shards=1):
    os.makedirs(path, exist_ok=True)
    for f in os.listdir(path):
        os.remove(os.path.join(path, f))
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    tensors = [(n, t.to(dtype)) for n, t in tl.state_tensors(model)]
    if shards == 1:
        save_safetensors(os.path.join(path, "model.safetensors"), tensors, {"format": "pt"})
        return
    weight_map = {}
    for s in range(shards):
        name = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = tensors[s::shards]
        save_safetensors(os.path.join(path, name), part, {"format": "pt"})
        weight_map.update({n: name for n, _ in part})
    with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=2)


def sliding_nats(model, tokens, window, stride):
    """The sum of -ln p(token | context) over a text scored in sliding windows: each token once, by
    the first window that reaches it (Hugging Face's "Perplexity of fixed-length models")."""
    n, total, previous_end, begin = len(tokens), 0.0, 0, 0
    while True:
        end = min(begin + window, n)
        first = max(previous_end, begin + 1)
        if first < end:
            logp = torch.log_softmax(model(tokens[begin:end - 1].unsqueeze(0))[0], -1)
            for i in range(first, end):
                total -= logp[i - begin - 1, tokens[i]].item()
        previous_end = end
        if end == n:
            return total
        begin += stride


def lora_losses(model, gen, vocab):
    """20 AdamW steps of LoRA on q_proj and v_proj; returns A's initial values, batches and losses."""
    r, alpha = LORA["rank"], LORA["alpha"]
    for p in model.parameters():
        p.requires_grad_(False)
    adapters, inits = [], []
    for i, layer in enumerate(model.model.layers):
        for target in LORA["targets"]:
            lin = getattr(layer.self_attn, target)
            a = torch.nn.Parameter((torch.rand(r, lin.in_features, generator=gen, dtype=torch.float64) - 0.5) * 0.4)
            b = torch.nn.Parameter(torch.zeros(lin.out_features, r, dtype=torch.float64))
            inits.append((f"lora.a.model.layers.{i}.self_attn.{target}", a.detach().clone()))
            adapters += [a, b]
            base = lin.forward
            lin.forward = (lambda x, base=base, a=a, b=b: base(x) + (alpha / r) * (x @ a.t()) @ b.t())
    # One batch, seen every step: 20 steps of a low-rank update can fit it, not the whole vocabulary.
    seq = torch.randint(0, vocab, (1, LORA["B"], LORA["T"] + 1), generator=gen).expand(LORA["steps"], -1, -1)
    opt = torch.optim.AdamW(adapters, **ADAMW)
    losses = []
    for s in range(LORA["steps"]):
        opt.zero_grad()
        out = model(seq[s, :, :-1])
        loss = F.cross_entropy(out.reshape(-1, vocab), seq[s, :, 1:].reshape(-1))
        losses.append(loss.item())
        loss.backward()
        opt.step()
    if not losses[-1] < losses[0] - 0.05:
        sys.exit(f"make_llama_fixtures: the LoRA fine-tune does not learn ({losses[0]} -> {losses[-1]})")
    return inits, seq, losses


def variant_fixtures(name, config, stored_dtype, shards, seed):
    c = tl.resolve(config)
    gen = torch.Generator().manual_seed(seed)
    model = tl.randomize(tl.Llama(c).double(), gen)
    write_directory(os.path.join(OUT, name), config, model, stored_dtype, shards)
    with torch.no_grad():  # what the stored file holds, widened
        for p in model.parameters():
            p.copy_(p.to(stored_dtype).double())
    ids = torch.randint(0, c["vocab_size"], (2, 24), generator=gen)
    prompt = torch.randint(0, c["vocab_size"], (1, 8), generator=gen)
    out = [("ids", ids), ("prompt", prompt)]
    with torch.no_grad():
        out.append(("logits.f64", model(ids)))
        m32 = tl.Llama(c).float()
        m32.load_state_dict({k: v.float() for k, v in model.state_dict().items()})
        out.append(("logits.f32", m32(ids)))
        greedy = model.greedy(prompt, 100, cached=False)
        if not torch.equal(greedy, model.greedy(prompt, 100, cached=True)):
            sys.exit(f"make_llama_fixtures: the twin's cached and uncached greedy tokens differ ({name})")
        out.append(("greedy", greedy))
        text = torch.randint(0, c["vocab_size"], (1, 61), generator=gen)
        out += [("perplexity.ids", text), ("perplexity.nats", torch.tensor([sliding_nats(model, text[0], 24, 8)], dtype=torch.float64))]
    inits, seq, losses = lora_losses(model, gen, c["vocab_size"])
    out += inits + [("lora.ids", seq[:, :, :-1].contiguous()), ("lora.targets", seq[:, :, 1:].contiguous()),
                    ("lora.loss", torch.tensor(losses, dtype=torch.float64))]
    save_safetensors(os.path.join(OUT, name + ".expect.safetensors"), out,
                     {"lora": json.dumps(dict(LORA, adamw=ADAMW))})


def layer_fixtures():
    gen = torch.Generator().manual_seed(77)
    tensors, cases = [], {}

    def record(case, module, x, forward, extra=None):
        module = tl.randomize(module.double(), gen) if module is not None else None
        x = x.clone().requires_grad_(True)
        y = forward(module, x)
        g = torch.randn(y.shape, generator=gen, dtype=torch.float64)
        y.backward(g)
        tensors.extend([(f"{case}.x", x.detach()), (f"{case}.g", g), (f"{case}.y", y.detach()),
                        (f"{case}.dx", x.grad)])
        if module is not None:
            for n, p in module.named_parameters():
                tensors.extend([(f"{case}.param.{n}", p.detach()), (f"{case}.grad.{n}", p.grad)])
        cases[case] = extra or {}

    x3 = lambda: torch.randn(2, 5, 32, generator=gen, dtype=torch.float64)  # noqa: E731
    record("rms_norm", tl.RMSNorm(32, 1e-5), x3(), lambda m, x: m(x), {"eps": 1e-5})
    inv = tl.inverse_frequencies(8, 10000.0, VARIANTS["llama_f32"]["rope_scaling"])
    record("rotary", None, torch.randn(2, 5, 3, 8, generator=gen, dtype=torch.float64),
           lambda m, x: tl.rotary(x.transpose(1, 2), inv, 3).transpose(1, 2),
           {"offset": 3, "theta": 10000.0, "scaling": VARIANTS["llama_f32"]["rope_scaling"]})
    record("swiglu", tl.MLP(32, 48), x3(), lambda m, x: m(x))
    for name in VARIANTS:
        c = tl.resolve(VARIANTS[name])
        record("attention_" + name, tl.Attention(c), x3(), lambda m, x: m(x), c)
        record("block_" + name, tl.Block(c), x3(), lambda m, x: m(x), c)
    save_safetensors(os.path.join(OUT, "layers.safetensors"), tensors, {"cases": json.dumps(cases)})


def main():
    os.makedirs(OUT, exist_ok=True)
    layer_fixtures()
    variant_fixtures("llama_f32", VARIANTS["llama_f32"], torch.float32, 1, 11)
    variant_fixtures("llama_bf16", VARIANTS["llama_f32"], torch.bfloat16, 1, 11)
    variant_fixtures("qwen2_sharded", VARIANTS["qwen2_sharded"], torch.float32, 2, 12)
    variant_fixtures("qwen3_f32", VARIANTS["qwen3_f32"], torch.float32, 1, 13)
    # A Llama over the 256 byte values, for the programs' tests (generate --tokenizer byte).
    byte_config = dict(VARIANTS["llama_f32"], vocab_size=256)
    gen = torch.Generator().manual_seed(14)
    write_directory(os.path.join(OUT, "byte_llama"), byte_config,
                    tl.randomize(tl.Llama(tl.resolve(byte_config)).double(), gen), torch.float32)


if __name__ == "__main__":
    main()
