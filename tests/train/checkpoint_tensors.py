"""Compares the tensors of two safetensors files byte for byte, without any library:
    python3 tests/train/checkpoint_tensors.py A B
prints one line per tensor name of either file: "same NAME", "differs NAME", "only-in-a NAME" or
"only-in-b NAME" (an 8-byte little-endian header length, the JSON header, then the raw data).
    python3 tests/train/checkpoint_tensors.py --nonzero SUFFIX FILE
exits 0 when FILE has tensors whose names end with SUFFIX (optimizer state aside) and each holds
a nonzero byte (LoRA's B starts at zero: a zero one never trained), 1 otherwise."""
import json
import struct
import sys


def tensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    body = data[8 + n:]
    return {name: (e["dtype"], tuple(e["shape"]), body[e["data_offsets"][0]:e["data_offsets"][1]])
            for name, e in header.items()}


if sys.argv[1] == "--nonzero":
    chosen = [data for name, (_, _, data) in tensors(sys.argv[3]).items()
              if name.endswith(sys.argv[2]) and not name.startswith("optimizer/")]
    sys.exit(0 if chosen and all(any(data) for data in chosen) else 1)
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
for name in sorted(set(a) | set(b)):
    if name not in b:
        print("only-in-a", name)
    elif name not in a:
        print("only-in-b", name)
    else:
        print("same" if a[name] == b[name] else "differs", name)
