#!/usr/bin/env python3
"""Build corvid's oracle fixtures with Hugging Face transformers.

Tiny random-weight Llama-family models (one folder each under tests/fixtures/)
with the oracle's full prompt logits and greedy continuations, plus top-k logits
and greedy continuations of the real SmolLM2-135M-Instruct Q4_1 GGUF.

    python3 tests/oracle/make_fixtures.py --out tests/fixtures \
        [--only llama,qwen3] [--smollm2-gguf models/SmolLM2-135M-Instruct.Q4_1.gguf]
    python3 tests/oracle/make_fixtures.py --tokenizers-only   # no torch needed

Needs torch, transformers, tokenizers, safetensors (and gguf for SmolLM2).
Everything runs in float32 on the CPU with eager attention; see
tests/fixtures/README.md for what each fixture covers and the tolerances.
"""
import argparse
import hashlib
import json
import math
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = (HERE / "corpus.txt").read_text(encoding="utf-8")

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]  # ids 0, 1, 2
from fixture_configs import BOS_ID, EOS_ID  # noqa: E402
CHATML = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
# Pre-tokenizer split patterns of real checkpoints (Llama 3 and Qwen2 differ in \p{N}{1,3}).
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                 r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

SHORT_TEXT = "The quick brown fox"
MEDIUM_TEXT = "Once upon a time, a little crow flew over the old bridge to a café in Zürich: tea, €4.50!"
LONG_TEXT = ("Every morning the crow flew over the river, the market and the old stone bridge, "
             "looking for shiny things. The quick brown fox jumps over the lazy dog again and again.")
CHAT = [{"role": "user", "content": "What is the capital of France?"}]
NEW_TOKENS = 32
MIN_GAP = 1e-2

from fixture_configs import FIXTURES  # noqa: E402  (the table of fixtures, one entry each)


# ---------------------------------------------------------------- tokenizer
def train_tokenizer(vocab_size, style):
    """Byte-level BPE trained on corpus.txt; deterministic for a given tokenizers version."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    if style == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        pattern = LLAMA3_PATTERN if style == "llama3" else QWEN2_PATTERN
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        if style == "qwen2":
            tok.normalizer = normalizers.NFC()
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=0, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(CORPUS.splitlines(keepends=True), trainer)
    tok.post_processor = None
    assert tok.get_vocab_size() == vocab_size, (tok.get_vocab_size(), vocab_size)
    assert [tok.token_to_id(s) for s in SPECIALS] == [0, 1, 2]
    return tok


def tokenizer_config():
    added = {str(i): dict(content=s, lstrip=False, normalized=False, rstrip=False,
                          single_word=False, special=True) for i, s in enumerate(SPECIALS)}
    return {"add_bos_token": False, "add_eos_token": False, "added_tokens_decoder": added,
            "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
            "bos_token": SPECIALS[BOS_ID], "eos_token": SPECIALS[EOS_ID], "pad_token": SPECIALS[0],
            "unk_token": None, "chat_template": CHATML, "clean_up_tokenization_spaces": False,
            "model_max_length": 256, "tokenizer_class": "PreTrainedTokenizerFast"}


def write_tokenizer(folder, vocab_size, style):
    tok = train_tokenizer(vocab_size, style)
    tok.save(str(folder / "tokenizer.json"))
    write_json(folder / "tokenizer_config.json", tokenizer_config())


def make_prompts(folder, long_prompt):
    from transformers import AutoTokenizer
    hf = AutoTokenizer.from_pretrained(str(folder))
    chat = hf.apply_chat_template(CHAT, add_generation_prompt=True, tokenize=False)
    texts = [SPECIALS[0], SHORT_TEXT, MEDIUM_TEXT, chat] + ([LONG_TEXT] if long_prompt else [])
    ids = [hf(t, add_special_tokens=False)["input_ids"] for t in texts]
    for t, i in zip(texts, ids):  # the fixture tokenizer must round-trip its prompts
        assert hf.decode(i) == t, (t, hf.decode(i))
    assert len(ids[0]) == 1
    return texts, ids


# ---------------------------------------------------------------- models
def write_json(path, obj):
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def init_weights(model, seed):
    """Wider-than-HF init so logits have structure: linears N(0, g^2/fan_in), embeddings
    N(0, 0.5^2), norms 1 + N(0, 0.1^2), biases N(0, 0.2^2)."""
    import torch
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():  # tied lm_head is the embedding (listed once)
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float32)
            if "norm" in name:
                val = 1.0 + 0.1 * noise
            elif name.endswith(".bias"):
                val = 0.2 * noise
            elif "embed_tokens" in name:
                val = 0.5 * noise
            else:
                gain = 3.0 if "lm_head" in name else 1.5 if ("q_proj" in name or "k_proj" in name) else 1.0
                if name.endswith("mlp.gate.weight"):
                    gain = 3.0  # a MoE router: decisive choices, so that no top-k is a near-tie
                # [out, in], or stacked experts [E, out, in]; 1-D: vision towers' probes, scalars
                fan_in = p.shape[-1] if p.dim() > 1 else p.shape[0]
                val = noise * (gain / math.sqrt(fan_in))
            p.copy_(val.to(p.dtype))


def greedy(model, ids):
    """HF generate, greedy, exactly NEW_TOKENS tokens (EOS disabled). Returns tokens, per-step gaps."""
    import torch
    inp = torch.tensor([ids])
    out = model.generate(inp, attention_mask=torch.ones_like(inp), do_sample=False,
                         max_new_tokens=NEW_TOKENS, min_new_tokens=0, output_logits=True,
                         return_dict_in_generate=True)
    toks = out.sequences[0, len(ids):].tolist()
    assert len(toks) == NEW_TOKENS and len(out.logits) == NEW_TOKENS, len(toks)
    gaps = []
    for step, lg in enumerate(out.logits):
        top2 = torch.topk(lg[0].float(), 2)
        assert top2.indices[0].item() == toks[step]
        gaps.append(float(top2.values[0] - top2.values[1]))
    return toks, gaps


def disable_eos(model):
    gc = model.generation_config
    gc.eos_token_id = None
    gc.pad_token_id = None
    gc.do_sample = False
    for k in ("temperature", "top_p", "top_k", "repetition_penalty"):
        if hasattr(gc, k):
            setattr(gc, k, None)


def fmt_row(row):
    return "[" + ",".join(f"{x:.6g}" for x in row) + "]"


def write_oracle(path, obj):
    """One key per line, compact values; logits (6 significant digits) and top-k one row per
    position, so the files stay small and diffable."""
    parts = []
    for key, val in obj.items():
        if key == "logits":
            text = "[\n" + ",\n".join("    [\n" + ",\n".join("      " + fmt_row(r) for r in lg) + "\n    ]"
                                      for lg in val) + "\n  ]"
        elif key == "topk":
            text = "[\n" + ",\n".join("    [\n" + ",\n".join("      " + json.dumps(r) for r in pr) + "\n    ]"
                                      for pr in val) + "\n  ]"
        elif isinstance(val, list) and val and isinstance(val[0], (list, str)):
            text = "[\n" + ",\n".join("    " + json.dumps(v, ensure_ascii=False) for v in val) + "\n  ]"
        else:
            text = json.dumps(val, ensure_ascii=False)
        parts.append(f"  {json.dumps(key)}: {text}")
    body = "{\n" + ",\n".join(parts) + "\n}\n"
    assert json.loads(body).keys() == obj.keys()
    path.write_text(body, encoding="utf-8")


def save_weights(model, folder, n_shards, keep_v5_config):
    """save_pretrained into folder; for n_shards > 1 pick a max_shard_size that gives exactly that many."""
    total = sum(t.numel() * t.element_size()
                for t in {p.data_ptr(): p for p in model.state_dict().values()}.values())
    for frac in ([None] if n_shards == 1 else [0.5 + 0.02 * k for k in range(25)]):
        with tempfile.TemporaryDirectory() as tmp:
            model.save_pretrained(tmp, **({} if frac is None else {"max_shard_size": int(total * frac)}))
            files = list(Path(tmp).iterdir())
            if len([f for f in files if f.name.endswith(".safetensors")]) != n_shards:
                continue
            for f in files:
                if f.name.endswith(".safetensors") or f.name.endswith(".index.json") or \
                        (f.name == "config.json" and keep_v5_config):
                    shutil.copy(f, folder / f.name)
            return
    raise RuntimeError(f"could not save {folder.name} in {n_shards} shards")


def build_fixture(name, out_root, seed0):
    import torch
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM
    cfg_dict, opt = FIXTURES[name]
    bf16 = opt.get("bf16", False)
    folder = out_root / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    classic = dict(cfg_dict, torch_dtype="bfloat16" if bf16 else "float32",
                   transformers_version=transformers.__version__)
    write_json(folder / "config.json", classic)
    write_json(folder / "generation_config.json",
               {"bos_token_id": BOS_ID, "eos_token_id": EOS_ID, "do_sample": False,
                "transformers_version": transformers.__version__})
    write_tokenizer(folder, opt.get("vocab_size") or cfg_dict["vocab_size"], opt["tok"])
    texts, prompts = make_prompts(folder, opt.get("long_prompt", False))
    if opt.get("min_prompt_tokens"):
        keep = [i for i, p in enumerate(prompts) if len(p) >= opt["min_prompt_tokens"]]
        texts, prompts = [texts[i] for i in keep], [prompts[i] for i in keep]

    config = AutoConfig.from_pretrained(str(folder))
    for seed in range(seed0, seed0 + 200):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, attn_implementation="eager",
                                                 dtype=torch.float32).eval()
        init_weights(model, seed)
        if opt.get("qk_norm_scale"):
            # Gemma 4 scores q.k unscaled (attention scale 1): with q/k norm weights near 1,
            # scores have std sqrt(head_dim), far sharper than any trained model. Weights
            # near head_dim^-1/4 give the usual softmax temperature (std ~1).
            with torch.no_grad():
                for pname, prm in model.named_parameters():
                    if pname.endswith(("q_norm.weight", "k_norm.weight")):
                        prm.mul_(prm.shape[0] ** -0.25)
        if opt.get("layer_scalars"):  # Gemma 4's per-layer output scalar is a buffer (init 1)
            with torch.no_grad():
                for bname, buf in model.named_buffers():
                    if bname.endswith("layer_scalar"):
                        buf.copy_(0.5 + torch.rand(buf.shape, generator=torch.Generator().manual_seed(seed)))
        if bf16:
            with torch.no_grad():
                for p in model.parameters():
                    p.copy_(p.bfloat16().float())
        disable_eos(model)
        with torch.no_grad():
            runs = [greedy(model, p) for p in prompts]
        min_gap = min(min(g) for _, g in runs)
        print(f"  {name}: seed {seed} min greedy gap {min_gap:.4g}", flush=True)
        if min_gap >= MIN_GAP:
            break
    else:
        raise RuntimeError(f"{name}: no seed gave greedy gaps >= {MIN_GAP}")

    # Save the weights, then restore our config.json (save_pretrained rewrites it).
    saved = model.to(torch.bfloat16) if bf16 else model
    save_weights(saved, folder, opt.get("shards", 1), opt.get("v5_config", False))
    shards = sorted(f.name for f in folder.glob("*.safetensors"))
    if opt.get("shards"):
        assert len(shards) == opt["shards"] and (folder / "model.safetensors.index.json").exists(), shards
    else:
        assert shards == ["model.safetensors"], shards

    # The oracle proper: reload from the folder exactly as a user would.
    model = AutoModelForCausalLM.from_pretrained(str(folder), attn_implementation="eager",
                                                 dtype=torch.float32).eval()
    disable_eos(model)
    logits, greedy_ids, greedy_gaps = [], [], []
    with torch.no_grad():
        for p, (toks0, _) in zip(prompts, runs):
            lg = model(torch.tensor([p])).logits[0].float()
            logits.append(lg)
            toks, gaps = greedy(model, p)
            assert toks == toks0, f"{name}: reloaded model's greedy differs from the in-memory one"
            # Cross-check the KV-cache path against one full forward over prompt + continuation.
            full = model(torch.tensor([p + toks])).logits[0, len(p) - 1:-1].argmax(-1).tolist()
            assert full == toks, f"{name}: cached greedy differs from full-forward argmax"
            greedy_ids.append(toks)
            greedy_gaps.append([round(g, 6) for g in gaps])
    min_gap = min(min(g) for g in greedy_gaps)
    meta = {
        "fixture": name, "covers": opt["what"],
        "transformers_version": transformers.__version__, "torch_version": torch.__version__,
        "tokenizers_version": __import__("tokenizers").__version__,
        "dtype": "float32", "weights_dtype": "bfloat16" if bf16 else "float32",
        "attn_implementation": "eager", "device": "cpu", "seed": seed,
        "weight_files": shards, "max_new_tokens": NEW_TOKENS,
        "prompts": prompts, "prompt_texts": texts,
    }
    meta.update(logits=[lg.tolist() for lg in logits], greedy=greedy_ids, greedy_gaps=greedy_gaps,
                min_greedy_gap=min_gap)
    write_oracle(folder / "oracle.json", meta)
    print(f"  {name}: seed {seed}, prompts {[len(p) for p in prompts]}, min gap {min_gap:.4g}, "
          f"files {sorted(f.name for f in folder.iterdir())}", flush=True)
    return {"seed": seed, "min_greedy_gap": min_gap, "prompt_lengths": [len(p) for p in prompts]}


# ---------------------------------------------------------------- SmolLM2 (real weights)
SMOL_PROMPTS = [
    "The capital of France is",
    "Once upon a time, there was a little",
    "def fibonacci(n):\n",
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\nWrite a haiku about the sea.<|im_end|>\n<|im_start|>assistant\n",
]
SMOL_NEW, SMOL_TOPK = 64, 20


def build_smollm2(gguf_path, out_root):
    import gguf
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer
    gguf_path = Path(gguf_path)
    sha = hashlib.sha256(gguf_path.read_bytes()).hexdigest()
    t0 = time.time()
    tok = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name,
                                                 dtype=torch.float32, attn_implementation="eager").eval()
    print(f"  smollm2: loaded in {time.time() - t0:.1f}s", flush=True)
    disable_eos(model)
    prompts, topk, greedy_ids, greedy_text, greedy_gaps = [], [], [], [], []
    with torch.no_grad():
        for text in SMOL_PROMPTS:
            ids = tok(text, add_special_tokens=False)["input_ids"]
            prompts.append(ids)
            lg = model(torch.tensor([ids])).logits[0].float()
            v, i = torch.topk(lg, SMOL_TOPK, dim=-1)
            topk.append([[[int(a), float(f"{b:.6g}")] for a, b in zip(ii.tolist(), vv.tolist())]
                         for ii, vv in zip(i, v)])
            inp = torch.tensor([ids])
            out = model.generate(inp, attention_mask=torch.ones_like(inp), do_sample=False,
                                 max_new_tokens=SMOL_NEW, min_new_tokens=0, output_logits=True,
                                 return_dict_in_generate=True)
            toks = out.sequences[0, len(ids):].tolist()
            assert len(toks) == SMOL_NEW
            gaps = []
            for step, l in enumerate(out.logits):
                t2 = torch.topk(l[0].float(), 2)
                assert t2.indices[0].item() == toks[step]
                gaps.append(round(float(t2.values[0] - t2.values[1]), 6))
            greedy_ids.append(toks)
            greedy_text.append(tok.decode(toks))
            greedy_gaps.append(gaps)
            print(f"  smollm2: {len(ids)} prompt tokens, min gap {min(gaps):.4g}: {greedy_text[-1]!r}",
                  flush=True)
    meta = {
        "model_file": gguf_path.name, "model_sha256": sha,
        "transformers_version": transformers.__version__, "torch_version": torch.__version__,
        "gguf_version": getattr(gguf, "__version__", None) or _dist_version("gguf"),
        "dtype": "float32 (GGUF Q4_1 dequantized by transformers/gguf-py)",
        "attn_implementation": "eager", "device": "cpu",
        "tokenizer": "transformers AutoTokenizer from the GGUF (gguf_file=...), add_special_tokens=False",
        "prompt_texts": SMOL_PROMPTS, "prompts": prompts, "top_k": SMOL_TOPK,
        "topk": topk, "max_new_tokens": SMOL_NEW, "greedy": greedy_ids, "greedy_text": greedy_text,
        "greedy_gaps": greedy_gaps, "min_greedy_gap": [min(g) for g in greedy_gaps],
    }
    folder = out_root / "smollm2"
    folder.mkdir(parents=True, exist_ok=True)
    write_oracle(folder / "oracle.json", meta)
    return {"min_greedy_gap": meta["min_greedy_gap"], "prompt_lengths": [len(p) for p in prompts]}


def _dist_version(name):
    from importlib.metadata import version
    return version(name)


# ---------------------------------------------------------------- main
def setup_torch():
    import torch
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_default_device("cpu")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(HERE.parent / "fixtures"))
    ap.add_argument("--only", default="", help="comma-separated fixture names (smollm2 included)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--smollm2-gguf", default="", help="path of SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--tokenizers-only", action="store_true",
                    help="only train/check the fixture tokenizers and prompts (no torch)")
    args = ap.parse_args()
    out = Path(args.out)
    names = [n for n in args.only.split(",") if n] or list(FIXTURES) + ["smollm2"]
    failed, summary = [], {}
    if args.tokenizers_only:
        for name in [n for n in names if n in FIXTURES]:
            cfg, opt = FIXTURES[name]
            folder = out / name
            folder.mkdir(parents=True, exist_ok=True)
            write_tokenizer(folder, opt.get("vocab_size") or cfg["vocab_size"], opt["tok"])
            texts, prompts = make_prompts(folder, opt.get("long_prompt", False))
            print(name, [len(p) for p in prompts])
        return 0
    setup_torch()
    for name in names:
        t0 = time.time()
        try:
            if name == "smollm2":
                if not args.smollm2_gguf:
                    print("smollm2: skipped (no --smollm2-gguf)")
                    continue
                summary[name] = build_smollm2(args.smollm2_gguf, out)
            else:
                summary[name] = build_fixture(name, out, args.seed)
            print(f"{name}: done in {time.time() - t0:.1f}s", flush=True)
        except Exception:
            traceback.print_exc()
            failed.append(name)
    print(json.dumps(summary, indent=1))
    if failed:
        print("FAILED:", failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
