#!/usr/bin/env python3
"""PyTorch peer for batch-1 decode: a Llama-family decoder written with plain torch
ops (bf16 weights, F.linear -> cuBLAS), a static KV cache, and each decode step
captured once in a CUDA graph and replayed. This is the fair PyTorch baseline the
CUDA issue asks for (eager `generate` pays Python and launch overhead per op and is
not a peer). Random weights in a realistic range; only the shapes matter for speed.

    python3 bench/torch_decode_baseline.py --config configs/llama-3.1-8b.json \
        --context 128 --tokens 128

Prints one line per run: context, tok/s, weight GB/s (bytes a token reads: every
matrix plus norms; the embedding table contributes one row).
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F


def build(cfg, device, dtype):
    h = cfg["hidden_size"]
    heads = cfg["num_attention_heads"]
    kv_heads = cfg.get("num_key_value_heads", heads)
    hd = cfg.get("head_dim", h // heads)
    inter = cfg["intermediate_size"]
    vocab = cfg["vocab_size"]

    def mat(rows, cols):
        return (torch.randn(rows, cols, device=device, dtype=torch.float32) * (cols ** -0.5)).to(dtype)

    layers = []
    for _ in range(cfg["num_hidden_layers"]):
        layers.append(dict(
            qkv=mat((heads + 2 * kv_heads) * hd, h), o=mat(h, heads * hd),
            gate_up=mat(2 * inter, h), down=mat(h, inter),
            n1=torch.ones(h, device=device, dtype=dtype), n2=torch.ones(h, device=device, dtype=dtype)))
    model = dict(embed=mat(vocab, h), layers=layers, norm=torch.ones(h, device=device, dtype=dtype),
                 lm_head=mat(vocab, h), heads=heads, kv_heads=kv_heads, hd=hd, inter=inter,
                 eps=cfg.get("rms_norm_eps", 1e-5), theta=cfg.get("rope_theta", 10000.0))
    return model


def weight_bytes_per_token(m):
    total = m["lm_head"].numel() * m["lm_head"].element_size() + m["norm"].numel() * 2
    for layer in m["layers"]:
        total += sum(t.numel() * t.element_size() for t in layer.values())
    return total + m["embed"].shape[1] * m["embed"].element_size()


def rms_norm(x, w, eps):
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def rope(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def step(m, token, pos, caches, mask, cos_tab, sin_tab):
    """One decode token. token, pos: int64 [1] device tensors (graph inputs)."""
    heads, kvh, hd = m["heads"], m["kv_heads"], m["hd"]
    x = m["embed"][token]  # [1, h]
    cos, sin = cos_tab[pos], sin_tab[pos]  # [1, hd/2]
    for layer, (kc, vc) in zip(m["layers"], caches):
        y = rms_norm(x, layer["n1"], m["eps"])
        qkv = F.linear(y, layer["qkv"])
        q, k, v = qkv.split([heads * hd, kvh * hd, kvh * hd], dim=-1)
        q = rope(q.view(1, heads, hd), cos, sin)
        k = rope(k.view(1, kvh, hd), cos, sin)
        kc.index_copy_(2, pos, k.view(1, kvh, 1, hd))
        vc.index_copy_(2, pos, v.view(1, kvh, 1, hd))
        att = F.scaled_dot_product_attention(q.view(1, heads, 1, hd), kc, vc, attn_mask=mask,
                                             enable_gqa=(heads != kvh))
        x = x + F.linear(att.reshape(1, heads * hd), layer["o"])
        y = rms_norm(x, layer["n2"], m["eps"])
        g, u = F.linear(y, layer["gate_up"]).split(m["inter"], dim=-1)
        x = x + F.linear(F.silu(g) * u, layer["down"])
    return F.linear(rms_norm(x, m["norm"], m["eps"]), m["lm_head"])


def run(m, context, tokens, device, dtype):
    cap = context + tokens
    kvh, hd = m["kv_heads"], m["hd"]
    caches = [(torch.zeros(1, kvh, cap, hd, device=device, dtype=dtype),
               torch.zeros(1, kvh, cap, hd, device=device, dtype=dtype)) for _ in m["layers"]]
    inv = 1.0 / (m["theta"] ** (torch.arange(0, hd, 2, device=device, dtype=torch.float32) / hd))
    ang = torch.arange(cap, device=device, dtype=torch.float32)[:, None] * inv[None, :]
    cos_tab, sin_tab = ang.cos().to(dtype), ang.sin().to(dtype)
    token = torch.zeros(1, dtype=torch.long, device=device)
    pos = torch.zeros(1, dtype=torch.long, device=device)
    mask = torch.full((1, 1, 1, cap), float("-inf"), device=device, dtype=dtype)

    with torch.no_grad():
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):  # warm-up (cuBLAS handles, autotuning) before capture
                step(m, token, pos, caches, mask, cos_tab, sin_tab)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            logits = step(m, token, pos, caches, mask, cos_tab, sin_tab)

        mask[..., :context] = 0  # the prompt's positions are "cached" (values don't matter for speed)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for i in range(tokens):
            p = context + i
            pos.fill_(p)
            mask[..., p] = 0
            graph.replay()
            token.copy_(logits.argmax(-1))  # greedy, stays on the GPU
        torch.cuda.synchronize()
        return tokens / (time.perf_counter() - start)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--context", type=int, nargs="+", default=[128])
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    cfg = json.load(open(args.config))
    torch.manual_seed(0)
    m = build(cfg, "cuda", torch.bfloat16)
    gb = weight_bytes_per_token(m) / 1e9
    print(f"torch {torch.__version__} {torch.cuda.get_device_name()} weights/token {gb:.2f} GB")
    for ctx in args.context:
        best = max(run(m, ctx, args.tokens, "cuda", torch.bfloat16) for _ in range(args.repeats))
        print(f"torch-graph bf16 ctx={ctx} tg{args.tokens}: {best:.1f} tok/s  {best * gb:.0f} GB/s")


if __name__ == "__main__":
    main()
