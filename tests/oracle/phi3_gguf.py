#!/usr/bin/env python3
"""Writes the phi3_longrope fixture as a GGUF laid out the way llama.cpp's converter writes Phi-3
(Phi3MiniModel: attn_qkv / ffn_up fused as in the checkpoint, rotate-half RoPE without a q/k
permutation, longrope as the global tensors rope_factors_long / rope_factors_short plus
rope.scaling.original_context_length and rope.scaling.attn_factor; facts, not code, from
llama.cpp), into tests/fixtures/phi3_gguf/model.gguf with the fixture's oracle.json (F32).

    /work/oracle-venv/bin/python tests/oracle/phi3_gguf.py
"""
import json
import math
from pathlib import Path

import numpy as np
from gguf import GGUFWriter, GGMLQuantizationType
from safetensors.numpy import load_file

from gguf_fixture import add_fixture_tokenizer, finish

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "fixtures" / "phi3_longrope"
OUT = HERE.parent / "fixtures" / "phi3_gguf"
LAYER = {"input_layernorm.weight": "attn_norm.weight", "self_attn.qkv_proj.weight": "attn_qkv.weight",
         "self_attn.o_proj.weight": "attn_output.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
         "mlp.gate_up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight"}


def main():
    cfg = json.loads((SRC / "config.json").read_text())
    rs = cfg["rope_scaling"]
    hd = cfg["hidden_size"] // cfg["num_attention_heads"]
    rot = int(hd * cfg.get("partial_rotary_factor", 1.0))
    orig, ctx = cfg["original_max_position_embeddings"], cfg["max_position_embeddings"]
    OUT.mkdir(parents=True, exist_ok=True)
    w = GGUFWriter(str(OUT / "model.gguf"), "phi3")
    w.add_context_length(ctx)
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_rope_freq_base(cfg["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_rope_dimension_count(rot)
    w.add_uint32("phi3.rope.scaling.original_context_length", orig)
    w.add_float32("phi3.rope.scaling.attn_factor", math.sqrt(1 + math.log(ctx / orig) / math.log(orig)))
    if cfg.get("sliding_window"):
        w.add_uint32("phi3.attention.sliding_window", cfg["sliding_window"])
    add_fixture_tokenizer(w, SRC)
    w.add_tensor("rope_factors_long.weight", np.array(rs["long_factor"], dtype=np.float32))
    w.add_tensor("rope_factors_short.weight", np.array(rs["short_factor"], dtype=np.float32))
    for hf, t in sorted(load_file(str(SRC / "model.safetensors")).items()):
        t = t.astype(np.float32)
        name = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
                "lm_head.weight": "output.weight"}.get(hf)
        if name is None:
            parts = hf.split(".")
            name = f"blk.{parts[2]}.{LAYER['.'.join(parts[3:])]}"
        w.add_tensor(name, t, raw_dtype=GGMLQuantizationType.F32)
    finish(w, SRC, OUT,
        "The `phi3_longrope` fixture as a GGUF in llama.cpp's Phi-3 layout (F32, longrope as rope_factors_long/short), "
        "made by `tests/oracle/phi3_gguf.py`; oracle.json is phi3_longrope's (same weights).\n")


if __name__ == "__main__":
    main()
