"""The FP8 KV format's oracle: ml_dtypes' float8_e4m3fn (round to nearest even), with the
scale per group of 64 values that corvid's F8G64 keeps (ops/kv_fp8.h).

    pip install numpy ml_dtypes==0.7.0
    python3 tests/oracle/make_kv_fp8_oracle.py tests/data/kv_fp8

Writes
  sweep.f32 / sweep.u8: values and their e4m3 codes: every code's value, every midpoint
    between neighbouring codes (ties, which go to the even code), and log-uniform random
    values of both signs within the finite range;
  input.f32 ([groups, 64] float32: the affine oracle's kinds of rows) and fp8.bin, each
    group's 64 codes then its f32 scale max|x| / 448, the codes of x / scale;
  fp8.deq.f32: scale * value(code).
"""
import os
import sys

import ml_dtypes
import numpy as np

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
e4m3 = ml_dtypes.float8_e4m3fn

codes = np.arange(256, dtype=np.uint8)
values = codes.view(e4m3).astype(np.float32)
finite = np.sort(values[np.isfinite(values) & (values >= 0)])
mids = ((finite[1:].astype(np.float64) + finite[:-1]) / 2).astype(np.float32)
rng = np.random.RandomState(2026)
rand = (np.exp(rng.uniform(np.log(1e-4), np.log(448), 4000)) * rng.choice([-1, 1], 4000)).astype(np.float32)
sweep = np.concatenate([finite, -finite, mids, -mids, rand]).astype(np.float32)
sweep.tofile(os.path.join(out, "sweep.f32"))
sweep.astype(e4m3).view(np.uint8).tofile(os.path.join(out, "sweep.u8"))

rows = [rng.randn(8, 64) * s for s in (1e-3, 0.1, 1.0, 3.0, 40.0, 900.0)]
rows.append(rng.rand(4, 64) * 5 + 1)
edge = np.zeros((6, 64))
edge[1] = 0.75
edge[2, ::2] = -1.0
edge[3] = np.linspace(-1, 3, 64)
edge[4, 5] = 1e-6
edge[5] = rng.randn(64) * 1e-30
rows.append(edge)
x = np.concatenate(rows).astype(np.float32)
x.tofile(os.path.join(out, "input.f32"))
amax = np.abs(x).max(axis=1, keepdims=True)
scale = (amax / np.float32(448)).astype(np.float32)
safe = np.where(scale > 0, scale, np.float32(1))
q = np.where(scale > 0, x / safe, np.float32(0)).astype(np.float32).astype(e4m3)
blob = np.concatenate([q.view(np.uint8), scale.view(np.uint8).reshape(-1, 4)], axis=1)
blob.tofile(os.path.join(out, "fp8.bin"))
(q.astype(np.float32) * scale).astype(np.float32).tofile(os.path.join(out, "fp8.deq.f32"))
print("sweep", sweep.shape, "groups", x.shape[0])
