#!/usr/bin/env python3
"""Runs the oracle, Hugging Face `tokenizers`, over tests/tokenizer/corpus.json and
writes the expected ids and decoded text to tests/tokenizer/expected/<name>.json.

Tokenizers:
  qwen3, llama3_1, gemma3  <shared>/tokenizers/<name>/tokenizer.json (shared = $CORVID_SHARED_DIR
                           or ../shared next to the repository)
  smollm2                  built here from the vocabulary inside
                           models/SmolLM2-135M-Instruct.Q4_1.gguf (scripts/fetch-model.sh), with
                           the structure of HuggingFaceTB/SmolLM2-135M-Instruct's tokenizer.json:
                           model BPE (vocab + merges from the GGUF), pre_tokenizer
                           Sequence[Digits(individual_digits=true), ByteLevel(add_prefix_space=false,
                           use_regex=true)], decoder ByteLevel, post_processor ByteLevel, and the 17
                           control tokens (token_type 3: <|endoftext|>, <|im_start|>, ...) as special
                           added tokens. llama.cpp's "smollm" pre-tokenizer (\\p{N} then the GPT-2
                           regex) is the same split.

File format (compact JSON):
  {"tokenizer": name, "prefix": [...], "suffix": [...],        # ids add_special_tokens puts around
   "ids": [[...], ...],            # encode(s, add_special_tokens=False), one per corpus string
   "with_special": {"i": [...]},   # encode(s, True) where it is not prefix + ids + suffix
   "decode": [null | [d, ds], ...] # d = decode(ids, skip_special_tokens=False), ds = decode(ids, True);
                                   # null when both equal the string; ds null when equal to d
   "random": [[ids, d, ds], ...]}  # decodes of random id sequences (byte tokens, specials, ...)

Usage: python3 tests/tokenizer/make_expected.py [name ...]
"""
import json
import os
import random
import sys

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SHARED = os.environ.get("CORVID_SHARED_DIR") or next(
    (p for p in (os.path.join(REPO, "..", "shared"), os.path.join(REPO, "shared")) if os.path.isdir(p)),
    os.path.join(REPO, "..", "shared"))
SMOLLM2_GGUF = os.path.join(REPO, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")


def smollm2_from_gguf(path):
    import gguf

    r = gguf.GGUFReader(path)

    def strings(key):
        f = r.fields[key]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    tokens = strings("tokenizer.ggml.tokens")
    merges = [tuple(m.split(" ")) for m in strings("tokenizer.ggml.merges")]
    f = r.fields["tokenizer.ggml.token_type"]
    types = [int(f.parts[i][0]) for i in f.data]
    vocab = {t: i for i, t in enumerate(tokens)}
    tk = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token=None, fuse_unk=False, byte_fallback=False))
    tk.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tk.decoder = decoders.ByteLevel()
    tk.post_processor = processors.ByteLevel(trim_offsets=False)
    specials = [AddedToken(tokens[i], special=True, normalized=False) for i, t in enumerate(types) if t == 3]
    tk.add_special_tokens(specials)
    for i, t in enumerate(types):
        if t == 3:
            assert tk.token_to_id(tokens[i]) == i, tokens[i]
    return tk


def load(name):
    if name == "smollm2":
        if not os.path.exists(SMOLLM2_GGUF):
            sys.exit(f"make_expected: {SMOLLM2_GGUF} missing; run scripts/fetch-model.sh")
        return smollm2_from_gguf(SMOLLM2_GGUF)
    return Tokenizer.from_file(os.path.join(SHARED, "tokenizers", name, "tokenizer.json"))


def random_sequences(tk, rng, count):
    vocab = tk.get_vocab(with_added_tokens=True)
    n = max(vocab.values()) + 1
    byte_ids = [i for t, i in vocab.items() if len(t) == 6 and t.startswith("<0x") and t.endswith(">")]
    single_char = [i for t, i in vocab.items() if len(t) == 1]
    specials = [i for t, i in vocab.items() if t.startswith("<") and t.endswith(">") and len(t) > 2]
    seqs = []
    for k in range(count):
        ln = rng.randint(1, 24)
        pool = [range(n)]
        if byte_ids:
            pool.append(byte_ids)
        pool.append(single_char)
        pool.append(specials)
        seq = []
        for _ in range(ln):
            p = rng.choice(pool) if k % 3 else pool[0]
            seq.append(rng.choice(p))
        seqs.append(seq)
    return seqs


def make(name, corpus):
    tk = load(name)
    prefix = tk.encode("", add_special_tokens=True).ids
    # encode("") gives exactly what the post-processor adds; split it around the sequence.
    probe = tk.encode("a", add_special_tokens=False).ids
    probe_with = tk.encode("a", add_special_tokens=True).ids
    pos = next(i for i in range(len(probe_with)) if probe_with[i:i + len(probe)] == probe)
    prefix, suffix = probe_with[:pos], probe_with[pos + len(probe):]

    out = {"tokenizer": name, "prefix": prefix, "suffix": suffix, "ids": [], "with_special": {}, "decode": []}
    plain = tk.encode_batch(corpus, add_special_tokens=False)
    full = tk.encode_batch(corpus, add_special_tokens=True)
    for i, (s, e, w) in enumerate(zip(corpus, plain, full)):
        ids = e.ids
        out["ids"].append(ids)
        if w.ids != prefix + ids + suffix:
            out["with_special"][str(i)] = w.ids
        d = tk.decode(ids, skip_special_tokens=False)
        ds = tk.decode(ids, skip_special_tokens=True)
        if d == s and ds == s:
            out["decode"].append(None)
        else:
            out["decode"].append([d, None if ds == d else ds])
    rng = random.Random(7)
    out["random"] = [[seq, tk.decode(seq, skip_special_tokens=False), tk.decode(seq, skip_special_tokens=True)]
                     for seq in random_sequences(tk, rng, 400)]
    path = os.path.join(HERE, "expected", f"{name}.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    n_ids = sum(len(x) for x in out["ids"])
    print(f"make_expected: {name}: {len(corpus)} strings, {n_ids} ids, {len(out['with_special'])} special-cased, "
          f"{os.path.getsize(path)} bytes -> {path}")


def main():
    with open(os.path.join(HERE, "corpus.json"), encoding="utf-8") as f:
        corpus = json.load(f)["strings"]
    names = sys.argv[1:] or ["qwen3", "llama3_1", "gemma3", "smollm2"]
    for name in names:
        make(name, corpus)


if __name__ == "__main__":
    main()
