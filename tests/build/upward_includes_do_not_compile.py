#!/usr/bin/env python3
"""The floors' one-way arrows are the build's: each floor (core, autograd, layers, train: the
framework; text; each model family under models/) is compiled against an include root that holds
only itself and the floors below it. For every floor, a probe compiled with the very command line
of one of its sources (from compile_commands.json) must compile when it includes a header of its
own floor or a lower one, and must fail, the header not found, when it includes a header of a
higher floor or of a sibling (a core/ file including train/trainer.h, text/ including a model,
train/ including text/, one model family including another).

  upward_includes_do_not_compile.py BUILD_DIR
"""
import json
import os
import shlex
import subprocess
import sys
import tempfile

FRAMEWORK = ["core", "autograd", "layers", "train"]
FAMILIES = ["models_gpt", "models_llama", "models_seq2seq", "models_toy"]
FLOORS = FRAMEWORK + ["text"] + FAMILIES
HEADER = {"core": "core/tensor.h", "autograd": "autograd/variable.h", "layers": "layers/linear.h",
          "train": "train/trainer.h", "text": "text/tokenizer.h", "models_gpt": "models/gpt/gpt.h",
          "models_llama": "models/llama/llama.h",
          "models_seq2seq": "models/seq2seq/seq2seq.h", "models_toy": "models/toy/sequence_model.h"}
# What each floor may include: the floors below it and itself, never a sibling family.
SEES = {f: FRAMEWORK[:FRAMEWORK.index(f) + 1] for f in FRAMEWORK}
SEES["text"] = FRAMEWORK + ["text"]
for family in FAMILIES:
    SEES[family] = FRAMEWORK + ["text", family]

build = os.path.abspath(sys.argv[1])
commands = json.load(open(os.path.join(build, "compile_commands.json")))
failures = 0
with tempfile.TemporaryDirectory() as scratch:
    for floor in FLOORS:
        # One source of the floor's library, and its command line with the probe put in.
        entry = next(e for e in commands if f"libattograd_{floor}.a.p" in e["command"])
        argv = shlex.split(entry["command"])
        if "-c" in argv:
            i = argv.index("-c")
            del argv[i:i + 2]
        for flag in ("-o", "-MF", "-MQ"):
            while flag in argv:
                i = argv.index(flag)
                del argv[i:i + 2]
        argv = [a for a in argv if a != "-MD"]
        for other in FLOORS:
            probe = os.path.join(scratch, f"{floor}_{other}.cpp")
            with open(probe, "w") as f:
                f.write(f'#include "attograd/{HEADER[other]}"\nint probe_{floor}_{other}() {{ return 0; }}\n')
            done = subprocess.run(argv + ["-fsyntax-only", probe], cwd=entry["directory"], capture_output=True, text=True)
            allowed = other in SEES[floor]
            if allowed and done.returncode != 0:
                print(f"FAIL: {floor}/ cannot include {HEADER[other]}:\n{done.stderr[-1500:]}")
                failures += 1
            elif not allowed and (done.returncode == 0 or "No such file" not in done.stderr):
                print(f"FAIL: {floor}/ includes {HEADER[other]} (a higher floor or a sibling) and it "
                      f"{'compiles' if done.returncode == 0 else 'fails otherwise: ' + done.stderr[-500:]}")
                failures += 1
            else:
                print(f"ok: {floor}/ {'includes' if allowed else 'cannot include'} {HEADER[other]}")
print(f"{failures} failures")
sys.exit(1 if failures else 0)
