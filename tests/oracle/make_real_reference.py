#!/usr/bin/env python3
"""Reference greedy continuations for a real GGUF checkpoint, computed outside corvid:
transformers (torch, CPU, float32, eager attention) loads the GGUF through gguf-py,
i.e. runs the dequantized model. Prompts are tokenized with HF `tokenizers` from the
released tokenizer.json given as the argument (plus BOS 2), since transformers' own
conversion of the Gemma 3 GGUF tokenizer splits words wrongly.

    cd <folder holding gemma-3-270m.Q4_K_M.gguf>
    python3 tests/oracle/make_real_reference.py ../shared/tokenizers/gemma3/tokenizer.json
    # writes ref3.json; tests/fixtures/real/gemma3-270m.json holds its runs

Needs torch, transformers, gguf, accelerate, tokenizers.
"""
import json, sys, torch
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM
torch.use_deterministic_algorithms(True)
tok = Tokenizer.from_file(sys.argv[1])
model = AutoModelForCausalLM.from_pretrained(".", gguf_file="gemma-3-270m.Q4_K_M.gguf", dtype=torch.float32,
                                             attn_implementation="eager").eval()
norms = {n: float(p.float().mean()) for n, p in model.named_parameters() if n.endswith("norm.weight")}
print("mean of norm weights (first 3):", list(norms.items())[:3], flush=True)
prompts = ["The capital of France is", "def fibonacci(n):\n", "Once upon a time, in a small village,"]
runs = []
for p in prompts:
    ids = [2] + tok.encode(p, add_special_tokens=False).ids
    g = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long), do_sample=False,
                       max_new_tokens=32, min_new_tokens=32, output_logits=True, return_dict_in_generate=True)
    toks = g.sequences[0, len(ids):].tolist()
    gaps = [float(torch.topk(l[0].float(), 2).values.diff().abs()) for l in g.logits]
    runs.append(dict(prompt=p, ids=ids, greedy=toks, text=tok.decode(toks), gaps=[round(x, 5) for x in gaps]))
    print(p, ids, "->", repr(tok.decode(toks)), min(gaps), flush=True)
json.dump(runs, open("ref3.json", "w"), indent=1)
