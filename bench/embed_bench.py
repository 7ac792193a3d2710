#!/usr/bin/env python3
"""Embeddings throughput of an OpenAI-compatible /v1/embeddings server (corvid serve --task embed,
vLLM, llama-server --embeddings): --requests requests of --batch texts each from --concurrency
clients; reports inputs/s, prompt tokens/s (the server's usage) and request latency percentiles.
Texts are made from a fixed word list with log-normal lengths (--words-mean), reproducible
with --seed. Standard library only.

    python3 bench/embed_bench.py --url http://127.0.0.1:8080 --requests 200 --batch 16 --concurrency 8
"""
import argparse
import json
import random
import statistics
import threading
import time
import urllib.request

WORDS = ("time person year way day thing man world life hand part child eye woman place work week case point "
         "government company number group problem fact river mountain ocean garden music story history science "
         "language market city country family water light money table window paper school question answer").split()


def post(url, body, key):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json",
                                          **({"Authorization": "Bearer " + key} if key else {})})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--model", default="")
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--batch", type=int, default=16, help="texts per request")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--words-mean", type=float, default=24, help="mean words per text")
    ap.add_argument("--words-max", type=int, default=120)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json-out", default=None)
    args = ap.parse_args()
    rng = random.Random(args.seed)

    def text():
        n = max(1, min(args.words_max, int(rng.lognormvariate(0, 0.6) * args.words_mean)))
        return " ".join(rng.choice(WORDS) for _ in range(n))

    bodies = [{"model": args.model, "input": [text() for _ in range(args.batch)], "encoding_format": "base64"}
              for _ in range(args.requests)]
    url = args.url.rstrip("/") + "/v1/embeddings"
    post(url, {"model": args.model, "input": ["warm up"] * args.batch}, args.api_key)
    latencies, tokens, errors = [], [], []
    lock = threading.Lock()
    next_index = [0]

    def worker():
        while True:
            with lock:
                i = next_index[0]
                next_index[0] += 1
            if i >= len(bodies):
                return
            start = time.perf_counter()
            try:
                r = post(url, bodies[i], args.api_key)
                with lock:
                    latencies.append(time.perf_counter() - start)
                    tokens.append(r["usage"]["prompt_tokens"])
            except Exception as e:  # noqa: BLE001 (reported, not raised)
                with lock:
                    errors.append(repr(e))

    start = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(args.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    lat = sorted(latencies)
    pct = lambda p: round(1000 * lat[min(len(lat) - 1, int(p / 100 * len(lat)))], 1) if lat else None  # noqa: E731
    summary = {"requests": args.requests, "completed": len(latencies), "failed": len(errors),
               "batch": args.batch, "concurrency": args.concurrency, "wall_s": round(wall, 2),
               "inputs_per_s": round(len(latencies) * args.batch / wall, 1),
               "prompt_tokens_per_s": round(sum(tokens) / wall, 1),
               "mean_tokens_per_input": round(sum(tokens) / max(1, len(tokens) * args.batch), 1),
               "latency_ms": {"p50": pct(50), "p99": pct(99),
                              "mean": round(1000 * statistics.fmean(lat), 1) if lat else None}}
    if errors:
        summary["first_error"] = errors[0]
    print(json.dumps(summary, indent=2))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(summary, f, indent=2)


if __name__ == "__main__":
    main()
