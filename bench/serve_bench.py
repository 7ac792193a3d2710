#!/usr/bin/env python3
"""Serving benchmark for any OpenAI-compatible server (corvid serve, llama-server, vLLM).

Sends streaming /v1/completions requests, either with Poisson arrivals at --rate
requests/s or with a fixed number of clients (--concurrency), and reports request and
output-token throughput with TTFT (time to first token) and ITL (inter-token latency)
percentiles. Prompt and output lengths follow ShareGPT-like log-normal distributions
(--prompt-mean/--output-mean tokens, clipped), built from a fixed word list, so a run is
reproducible with --seed and needs no dataset. Output lengths are enforced with
max_tokens and ignore_eos where the server honours it.

    python3 bench/serve_bench.py --url http://127.0.0.1:8080 --requests 64 --concurrency 8
    python3 bench/serve_bench.py --url http://127.0.0.1:8080 --requests 200 --rate 4

Needs httpx (installed with the openai client).
"""
import argparse
import asyncio
import json
import math
import random
import statistics
import time

import httpx

WORDS = ("time person year way day thing man world life hand part child eye woman place work week case point "
         "government company number group problem fact river mountain ocean garden music story history science "
         "language market city country family water light money table window paper school question answer").split()


def lognormal_lengths(rng, n, mean, sigma, lo, hi):
    # Log-normal with the given mean: mu = ln(mean) - sigma^2 / 2.
    mu = math.log(mean) - sigma * sigma / 2
    return [int(min(hi, max(lo, round(rng.lognormvariate(mu, sigma))))) for _ in range(n)]


def make_prompt(rng, words):
    return " ".join(rng.choice(WORDS) for _ in range(words))


def percentile(values, p):
    if not values:
        return float("nan")
    values = sorted(values)
    k = (len(values) - 1) * p / 100
    lo, hi = math.floor(k), math.ceil(k)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


async def one_request(client, args, prompt, max_tokens, results):
    body = {"model": args.model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "ignore_eos": True, "stream_options": {"include_usage": True}}
    start = time.perf_counter()
    stamps, completion_tokens, error = [], None, None
    try:
        async with client.stream("POST", args.url + "/v1/completions", json=body, headers=args.headers) as r:
            if r.status_code != 200:
                error = f"HTTP {r.status_code}: {(await r.aread())[:200]!r}"
            else:
                async for line in r.aiter_lines():
                    if not line.startswith("data: "):
                        continue
                    data = line[6:]
                    if data == "[DONE]":
                        break
                    chunk = json.loads(data)
                    if chunk.get("usage"):
                        completion_tokens = chunk["usage"].get("completion_tokens")
                    if chunk.get("choices") and chunk["choices"][0].get("text"):
                        stamps.append(time.perf_counter())
    except (httpx.HTTPError, json.JSONDecodeError) as e:
        error = repr(e)
    end = time.perf_counter()
    results.append({"start": start, "end": end, "stamps": stamps, "error": error,
                    "tokens": completion_tokens if completion_tokens is not None else len(stamps)})


async def run(args):
    rng = random.Random(args.seed)
    # Words are ~1.3 tokens each in common BPE vocabularies.
    prompt_tokens = lognormal_lengths(rng, args.requests, args.prompt_mean, 0.8, 4, args.prompt_max)
    output_tokens = lognormal_lengths(rng, args.requests, args.output_mean, 0.7, 4, args.output_max)
    prompts = [make_prompt(rng, max(1, int(t / 1.3))) for t in prompt_tokens]
    results = []
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(timeout=httpx.Timeout(args.timeout), limits=limits) as client:
        t0 = time.perf_counter()
        if args.rate > 0:
            tasks = []
            for p, m in zip(prompts, output_tokens):
                tasks.append(asyncio.create_task(one_request(client, args, p, m, results)))
                await asyncio.sleep(rng.expovariate(args.rate))
            await asyncio.gather(*tasks)
        else:
            queue = list(zip(prompts, output_tokens))

            async def worker():
                while queue:
                    p, m = queue.pop()
                    await one_request(client, args, p, m, results)

            await asyncio.gather(*(worker() for _ in range(args.concurrency)))
        wall = time.perf_counter() - t0

    ok = [r for r in results if not r["error"] and r["stamps"]]
    ttft = [(r["stamps"][0] - r["start"]) * 1000 for r in ok]
    itl = [(b - a) * 1000 for r in ok for a, b in zip(r["stamps"], r["stamps"][1:])]
    out_tokens = sum(r["tokens"] for r in ok)
    summary = {
        "requests": len(results), "failed": len(results) - len(ok), "wall_s": round(wall, 2),
        "mode": f"rate {args.rate}/s" if args.rate > 0 else f"concurrency {args.concurrency}",
        "request_throughput": round(len(ok) / wall, 3), "output_tok_s": round(out_tokens / wall, 1),
        "ttft_ms": {"p50": round(percentile(ttft, 50), 1), "p99": round(percentile(ttft, 99), 1),
                    "mean": round(statistics.fmean(ttft), 1) if ttft else None},
        "itl_ms": {"p50": round(percentile(itl, 50), 2), "p99": round(percentile(itl, 99), 2),
                   "mean": round(statistics.fmean(itl), 2) if itl else None},
        "mean_prompt_words": round(statistics.fmean(len(p.split()) for p in prompts), 1),
        "mean_output_tokens": round(out_tokens / max(1, len(ok)), 1),
    }
    errors = [r["error"] for r in results if r["error"]]
    if errors:
        summary["first_error"] = errors[0]
    print(json.dumps(summary, indent=2))
    return summary


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--model", default=None, help="model name (default: the first of GET /v1/models)")
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--rate", type=float, default=0, help="Poisson arrivals per second (0: use --concurrency)")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--prompt-mean", type=float, default=220, help="mean prompt tokens (ShareGPT ~ 220)")
    ap.add_argument("--prompt-max", type=int, default=1024)
    ap.add_argument("--output-mean", type=float, default=190, help="mean output tokens (ShareGPT ~ 190)")
    ap.add_argument("--output-max", type=int, default=512)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=600)
    args = ap.parse_args()
    args.url = args.url.rstrip("/")
    args.headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    if args.model is None:
        models = httpx.get(args.url + "/v1/models", headers=args.headers, timeout=30).json()
        args.model = models["data"][0]["id"]
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
