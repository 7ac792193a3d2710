"""corvid perplexity's oracle: the tiny llama fixture's perplexity as llama.cpp's tool
defines it, computed with mlx-lm (float32) over a fixed sequence of token ids.

    pip install mlx==0.32.4 mlx-cpu==0.32.4 mlx-lm==0.32.2 tokenizers
    python3 tests/oracle/make_perplexity_oracle.py tests/fixtures/llama tests/data/perplexity_oracle.json

Windows of 32 tokens, the first id of each replaced by BOS where the tokenizer adds one,
positions 16..30 scored (token j + 1 under the logits of position j); PPL = exp(mean NLL).
"""
import json
import sys
from pathlib import Path

import mlx.core as mx
import numpy as np
from mlx_lm.utils import load_model
from tokenizers import Tokenizer

fixture, out = Path(sys.argv[1]), sys.argv[2]
model, config = load_model(fixture)
tok = Tokenizer.from_file(str(fixture / "tokenizer.json"))
probe = tok.encode("a").ids
bos = config.get("bos_token_id")
adds_bos = bos is not None and len(probe) > 0 and probe[0] == bos
context, windows = 32, 3
ids = np.random.RandomState(2026).randint(3, config["vocab_size"], size=context * windows + 5).tolist()
nll = []
for w in range(windows):
    window = ids[w * context:(w + 1) * context]
    if adds_bos:
        window[0] = bos
    logits = np.array(model(mx.array([window]))[0].astype(mx.float32), dtype=np.float64)
    for j in range(context // 2, context - 1):
        row = logits[j]
        top = row.max()
        nll.append(np.log(np.exp(row - top).sum()) - (row[window[j + 1]] - top))
ppl = float(np.exp(np.mean(nll)))
json.dump({"context": context, "windows": windows, "adds_bos": adds_bos, "ids": ids, "ppl": ppl}, open(out, "w"))
print("ppl", ppl, "adds_bos", adds_bos, "scored", len(nll))
