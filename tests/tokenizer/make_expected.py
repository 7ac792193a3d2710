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
                                   # null when both equal the string; ds null when equal to d;
                                   # 0 when the oracle panicked (not compared)
   "random": [[ids, d, ds], ...]}  # decodes of random id sequences (byte tokens, specials, ...)

  synthetic_*              small tokenizers trained here on the corpus (tests/tokenizer/synthetic/, committed)
                           to cover components and flags the real ones do not use: Metaspace, Lowercase,
                           NFKC/NFD, Split behaviors, unk + fuse_unk, added-token lstrip/rstrip/single_word/
                           normalized, Strip with stop, RobertaProcessing, ignore_merges, add_prefix_space.

Usage: python3 tests/tokenizer/make_expected.py [name ...] [--retrain]
"""
import json
import os
import random
import sys

from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors,
                        trainers)

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


SYNTHETIC_DIR = os.path.join(HERE, "synthetic")


def train(tk, corpus, vocab_size, special_tokens, alphabet=()):
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special_tokens, initial_alphabet=list(alphabet),
                                  show_progress=False)
    tk.train_from_iterator(corpus, trainer=trainer)


def synthetic_meta(corpus):
    """Metaspace pre-tokenizer and decoder, NFKC + lowercase, unk with fuse_unk, every added-token flag
    (single_word, lstrip, rstrip, normalized) and a [CLS] $A [SEP] template."""
    tk = Tokenizer(models.BPE(unk_token="[UNK]", fuse_unk=True))
    tk.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tk.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex("[-/]"), behavior="merged_with_next"),
        pre_tokenizers.Split(Regex("\\d+"), behavior="isolated"),
        pre_tokenizers.Split(",", behavior="merged_with_previous"),
        pre_tokenizers.Split(Regex("[.!?]"), behavior="contiguous"),
        pre_tokenizers.Split(Regex("[|]"), behavior="removed"),
        pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True),
    ])
    tk.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    train(tk, [c for c in corpus if len(c) < 400][:1500], 600, ["[UNK]", "[CLS]", "[SEP]"])
    tk.add_special_tokens(["[CLS]", "[SEP]", AddedToken("<mask>", lstrip=True, rstrip=False, normalized=False)])
    tk.add_tokens([AddedToken("<sw>", single_word=True, normalized=False),
                   AddedToken("[l]", lstrip=True, normalized=True),
                   AddedToken("[r]", rstrip=True, normalized=False),
                   AddedToken("both", lstrip=True, rstrip=True, normalized=False),
                   AddedToken("hello world", normalized=True),
                   AddedToken("<|im_start|>", normalized=False)])
    tk.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", tk.token_to_id("[CLS]")), ("[SEP]", tk.token_to_id("[SEP]"))])
    return tk


def synthetic_spm(corpus):
    """SentencePiece-style BPE: Prepend + Replace normalizer, byte fallback, and a decoder that strips
    one leading and one trailing space (Strip stop > 0 exercises the streaming hold-back)."""
    tk = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tk.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.Prepend("\u2581"),
                                          normalizers.Replace(" ", "\u2581")])
    tk.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                    decoders.Strip(" ", 1, 1)])
    train(tk, [c for c in corpus if len(c) < 400][:1500], 700, ["<unk>", "<s>", "</s>"])
    # Byte tokens are ordinary vocabulary entries in SentencePiece models: add them to the model, not as added tokens.
    spec = json.loads(tk.to_str())
    vocab = spec["model"]["vocab"]
    for b in range(256):
        vocab.setdefault(f"<0x{b:02X}>", len(vocab))
    tk = Tokenizer.from_str(json.dumps(spec))
    tk.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                      special_tokens=[("<s>", tk.token_to_id("<s>"))])
    return tk


def synthetic_bytelevel(corpus):
    """ByteLevel with add_prefix_space and the GPT-2 regex, contiguous Digits, a Whitespace-free
    decoder chain, a Roberta-style template and ignore_merges."""
    tk = Tokenizer(models.BPE(ignore_merges=True))
    tk.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=False),
                                                pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)])
    tk.decoder = decoders.ByteLevel()
    train(tk, [c for c in corpus if len(c) < 400][:1500], 900, ["<s>", "</s>"], pre_tokenizers.ByteLevel.alphabet())
    tk.add_tokens([AddedToken("  ", normalized=False), AddedToken("\n\n", normalized=False)])
    tk.post_processor = processors.RobertaProcessing(("</s>", tk.token_to_id("</s>")), ("<s>", tk.token_to_id("<s>")))
    return tk


SYNTHETIC = {"synthetic_meta": synthetic_meta, "synthetic_spm": synthetic_spm,
             "synthetic_bytelevel": synthetic_bytelevel}


# Real tokenizers small enough to commit (tests/data/tokenizers/<dir>/).
COMMITTED = {"minilm": "all-MiniLM-L6-v2"}


def synthetic_path(name):
    return os.path.join(SYNTHETIC_DIR, f"{name}.tokenizer.json")


def make_synthetic(name, corpus):
    """Trains the small tokenizer once and commits it; later runs reuse the file (training is not the oracle)."""
    path = synthetic_path(name)
    if os.path.exists(path) and "--retrain" not in sys.argv:
        return
    os.makedirs(SYNTHETIC_DIR, exist_ok=True)
    SYNTHETIC[name](corpus).save(path, pretty=False)


def load(name):
    if name in SYNTHETIC:
        return Tokenizer.from_file(synthetic_path(name))
    if name == "smollm2":
        if not os.path.exists(SMOLLM2_GGUF):
            sys.exit(f"make_expected: {SMOLLM2_GGUF} missing; run scripts/fetch-model.sh")
        return smollm2_from_gguf(SMOLLM2_GGUF)
    if name in COMMITTED:
        tk = Tokenizer.from_file(os.path.join(REPO, "tests", "data", "tokenizers", COMMITTED[name], "tokenizer.json"))
        tk.no_padding()  # the file's encode defaults; corvid leaves lengths to the engine
        tk.no_truncation()
        return tk
    return Tokenizer.from_file(os.path.join(SHARED, "tokenizers", name, "tokenizer.json"))


def random_sequences(tk, rng, count):
    vocab = tk.get_vocab(with_added_tokens=True)
    n = max(vocab.values()) + 1
    byte_ids = [i for t, i in vocab.items() if len(t) == 6 and t.startswith("<0x") and t.endswith(">")]
    single_char = [i for t, i in vocab.items() if len(t) == 1]
    specials = [i for t, i in vocab.items()
                if len(t) > 2 and ((t[0], t[-1]) == ("<", ">") or (t[0], t[-1]) == ("[", "]"))]
    seqs = []
    for k in range(count):
        ln = rng.randint(1, 24)
        pool = [range(n)]
        if byte_ids:
            pool.append(byte_ids)
        pool.append(single_char)
        if specials:
            pool.append(specials)
        seq = []
        for _ in range(ln):
            p = rng.choice(pool) if k % 3 else pool[0]
            seq.append(rng.choice(p))
        seqs.append(seq)
    return seqs


SYNTHETIC_STRINGS = 500  # the synthetic tokenizers test components, not scripts: a prefix of the corpus will do


def make(name, corpus):
    tk = load(name)
    if name in SYNTHETIC:
        corpus = corpus[:SYNTHETIC_STRINGS]
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
        try:
            d = tk.decode(ids, skip_special_tokens=False)
            ds = tk.decode(ids, skip_special_tokens=True)
        except BaseException:  # tokenizers' Strip decoder with stop > 0 panics on an empty decode
            out["decode"].append(0)
            continue
        if d == s and ds == s:
            out["decode"].append(None)
        else:
            out["decode"].append([d, None if ds == d else ds])
    rng = random.Random(7)
    out["random"] = []
    for seq in random_sequences(tk, rng, 100 if name in SYNTHETIC else 400):
        try:
            out["random"].append([seq, tk.decode(seq, skip_special_tokens=False),
                                  tk.decode(seq, skip_special_tokens=True)])
        except BaseException:
            pass
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
    names = [a for a in sys.argv[1:] if not a.startswith("--")] or ["qwen3", "llama3_1", "gemma3", "smollm2",
                                                                   *COMMITTED, *SYNTHETIC]
    for name in names:
        if name in SYNTHETIC:
            make_synthetic(name, corpus)
        make(name, corpus)


if __name__ == "__main__":
    main()
