#!/usr/bin/env python3
"""Second oracle: mlx-lm (the reference implementation of the system corvid descends
from) on the same tiny checkpoints. For each fixture named, greedy continuations of
the fixture's own prompts go to tests/fixtures/<name>/mlx_oracle.json.

    pip install mlx==0.32.4 mlx-cpu==0.32.4 mlx-lm==0.32.2   # runs on Linux CPUs
    python3 tests/oracle/make_mlx_oracle.py gemma3 llama

Float32 weights, greedy argmax of mlx-lm's logits one token at a time with its own KV
caches (mlx_lm.models.cache.make_prompt_cache), max_new_tokens as in oracle.json.
"""
import json
import sys
from pathlib import Path

import mlx.core as mx
from mlx_lm import load
from mlx_lm.models.cache import make_prompt_cache

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures"


def greedy(model, prompt, n):
    cache = make_prompt_cache(model)
    logits = model(mx.array([prompt]), cache=cache)
    out = []
    for _ in range(n):
        tok = int(mx.argmax(logits[0, -1]).item())
        out.append(tok)
        logits = model(mx.array([[tok]]), cache=cache)
    return out


def main():
    import importlib.metadata as md
    for name in sys.argv[1:]:
        folder = FIXTURES / name
        oracle = json.loads((folder / "oracle.json").read_text())
        model, _ = load(str(folder))
        model.set_dtype(mx.float32)
        runs = [greedy(model, p, oracle["max_new_tokens"]) for p in oracle["prompts"]]
        agree = [r == g for r, g in zip(runs, oracle["greedy"])]
        print(f"{name}: mlx-lm greedy equals transformers' on {sum(agree)}/{len(agree)} prompts")
        meta = {"fixture": name, "mlx_version": md.version("mlx"), "mlx_lm_version": md.version("mlx-lm"),
                "dtype": "float32", "device": "cpu", "prompts": oracle["prompts"], "greedy": runs,
                "equals_transformers": agree}
        (folder / "mlx_oracle.json").write_text(
            "{\n" + ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in meta.items()) + "\n}\n")


if __name__ == "__main__":
    main()
