#!/usr/bin/env python3
"""Writes a Llama-architecture GGUF with random F16 weights and a placeholder
vocabulary, from a Hugging Face config.json, so that llama.cpp can be benchmarked
on real shapes (e.g. Llama-3.1-8B) without downloading a checkpoint. Quantize it
with llama.cpp's llama-quantize for the other types. Values only need a realistic
range: a pool of random numbers scaled like 1/sqrt(fan_in) is reused across tensors.

    python3 bench/make_random_gguf.py configs/llama-3.1-8b.json /tmp/llama8b-f16.gguf
"""
import json
import sys

import numpy as np
import gguf


def main():
    cfg_path, out_path = sys.argv[1], sys.argv[2]
    cfg = json.load(open(cfg_path))
    h, inter = cfg["hidden_size"], cfg["intermediate_size"]
    heads = cfg["num_attention_heads"]
    kv_heads = cfg.get("num_key_value_heads", heads)
    hd = cfg.get("head_dim", h // heads)
    vocab, n_layers = cfg["vocab_size"], cfg["num_hidden_layers"]

    rng = np.random.default_rng(0)
    pool = rng.standard_normal(1 << 24, dtype=np.float32).astype(np.float16)

    def mat(rows, cols):
        n = rows * cols
        reps = -(-n // pool.size)
        flat = np.tile(pool, reps)[:n] if reps > 1 else pool[:n]
        return (flat.reshape(rows, cols) * np.float16(cols ** -0.5)).astype(np.float16)

    w = gguf.GGUFWriter(out_path, "llama")
    w.add_name("random-" + cfg.get("model_type", "llama"))
    w.add_block_count(n_layers)
    w.add_context_length(min(cfg.get("max_position_embeddings", 8192), 131072))
    w.add_embedding_length(h)
    w.add_feed_forward_length(inter)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_dimension_count(hd)
    w.add_rope_freq_base(float(cfg.get("rope_theta", 10000.0)))
    w.add_layer_norm_rms_eps(float(cfg.get("rms_norm_eps", 1e-5)))
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    # Placeholder SentencePiece vocabulary: <unk>, <s>, </s>, the 256 byte tokens, then t<i>.
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    tokens += [f"t{i}" for i in range(len(tokens), vocab)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    types += [gguf.TokenType.BYTE] * 256 + [gguf.TokenType.NORMAL] * (vocab - 259)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * vocab)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)

    ones = np.ones(h, dtype=np.float32)
    w.add_tensor("token_embd.weight", mat(vocab, h))
    for i in range(n_layers):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", ones)
        w.add_tensor(p + "attn_q.weight", mat(heads * hd, h))
        w.add_tensor(p + "attn_k.weight", mat(kv_heads * hd, h))
        w.add_tensor(p + "attn_v.weight", mat(kv_heads * hd, h))
        w.add_tensor(p + "attn_output.weight", mat(h, heads * hd))
        w.add_tensor(p + "ffn_norm.weight", ones)
        w.add_tensor(p + "ffn_gate.weight", mat(inter, h))
        w.add_tensor(p + "ffn_up.weight", mat(inter, h))
        w.add_tensor(p + "ffn_down.weight", mat(h, inter))
    w.add_tensor("output_norm.weight", ones)
    if not cfg.get("tie_word_embeddings", False):
        w.add_tensor("output.weight", mat(vocab, h))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
