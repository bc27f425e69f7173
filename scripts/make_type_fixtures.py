#!/usr/bin/env python3
"""Writes Tests/KernelTests/Fixtures/gguf_types.json: a few real rows of every GGUF type Ember computes with,
and their values as the `gguf` package's numpy dequantizers (gguf.quants) give them — the independent oracle
Ember's scalar dequantizers are checked against.

Usage: make_type_fixtures.py OUT.json FILE.gguf [FILE.gguf ...]
The files are SmolLM2-135M-Instruct re-quantized by llama.cpp's llama-quantize (see the fixture README).
For each type, the first 2-D tensor of that type found in the files gives rows 0 and its last row.
"""
import base64, json, os, sys
import numpy as np
from gguf import GGUFReader, quants, GGMLQuantizationType as T

WANTED = ["F16", "BF16", "Q8_0", "Q5_0", "Q5_1", "Q4_0", "Q4_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS"]

def main():
    out, files = sys.argv[1], sys.argv[2:]
    found = {}
    for path in files:
        reader = GGUFReader(path)
        for tensor in reader.tensors:
            name = tensor.tensor_type.name
            if name not in WANTED or name in found or len(tensor.shape) != 2:
                continue
            columns, rows = int(tensor.shape[0]), int(tensor.shape[1])
            raw = np.asarray(tensor.data)            # rows × bytes per row (uint8), or rows × columns for F16/BF16
            raw = raw.reshape(rows, -1).view(np.uint8)
            picked = [0, rows - 1]
            blocks = np.concatenate([raw[r] for r in picked]).tobytes()
            values = quants.dequantize(np.frombuffer(blocks, dtype=np.uint8).reshape(len(picked), -1), tensor.tensor_type)
            values = np.asarray(values, dtype=np.float32).reshape(-1)
            assert values.size == len(picked) * columns, (name, values.size)
            found[name] = {
                "type": name, "gguf_type_id": int(tensor.tensor_type), "source": os.path.basename(path),
                "tensor": tensor.name, "rows": picked, "columns": columns,
                "blocks_base64": base64.b64encode(blocks).decode(),
                "values_base64": base64.b64encode(values.astype("<f4").tobytes()).decode(),
            }
    missing = [t for t in WANTED if t not in found]
    if missing:
        sys.exit(f"no tensor of type {missing} in the files given")
    with open(out, "w") as f:
        json.dump([found[t] for t in WANTED], f, indent=1)
        f.write("\n")
    print(f"{out}: {len(found)} types, {os.path.getsize(out)} bytes")

if __name__ == "__main__":
    main()
