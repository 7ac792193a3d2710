#!/usr/bin/env python3
"""Writes the smollm3_interval fixture as a GGUF laid out the way llama.cpp's converter writes
SmolLM3 (SmolLM3Model inherits LlamaModel: llama keys, q/k rows permuted so that adjacent
pairs rotate together; no key for the NoPE layers, which llama.cpp fixes at every 4th layer;
facts, not code, taken from llama.cpp), into tests/fixtures/smollm3_gguf/model.gguf with the
fixture's oracle.json beside it (F32, same weights).

    /work/oracle-venv/bin/python tests/oracle/smollm3_gguf.py
"""
import json
from pathlib import Path

import numpy as np
from gguf import GGUFWriter, GGMLQuantizationType
from safetensors.numpy import load_file

from gguf_fixture import add_fixture_tokenizer, finish

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "fixtures" / "smollm3_interval"
OUT = HERE.parent / "fixtures" / "smollm3_gguf"

LAYER = {"input_layernorm.weight": "attn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight",
         "self_attn.k_proj.weight": "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight",
         "self_attn.o_proj.weight": "attn_output.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
         "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
         "mlp.down_proj.weight": "ffn_down.weight"}


def permute(w, heads):
    """llama.cpp's q/k row order: within each head, row 2i is HF row i and row 2i+1 is HF row i + hd/2."""
    rows, cols = w.shape
    hd = rows // heads
    return w.reshape(heads, 2, hd // 2, cols).swapaxes(1, 2).reshape(rows, cols)


def main():
    cfg = json.loads((SRC / "config.json").read_text())
    assert cfg["num_hidden_layers"] % 4 == 0 and cfg.get("no_rope_layer_interval", 4) == 4
    heads, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    OUT.mkdir(parents=True, exist_ok=True)
    w = GGUFWriter(str(OUT / "model.gguf"), "smollm3")
    w.add_context_length(cfg.get("max_position_embeddings", 32768))
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_rope_freq_base(cfg["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_vocab_size(cfg["vocab_size"])
    w.add_rope_dimension_count(cfg["hidden_size"] // heads)
    add_fixture_tokenizer(w, SRC)
    for hf, t in sorted(load_file(str(SRC / "model.safetensors")).items()):
        t = t.astype(np.float32)
        if hf == "lm_head.weight":
            continue  # tied
        if hf == "model.embed_tokens.weight":
            name = "token_embd.weight"
        elif hf == "model.norm.weight":
            name = "output_norm.weight"
        else:
            parts = hf.split(".")
            name = f"blk.{parts[2]}.{LAYER['.'.join(parts[3:])]}"
            if name.endswith("attn_q.weight"):
                t = permute(t, heads)
            elif name.endswith("attn_k.weight"):
                t = permute(t, kv)
        w.add_tensor(name, np.ascontiguousarray(t), raw_dtype=GGMLQuantizationType.F32)
    finish(w, SRC, OUT,
        "The `smollm3_interval` fixture as a GGUF in llama.cpp's SmolLM3 layout (F32, q/k permuted), made by "
        "`tests/oracle/smollm3_gguf.py`; oracle.json is smollm3_interval's (same weights).\n")


if __name__ == "__main__":
    main()
