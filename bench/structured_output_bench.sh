#!/usr/bin/env bash
# What structured output costs per token: the same serving load with and without a
# JSON schema held to every request, at 1 and 64 concurrent streams, on one server.
# The model is a real shape with random weights (the masks' cost depends on the
# vocabulary and the format, not on the weights); the tokenizer gives the vocabulary.
#
#   bench/structured_output_bench.sh OUT_DIR CORVID_BIN SERVE_ARGS...
#   e.g. bench/structured_output_bench.sh /tmp/so-gpu build-cuda/corvid -m configs/llama-3.1-8b.json \
#        --dummy-weights BF16 --tokenizer ../shared/tokenizers/llama3_1
#        bench/structured_output_bench.sh /tmp/so-cpu build/corvid -m models/SmolLM2-135M-Instruct.Q4_1.gguf -t 2
#
# Writes OUT_DIR/{free,held}-c{1,64}.json (bench/serve_bench.py summaries) and prints a table.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?output folder}
BIN=${2:?corvid binary}
shift 2
PORT=${PORT:-8093}
REQUESTS_64=${REQUESTS_64:-192}
mkdir -p "$OUT"
# JSON that cannot end within the bench's output lengths (with ignore_eos a complete format
# ends the request): an array of at least 200 strings, compact.
SCHEMA='{"structured_outputs": {"json": {"type": "array", "items": {"type": "string"}, "minItems": 200}}}'

"$BIN" serve "$@" --port "$PORT" --max-num-seqs 64 --max-num-batched-tokens 4096 > "$OUT/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null' EXIT
for _ in $(seq 1 120); do
  grep -q "listening on" "$OUT/server.log" && break
  sleep 1
done
grep -q "listening on" "$OUT/server.log" || { cat "$OUT/server.log"; exit 1; }

run() {  # name concurrency requests [extra body]
  python3 bench/serve_bench.py --url "http://127.0.0.1:$PORT" --concurrency "$2" --requests "$3" \
    --prompt-mean 128 --prompt-max 256 --output-mean 128 --output-max 256 --warmup 4 \
    --json-out "$OUT/$1.json" --extra-body "${4:-{\}}" > "$OUT/$1.txt" 2>&1 || { cat "$OUT/$1.txt"; exit 1; }
}
# The same prompts each time: a first, unrecorded pass fills the prefix cache so that
# both recorded passes find it alike.
for c in 1 64; do
  n=$([ "$c" = 1 ] && echo 8 || echo "$REQUESTS_64")
  run "warm-c$c" "$c" "$n"
  run "held-c$c" "$c" "$n" "$SCHEMA"
  run "free-c$c" "$c" "$n"
done

python3 - "$OUT" <<'EOF'
import json, sys
out = sys.argv[1]
print(f"{'streams':>7} {'format':>6} {'out tok/s':>10} {'mean out':>9} {'TPOT p50 ms':>12} {'ITL p50 ms':>11} {'ITL p99 ms':>11}")
for c in (1, 64):
    base = None
    for kind in ("free", "held"):
        s = json.load(open(f"{out}/{kind}-c{c}.json"))
        tpot = s["tpot_ms"]["p50"] or float("nan")
        extra = "" if base is None else f"  (+{tpot - base:.3f} ms/token, {100 * (tpot - base) / base:+.1f}%)"
        extra += f"  failed {s['failed']}: {s.get('first_error', '')[:200]}" if s["failed"] else ""
        base = tpot if base is None else base
        print(f"{c:>7} {kind:>6} {s['output_tok_s']:>10.0f} {s['mean_output_tokens']:>9} {tpot:>12.3f} {s['itl_ms']['p50']:>11.3f} "
              f"{s['itl_ms']['p99']:>11.3f}{extra}")
EOF
