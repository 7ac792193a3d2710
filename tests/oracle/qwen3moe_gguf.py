#!/usr/bin/env python3
"""Writes the qwen3_moe fixture as a GGUF laid out the way llama.cpp's converter writes Qwen3-MoE
(architecture qwen3moe: expert_count / expert_used_count / expert_feed_forward_length keys, the
router as ffn_gate_inp, each projection's experts stacked into one 3-D ffn_{gate,up,down}_exps
tensor of [experts, rows, cols]; q/k not permuted, Qwen's RoPE rotates halves; facts, not code,
taken from llama.cpp), into tests/fixtures/qwen3moe_gguf/model.gguf with the fixture's
oracle.json beside it (F32, same weights).

    /work/oracle-venv/bin/python tests/oracle/qwen3moe_gguf.py
"""
import json
import re
from pathlib import Path

import numpy as np
from gguf import GGUFWriter, GGMLQuantizationType
from safetensors.numpy import load_file

from gguf_fixture import add_fixture_tokenizer, finish

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "fixtures" / "qwen3_moe"
OUT = HERE.parent / "fixtures" / "qwen3moe_gguf"

LAYER = {"input_layernorm.weight": "attn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight",
         "self_attn.k_proj.weight": "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight",
         "self_attn.o_proj.weight": "attn_output.weight", "self_attn.q_norm.weight": "attn_q_norm.weight",
         "self_attn.k_norm.weight": "attn_k_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
         "mlp.gate.weight": "ffn_gate_inp.weight"}
EXPERT = re.compile(r"model\.layers\.(\d+)\.mlp\.experts\.(\d+)\.(gate|up|down)_proj\.weight")


def main():
    cfg = json.loads((SRC / "config.json").read_text())
    heads, kv, E = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["num_experts"]
    assert cfg["decoder_sparse_step"] == 1 and not cfg["mlp_only_layers"] and cfg["norm_topk_prob"]
    OUT.mkdir(parents=True, exist_ok=True)
    w = GGUFWriter(str(OUT / "model.gguf"), "qwen3moe")
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_key_length(cfg["head_dim"])
    w.add_value_length(cfg["head_dim"])
    w.add_rope_freq_base(cfg["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_vocab_size(cfg["vocab_size"])
    w.add_expert_count(E)
    w.add_expert_used_count(cfg["num_experts_per_tok"])
    w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
    add_fixture_tokenizer(w, SRC)
    tensors = load_file(str(SRC / "model.safetensors"))
    experts = {}
    for hf, t in sorted(tensors.items()):
        t = t.astype(np.float32)
        m = EXPERT.fullmatch(hf)
        if m:
            experts.setdefault((int(m[1]), m[3]), {})[int(m[2])] = t
            continue
        if hf == "lm_head.weight":
            name = "output.weight"
        elif hf == "model.embed_tokens.weight":
            name = "token_embd.weight"
        elif hf == "model.norm.weight":
            name = "output_norm.weight"
        else:
            parts = hf.split(".")
            name = f"blk.{parts[2]}.{LAYER['.'.join(parts[3:])]}"
        w.add_tensor(name, np.ascontiguousarray(t), raw_dtype=GGMLQuantizationType.F32)
    for (layer, proj), per_expert in sorted(experts.items()):
        assert sorted(per_expert) == list(range(E))
        stack = np.stack([per_expert[e] for e in range(E)])  # [E, rows, cols]
        w.add_tensor(f"blk.{layer}.ffn_{proj}_exps.weight", np.ascontiguousarray(stack),
                     raw_dtype=GGMLQuantizationType.F32)
    finish(w, SRC, OUT,
        "The `qwen3_moe` fixture as a GGUF in llama.cpp's qwen3moe layout (F32; the router as ffn_gate_inp, "
        "the experts stacked as ffn_{gate,up,down}_exps), made by `tests/oracle/qwen3moe_gguf.py`; oracle.json "
        "is qwen3_moe's (same weights).\n")


if __name__ == "__main__":
    main()
