#!/usr/bin/env python3
"""Serving benchmark for any OpenAI-compatible server (corvid serve, llama-server, vLLM).

Sends streaming /v1/completions requests, either with Poisson arrivals at --rate
requests/s or with a fixed number of clients (--concurrency), and reports request and
output-token throughput with TTFT (time to first token), ITL (inter-token latency, between
streamed chunks) and TPOT (time per output token after the first, per request)
percentiles. Prompt and output lengths follow ShareGPT-like log-normal distributions
(--prompt-mean/--output-mean tokens, clipped), built from a fixed word list, so a run is
reproducible with --seed and needs no dataset. Output lengths are enforced with
max_tokens and ignore_eos where the server honours it; the token counts reported are the
servers' own (usage), so a server that stops early shows it.

    python3 bench/serve_bench.py --url http://127.0.0.1:8080 --requests 64 --concurrency 8
    python3 bench/serve_bench.py --url http://127.0.0.1:8080 --requests 200 --rate 4

Standard library only (plain HTTP/1.1 over asyncio streams, one connection per request),
so it runs on machines where nothing can be installed.
"""
import argparse
import asyncio
import json
import math
import random
import statistics
import sys
import time
import urllib.parse
import urllib.request

WORDS = ("time person year way day thing man world life hand part child eye woman place work week case point "
         "government company number group problem fact river mountain ocean garden music story history science "
         "language market city country family water light money table window paper school question answer").split()


class HttpError(Exception):
    pass


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


async def post_stream(url, body, headers):
    """POSTs JSON to url and yields the response body's chunks; raises HttpError on a non-200 status."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "http":
        raise HttpError(f"only http:// URLs are supported, got {url}")
    host, port = parts.hostname, parts.port or 80
    reader, writer = await asyncio.open_connection(host, port, limit=1 << 20)
    try:
        payload = json.dumps(body).encode()
        head = [f"POST {parts.path or '/'} HTTP/1.1", f"Host: {host}:{port}", "Content-Type: application/json",
                f"Content-Length: {len(payload)}", "Accept: text/event-stream", "Connection: close"]
        head += [f"{k}: {v}" for k, v in headers.items()]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + payload)
        await writer.drain()
        status_line = await reader.readline()
        fields = status_line.split(None, 2)
        if len(fields) < 2 or not fields[0].startswith(b"HTTP/"):
            raise HttpError(f"bad status line {status_line[:80]!r}")
        status = int(fields[1])
        response_headers = {}
        while True:
            line = await reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            response_headers[name.strip().lower()] = value.strip()

        async def body_chunks():
            if response_headers.get("transfer-encoding", "").lower() == "chunked":
                while True:
                    size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                            pass  # trailers
                        return
                    chunk = await reader.readexactly(size)
                    await reader.readexactly(2)
                    yield chunk
            elif "content-length" in response_headers:
                yield await reader.readexactly(int(response_headers["content-length"]))
            else:
                while chunk := await reader.read(1 << 16):
                    yield chunk

        if status != 200:
            text = b"".join([c async for c in body_chunks()])
            raise HttpError(f"HTTP {status}: {text[:200]!r}")
        async for chunk in body_chunks():
            yield chunk
    finally:
        writer.close()


async def one_request(args, prompt, max_tokens, results):
    body = {"model": args.model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "ignore_eos": True, "stream_options": {"include_usage": True}}
    body.update(args.extra_body)
    start = time.perf_counter()
    stamps, usage, error, done = [], {}, None, False

    async def consume():
        nonlocal usage, done
        pending = b""
        async for chunk in post_stream(args.url + "/v1/completions", body, args.headers):
            now = time.perf_counter()
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                line = line.strip()
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    done = True
                    return
                event = json.loads(data)
                if "error" in event:
                    raise HttpError(f"error event: {str(event['error'])[:200]}")
                if event.get("usage"):
                    usage = event["usage"]
                if event.get("choices") and event["choices"][0].get("text"):
                    stamps.append(now)

    try:
        await asyncio.wait_for(consume(), args.timeout)
        if not done:
            error = "stream ended without data: [DONE]"
    except (OSError, HttpError, ValueError, asyncio.IncompleteReadError, asyncio.TimeoutError) as e:
        error = repr(e)
    except asyncio.CancelledError:
        # Cut off by --time-limit: what it streamed so far still counts towards throughput and latencies.
        results.append({"start": start, "end": time.perf_counter(), "stamps": stamps, "error": None,
                        "cancelled": True, "tokens": len(stamps), "prompt_tokens": None})
        raise
    end = time.perf_counter()
    tokens = usage.get("completion_tokens")
    results.append({"start": start, "end": end, "stamps": stamps, "error": error,
                    "tokens": tokens if tokens is not None else len(stamps),
                    "prompt_tokens": usage.get("prompt_tokens")})


async def drive(args, prompts, output_tokens, rng):
    """Sends every request (Poisson arrivals or fixed concurrency); returns (results, wall seconds).

    With --time-limit, requests still running at the limit are cancelled (their results say
    cancelled) and those not yet sent are dropped; rates are over the limit."""
    results = []
    t0 = time.perf_counter()
    deadline = t0 + args.time_limit if args.time_limit > 0 else math.inf
    if args.rate > 0:
        async def send_all():
            tasks = []
            for p, m in zip(prompts, output_tokens):
                if time.perf_counter() >= deadline:
                    break
                tasks.append(asyncio.create_task(one_request(args, p, m, results)))
                await asyncio.sleep(rng.expovariate(args.rate))
            await asyncio.gather(*tasks)
        job = send_all()
    else:
        queue = list(zip(prompts, output_tokens))
        queue.reverse()  # pop() from the end sends the requests in order

        async def worker():
            while queue and time.perf_counter() < deadline:
                p, m = queue.pop()
                await one_request(args, p, m, results)

        job = asyncio.gather(*(worker() for _ in range(args.concurrency)))
    try:
        await asyncio.wait_for(job, None if deadline == math.inf else max(0.0, deadline - time.perf_counter()))
    except asyncio.TimeoutError:
        pass
    return results, time.perf_counter() - t0


def rounded(values, p, digits):
    return round(percentile(values, p), digits) if values else None


async def run(args):
    rng = random.Random(args.seed)
    prompt_tokens = lognormal_lengths(rng, args.requests, args.prompt_mean, 0.8, 4, args.prompt_max)
    output_tokens = lognormal_lengths(rng, args.requests, args.output_mean, 0.7, 4, args.output_max)
    prompts = [make_prompt(rng, max(1, round(t / args.tokens_per_word))) for t in prompt_tokens]
    if args.warmup > 0:
        # Short requests first so one-time costs (allocation, graph capture, lazy loading) stay out of the numbers.
        warm_rng = random.Random(args.seed + 1)  # its own stream: the measured load stays the same with or without
        warm = [make_prompt(warm_rng, 32) for _ in range(args.warmup)]
        warm_results = []
        try:
            await asyncio.wait_for(asyncio.gather(*(one_request(args, p, 16, warm_results) for p in warm)),
                                   args.warmup_time_limit)
        except asyncio.TimeoutError:
            print(f"warm-up: {len(warm) - len(warm_results)} requests unfinished after {args.warmup_time_limit} s",
                  file=sys.stderr)
        failed = [r["error"] for r in warm_results if r["error"]]
        if failed:
            print(f"warm-up: {len(failed)} of {len(warm)} requests failed, first: {failed[0]}", file=sys.stderr)
    results, wall = await drive(args, prompts, output_tokens, rng)

    cut = [r for r in results if r.get("cancelled")]
    ok = [r for r in results if not r["error"] and r["stamps"] and not r.get("cancelled")]
    failed = [r for r in results if r["error"] or (not r["stamps"] and not r.get("cancelled"))]
    streamed = ok + [r for r in cut if r["stamps"]]  # latency samples: everything that got a token
    ttft = [(r["stamps"][0] - r["start"]) * 1000 for r in streamed]
    itl = [(b - a) * 1000 for r in streamed for a, b in zip(r["stamps"], r["stamps"][1:])]
    tpot = [(r["end"] - r["stamps"][0]) * 1000 / (r["tokens"] - 1) for r in ok if r["tokens"] > 1]
    e2e = [(r["end"] - r["start"]) for r in ok]
    out_tokens = sum(r["tokens"] for r in ok)
    served_prompt_tokens = [r["prompt_tokens"] for r in ok if r["prompt_tokens"] is not None]
    summary = {
        "requests": len(prompts), "completed": len(ok), "failed": len(failed),
        "unfinished": len(prompts) - len(ok) - len(failed), "cut_at_time_limit": len(cut),
        "wall_s": round(wall, 2),
        "mode": f"rate {args.rate}/s" if args.rate > 0 else f"concurrency {args.concurrency}",
        "request_throughput": round(len(ok) / wall, 3), "output_tok_s": round((out_tokens + sum(r["tokens"] for r in cut)) / wall, 1),
        "ttft_ms": {"p50": rounded(ttft, 50, 1), "p99": rounded(ttft, 99, 1),
                    "mean": round(statistics.fmean(ttft), 1) if ttft else None},
        "itl_ms": {"p50": rounded(itl, 50, 2), "p99": rounded(itl, 99, 2),
                   "mean": round(statistics.fmean(itl), 2) if itl else None},
        "tpot_ms": {"p50": rounded(tpot, 50, 2), "p99": rounded(tpot, 99, 2)},
        "e2e_s": {"p50": rounded(e2e, 50, 2), "p99": rounded(e2e, 99, 2)},
        "mean_prompt_tokens": round(statistics.fmean(served_prompt_tokens), 1) if served_prompt_tokens else None,
        "mean_output_tokens": round(out_tokens / max(1, len(ok)), 1),
        "requested_output_tokens": round(statistics.fmean(output_tokens), 1),
    }
    errors = [r["error"] for r in results if r["error"]]
    if errors:
        summary["first_error"] = errors[0]
    print(json.dumps(summary, indent=2))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(summary, f, indent=2)
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
    ap.add_argument("--tokens-per-word", type=float, default=1.0,
                    help="tokens per word of the word list (1.0 for Llama 3's and SmolLM2's vocabularies)")
    ap.add_argument("--warmup", type=int, default=4, help="short requests sent at once before timing (0: none)")
    ap.add_argument("--warmup-time-limit", type=float, default=30, help="seconds the warm-up may take")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=600, help="seconds allowed to one request")
    ap.add_argument("--time-limit", type=float, default=0,
                    help="seconds for the whole run: then in-flight requests are cancelled, the rest not sent, "
                         "and the numbers are over what finished (0: no limit)")
    ap.add_argument("--json-out", default=None, help="also write the summary to this file")
    ap.add_argument("--extra-body", type=json.loads, default={},
                    help="JSON object merged into every request body, e.g. a structured output: "
                         "'{\"structured_outputs\": {\"json\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}}}}'")
    args = ap.parse_args()
    args.url = args.url.rstrip("/")
    args.headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    if args.model is None:
        req = urllib.request.Request(args.url + "/v1/models", headers=args.headers)
        with urllib.request.urlopen(req, timeout=30) as r:
            args.model = json.load(r)["data"][0]["id"]
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
