#!/usr/bin/env python3
"""Writes tests/data/quant_blocks.bin: random GGUF blocks and their dequantized
values as computed by gguf-py (the `gguf` package from llama.cpp), an independent
oracle for corvid's block layouts.

Format, per type: u32 name length, name bytes, u32 block count, u32 bytes per
block, the raw blocks, then block_count * block_elems float32 values.
Scale fields are set to small finite f16 values so every element is finite.
"""
import struct
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

# (type, block bytes, block elems, byte offsets of f16 scale fields)
TYPES = [
    ("Q4_0", T.Q4_0, 18, 32, [0]),
    ("Q4_1", T.Q4_1, 20, 32, [0, 2]),
    ("Q5_0", T.Q5_0, 22, 32, [0]),
    ("Q5_1", T.Q5_1, 24, 32, [0, 2]),
    ("Q8_0", T.Q8_0, 34, 32, [0]),
    ("Q4_K", T.Q4_K, 144, 256, [0, 2]),
    ("Q5_K", T.Q5_K, 176, 256, [0, 2]),
    ("Q6_K", T.Q6_K, 210, 256, [208]),
]


def main(path):
    rng = np.random.default_rng(1234)
    out = bytearray()
    for name, qtype, nbytes, nelems, scale_offsets in TYPES:
        nblocks = 3
        raw = rng.integers(0, 256, size=(nblocks, nbytes), dtype=np.uint8)
        for b in range(nblocks):
            for off in scale_offsets:
                scale = np.float16(rng.uniform(-0.05, 0.05)).tobytes()
                raw[b, off:off + 2] = np.frombuffer(scale, dtype=np.uint8)
        values = quants.dequantize(raw.reshape(-1), qtype).astype(np.float32).reshape(-1)
        assert values.size == nblocks * nelems and np.all(np.isfinite(values))
        out += struct.pack("<I", len(name)) + name.encode()
        out += struct.pack("<II", nblocks, nbytes)
        out += raw.tobytes() + values.tobytes()
    with open(path, "wb") as f:
        f.write(out)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/data/quant_blocks.bin")
