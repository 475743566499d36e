#!/usr/bin/python3
"""Writes a GPT-2 124M (or another preset's shape) with seeded random weights in the layouts
attograd imports, for bench/compare_gpt2.sh: DIR/model.safetensors (Hugging Face as published:
unprefixed, Conv1D, float32), DIR/nanogpt.safetensors (nanoGPT's state_dict names) and
DIR/gpt2_124M.bin (llm.c version 3). Written by tests/parity/torch_gpt2.py's writers, which know
nothing of attograd's code.

  /usr/bin/python3 bench/gpt2_files.py /tmp/gpt2-bench [--layers 12 --heads 12 --d-model 768]
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "parity"))
sys.dont_write_bytecode = True

import torch  # noqa: E402

from torch_gpt2 import GPT2, write_hf, write_llmc, write_nanogpt  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir")
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--d-model", type=int, default=768)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--block-size", type=int, default=1024)
    args = p.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    torch.manual_seed(124)
    model = GPT2(args.vocab, args.block_size, args.d_model, args.heads, args.layers)
    with torch.no_grad():  # GPT-2's initialisation, so that generation looks like a trained model's scale
        for name, t in model.named_parameters():
            if ".ln_" in name or "ln_f" in name:
                t.copy_(1.0 + 0.1 * torch.randn_like(t) if name.endswith("weight") else 0.02 * torch.randn_like(t))
            elif name.endswith("bias"):
                t.normal_(0.0, 0.02)
            else:
                t.normal_(0.0, 0.02 if "c_proj" not in name else 0.02 / (2 * args.layers) ** 0.5)
    write_hf(os.path.join(args.dir, "model.safetensors"), model, torch.float32, prefix=False)
    write_nanogpt(os.path.join(args.dir, "nanogpt.safetensors"), model, torch.float32)
    write_llmc(os.path.join(args.dir, "gpt2_124M.bin"), model)
    print(f"gpt2_files: wrote {sum(t.numel() for t in model.parameters())} parameters in three layouts to {args.dir}")


if __name__ == "__main__":
    main()
