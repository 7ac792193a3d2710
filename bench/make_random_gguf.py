#!/usr/bin/env python3
"""Writes a Llama-architecture GGUF with random F16 weights from a Hugging Face
config.json, so that corvid and llama.cpp can be benchmarked on real shapes (e.g.
Llama-3.1-8B) without downloading a checkpoint. Quantize it with llama.cpp's
llama-quantize for the other types. A qwen3_moe config (configs/qwen3-30b-a3b.json)
gives llama.cpp's qwen3moe layout: q/k norms, a random F32 router ffn_gate_inp (so tokens
spread over the experts) and each projection's experts as one 3-D ffn_*_exps tensor.

    python3 bench/make_random_gguf.py configs/llama-3.1-8b.json /tmp/llama8b-f16.gguf \\
        --vocab-from ggml-vocab-llama-bpe.gguf

--vocab-from copies every tokenizer.* key (tokens, merges, token types, bos/eos ids,
pre-tokenizer, chat template) verbatim from a tokenizer-only GGUF such as llama.cpp's
models/ggml-vocab-llama-bpe.gguf, and sizes the embedding and output rows to that
vocabulary, so every server tokenizes real text the same way. Without it the file gets
a placeholder SentencePiece vocabulary (<unk>, <s>, </s>, 256 byte tokens, t<i>).

Needs only numpy (no `gguf` package): the container is written here directly. Values
only need a realistic range: one pool of random numbers per fan-in, scaled by
1/sqrt(fan_in), is streamed into every tensor from a rotating offset, so an 8B file
costs little more than writing 16 GB.
"""
import argparse
import json
import math
import mmap
import os
import struct
import sys
import time

import numpy as np

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
ALIGNMENT = 32
# GGUF metadata value types.
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY, T_UINT64, T_INT64, \
    T_FLOAT64 = range(13)
SCALAR_SIZE = {T_UINT8: 1, T_INT8: 1, T_UINT16: 2, T_INT16: 2, T_UINT32: 4, T_INT32: 4, T_FLOAT32: 4, T_BOOL: 1,
               T_UINT64: 8, T_INT64: 8, T_FLOAT64: 8}
SCALAR_FORMAT = {T_UINT8: "<B", T_INT8: "<b", T_UINT16: "<H", T_INT16: "<h", T_UINT32: "<I", T_INT32: "<i",
                 T_FLOAT32: "<f", T_BOOL: "<?", T_UINT64: "<Q", T_INT64: "<q", T_FLOAT64: "<d"}
# ggml tensor types.
GGML_F32, GGML_F16, GGML_Q4_0, GGML_Q8_0, GGML_Q4_K = 0, 1, 2, 8, 12
# Weight types this script writes: ggml type, llama.cpp file type, (elements, bytes) per block.
WEIGHT_TYPES = {"F16": (GGML_F16, 1, (1, 2)), "Q8_0": (GGML_Q8_0, 7, (32, 34)), "Q4_0": (GGML_Q4_0, 2, (32, 18)),
                "Q4_K": (GGML_Q4_K, 14, (256, 144))}
BLOCK_SHAPE = {t: shape for t, _, shape in WEIGHT_TYPES.values()}
# Token types (llama.cpp's llama_token_type).
TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_BYTE = 1, 2, 3, 6
POOL_ELEMENTS = 1 << 24  # 32 MiB of F16 per distinct fan-in


def gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def encode_value(vtype, value):
    """Type tag + value bytes of one metadata entry (after its key)."""
    if vtype == T_STRING:
        return struct.pack("<I", T_STRING) + gguf_string(value)
    if vtype == T_ARRAY:
        elem_type, items = value
        head = struct.pack("<IIQ", T_ARRAY, elem_type, len(items))
        if elem_type == T_STRING:
            return head + b"".join(gguf_string(s) for s in items)
        return head + b"".join(struct.pack(SCALAR_FORMAT[elem_type], v) for v in items)
    return struct.pack("<I", vtype) + struct.pack(SCALAR_FORMAT[vtype], value)


def read_metadata(path):
    """{key: raw bytes of type tag + value} for every metadata entry of a GGUF file, in order."""
    with open(path, "rb") as f:  # mapped: only the header of a 16 GB model is read
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    if data[:4] != GGUF_MAGIC:
        sys.exit(f"{path}: not a GGUF file")
    version, = struct.unpack_from("<I", data, 4)
    if version < 2:
        sys.exit(f"{path}: GGUF version {version} is too old (need 2 or 3)")
    _, kv_count = struct.unpack_from("<QQ", data, 8)
    pos = 24

    def skip_string(p):
        n, = struct.unpack_from("<Q", data, p)
        return p + 8 + n

    def skip_value(vtype, p):
        if vtype in SCALAR_SIZE:
            return p + SCALAR_SIZE[vtype]
        if vtype == T_STRING:
            return skip_string(p)
        if vtype == T_ARRAY:
            elem_type, count = struct.unpack_from("<IQ", data, p)
            p += 12
            if elem_type in SCALAR_SIZE:
                return p + count * SCALAR_SIZE[elem_type]
            for _ in range(count):
                p = skip_value(elem_type, p)
            return p
        sys.exit(f"{path}: unknown GGUF value type {vtype}")

    entries = {}
    for _ in range(kv_count):
        key_end = skip_string(pos)
        key = bytes(data[pos + 8:key_end]).decode("utf-8")
        vtype, = struct.unpack_from("<I", data, key_end)
        end = skip_value(vtype, key_end + 4)
        entries[key] = data[key_end:end]
        pos = end
    return entries


def array_length(raw):
    """Element count of an encoded array value (type tag + value bytes)."""
    vtype, _, count = struct.unpack_from("<IIQ", raw, 0)
    assert vtype == T_ARRAY
    return count


def scalar_value(raw):
    vtype, = struct.unpack_from("<I", raw, 0)
    return struct.unpack_from(SCALAR_FORMAT[vtype], raw, 4)[0]


def placeholder_vocabulary(vocab):
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    tokens += [f"t{i}" for i in range(len(tokens), vocab)]
    types = [TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_CONTROL] + [TOKEN_BYTE] * 256 + [TOKEN_NORMAL] * (vocab - 259)
    return {
        "tokenizer.ggml.model": encode_value(T_STRING, "llama"),
        "tokenizer.ggml.tokens": encode_value(T_ARRAY, (T_STRING, tokens)),
        "tokenizer.ggml.scores": encode_value(T_ARRAY, (T_FLOAT32, [0.0] * vocab)),
        "tokenizer.ggml.token_type": encode_value(T_ARRAY, (T_INT32, types)),
        "tokenizer.ggml.bos_token_id": encode_value(T_UINT32, 1),
        "tokenizer.ggml.eos_token_id": encode_value(T_UINT32, 2),
    }


def llama3_rope_factors(cfg, head_dim):
    """Per-frequency divisors for Llama 3's rope_scaling (llama.cpp's rope_freqs.weight), or None."""
    rs = cfg.get("rope_scaling") or {}
    if rs.get("rope_type", rs.get("type")) != "llama3":
        return None
    base = float(cfg.get("rope_theta", 10000.0))
    factor, low, high = float(rs["factor"]), float(rs["low_freq_factor"]), float(rs["high_freq_factor"])
    old_ctx = float(rs["original_max_position_embeddings"])
    factors = []
    for i in range(0, head_dim, 2):
        wavelen = 2 * math.pi * base ** (i / head_dim)
        if wavelen < old_ctx / high:
            factors.append(1.0)
        elif wavelen > old_ctx / low:
            factors.append(factor)
        else:
            smooth = (old_ctx / wavelen - low) / (high - low)
            factors.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.array(factors, dtype=np.float32)


class RandomSource:
    """Streams F16 values ~ N(0, 1/fan_in) from one pool per fan-in, from a rotating offset."""

    def __init__(self, seed):
        self.base = np.random.default_rng(seed).standard_normal(POOL_ELEMENTS, dtype=np.float32)
        self.pools = {}
        self.offset = 0

    def write(self, f, elements, fan_in):
        pool = self.pools.get(fan_in)
        if pool is None:
            pool = self.pools[fan_in] = (self.base * np.float32(fan_in ** -0.5)).astype(np.float16)
        view = memoryview(pool).cast("B")
        self.offset = (self.offset + 7919 * 64) % POOL_ELEMENTS  # a different window for each tensor
        at, left = self.offset, elements
        while left:
            n = min(left, POOL_ELEMENTS - at)
            f.write(view[at * 2:(at + n) * 2])
            left -= n
            at = 0


class RandomBlocks:
    """Streams random blocks of a GGUF block format: random quants under a fixed scale per
    fan-in, so that dequantized values have mean ~0 and std ~1/sqrt(fan_in) like RandomSource."""

    BLOCKS = 1 << 18

    def __init__(self, ggml_type, seed):
        self.type, self.rng, self.pools, self.offset = ggml_type, np.random.default_rng(seed), {}, 0
        self.elems, self.bytes = BLOCK_SHAPE[ggml_type]

    def pool(self, fan_in):
        raw = self.rng.integers(0, 256, size=(self.BLOCKS, self.bytes), dtype=np.uint8)
        s = fan_in ** -0.5
        f16 = lambda x: np.frombuffer(np.float16(x).tobytes(), dtype=np.uint8)
        if self.type == GGML_Q8_0:  # d, then 32 int8 (std ~74)
            raw[:, 0:2] = f16(s / 74)
        elif self.type == GGML_Q4_0:  # d, then 32 nibbles q: value (q - 8) d (std ~4.6)
            raw[:, 0:2] = f16(s / 4.6)
        else:  # Q4_K: d, dmin, 12 bytes of 6-bit scales/mins, 128 bytes of nibbles: d*sc*q - dmin*m
            d = s / 320
            raw[:, 0:2], raw[:, 2:4] = f16(d), f16(7.5 * d)  # dmin = 7.5 d centres the values
        return raw.reshape(-1)

    def write(self, f, elements, fan_in):
        pool = self.pools.get(fan_in)
        if pool is None:
            pool = self.pools[fan_in] = self.pool(fan_in)
        view = memoryview(pool)
        self.offset = (self.offset + 7919) % self.BLOCKS
        at, left = self.offset, elements // self.elems
        while left:
            n = min(left, self.BLOCKS - at)
            f.write(view[at * self.bytes:(at + n) * self.bytes])
            left -= n
            at = 0


def tensor_bytes(rows, cols, ggml_type):
    if ggml_type == GGML_F32:
        return rows * cols * 4
    elems, nbytes = BLOCK_SHAPE[ggml_type]
    if cols % elems:
        sys.exit(f"a row of {cols} is not a whole number of {elems}-element blocks")
    return rows * cols // elems * nbytes


def tensor_plan(cfg, vocab):
    """[(name, rows, cols, ggml type, count)] in file order; cols is the fan-in (ggml's ne[0]);
    count > 1: a 3-D stack of that many [rows, cols] matrices (MoE experts)."""
    h, inter = cfg["hidden_size"], cfg["intermediate_size"]
    heads = cfg["num_attention_heads"]
    kv_heads = cfg.get("num_key_value_heads", heads)
    hd = cfg.get("head_dim", h // heads)
    moe = cfg.get("model_type") == "qwen3_moe"
    plan = [("token_embd.weight", vocab, h, GGML_F16, 1)]
    if llama3_rope_factors(cfg, hd) is not None:
        plan.append(("rope_freqs.weight", 1, hd // 2, GGML_F32, 1))
    for i in range(cfg["num_hidden_layers"]):
        p = f"blk.{i}."
        plan += [(p + "attn_norm.weight", 1, h, GGML_F32, 1),
                 (p + "attn_q.weight", heads * hd, h, GGML_F16, 1),
                 (p + "attn_k.weight", kv_heads * hd, h, GGML_F16, 1),
                 (p + "attn_v.weight", kv_heads * hd, h, GGML_F16, 1),
                 (p + "attn_output.weight", h, heads * hd, GGML_F16, 1),
                 (p + "ffn_norm.weight", 1, h, GGML_F32, 1)]
        if moe:
            assert cfg.get("decoder_sparse_step", 1) == 1 and not cfg.get("mlp_only_layers"), "every layer sparse"
            e, ffn = cfg["num_experts"], cfg["moe_intermediate_size"]
            plan += [(p + "attn_q_norm.weight", 1, hd, GGML_F32, 1),
                     (p + "attn_k_norm.weight", 1, hd, GGML_F32, 1),
                     (p + "ffn_gate_inp.weight", e, h, GGML_F32, 1),
                     (p + "ffn_gate_exps.weight", ffn, h, GGML_F16, e),
                     (p + "ffn_up_exps.weight", ffn, h, GGML_F16, e),
                     (p + "ffn_down_exps.weight", h, ffn, GGML_F16, e)]
        else:
            plan += [(p + "ffn_gate.weight", inter, h, GGML_F16, 1),
                     (p + "ffn_up.weight", inter, h, GGML_F16, 1),
                     (p + "ffn_down.weight", h, inter, GGML_F16, 1)]
    plan.append(("output_norm.weight", 1, h, GGML_F32, 1))
    if not cfg.get("tie_word_embeddings", False):
        plan.append(("output.weight", vocab, h, GGML_F16, 1))
    return plan


def padding(n):
    return (-n) % ALIGNMENT


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config", help="Hugging Face config.json of a Llama-architecture model")
    ap.add_argument("out", help="GGUF file to write")
    ap.add_argument("--vocab-from", metavar="GGUF", help="copy the tokenizer.* keys of this GGUF (vocab size too)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--type", choices=sorted(WEIGHT_TYPES), default="F16",
                    help="type of every matrix (random blocks for the quantized types); norms stay F32")
    args = ap.parse_args()
    started = time.perf_counter()

    cfg = json.load(open(args.config))
    h, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    hd = cfg.get("head_dim", h // heads)
    vocab = cfg["vocab_size"]
    if args.vocab_from:
        tokenizer = {k: v for k, v in read_metadata(args.vocab_from).items() if k.startswith("tokenizer.")}
        if "tokenizer.ggml.tokens" not in tokenizer:
            sys.exit(f"{args.vocab_from}: no tokenizer.ggml.tokens")
        vocab_from_file = array_length(tokenizer["tokenizer.ggml.tokens"])
        if vocab_from_file != vocab:
            print(f"note: {args.vocab_from} has {vocab_from_file} tokens, {args.config} says vocab_size {vocab}; "
                  f"using {vocab_from_file}", file=sys.stderr)
        vocab = vocab_from_file
    else:
        tokenizer = placeholder_vocabulary(vocab)

    moe = cfg.get("model_type") == "qwen3_moe"
    arch = "qwen3moe" if moe else "llama"
    metadata = {
        "general.architecture": encode_value(T_STRING, arch),
        "general.name": encode_value(T_STRING, "random-" + cfg.get("model_type", "llama")),
        "general.file_type": encode_value(T_UINT32, WEIGHT_TYPES[args.type][1]),
        "general.alignment": encode_value(T_UINT32, ALIGNMENT),
        "llama.block_count": encode_value(T_UINT32, cfg["num_hidden_layers"]),
        "llama.context_length": encode_value(T_UINT32, min(cfg.get("max_position_embeddings", 8192), 131072)),
        "llama.embedding_length": encode_value(T_UINT32, h),
        "llama.feed_forward_length": encode_value(T_UINT32, cfg["intermediate_size"]),
        "llama.attention.head_count": encode_value(T_UINT32, heads),
        "llama.attention.head_count_kv": encode_value(T_UINT32, cfg.get("num_key_value_heads", heads)),
        "llama.rope.dimension_count": encode_value(T_UINT32, hd),
        "llama.rope.freq_base": encode_value(T_FLOAT32, float(cfg.get("rope_theta", 10000.0))),
        "llama.attention.layer_norm_rms_epsilon": encode_value(T_FLOAT32, float(cfg.get("rms_norm_eps", 1e-5))),
        "llama.vocab_size": encode_value(T_UINT32, vocab),
    }
    if moe:
        metadata = {k.replace("llama.", "qwen3moe.", 1) if k.startswith("llama.") else k: v
                    for k, v in metadata.items()}
        metadata.update({
            "qwen3moe.expert_count": encode_value(T_UINT32, cfg["num_experts"]),
            "qwen3moe.expert_used_count": encode_value(T_UINT32, cfg["num_experts_per_tok"]),
            "qwen3moe.expert_feed_forward_length": encode_value(T_UINT32, cfg["moe_intermediate_size"]),
            "qwen3moe.attention.key_length": encode_value(T_UINT32, hd),
            "qwen3moe.attention.value_length": encode_value(T_UINT32, hd),
        })
    metadata.update(tokenizer)

    weight_type = WEIGHT_TYPES[args.type][0]
    plan = [(n, r, c, weight_type if t == GGML_F16 else t, e) for n, r, c, t, e in tensor_plan(cfg, vocab)]
    header = [GGUF_MAGIC, struct.pack("<IQQ", GGUF_VERSION, len(plan), len(metadata))]
    header += [gguf_string(k) + v for k, v in metadata.items()]
    offset = 0
    for name, rows, cols, ggml_type, count in plan:
        dims = [cols] if rows == 1 else [cols, rows] if count == 1 else [cols, rows, count]
        header.append(gguf_string(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
                      + struct.pack("<IQ", ggml_type, offset))
        nbytes = tensor_bytes(rows * count, cols, ggml_type)
        offset += nbytes + padding(nbytes)
    header = b"".join(header)

    source = RandomSource(args.seed) if weight_type == GGML_F16 else RandomBlocks(weight_type, args.seed)
    ones = {}
    rope_factors = llama3_rope_factors(cfg, hd)
    partial = args.out + ".partial"  # renamed when complete: a killed run leaves no valid-looking file
    with open(partial, "wb", buffering=1 << 22) as f:
        f.write(header + bytes(padding(len(header))))
        router = np.random.default_rng(args.seed + 1)
        for name, rows, cols, ggml_type, count in plan:
            if name == "rope_freqs.weight":
                data = rope_factors.tobytes()
            elif name.endswith("ffn_gate_inp.weight"):  # the router: random, so tokens spread over experts
                data = (router.standard_normal((rows, cols), dtype=np.float32) * np.float32(cols ** -0.5)).tobytes()
            elif ggml_type == GGML_F32:  # norm weights
                data = ones.setdefault(cols, np.ones(cols, dtype=np.float32)).tobytes()
            else:
                source.write(f, rows * count * cols, cols)
                data = b""
            nbytes = tensor_bytes(rows * count, cols, ggml_type)
            f.write(data + bytes(padding(nbytes)))
        total = f.tell()
    os.replace(partial, args.out)
    params = sum(r * c * e for _, r, c, _, e in plan)
    print(f"wrote {args.out}: {params / 1e9:.2f}B parameters, vocabulary {vocab}, {total / 2**30:.2f} GiB "
          f"in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
