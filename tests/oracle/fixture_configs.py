"""The tiny fixtures' configs: name -> (config.json fields, options for make_fixtures.py)."""

BOS_ID, EOS_ID = 0, 2  # the fixture tokenizers' <|endoftext|> and <|im_end|>

# name -> (classic config.json fields, options). Classic = the form most Hub checkpoints
# ship (rope_theta + rope_scaling at top level, torch_dtype); transformers 5 converts it
# on load. qwen3 keeps the form transformers 5 itself saves (dtype, rope_parameters).
BASE = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=256, rms_norm_eps=1e-5, hidden_act="silu",
            bos_token_id=BOS_ID, eos_token_id=EOS_ID, use_cache=True, initializer_range=0.02)
# Gemma 4 fixtures differ only in layers, per-layer embeddings and KV sharing.
GEMMA4 = dict({k: v for k, v in BASE.items() if k != "hidden_act"}, architectures=["Gemma4ForCausalLM"],
              model_type="gemma4_text", vocab_size=512, intermediate_size=96, head_dim=16, global_head_dim=32,
              num_global_key_value_heads=1, attention_k_eq_v=True, hidden_activation="gelu_pytorch_tanh",
              rms_norm_eps=1e-6, sliding_window=16,
              rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                               "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                                  "rope_theta": 1000000.0}},
              enable_moe_block=False, final_logit_softcapping=30.0, tie_word_embeddings=True, pad_token_id=0)
GEMMA3_TEXT = dict({k: v for k, v in BASE.items() if k != "hidden_act"}, vocab_size=512, intermediate_size=160,
                   head_dim=16, num_hidden_layers=3, hidden_activation="gelu_pytorch_tanh", rms_norm_eps=1e-6,
                   query_pre_attn_scalar=24, sliding_window=16, sliding_window_pattern=2,
                   rope_theta=1000000.0, rope_local_base_freq=10000.0,
                   rope_scaling=dict(rope_type="linear", factor=2.0), final_logit_softcapping=30.0,
                   attn_logit_softcapping=None, tie_word_embeddings=True)
# The MoE fixtures' common shape (issue 19).
QWEN_MOE = dict(BASE, vocab_size=512, intermediate_size=96, head_dim=16, moe_intermediate_size=32,
                rope_theta=1000000.0, tie_word_embeddings=False, decoder_sparse_step=1, mlp_only_layers=[])
FIVE_LAYERS = ["sliding_attention", "full_attention", "sliding_attention", "sliding_attention", "full_attention"]
FIXTURES = {
    "llama": (dict(BASE, architectures=["LlamaForCausalLM"], model_type="llama", vocab_size=512,
                   intermediate_size=160, rope_theta=10000.0, tie_word_embeddings=False,
                   attention_bias=False, mlp_bias=False, head_dim=16),
              dict(tok="gpt2", what="Llama, untied, GQA 4 q heads / 2 kv heads, head_dim 16, plain RoPE")),
    "llama3_tied": (dict(BASE, architectures=["LlamaForCausalLM"], model_type="llama", vocab_size=512,
                         intermediate_size=128, rope_theta=500000.0, tie_word_embeddings=True,
                         attention_bias=False, mlp_bias=False, head_dim=16,
                         rope_scaling=dict(rope_type="llama3", factor=4.0, low_freq_factor=1.0,
                                           high_freq_factor=4.0, original_max_position_embeddings=64)),
                    dict(tok="llama3", shards=2,
                         what="Llama, tied embeddings, rope_scaling llama3 (all three wavelength bands hit), "
                              "saved sharded: 2 safetensors shards + model.safetensors.index.json")),
    "mistral_swa": (dict(BASE, architectures=["MistralForCausalLM"], model_type="mistral", vocab_size=512,
                         intermediate_size=192, rope_theta=10000.0, tie_word_embeddings=False,
                         sliding_window=16, head_dim=16),
                    dict(tok="gpt2", long_prompt=True,
                         what="Mistral, sliding_window 16 (key j visible to query i iff i-16 < j <= i), "
                              "prompts and continuations far longer than the window, GQA 4/2")),
    "qwen2_yarn": (dict(BASE, architectures=["Qwen2ForCausalLM"], model_type="qwen2", vocab_size=400,
                        intermediate_size=160, rope_theta=10000.0, tie_word_embeddings=True,
                        use_sliding_window=False, sliding_window=None, max_window_layers=2,
                        rope_scaling=dict(type="yarn", factor=4.0, original_max_position_embeddings=64)),
                   dict(tok="qwen2",
                        what="Qwen2, q/k/v biases, tied embeddings, vocab 400 (not a power of two), "
                             "rope_scaling yarn factor 4 (old key 'type', attention factor 0.1 ln 4 + 1)")),
    "qwen2_linear": (dict(BASE, architectures=["Qwen2ForCausalLM"], model_type="qwen2", vocab_size=512,
                          intermediate_size=128, rope_theta=1000000.0, tie_word_embeddings=False,
                          use_sliding_window=False, sliding_window=None, max_window_layers=2,
                          rope_scaling=dict(rope_type="linear", factor=2.0)),
                     dict(tok="qwen2",
                          what="Qwen2, q/k/v biases, untied, rope_theta 1e6, rope_scaling linear factor 2")),
    "qwen3_bf16": (dict(BASE, architectures=["Qwen3ForCausalLM"], model_type="qwen3", vocab_size=512,
                        intermediate_size=192, rope_theta=1000000.0, tie_word_embeddings=False,
                        head_dim=32, attention_bias=False, use_sliding_window=False, sliding_window=None,
                        max_window_layers=2),
                   dict(tok="qwen2", bf16=True, v5_config=True,
                        what="Qwen3, q_norm/k_norm, head_dim 32 != hidden/heads (16), untied, weights "
                             "saved in bfloat16 (oracle runs float32 on the bf16 values), config.json "
                             "as transformers 5 writes it (dtype, rope_parameters)")),
    # The production head sizes (SmolLM2: 64, Llama-3.1-8B / Qwen3-8B: 128), where the GPU runs
    # its tensor-core prefill attention and its tiled decode attention at model level.
    "llama_hd64": (dict(BASE, architectures=["LlamaForCausalLM"], model_type="llama", vocab_size=512,
                        intermediate_size=160, rope_theta=10000.0, tie_word_embeddings=False,
                        attention_bias=False, mlp_bias=False, head_dim=64),
                   dict(tok="gpt2", long_prompt=True,
                        what="Llama, head_dim 64 (SmolLM2's) != hidden/heads (16), GQA 4/2, prompts up to "
                             "60 tokens")),
    "qwen3_hd128": (dict(BASE, architectures=["Qwen3ForCausalLM"], model_type="qwen3", vocab_size=512,
                         intermediate_size=192, rope_theta=1000000.0, tie_word_embeddings=False,
                         head_dim=128, attention_bias=False, use_sliding_window=False, sliding_window=None,
                         max_window_layers=2),
                    dict(tok="qwen2", long_prompt=True,
                         what="Qwen3, q_norm/k_norm, head_dim 128 (the 8B models') != hidden/heads (16), "
                              "GQA 4/2, prompts up to 60 tokens")),
    # Issue 18: the three silent bugs' fixtures, and the new families.
    "llama_bias": (dict(BASE, architectures=["LlamaForCausalLM"], model_type="llama", vocab_size=512,
                        intermediate_size=160, rope_theta=10000.0, tie_word_embeddings=False,
                        attention_bias=True, mlp_bias=True, head_dim=16),
                   dict(tok="gpt2",
                        what="Llama with attention_bias (q/k/v and o_proj biases) and mlp_bias "
                             "(gate/up/down biases)")),
    "qwen2_swa": (dict(BASE, architectures=["Qwen2ForCausalLM"], model_type="qwen2", vocab_size=512,
                       intermediate_size=160, rope_theta=10000.0, tie_word_embeddings=False,
                       use_sliding_window=True, sliding_window=16, max_window_layers=1),
                  dict(tok="qwen2", long_prompt=True,
                       what="Qwen2 with use_sliding_window: window 16 on layers >= max_window_layers (1), "
                            "layer 0 full, prompts far longer than the window")),
    "gemma3": (dict(GEMMA3_TEXT, architectures=["Gemma3ForCausalLM"], model_type="gemma3_text"),
               dict(tok="gpt2", long_prompt=True,
                    what="Gemma 3 text: sandwich (1+w) norms, GeGLU, embeddings x sqrt(hidden), q/k norms, "
                         "query_pre_attn_scalar 24 != head_dim, layers sliding (window 16, theta 1e4) / full "
                         "(theta 1e6, linear rope factor 2) from sliding_window_pattern 2, final logit "
                         "softcap 30, tied; classic config keys")),
    "gemma3_v5": (dict({k: v for k, v in BASE.items() if k != "hidden_act"}, architectures=["Gemma3ForCausalLM"],
                       model_type="gemma3_text", vocab_size=512, intermediate_size=128, head_dim=64,
                       num_hidden_layers=2, hidden_activation="gelu_pytorch_tanh", rms_norm_eps=1e-6,
                       query_pre_attn_scalar=64, sliding_window=8,
                       layer_types=["sliding_attention", "full_attention"],
                       rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                                        "full_attention": {"rope_type": "default", "rope_theta": 1000000.0}},
                       final_logit_softcapping=None, tie_word_embeddings=True),
                  dict(tok="gpt2", long_prompt=True, v5_config=True,
                       what="Gemma 3 text, head_dim 64, window 8, no softcap, config.json as transformers 5 "
                            "writes it (layer_types, rope_parameters per layer type)")),
    "gemma4": (dict(GEMMA4, num_hidden_layers=5, layer_types=FIVE_LAYERS, hidden_size_per_layer_input=8,
                    vocab_size_per_layer_input=512, num_kv_shared_layers=2, use_double_wide_mlp=True),
               dict(tok="gpt2", long_prompt=True, layer_scalars=True, qk_norm_scale=True,
                    what="Gemma 4 text: plain-weight norms (q/k norm weights ~ head_dim^-1/4, since scores are unscaled), q/k norms + weightless v norm, attention scale 1, "
                         "sliding (head_dim 16, 2 kv heads, theta 1e4, window 16) and full layers (head_dim 32, "
                         "attention_k_eq_v: 1 kv head, v = k_proj, proportional rope 0.25 theta 1e6), per-layer "
                         "embeddings (8 per layer), layer_scalar != 1, the last 2 layers KV-shared (layer 3 reads "
                         "layer 2, layer 4 reads layer 1) with double-wide MLPs, final softcap 30, tied")),
    "gemma4_nople": (dict(GEMMA4, num_hidden_layers=3,
                          layer_types=["sliding_attention", "sliding_attention", "full_attention"],
                          hidden_size_per_layer_input=0, num_kv_shared_layers=0, use_double_wide_mlp=False),
                     dict(tok="gpt2", long_prompt=True, layer_scalars=True, qk_norm_scale=True,
                          what="Gemma 4 text as the 31B is built: no per-layer embeddings "
                               "(hidden_size_per_layer_input 0), no KV-shared layers; two sliding layers "
                               "and a full one with attention_k_eq_v and proportional rope")),
    "gemma4_shared": (dict(GEMMA4, num_hidden_layers=5, layer_types=FIVE_LAYERS, hidden_size_per_layer_input=0,
                           num_kv_shared_layers=2, use_double_wide_mlp=True),
                      dict(tok="gpt2", long_prompt=True, layer_scalars=True, qk_norm_scale=True,
                           what="Gemma 4 text with KV-shared layers and no per-layer embeddings: gemma4's layers "
                                "(3 reads 2, 4 reads 1, double-wide MLPs) without PLE, to tell the two apart")),
    "gemma4_wide": (dict(GEMMA4, num_hidden_layers=4, num_attention_heads=2, num_key_value_heads=1,
                         head_dim=256, global_head_dim=512, attention_k_eq_v=False,
                         layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
                         hidden_size_per_layer_input=8, vocab_size_per_layer_input=512, num_kv_shared_layers=2,
                         use_double_wide_mlp=False),
                    dict(tok="gpt2", long_prompt=True, layer_scalars=True, qk_norm_scale=True,
                         what="Gemma 4 text at the real models' head sizes: sliding heads of 256, full heads of 512 "
                              "(E2B/E4B's geometry, v_proj present), 2 query heads over 1 kv head, per-layer "
                              "embeddings, the last 2 layers KV-shared (2 reads 0, 3 reads 1)")),
    # Multimodal wrappers: corvid runs the language model of a *ForConditionalGeneration
    # checkpoint; the oracle is the wrapper itself on text-only input.
    "gemma3_mm": (dict(architectures=["Gemma3ForConditionalGeneration"], model_type="gemma3",
                       # No final softcap, as in the released 4B/12B/27B configs: transformers 5.17's
                       # Gemma3ForConditionalGeneration ignores the field (Gemma3ForCausalLM and
                       # mlx-lm apply it, and so does corvid).
                       text_config=dict(GEMMA3_TEXT, model_type="gemma3_text", final_logit_softcapping=None),
                       vision_config=dict(model_type="siglip_vision_model", hidden_size=32, intermediate_size=64,
                                          num_hidden_layers=1, num_attention_heads=2, image_size=28,
                                          patch_size=14),
                       mm_tokens_per_image=4, tie_word_embeddings=True),
                  dict(tok="gpt2", long_prompt=True, vocab_size=512,
                       what="Gemma 3 as the 4B+ checkpoints ship (Gemma3ForConditionalGeneration): the gemma3 "
                            "fixture's text model (without the final softcap) under text_config, weights as "
                            "language_model.model.*, a tiny SigLIP vision tower and projector beside it (not loaded)")),
    "gemma4_mm": (dict(architectures=["Gemma4ForConditionalGeneration"], model_type="gemma4",
                       text_config=dict({k: v for k, v in GEMMA4.items() if k != "architectures"},
                                        num_hidden_layers=5, layer_types=FIVE_LAYERS, hidden_size_per_layer_input=8,
                                        vocab_size_per_layer_input=512, num_kv_shared_layers=2,
                                        use_double_wide_mlp=True),
                       vision_config=dict(model_type="gemma4_vision", hidden_size=32, intermediate_size=64,
                                          num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                                          head_dim=16, patch_size=4, position_embedding_size=64),
                       audio_config=None, tie_word_embeddings=True),
                  dict(tok="gpt2", long_prompt=True, layer_scalars=True, qk_norm_scale=True, vocab_size=512,
                       what="Gemma 4 as every checkpoint ships (Gemma4ForConditionalGeneration): the gemma4 "
                            "fixture's text model under text_config, weights as model.language_model.*, a tiny "
                            "vision tower and embed_vision beside it (not loaded)")),
    "olmo2": (dict(BASE, architectures=["Olmo2ForCausalLM"], model_type="olmo2", vocab_size=512,
                   intermediate_size=160, rope_theta=10000.0, tie_word_embeddings=False, attention_bias=False,
                   rms_norm_eps=1e-6),
              dict(tok="gpt2", what="OLMo 2: post-norms (no input norm), q/k RMSNorm over the whole projection")),
    "granite": (dict(BASE, architectures=["GraniteForCausalLM"], model_type="granite", vocab_size=512,
                     intermediate_size=160, rope_theta=10000.0, tie_word_embeddings=True, attention_bias=False,
                     mlp_bias=False, embedding_multiplier=4.0, residual_multiplier=0.5,
                     attention_multiplier=0.125, logits_scaling=2.5),
                dict(tok="gpt2", what="Granite: embedding x4, residual x0.5, attention scale 0.125 (not "
                                      "1/sqrt(16)), logits / 2.5, tied")),
    "smollm3": (dict(BASE, architectures=["SmolLM3ForCausalLM"], model_type="smollm3", vocab_size=512,
                     intermediate_size=160, rope_theta=2000000.0, tie_word_embeddings=True, attention_bias=False,
                     mlp_bias=False, no_rope_layers=[1, 0], use_sliding_window=False, pad_token_id=0),
                dict(tok="gpt2", long_prompt=True, what="SmolLM3: layer 1 NoPE (no_rope_layers [1, 0]), tied, "
                                                        "rope_theta 2e6")),
    "smollm3_interval": (dict(BASE, architectures=["SmolLM3ForCausalLM"], model_type="smollm3", vocab_size=512,
                              num_hidden_layers=4, intermediate_size=160, rope_theta=2000000.0,
                              tie_word_embeddings=True, attention_bias=False, mlp_bias=False,
                              no_rope_layer_interval=4, use_sliding_window=False, pad_token_id=0),
                         dict(tok="gpt2", long_prompt=True,
                              what="SmolLM3 with the released models' NoPE pattern from no_rope_layer_interval 4 "
                                   "(layer 3 NoPE; no no_rope_layers list), 4 layers, tied; also written as GGUF "
                                   "(smollm3_gguf), where llama.cpp fixes that pattern")),
    "phi3": (dict(BASE, architectures=["Phi3ForCausalLM"], model_type="phi3", vocab_size=512,
                  intermediate_size=160, rope_theta=10000.0, tie_word_embeddings=False, sliding_window=24,
                  original_max_position_embeddings=256, partial_rotary_factor=0.5, pad_token_id=0),
             dict(tok="gpt2", long_prompt=True, what="Phi-3: fused qkv_proj and gate_up_proj, sliding window 24 "
                                                     "on every layer, partial rotary 0.5 (8 of 16 dims)")),
    "phi3_longrope": (dict(BASE, architectures=["Phi3ForCausalLM"], model_type="phi3", vocab_size=512,
                           intermediate_size=160, rope_theta=10000.0, tie_word_embeddings=False,
                           original_max_position_embeddings=4, partial_rotary_factor=0.5, pad_token_id=0,
                           rope_scaling=dict(type="longrope", short_factor=[1.0, 1.3, 2.1, 3.7],
                                             long_factor=[1.5, 2.5, 6.0, 11.0])),
                      dict(tok="gpt2", long_prompt=True, min_prompt_tokens=5,
                           what="Phi-3 with longrope: per-frequency short/long factors over the 8 rotary dims, "
                                "original context 4 of 256 (attention factor sqrt(1 + ln 64 / ln 4) = 2); every "
                                "prompt longer than 4 tokens, so transformers runs the long factors throughout "
                                "as corvid does for a context past the original")),
    # Issue 19: sparse mixture-of-experts.
    "qwen3_moe": (dict(QWEN_MOE, architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe", num_experts=8,
                       num_experts_per_tok=2, norm_topk_prob=True, attention_bias=False),
                  dict(tok="qwen2", long_prompt=True,
                       what="Qwen3-MoE: 8 experts, top-2 renormalised (norm_topk_prob), moe_intermediate_size 32, "
                            "q/k norms, every layer sparse; weights as transformers 5 saves them")),
    "qwen3_moe_dense_layers": (dict(QWEN_MOE, architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe",
                                    num_hidden_layers=4, num_experts=6, num_experts_per_tok=3,
                                    norm_topk_prob=False, mlp_only_layers=[2], attention_bias=False),
                               dict(tok="qwen2", long_prompt=True,
                                    what="Qwen3-MoE with mlp_only_layers [2] (layer 2 a dense MLP of "
                                         "intermediate_size 96), 6 experts (not a power of two), top-3 not "
                                         "renormalised")),
    "qwen2_moe": (dict(QWEN_MOE, architectures=["Qwen2MoeForCausalLM"], model_type="qwen2_moe", num_hidden_layers=4,
                       num_experts=8, num_experts_per_tok=2, norm_topk_prob=False, decoder_sparse_step=2,
                       shared_expert_intermediate_size=48, qkv_bias=True, use_sliding_window=False),
                  dict(tok="qwen2", long_prompt=True,
                       what="Qwen2-MoE: decoder_sparse_step 2 (layers 1 and 3 sparse, 0 and 2 dense), a shared "
                            "expert of 48 behind its sigmoid gate, top-2 of 8 not renormalised, q/k/v biases")),
}
