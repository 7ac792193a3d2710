#!/usr/bin/env python3
"""Independent numpy (float64) forward pass over the tiny fixtures, checked against oracle.json.

Needs only numpy: no torch, no transformers. It restates, in ~150 lines, what each
fixture's config means (RoPE variants, GQA, sliding window, q/k norms, biases, tied
embeddings, bf16 weights, shards), so it doubles as a readable spec of the semantics
corvid must match, and it measures how far an independent implementation lands from
the oracle (the basis of the tolerances in tests/fixtures/README.md).

    python3 tests/oracle/check_fixtures.py [tests/fixtures]
"""
import json
import math
import struct
import sys
from pathlib import Path

import numpy as np


def load_safetensors(path):
    raw = Path(path).read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        buf = raw[8 + n + a:8 + n + b]
        if info["dtype"] == "F32":
            t = np.frombuffer(buf, dtype="<f4")
        elif info["dtype"] == "BF16":  # bf16 = the top 16 bits of an f32
            t = (np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise ValueError(f"{path}: {name}: dtype {info['dtype']}")
        out[name] = t.reshape(info["shape"]).astype(np.float64)
    return out


def load_weights(folder):
    index = folder / "model.safetensors.index.json"
    files = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.exists() \
        else ["model.safetensors"]
    w = {}
    for f in files:
        w.update(load_safetensors(folder / f))
    return w


def rope_params(cfg):
    """Classic (rope_theta + rope_scaling) or transformers-5 (rope_parameters) config."""
    p = dict(cfg.get("rope_parameters") or cfg.get("rope_scaling") or {})
    p.setdefault("rope_theta", cfg.get("rope_theta", 10000.0))
    p["rope_type"] = p.get("rope_type", p.get("type", "default"))
    return p


def inv_freq_and_scale(cfg, dim):
    p = rope_params(cfg)
    base, kind = p["rope_theta"], p["rope_type"]
    inv = 1.0 / base ** (np.arange(0, dim, 2) / dim)
    if kind == "default":
        return inv, 1.0
    if kind == "linear":
        return inv / p["factor"], 1.0
    if kind == "llama3":
        f, lo, hi, old = p["factor"], p["low_freq_factor"], p["high_freq_factor"], \
            p["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv
        scaled = np.where(wavelen > old / lo, inv / f, inv)
        smooth = (old / wavelen - lo) / (hi - lo)
        smoothed = (1 - smooth) * scaled / f + smooth * scaled
        medium = (wavelen >= old / hi) & (wavelen <= old / lo)
        return np.where(medium, smoothed, scaled), 1.0
    if kind == "yarn":
        f, old = p["factor"], p.get("original_max_position_embeddings", cfg["max_position_embeddings"])
        beta_fast, beta_slow = p.get("beta_fast") or 32, p.get("beta_slow") or 1
        scale = p.get("attention_factor") or (0.1 * math.log(f) + 1.0 if f > 1 else 1.0)

        def corr_dim(rot):
            return dim * math.log(old / (rot * 2 * math.pi)) / (2 * math.log(base))
        lo, hi = math.floor(corr_dim(beta_fast)), math.ceil(corr_dim(beta_slow))
        lo, hi = max(lo, 0), min(hi, dim - 1)
        hi = hi + 0.001 if lo == hi else hi
        ramp = np.clip((np.arange(dim // 2) - lo) / (hi - lo), 0, 1)
        extrap = 1 - ramp
        return (inv / f) * (1 - extrap) + inv * extrap, scale
    raise ValueError(f"rope_type {kind}")


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(x, pos, inv, scale):  # x: [T, H, D]; halves layout (rotate_half), not interleaved
    ang = pos[:, None] * inv[None, :]
    cos = np.concatenate([np.cos(ang), np.cos(ang)], -1)[:, None, :] * scale
    sin = np.concatenate([np.sin(ang), np.sin(ang)], -1)[:, None, :] * scale
    half = x.shape[-1] // 2
    rot = np.concatenate([-x[..., half:], x[..., :half]], -1)
    return x * cos + rot * sin


def forward(cfg, w, ids):
    H, KV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    D = cfg.get("head_dim") or cfg["hidden_size"] // H
    eps, T = cfg["rms_norm_eps"], len(ids)
    window = cfg.get("sliding_window") if cfg["model_type"] == "mistral" or cfg.get("use_sliding_window") \
        else None
    inv, scale = inv_freq_and_scale(cfg, D)
    pos = np.arange(T, dtype=np.float64)
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    visible = (j <= i) & ((i - j < window) if window else True)

    def lin(x, name):
        y = x @ w[name + ".weight"].T
        return y + w[name + ".bias"] if name + ".bias" in w else y

    x = w["model.embed_tokens.weight"][ids]
    for L in range(cfg["num_hidden_layers"]):
        pre = f"model.layers.{L}."
        h = rms_norm(x, w[pre + "input_layernorm.weight"], eps)
        q = lin(h, pre + "self_attn.q_proj").reshape(T, H, D)
        k = lin(h, pre + "self_attn.k_proj").reshape(T, KV, D)
        v = lin(h, pre + "self_attn.v_proj").reshape(T, KV, D)
        if pre + "self_attn.q_norm.weight" in w:  # Qwen3: per-head RMSNorm before RoPE
            q = rms_norm(q, w[pre + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, w[pre + "self_attn.k_norm.weight"], eps)
        q, k = rope(q, pos, inv, scale), rope(k, pos, inv, scale)
        out = np.empty((T, H, D))
        for hh in range(H):
            kv = hh // (H // KV)
            s = q[:, hh] @ k[:, kv].T / math.sqrt(D)
            s = np.where(visible, s, -np.inf)
            p = np.exp(s - s.max(-1, keepdims=True))
            out[:, hh] = (p / p.sum(-1, keepdims=True)) @ v[:, kv]
        x = x + lin(out.reshape(T, H * D), pre + "self_attn.o_proj")
        h = rms_norm(x, w[pre + "post_attention_layernorm.weight"], eps)
        g = lin(h, pre + "mlp.gate_proj")
        x = x + lin(g / (1 + np.exp(-g)) * lin(h, pre + "mlp.up_proj"), pre + "mlp.down_proj")
    x = rms_norm(x, w["model.norm.weight"], eps)
    tied = cfg.get("tie_word_embeddings", False)
    head = w["model.embed_tokens.weight"] if tied else w["lm_head.weight"]
    return x @ head.T


def check(folder):
    cfg = json.loads((folder / "config.json").read_text())
    ora = json.loads((folder / "oracle.json").read_text())
    w = load_weights(folder)
    worst, ok = 0.0, True
    for n, (ids, lg, greedy) in enumerate(zip(ora["prompts"], ora["logits"], ora["greedy"])):
        ref = np.array(lg)
        got = forward(cfg, w, ids)
        worst = max(worst, float(np.abs(got - ref).max()))
        full = forward(cfg, w, ids + greedy)[len(ids) - 1:-1].argmax(-1).tolist()
        if full != greedy:
            ok = False
            print(f"  {folder.name} prompt {n}: greedy differs at step "
                  f"{next(s for s, (a, b) in enumerate(zip(full, greedy)) if a != b)}")
    print(f"{folder.name}: max |logit - oracle| = {worst:.3g} over {len(ora['prompts'])} prompts, "
          f"greedy {'ok' if ok else 'MISMATCH'}, min greedy gap {ora['min_greedy_gap']}")
    return ok and worst < 1e-3


def main():
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "fixtures")
    results = [check(d) for d in sorted(root.iterdir()) if (d / "config.json").exists()]
    print(f"{sum(results)} passed, {len(results) - sum(results)} failed")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
