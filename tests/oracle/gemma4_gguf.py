#!/usr/bin/env python3
"""Writes the gemma4 fixture (tests/fixtures/gemma4) as a GGUF laid out the way llama.cpp's
converter writes Gemma 4 (convert_hf_to_gguf.py Gemma4Model, gguf-py constants/tensor_mapping,
read by src/models/gemma4*.cpp; facts, not code, taken from there), into
tests/fixtures/gemma4_gguf/model.gguf, with the fixture's oracle.json beside it (same weights,
F32, so the same transformers logits apply). The tokenizer is the fixture's byte-level BPE
("gpt2"); real Gemma 4 GGUFs carry llama.cpp's own "gemma4" tokenizer model instead.

    /work/oracle-venv/bin/python tests/oracle/gemma4_gguf.py
"""
import json
from pathlib import Path

import numpy as np
from gguf import GGUFWriter, GGMLQuantizationType
from safetensors.numpy import load_file

from gguf_fixture import add_fixture_tokenizer, finish

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "fixtures" / "gemma4"
OUT = HERE.parent / "fixtures" / "gemma4_gguf"

GLOBAL = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
          "model.embed_tokens_per_layer.weight": "per_layer_token_embd.weight",
          "model.per_layer_model_projection.weight": "per_layer_model_proj.weight",
          "model.per_layer_projection_norm.weight": "per_layer_proj_norm.weight"}
LAYER = {"input_layernorm.weight": "attn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight",
         "self_attn.k_proj.weight": "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight",
         "self_attn.o_proj.weight": "attn_output.weight", "self_attn.q_norm.weight": "attn_q_norm.weight",
         "self_attn.k_norm.weight": "attn_k_norm.weight",
         "post_attention_layernorm.weight": "post_attention_norm.weight",
         "pre_feedforward_layernorm.weight": "ffn_norm.weight",
         "post_feedforward_layernorm.weight": "post_ffw_norm.weight", "mlp.gate_proj.weight": "ffn_gate.weight",
         "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight",
         "layer_scalar": "layer_output_scale.weight", "per_layer_input_gate.weight": "inp_gate.weight",
         "per_layer_projection.weight": "proj.weight", "post_per_layer_input_norm.weight": "post_norm.weight"}


def gguf_name(hf):
    if hf in GLOBAL:
        return GLOBAL[hf]
    parts = hf.split(".")
    assert parts[:2] == ["model", "layers"], hf
    return f"blk.{parts[2]}.{LAYER['.'.join(parts[3:])]}"


def main():
    cfg = json.loads((SRC / "config.json").read_text())
    L, I = cfg["num_hidden_layers"], cfg["intermediate_size"]
    shared = cfg.get("num_kv_shared_layers", 0)
    sliding = [t == "sliding_attention" for t in cfg["layer_types"]]
    sliding[-1] = False  # transformers forces the last layer to full attention
    kv = cfg["num_key_value_heads"]
    gkv = cfg.get("num_global_key_value_heads") if cfg.get("attention_k_eq_v") else None
    full_rope = cfg["rope_parameters"]["full_attention"]
    D = cfg["global_head_dim"]

    OUT.mkdir(parents=True, exist_ok=True)
    w = GGUFWriter(str(OUT / "model.gguf"), "gemma4")
    w.add_context_length(cfg.get("max_position_embeddings", 131072))
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(L)
    if cfg.get("use_double_wide_mlp"):
        w.add_array("gemma4.feed_forward_length", [I if i < L - shared else 2 * I for i in range(L)])
    else:
        w.add_feed_forward_length(I)
    w.add_head_count(cfg["num_attention_heads"])
    if gkv:
        w.add_array("gemma4.attention.head_count_kv", [kv if s else gkv for s in sliding])
    else:
        w.add_head_count_kv(kv)
    w.add_key_length(D)
    w.add_value_length(D)
    w.add_uint32("gemma4.attention.key_length_swa", cfg["head_dim"])
    w.add_uint32("gemma4.attention.value_length_swa", cfg["head_dim"])
    w.add_uint32("gemma4.attention.sliding_window", cfg["sliding_window"])
    w.add_array("gemma4.attention.sliding_window_pattern", sliding)
    w.add_uint32("gemma4.attention.shared_kv_layers", shared)
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_uint32("gemma4.embedding_length_per_layer_input", cfg.get("hidden_size_per_layer_input", 0))
    w.add_rope_freq_base(full_rope["rope_theta"])
    w.add_float32("gemma4.rope.freq_base_swa", cfg["rope_parameters"]["sliding_attention"]["rope_theta"])
    w.add_rope_dimension_count(D)
    w.add_uint32("gemma4.rope.dimension_count_swa", cfg["head_dim"])
    if cfg.get("final_logit_softcapping"):
        w.add_float32("gemma4.final_logit_softcapping", cfg["final_logit_softcapping"])

    add_fixture_tokenizer(w, SRC)

    # Proportional RoPE as llama.cpp stores it: one factor per frequency of the full heads,
    # 1 where the pair rotates and 1e30 where it does not.
    rotated = int(full_rope.get("partial_rotary_factor", 1.0) * D / 2)
    w.add_tensor("rope_freqs.weight", np.array([1.0] * rotated + [1e30] * (D // 2 - rotated), dtype=np.float32))
    for hf, t in sorted(load_file(str(SRC / "model.safetensors")).items()):
        t = t.astype(np.float32)
        if hf == "lm_head.weight":
            continue  # tied
        if hf.endswith("layer_scalar"):
            t = t.reshape(1)
        w.add_tensor(gguf_name(hf), t, raw_dtype=GGMLQuantizationType.F32)
    finish(w, SRC, OUT,
        "The `gemma4` fixture as a GGUF in llama.cpp's Gemma 4 layout (F32), made by "
        "`tests/oracle/gemma4_gguf.py`; oracle.json is gemma4's (same weights).\n")


if __name__ == "__main__":
    main()
