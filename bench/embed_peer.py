#!/usr/bin/env python3
"""The peer of bench/embed_bench.py: sentence-transformers encoding the same texts (same word
list, lengths and seed) in batches of --batch, on --device. With --random-from CONFIG_DIR it
builds the model from a config.json with random weights (the same compute as the real one,
for machines without the weights), mean pooling and normalisation as all-MiniLM-L6-v2 has.

    python3 bench/embed_peer.py --model models/all-MiniLM-L6-v2 --device cpu --requests 200 --batch 16
    python3 bench/embed_peer.py --random-from configs/all-minilm-l6-v2.json --tokenizer tests/data/tokenizers/all-MiniLM-L6-v2 --device cuda
"""
import argparse
import json
import random
import time

from embed_bench import WORDS


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", help="a sentence-transformers folder")
    ap.add_argument("--random-from", help="a config.json: random weights of that shape")
    ap.add_argument("--tokenizer", help="with --random-from: the tokenizer folder")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--words-mean", type=float, default=24)
    ap.add_argument("--words-max", type=int, default=120)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0, help="torch threads on the CPU (0: torch's default)")
    args = ap.parse_args()
    import torch
    from sentence_transformers import SentenceTransformer
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.model:
        st = SentenceTransformer(args.model, device=args.device)
    else:
        # A sentence-transformers folder of that shape with random weights: BertModel, the
        # tokenizer, mean pooling and Normalize (all-MiniLM-L6-v2's modules).
        import shutil
        import tempfile
        from pathlib import Path
        from transformers import BertConfig, BertModel
        folder = Path(tempfile.mkdtemp())
        config = BertConfig.from_json_file(args.random_from)
        BertModel(config).save_pretrained(folder)
        for f in Path(args.tokenizer).iterdir():
            shutil.copy(f, folder / f.name)
        (folder / "modules.json").write_text(json.dumps([
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]))
        (folder / "1_Pooling").mkdir()
        (folder / "1_Pooling" / "config.json").write_text(json.dumps(
            {"word_embedding_dimension": config.hidden_size, "pooling_mode_mean_tokens": True}))
        st = SentenceTransformer(str(folder), device=args.device)
    rng = random.Random(args.seed)

    def text():
        n = max(1, min(args.words_max, int(rng.lognormvariate(0, 0.6) * args.words_mean)))
        return " ".join(rng.choice(WORDS) for _ in range(n))

    batches = [[text() for _ in range(args.batch)] for _ in range(args.requests)]
    st.encode(["warm up"] * args.batch, batch_size=args.batch)
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    for b in batches:
        st.encode(b, batch_size=args.batch, convert_to_numpy=True)
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    wall = time.perf_counter() - start
    print(json.dumps({"peer": "sentence-transformers", "device": args.device, "batch": args.batch,
                      "requests": args.requests, "wall_s": round(wall, 2),
                      "inputs_per_s": round(args.requests * args.batch / wall, 1),
                      "torch": torch.__version__}, indent=2))


if __name__ == "__main__":
    main()
