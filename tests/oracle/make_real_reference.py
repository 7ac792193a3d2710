#!/usr/bin/env python3
"""Reference greedy continuations for a real GGUF checkpoint, computed outside corvid:
transformers (torch, CPU, float32, eager attention) loads the GGUF through gguf-py,
i.e. runs the dequantized model; 32 greedy tokens a prompt, EOS off. Writes
tests/fixtures/real/NAME.json (RealWeights.GreedyEqualsTransformers reads it).

    python3 tests/oracle/make_real_reference.py gemma3-270m models/gemma-3-270m.Q4_K_M.gguf \
        --tokenizer-json ../shared/tokenizers/gemma3/tokenizer.json --bos 2
    python3 tests/oracle/make_real_reference.py qwen2.5-coder-0.5b models/qwen2.5-coder-0.5b-instruct.Q4_K_M.gguf

--tokenizer-json tokenizes with HF `tokenizers` on the released tokenizer.json (plus
--bos), for files whose GGUF tokenizer transformers converts wrongly (Gemma 3's: it
splits words into pieces); otherwise transformers' tokenizer from the GGUF is used.
Needs torch, transformers, gguf, accelerate, tokenizers.
"""
import argparse
import hashlib
import json
from pathlib import Path

PROMPTS = {
    "gemma3-270m": ["The capital of France is", "def fibonacci(n):\n", "Once upon a time, in a small village,"],
    "qwen2.5-coder-0.5b": ["def fibonacci(n):\n", "The capital of France is",
                           "<|im_start|>user\nWrite a Python function that reverses a string.<|im_end|>\n"
                           "<|im_start|>assistant\n"],
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("name", choices=sorted(PROMPTS))
    ap.add_argument("gguf")
    ap.add_argument("--tokenizer-json")
    ap.add_argument("--bos", type=int)
    args = ap.parse_args()
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer
    torch.use_deterministic_algorithms(True)
    gguf = Path(args.gguf).resolve()
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    if args.tokenizer_json:
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(args.tokenizer_json)
        encode = lambda p: ([args.bos] if args.bos is not None else []) + tok.encode(p, add_special_tokens=False).ids
        decode = tok.decode
        how = f"HF tokenizers on {Path(args.tokenizer_json).name}" + (f", BOS {args.bos} prepended" if args.bos else "")
    else:
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        encode = lambda p: tok(p, add_special_tokens=False)["input_ids"]
        decode = tok.decode
        how = "transformers AutoTokenizer from the GGUF, add_special_tokens=False"
    runs = []
    for p in PROMPTS[args.name]:
        ids = encode(p)
        g = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                           do_sample=False, max_new_tokens=32, min_new_tokens=32, output_logits=True,
                           return_dict_in_generate=True, eos_token_id=None, pad_token_id=0)
        toks = g.sequences[0, len(ids):].tolist()
        gaps = [float(torch.topk(l[0].float(), 2).values.diff().abs()) for l in g.logits]
        runs.append(dict(prompt=p, ids=ids, greedy=toks, text=decode(toks), min_gap=round(min(gaps), 5)))
        print(repr(p), "->", repr(decode(toks)), flush=True)
    out = {"model": gguf.name, "model_sha256": hashlib.sha256(gguf.read_bytes()).hexdigest(),
           "reference": f"transformers {transformers.__version__} + torch {torch.__version__} (CPU, float32, eager "
                        "attention) on the GGUF dequantized by gguf-py, greedy, 32 new tokens, EOS off",
           "tokenizer": how, "runs": runs}
    dest = Path(__file__).resolve().parent.parent / "fixtures" / "real" / f"{args.name}.json"
    dest.write_text("{\n" + ",\n".join(
        f"  {json.dumps(k)}: " + (json.dumps(v) if k != "runs" else
                                  "[\n" + ",\n".join("    " + json.dumps(x, ensure_ascii=False) for x in v) + "\n  ]")
        for k, v in out.items()) + "\n}\n")


if __name__ == "__main__":
    main()
