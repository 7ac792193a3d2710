"""Malformed files: one-line error naming the file, non-zero exit, no crash."""
import json
import shutil
import struct

import pytest

from conftest import STORIES, run_corvid, write_safetensors

F32_64 = struct.pack("<64f", *([0.5] * 64))


def assert_clean_error(r, *fragments):
    assert r.returncode == 1, (r.returncode, r.stderr)  # not a signal, not an abort
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("corvid: error: ")
    for f in fragments:
        assert f in lines[0], (f, lines[0])


def tiny_config(**over):
    c = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 8, "hidden_size": 8,
         "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
         "max_position_embeddings": 64, "rms_norm_eps": 1e-6, "tie_word_embeddings": True}
    c.update(over)
    return c


def tiny_llama_dir(tmp_path, config=None, tensors=None, tokenizer=True):
    d = tmp_path / "model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(config or tiny_config()))
    f32 = lambda *shape: ("F32", shape, struct.pack(f"<{_n(shape)}f", *([0.01] * _n(shape))))
    t = tensors or {
        "model.embed_tokens.weight": f32(8, 8), "model.norm.weight": f32(8),
        "model.layers.0.input_layernorm.weight": f32(8), "model.layers.0.post_attention_layernorm.weight": f32(8),
        "model.layers.0.self_attn.q_proj.weight": f32(8, 8), "model.layers.0.self_attn.k_proj.weight": f32(4, 8),
        "model.layers.0.self_attn.v_proj.weight": f32(4, 8), "model.layers.0.self_attn.o_proj.weight": f32(8, 8),
        "model.layers.0.mlp.gate_proj.weight": f32(16, 8), "model.layers.0.mlp.up_proj.weight": f32(16, 8),
        "model.layers.0.mlp.down_proj.weight": f32(8, 16)}
    write_safetensors(d / "model.safetensors", t)
    if tokenizer:
        vocab = {chr(ord("a") + i): i for i in range(8)}
        tok = {"version": "1.0", "added_tokens": [], "normalizer": None, "pre_tokenizer": None,
               "post_processor": None, "decoder": None,
               "model": {"type": "BPE", "vocab": vocab, "merges": [], "dropout": None, "unk_token": None,
                         "continuing_subword_prefix": None, "end_of_word_suffix": None, "fuse_unk": False,
                         "byte_fallback": False, "ignore_merges": False}}
        (d / "tokenizer.json").write_text(json.dumps(tok))
    return d


def _n(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def test_valid_tiny_checkpoint_runs(tmp_path):
    d = tiny_llama_dir(tmp_path)
    r = run_corvid("generate", "-m", d, "-p", "abc", "--raw", "-n", 3, "--ids")
    assert r.returncode == 0, r.stderr


def test_missing_path():
    assert_clean_error(run_corvid("generate", "-m", "/nonexistent/model.gguf", "-p", "x"), "/nonexistent/model.gguf")


@pytest.mark.parametrize("keep", [0, 3, 8, 24, 200, 5000, 600000])
def test_truncated_gguf(tmp_path, keep):
    p = tmp_path / "truncated.gguf"
    p.write_bytes(STORIES.read_bytes()[:keep])
    assert_clean_error(run_corvid("generate", "-m", p, "-p", "x"), str(p))


def test_gguf_bad_magic(tmp_path):
    p = tmp_path / "bad.gguf"
    p.write_bytes(b"GGUX" + STORIES.read_bytes()[4:])
    assert_clean_error(run_corvid("inspect", p), str(p))


def test_truncated_safetensors(tmp_path):
    d = tiny_llama_dir(tmp_path)
    data = (d / "model.safetensors").read_bytes()
    (d / "model.safetensors").write_bytes(data[: len(data) - 100])
    assert_clean_error(run_corvid("generate", "-m", d, "-p", "a"), "model.safetensors")


def test_safetensors_header_past_end(tmp_path):
    d = tiny_llama_dir(tmp_path)
    (d / "model.safetensors").write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
    assert_clean_error(run_corvid("inspect", d), "model.safetensors")


def test_safetensors_offsets_past_end(tmp_path):
    d = tiny_llama_dir(tmp_path)
    write_safetensors(d / "model.safetensors", {"model.norm.weight": ("F32", [8], b"\0" * 32)},
                      header_override={"model.norm.weight": {"dtype": "F32", "shape": [8], "data_offsets": [0, 4096]}})
    assert_clean_error(run_corvid("inspect", d), "model.safetensors")


def test_shape_mismatch_against_config(tmp_path):
    d = tiny_llama_dir(tmp_path, config=tiny_config(hidden_size=16))
    assert_clean_error(run_corvid("generate", "-m", d, "-p", "a"), "model.embed_tokens.weight")


def test_unknown_architecture(tmp_path):
    d = tiny_llama_dir(tmp_path, config=tiny_config(model_type="gpt_neox"))
    assert_clean_error(run_corvid("inspect", d), "gpt_neox")


def test_missing_tokenizer(tmp_path):
    d = tiny_llama_dir(tmp_path, tokenizer=False)
    assert_clean_error(run_corvid("generate", "-m", d, "-p", "a"), "tokenizer")


def test_corrupt_config_json(tmp_path):
    d = tiny_llama_dir(tmp_path)
    (d / "config.json").write_text("{not json")
    assert_clean_error(run_corvid("inspect", d), "config.json")


def test_missing_tensor(tmp_path):
    d = tiny_llama_dir(tmp_path)
    write_safetensors(d / "model.safetensors", {"model.norm.weight": ("F32", [8], b"\0" * 32)})
    assert_clean_error(run_corvid("generate", "-m", d, "-p", "a"), "model.embed_tokens.weight")


def test_prompt_longer_than_context(tmp_path):
    r = run_corvid("generate", "-m", STORIES, "-p", "Once upon a time " * 20, "--raw", "-n", 10, "-c", 16)
    assert_clean_error(r, "context")
