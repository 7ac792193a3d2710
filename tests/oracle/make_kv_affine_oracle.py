"""The affine KV formats' oracle: mlx's mx.quantize on f16 values (what mlx-lm's
QuantizedKVCache does with an f16 model's keys and values).

    pip install mlx==0.32.4 mlx-cpu==0.32.4
    python3 tests/oracle/make_kv_affine_oracle.py tests/data/kv_affine

Writes input.f32 ([groups, 64] float32: random values at several scales, not all f16-exact,
and edge cases) and, per format, FORMAT.bin: each group's codes (mlx's packed uint32 words as
little-endian bytes), then its f16 scale and f16 bias, the layout of corvid's A8G64/A4G64/
A8G32/A4G32 (ops/kv_affine.h); plus FORMAT.deq.f32, mx.dequantize of the same.
"""
import os
import sys

import mlx.core as mx
import numpy as np

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.RandomState(2026)
rows = []
for scale in (1e-3, 0.1, 1.0, 3.0, 40.0, 900.0):
    rows.append(rng.randn(8, 64) * scale)
rows.append(rng.rand(4, 64) * 5 + 1)        # all positive: the max is the edge
rows.append(-(rng.rand(4, 64) * 5 + 1))     # all negative: the min is the edge
edge = np.zeros((8, 64))
edge[1] = 0.75                               # constant
edge[2] = -2.5
edge[3, ::2] = 1.0                           # two values
edge[4] = np.linspace(-1, 1, 64)             # symmetric: |min| == |max|
edge[5] = np.linspace(-1, 3, 64)
edge[6, 5] = 1e-6                            # one tiny value among zeros
edge[7] = rng.randn(64) * 1e-6               # below f16's normal range
rows.append(edge)
x = np.concatenate(rows).astype(np.float32)
x.tofile(os.path.join(out, "input.f32"))
xh = mx.array(x).astype(mx.float16)
for bits in (8, 4):
    for group in (64, 32):
        q, s, b = mx.quantize(xh, group_size=group, bits=bits)
        mx.eval(q, s, b)
        codes = np.array(q).view(np.uint8).reshape(-1, group * bits // 8)
        scales = np.array(s).astype(np.float16).reshape(-1, 1).view(np.uint8)
        biases = np.array(b).astype(np.float16).reshape(-1, 1).view(np.uint8)
        blob = np.concatenate([codes, scales.reshape(-1, 2), biases.reshape(-1, 2)], axis=1)
        name = f"q{bits}_g{group}"
        blob.tofile(os.path.join(out, name + ".bin"))
        deq = mx.dequantize(q, s, b, group_size=group, bits=bits).astype(mx.float32)
        np.array(deq).astype(np.float32).tofile(os.path.join(out, name + ".deq.f32"))
        print(name, blob.shape)
