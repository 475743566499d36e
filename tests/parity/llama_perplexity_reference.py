"""Sliding-window perplexity of an exported Llama-family model, computed by PyTorch from the
exported directory alone: the reference export_gpt's Llama output is held to
(tests/parity/llama_export_matches_torch.sh).

    /usr/bin/python3 tests/parity/llama_perplexity_reference.py DIRECTORY TEXT STRIDE WINDOW

DIRECTORY is what `export_gpt --format hf` writes for a Llama-family checkpoint: config.json and
model.safetensors under Hugging Face's names. The model is tests/parity/torch_llama.py's twin in
float64, built from config.json as Hugging Face's loader would (its defaults per architecture);
the text is read as bytes (token id = byte), and the windows are perplexity_reference.py's. Prints
the same four lines as perplexity_reference.py.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
from perplexity_reference import print_figures, read_safetensors, sliding_window_nats  # noqa: E402
from torch_llama import load_hf_directory  # noqa: E402


def main():
    if len(sys.argv) != 5:
        sys.exit("usage: llama_perplexity_reference.py DIRECTORY TEXT STRIDE WINDOW")
    path, text_path, stride, window = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    model = load_hf_directory(path, lambda f: read_safetensors(f)[0])
    model.eval()
    if model.c["vocab_size"] < 256:
        sys.exit(f"the model's vocabulary has {model.c['vocab_size']} tokens, fewer than the byte tokenizer's 256")
    with open(text_path, "rb") as f:
        ids = torch.tensor(list(f.read()), dtype=torch.long)
    print_figures(*sliding_window_nats(model, ids, stride, window))


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
