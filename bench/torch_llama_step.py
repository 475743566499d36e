#!/usr/bin/python3
"""The PyTorch twin of bench/llama_step: the Llama family's training step (forward, cross-entropy,
backward, AdamW) or batch-1 greedy generation with a KV cache, in float32, on the model of
tests/parity/torch_llama.py (written from the architecture's definition, the same one the parity
tests hold attograd to). The same flags and JSON as llama_step. A development tool only (Debian's
/usr/bin/python3, PyTorch 1.13).

  /usr/bin/python3 bench/torch_llama_step.py --config smollm2-4x256 [--threads 2] [--steps 5] [--json]
  /usr/bin/python3 bench/torch_llama_step.py --config smollm2-4x256 --generate 64 [--json]
"""
import argparse
import json
import os
import resource
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "parity"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import torch_llama as tl  # noqa: E402

PRESETS = {
    "smollm2-135m": dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                         num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192,
                         rms_norm_eps=1e-5, rope_theta=100000.0, tie_word_embeddings=True, model_type="llama"),
    "llama-tiny": dict(vocab_size=256, hidden_size=128, intermediate_size=384, num_hidden_layers=4,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-5,
                       rope_theta=10000.0, tie_word_embeddings=True, model_type="llama"),
}
CONFIGS = {"smollm2-4x256": ("smollm2-135m", 4, 256), "tiny-16x256": ("llama-tiny", 16, 256)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default="tiny-16x256", choices=sorted(CONFIGS))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--generate", type=int, default=0)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    preset, B, T = CONFIGS[a.config]
    model = tl.Llama(tl.resolve(PRESETS[preset]))
    with torch.no_grad():  # Hugging Face's initialisation: N(0, 0.02), norms 1
        for name, w in model.named_parameters():
            if not name.endswith("norm.weight"):
                w.normal_(0.0, 0.02)
    vocab = PRESETS[preset]["vocab_size"]
    if a.generate:
        model.eval()
        prompt = torch.tensor([[1]])
        ms = []
        with torch.no_grad():
            for r in range(max(a.warmup, 1) + a.repeats):
                t0 = time.perf_counter()
                tokens = model.greedy(prompt, a.generate, cached=True)
                if r >= max(a.warmup, 1):
                    ms.append((time.perf_counter() - t0) * 1e3)
        ms.sort()
        median = ms[len(ms) // 2]
        out = dict(framework="pytorch", mode="generate", config=a.config, new_tokens=a.generate, median_ms=median,
                   tokens_per_s=a.generate / (median / 1e3), peak_rss_mb=peak_rss_mb(), threads=a.threads)
    else:
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        gen = torch.Generator().manual_seed(1)
        ms, loss = [], None
        for s in range(a.warmup + a.steps):
            seq = torch.randint(0, vocab, (B, T + 1), generator=gen)
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            logits = model(seq[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, vocab), seq[:, 1:].reshape(-1))
            loss.backward()
            opt.step()
            if s >= a.warmup:
                ms.append((time.perf_counter() - t0) * 1e3)
        ms.sort()
        out = dict(framework="pytorch", mode="train", config=a.config, steps=a.steps, median_ms=ms[len(ms) // 2],
                   peak_rss_mb=peak_rss_mb(), last_loss=loss.item(), threads=a.threads)
    print(json.dumps(out) if a.json else out)


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


if __name__ == "__main__":
    main()
