#!/usr/bin/python3
"""Writes a Hugging Face directory of a published Llama-family shape with seeded random weights, for
the benchmarks and checks that need a model as large as a real one (no download): config.json, the
tensors in bfloat16 as the hub ships them (sharded like the hub's larger models when --shards > 1,
with model.safetensors.index.json) and, when given, a tokenizer.json copied beside them.

  /usr/bin/python3 bench/hf_llama_directory.py /tmp/qwen3-0.6b --shape qwen3-0.6b \\
      --tokenizer ~/.cache/attograd/hf/qwen3/tokenizer.json

Weights are N(0, 0.02), norms 1: what an untrained model of the shape holds. The names and shapes
are Hugging Face's LlamaForCausalLM / Qwen3ForCausalLM ones, written from the architecture here
(tests/parity/torch_reference.py's writer), not from attograd's code.
"""
import argparse
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "parity"))
sys.dont_write_bytecode = True

import torch  # noqa: E402

from torch_reference import save_safetensors  # noqa: E402

SHAPES = {
    # The hub's config.json of each, abridged to the keys a loader reads.
    "qwen3-0.6b": dict(architectures=["Qwen3ForCausalLM"], model_type="qwen3", vocab_size=151936, hidden_size=1024,
                       intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8,
                       head_dim=128, max_position_embeddings=40960, rms_norm_eps=1e-6, rope_theta=1000000.0,
                       tie_word_embeddings=True, attention_bias=False, hidden_act="silu", torch_dtype="bfloat16"),
    "smollm2-135m": dict(architectures=["LlamaForCausalLM"], model_type="llama", vocab_size=49152, hidden_size=576,
                         intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                         max_position_embeddings=8192, rms_norm_eps=1e-5, rope_theta=100000.0,
                         tie_word_embeddings=True, attention_bias=False, hidden_act="silu", torch_dtype="bfloat16"),
}


def tensor_shapes(c):
    d, hd = c["hidden_size"], c.get("head_dim", c["hidden_size"] // c["num_attention_heads"])
    q, kv, ff = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd, c["intermediate_size"]
    out = [("model.embed_tokens.weight", (c["vocab_size"], d))]
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out += [(p + "input_layernorm.weight", (d,)), (p + "self_attn.q_proj.weight", (q, d)),
                (p + "self_attn.k_proj.weight", (kv, d)), (p + "self_attn.v_proj.weight", (kv, d)),
                (p + "self_attn.o_proj.weight", (d, q))]
        if c["model_type"] == "qwen3":
            out += [(p + "self_attn.q_norm.weight", (hd,)), (p + "self_attn.k_norm.weight", (hd,))]
        out += [(p + "post_attention_layernorm.weight", (d,)), (p + "mlp.gate_proj.weight", (ff, d)),
                (p + "mlp.up_proj.weight", (ff, d)), (p + "mlp.down_proj.weight", (d, ff))]
    out.append(("model.norm.weight", (d,)))
    if not c["tie_word_embeddings"]:
        out.append(("lm_head.weight", (c["vocab_size"], d)))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir")
    p.add_argument("--shape", choices=sorted(SHAPES), default="qwen3-0.6b")
    p.add_argument("--shards", type=int, default=2)
    p.add_argument("--tokenizer", help="a tokenizer.json to copy into the directory")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    config = SHAPES[a.shape]
    gen = torch.Generator().manual_seed(a.seed)
    tensors = []
    for name, shape in tensor_shapes(config):
        if name.endswith("norm.weight"):
            t = torch.ones(shape, dtype=torch.bfloat16)
        else:
            t = (0.02 * torch.randn(shape, generator=gen)).to(torch.bfloat16)
        tensors.append((name, t))
    os.makedirs(a.dir, exist_ok=True)
    with open(os.path.join(a.dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    if a.shards == 1:
        save_safetensors(os.path.join(a.dir, "model.safetensors"), tensors, {"format": "pt"})
    else:
        weight_map = {}
        per = -(-len(tensors) // a.shards)
        for s in range(a.shards):
            name = f"model-{s + 1:05d}-of-{a.shards:05d}.safetensors"
            part = tensors[s * per:(s + 1) * per]
            save_safetensors(os.path.join(a.dir, name), part, {"format": "pt"})
            weight_map.update({n: name for n, _ in part})
        total = sum(t.numel() * 2 for _, t in tensors)
        with open(os.path.join(a.dir, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    if a.tokenizer:
        shutil.copyfile(os.path.expanduser(a.tokenizer), os.path.join(a.dir, "tokenizer.json"))
    print(f"wrote {a.dir}: {a.shape}, {sum(t.numel() for _, t in tensors):,} parameters in bfloat16, "
          f"{a.shards} shard(s)" + (", tokenizer.json" if a.tokenizer else ""))


if __name__ == "__main__":
    main()
