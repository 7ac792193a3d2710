#!/usr/bin/env python3
"""Writes the fuzz seed corpora under tests/fuzz/corpus/ (standard library only).

Seeds are small valid or near-valid files that reach deep into each parser:
GGUF files with every metadata value type and every supported tensor type, the
header of the real stories260K.gguf (tensor data cut off), safetensors files
with several dtypes, config.json variants, and multipart/form-data uploads (the
Content-Type header's value on the first line, then the body). Run from anywhere; it rewrites
the corpus folders.
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_value(vtype, v):
    fmt = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
    if vtype == 8:
        return gguf_string(v)
    if vtype == 9:
        etype, items = v
        return struct.pack("<IQ", etype, len(items)) + b"".join(gguf_value(etype, x) for x in items)
    return struct.pack(fmt[vtype], v)


def gguf(kvs, tensors, version=3, alignment=32):
    """kvs: [(key, type, value)]; tensors: [(name, ne innermost-first, ggml type, nbytes)]."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for key, vtype, v in kvs:
        out += gguf_string(key) + struct.pack("<I", vtype) + gguf_value(vtype, v)
    offset, offsets = 0, []
    for name, ne, ttype, nbytes in tensors:
        offsets.append(offset)
        out += gguf_string(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        out += struct.pack("<IQ", ttype, offset)
        offset = (offset + nbytes + alignment - 1) // alignment * alignment
    out += b"\0" * (-len(out) % alignment)
    data = bytearray(offset)
    for i, (_, _, _, nbytes) in enumerate(tensors):
        data[offsets[i]:offsets[i] + nbytes] = bytes((offsets[i] + j) % 251 for j in range(nbytes))
    return out + bytes(data)


def llama_kvs(arch="llama"):
    return [
        ("general.architecture", 8, arch), (f"{arch}.block_count", 4, 1), (f"{arch}.embedding_length", 4, 32),
        (f"{arch}.feed_forward_length", 4, 64), (f"{arch}.attention.head_count", 4, 4),
        (f"{arch}.attention.head_count_kv", 4, 2), (f"{arch}.rope.freq_base", 6, 10000.0),
        (f"{arch}.attention.layer_norm_rms_epsilon", 6, 1e-5), (f"{arch}.context_length", 4, 256),
        ("tokenizer.ggml.tokens", 9, (8, ["<s>", "</s>", "a", "b"])), ("tokenizer.ggml.bos_token_id", 4, 0),
        ("tokenizer.ggml.eos_token_id", 4, 1),
    ]


def write(folder, name, data):
    path = os.path.join(HERE, "corpus", folder)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, name), "wb") as f:
        f.write(data)


def gguf_seeds():
    layer = [("token_embd.weight", [32, 4], 0, 512), ("output_norm.weight", [32], 0, 128),
             ("blk.0.attn_q.weight", [32, 32], 8, 32 * 34), ("blk.0.attn_k.weight", [32, 16], 2, 16 * 18),
             ("blk.0.attn_v.weight", [32, 16], 3, 16 * 20), ("blk.0.attn_output.weight", [32, 32], 1, 2048),
             ("blk.0.ffn_gate.weight", [32, 64], 6, 64 * 22), ("blk.0.ffn_up.weight", [32, 64], 7, 64 * 24),
             ("blk.0.ffn_down.weight", [64, 32], 30, 4096), ("blk.0.attn_norm.weight", [32], 0, 128)]
    write("gguf", "llama_mixed_types.gguf", gguf(llama_kvs(), layer))
    kquants = [("a", [256, 2], 12, 288), ("b", [256, 1], 13, 176), ("c", [256, 1, 1, 1], 14, 210)]
    write("gguf", "kquants_v2_align64.gguf",
          gguf([("general.alignment", 4, 64)], kquants, version=2, alignment=64))
    qwen = [("token_embd.weight", [32, 4], 0, 512), ("blk.0.attn_q.bias", [32], 0, 128),
            ("blk.0.attn_q_norm.weight", [8], 0, 32), ("output.weight", [32, 4], 1, 256)]
    write("gguf", "qwen3.gguf", gguf(llama_kvs("qwen3") + [("qwen3.attention.key_length", 4, 8),
                                                         ("qwen3.rope.scaling.type", 8, "yarn"),
                                                         ("qwen3.rope.scaling.factor", 6, 4.0)], qwen))
    every_type = [("u8", 0, 200), ("i8", 1, -3), ("u16", 2, 65000), ("i16", 3, -300), ("u32", 4, 7),
                  ("i32", 5, -7), ("f32", 6, 0.5), ("bool", 7, True), ("str", 8, "text"), ("u64", 10, 2**63),
                  ("i64", 11, -(2**40)), ("f64", 12, 0.25), ("arr_f32", 9, (6, [1.0, 2.0])),
                  ("nested", 9, (9, [(5, [1, 2]), (8, ["x"])]))]
    write("gguf", "every_value_type.gguf", gguf([(k, t, v) for k, t, v in every_type], []))
    stories = os.path.join(ROOT, "tests", "data", "stories260K.gguf")
    with open(stories, "rb") as f:
        write("gguf", "stories260K_header.gguf", f.read(14176))  # metadata + tensor infos, no data


def safetensors(header, data_len, pad=True):
    text = json.dumps(header).encode()
    if pad:
        text += b" " * (-(8 + len(text)) % 8)
    return struct.pack("<Q", len(text)) + text + bytes(i % 251 for i in range(data_len))


def safetensors_seeds():
    h = {"__metadata__": {"format": "pt"},
         "model.embed_tokens.weight": {"dtype": "F32", "shape": [4, 2], "data_offsets": [0, 32]},
         "model.norm.weight": {"dtype": "BF16", "shape": [2], "data_offsets": [32, 36]},
         "h": {"dtype": "F16", "shape": [1, 1, 2, 2], "data_offsets": [36, 44]},
         "ids": {"dtype": "I32", "shape": [2], "data_offsets": [44, 52]},
         "step": {"dtype": "I64", "shape": [], "data_offsets": [56, 64]},
         "empty": {"dtype": "F32", "shape": [0, 3], "data_offsets": [64, 64]}}
    write("safetensors", "mixed.safetensors", safetensors(h, 64))
    others = {k: {"dtype": k, "shape": [2], "data_offsets": [i * 16, i * 16 + 2 * n]}
              for i, (k, n) in enumerate([("F64", 8), ("U8", 1), ("I8", 1), ("BOOL", 1), ("U16", 2),
                                          ("I16", 2), ("U32", 4), ("U64", 8), ("F8_E4M3", 1), ("F8_E5M2", 1)])}
    write("safetensors", "other_dtypes.safetensors", safetensors(others, 160))
    write("safetensors", "empty.safetensors", safetensors({}, 0))
    write("safetensors", "unpadded.safetensors",
          safetensors({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]}}, 12, pad=False))


def config_seeds():
    base = {"vocab_size": 1000, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2}
    variants = {
        "llama31.json": dict(base, model_type="llama", rope_theta=500000.0, eos_token_id=[1, 2],
                             rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                           "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}),
        "mistral.json": dict(base, model_type="mistral", sliding_window=None, head_dim=32),
        "qwen2.json": dict(base, model_type="qwen2", use_sliding_window=True, sliding_window=128,
                           max_window_layers=1, tie_word_embeddings=True, torch_dtype="bfloat16"),
        "qwen3.json": dict(base, model_type="qwen3", head_dim=16, attention_bias=True, partial_rotary_factor=0.5,
                           rope_parameters={"rope_theta": 1e6, "rope_type": "yarn", "factor": 4.0,
                                            "beta_fast": 32, "mscale": 1.0, "truncate": False}),
        "generation.json": {"bos_token_id": 1, "eos_token_id": [2, 3], "do_sample": True, "temperature": 0.6,
                            "top_p": 0.95, "top_k": 20, "min_p": 0.0, "repetition_penalty": 1.05,
                            "max_new_tokens": 128},
    }
    for name, cfg in variants.items():
        write("model_config", name, json.dumps(cfg).encode())


def multipart_seeds():
    # As the openai client (httpx) sends a transcription: fields, repeated fields, a file.
    b = "f9a1c0e4d2b34e5f8a7b6c5d4e3f2a1b"
    body = b"".join([
        f'--{b}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
        for k, v in [("model", "whisper-tiny.en"), ("language", "en"), ("response_format", "verbose_json"),
                     ("temperature", "0.0"), ("timestamp_granularities[]", "segment"), ("stream", "false")]])
    body += (f'--{b}\r\nContent-Disposition: form-data; name="file"; filename="speech.wav"\r\n'
             f'Content-Type: audio/x-wav\r\n\r\n').encode() + b"RIFF\x24\x00\x00\x00WAVE\r\n--" + b"\x00\xff"
    body += f"\r\n--{b}--\r\n".encode()
    write("multipart", "openai_client.txt", f"multipart/form-data; boundary={b}\n".encode() + body)
    # As curl -F sends it: a quoted boundary, a preamble, transport padding, an epilogue.
    c = "------------------------4f1d2e3c5b6a7988"
    curl = (f"preamble\r\n--{c} \r\ncontent-disposition: form-data; name=file; filename=\"a \\\"b\\\".mp3\"\r\n"
            f"\r\nID3\x03\r\n--{c}\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\nNames: Corvid.\r\n"
            f"--{c}--\r\nepilogue")
    write("multipart", "curl.txt", f'multipart/form-data; boundary="{c}"\n{curl}'.encode())


def ct2_string(s):
    b = s.encode() + b"\0"
    return struct.pack("<H", len(b)) + b


def ct2_variable(name, dims, dtype, data):
    return ct2_string(name) + struct.pack("<B", len(dims)) + b"".join(struct.pack("<I", d) for d in dims) + \
        struct.pack("<BI", dtype, len(data)) + data


def ctranslate2_seeds():
    # A small CTranslate2 model.bin (version 6): an F16 matrix, an F32 vector, int8 and
    # int16 scalars, one alias, as CTranslate2's converter writes them.
    body = struct.pack("<I", 6) + ct2_string("WhisperSpec") + struct.pack("<I", 3) + struct.pack("<I", 4)
    body += ct2_variable("encoder/conv1/weight", [2, 3], 4, bytes(range(12)))
    body += ct2_variable("encoder/position_encodings/encodings", [4], 0, struct.pack("<4f", 0.5, -1.0, 2.0, 0.0))
    body += ct2_variable("num_heads", [], 1, b"\x06")
    body += ct2_variable("decoder/scale_embeddings", [], 2, struct.pack("<h", 1))
    body += struct.pack("<I", 1) + ct2_string("decoder/embeddings/weight") + ct2_string("encoder/conv1/weight")
    write("ctranslate2", "small.bin", body)


if __name__ == "__main__":
    gguf_seeds()
    safetensors_seeds()
    config_seeds()
    multipart_seeds()
    ctranslate2_seeds()
