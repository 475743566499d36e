#!/usr/bin/python3
"""Writes the GPT-2 import fixtures under tests/parity/fixtures/gpt2/ (read by test_gpt2_import.cpp).

Run from anywhere:   /usr/bin/python3 tests/parity/make_gpt2_fixtures.py

One small GPT-2 (torch_gpt2.py: Hugging Face's names and Conv1D orientation, tanh GELU, eps 1e-5)
with seeded weights that are float32 values, written in every layout attograd imports:
  hf_f32.safetensors       Hugging Face, "transformer." prefix, mask buffers and lm_head.weight
  hf_f64.safetensors       Hugging Face as published (no prefix, no buffers, no head), float64
  nanogpt_f32.safetensors  nanoGPT's state_dict names, (out, in) weights, lm_head.weight
  llmc_f32.bin             llm.c version 3, the table padded to 128 rows
  hf_f16.safetensors       Hugging Face as published, in float16 (rounded by PyTorch)
  hf_bf16.safetensors      the same in bfloat16
  hf_byte_f32.safetensors  another GPT-2 of 256 tokens, context 64, for train_gpt --tokenizer byte
                           (tests/train/gpt2_weights_in_and_out.sh)
and what PyTorch computes with it, in expect_f32.safetensors and expect_f64.safetensors:
  ids (B, T) and logits (B, T, vocab); prompt and greedy (100 tokens continuing the prompt, argmax
  every step); finetune.ids / finetune.targets (steps, B, T) and finetune.loss (steps): 20 AdamW
  steps from these weights, the loss before each update.
The output is deterministic (one thread, seeded generators); rerunning rewrites the same bytes.
"""
import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.dont_write_bytecode = True

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from torch_gpt2 import GPT2, randomize, write_hf, write_llmc, write_nanogpt  # noqa: E402
from torch_reference import save_safetensors  # noqa: E402

torch.set_num_threads(1)

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures", "gpt2")
CONFIG = dict(vocab=97, block_size=128, d_model=32, n_head=4, n_layers=2)
STEPS, B, T = 20, 4, 16
ADAMW = dict(lr=3e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)


def main():
    os.makedirs(OUT, exist_ok=True)
    gen = torch.Generator().manual_seed(2019)
    model = randomize(GPT2(**CONFIG).double(), gen)
    ids = torch.randint(0, CONFIG["vocab"], (2, 24), generator=gen)
    prompt = torch.randint(0, CONFIG["vocab"], (1, 8), generator=gen)
    seq = torch.randint(0, CONFIG["vocab"], (STEPS, B, T + 1), generator=gen)

    write_hf(os.path.join(OUT, "hf_f32.safetensors"), model, torch.float32, prefix=True, buffers=True, head=True)
    write_hf(os.path.join(OUT, "hf_f64.safetensors"), model, torch.float64, prefix=False)
    write_hf(os.path.join(OUT, "hf_f16.safetensors"), model, torch.float16, prefix=False)
    write_hf(os.path.join(OUT, "hf_bf16.safetensors"), model, torch.bfloat16, prefix=False)
    write_nanogpt(os.path.join(OUT, "nanogpt_f32.safetensors"), model, torch.float32)
    write_llmc(os.path.join(OUT, "llmc_f32.bin"), model)

    for dtype, suffix in ((torch.float32, "f32"), (torch.float64, "f64")):
        m = GPT2(**CONFIG).to(dtype)
        m.load_state_dict({k: v.to(dtype) for k, v in model.state_dict().items()})
        with torch.no_grad():
            logits = m(ids)
        greedy = m.greedy(prompt[0].tolist(), 100)
        margin = m.greedy_margin(prompt[0].tolist(), 100)
        if not margin > 1e-3:
            sys.exit(f"make_gpt2_fixtures: greedy steps too close to a tie in {suffix} ({margin}); change the seed")
        opt = torch.optim.AdamW(m.parameters(), **ADAMW)
        losses = []
        for s in range(STEPS):
            opt.zero_grad()
            out = m(seq[s, :, :T])
            loss = F.cross_entropy(out.reshape(-1, CONFIG["vocab"]), seq[s, :, 1:].reshape(-1))
            losses.append(loss.item())
            loss.backward()
            opt.step()
        if not losses[-1] < losses[0] - 0.1:
            sys.exit(f"make_gpt2_fixtures: the fine-tune does not learn ({losses[0]} -> {losses[-1]})")
        save_safetensors(os.path.join(OUT, f"expect_{suffix}.safetensors"), [
            ("ids", ids), ("logits", logits), ("prompt", prompt), ("greedy", torch.tensor(greedy)),
            ("finetune.ids", seq[:, :, :T].contiguous()), ("finetune.targets", seq[:, :, 1:].contiguous()),
            ("finetune.loss", torch.tensor(losses, dtype=dtype))],
            {"config": str(CONFIG), "adamw": str(ADAMW), "greedy_margin": f"{margin:.6g}"})
    byte_model = randomize(GPT2(vocab=256, block_size=64, d_model=32, n_head=4, n_layers=2).double(),
                           torch.Generator().manual_seed(256))
    write_hf(os.path.join(OUT, "hf_byte_f32.safetensors"), byte_model, torch.float32, prefix=False)
    print(f"make_gpt2_fixtures: wrote {len(os.listdir(OUT))} files to {os.path.relpath(OUT)}")


if __name__ == "__main__":
    main()
