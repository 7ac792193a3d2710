#!/usr/bin/env bash
# Serving comparison: `corvid serve` and llama.cpp's `llama-server` on the same GGUF file under
# the same load (bench/serve_bench.py: streaming /v1/completions, fixed concurrency, the same
# prompts and output lengths for both), then DIR/summary.md with one table and the exact commands.
#
#   bench/serve_peer.sh --corvid build/corvid --llama-server /opt/llama.cpp/bin/llama-server \
#       --gguf /tmp/llama8b-f16.gguf --device cuda --out /tmp/serve_peer \
#       [--make configs/llama-3.1-8b.json --vocab-from ggml-vocab-llama-bpe.gguf]
#
# Each server is started once with room for the largest concurrency (corvid --max-num-seqs,
# llama-server -np: that many slots, each with prompt-max + output-max tokens of context;
# corvid gets the same KV capacity), waited for on /health, given every concurrency in turn,
# and stopped with SIGTERM before the other starts. Every step has a time limit; a server that
# fails to start is reported with its log tail and the run goes on. summary.md is rewritten
# after every measurement, so an interrupted run still leaves what it measured.
# Needs bash, python3 (standard library; numpy for --make) and the two binaries; no network.
# --budget (default 480 s, from the script's start, --make included) keeps the whole run inside
# one 10-minute device call.
set -u -o pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
corvid="" llama_server="" gguf="" device=cuda out=""
requests=200 concurrencies="32,64" prompt_mean=200 prompt_max=1024 output_mean=128 output_max=512
corvid_port=18080 llama_port=18081 threads="" kv_cache_gb="" start_timeout=240 run_time_limit=100 budget=480
warmup_time_limit=20 make_config="" vocab_from=""
corvid_extra="" llama_extra="" model_name=bench servers="corvid,llama"

usage() {
  cat <<EOF
usage: $0 --corvid BIN --llama-server BIN --gguf FILE --out DIR [options]
  --make CONFIG [--vocab-from GGUF]  write --gguf first (bench/make_random_gguf.py) if it does not exist
  --device cuda|cpu          where both servers run (default $device)
  --requests N               requests per measurement (default $requests)
  --concurrency LIST         comma-separated client counts (default $concurrencies)
  --prompt-mean N --prompt-max N    prompt tokens (default $prompt_mean, max $prompt_max)
  --output-mean N --output-max N    output tokens (default $output_mean, max $output_max)
  --threads N                CPU threads for both servers (default: theirs; cpu: all cores)
  --kv-cache-gb G            corvid's KV cache (default: room for llama-server's context)
  --servers LIST             which to run, in order (default $servers)
  --start-timeout S          seconds a server may take to answer /health (default $start_timeout)
  --run-time-limit S         seconds for one measurement; then what finished counts (default $run_time_limit)
  --budget S                 seconds for this whole script: measurements get shorter limits, or are
                             skipped, so that it ends in time (default $budget; 0: no budget)
  --corvid-args "..."  --llama-args "..."   extra flags for one server
  --corvid-port P  --llama-port P           (defaults $corvid_port, $llama_port)
EOF
  exit 2
}

while [ $# -gt 0 ]; do
  case "$1" in
    --corvid) corvid=$2; shift ;;
    --llama-server) llama_server=$2; shift ;;
    --gguf) gguf=$2; shift ;;
    --make) make_config=$2; shift ;;
    --vocab-from) vocab_from=$2; shift ;;
    --device) device=$2; shift ;;
    --out) out=$2; shift ;;
    --requests) requests=$2; shift ;;
    --concurrency) concurrencies=$2; shift ;;
    --prompt-mean) prompt_mean=$2; shift ;;
    --prompt-max) prompt_max=$2; shift ;;
    --output-mean) output_mean=$2; shift ;;
    --output-max) output_max=$2; shift ;;
    --threads) threads=$2; shift ;;
    --kv-cache-gb) kv_cache_gb=$2; shift ;;
    --servers) servers=$2; shift ;;
    --start-timeout) start_timeout=$2; shift ;;
    --run-time-limit) run_time_limit=$2; shift ;;
    --budget) budget=$2; shift ;;
    --corvid-args) corvid_extra=$2; shift ;;
    --llama-args) llama_extra=$2; shift ;;
    --corvid-port) corvid_port=$2; shift ;;
    --llama-port) llama_port=$2; shift ;;
    -h|--help) usage ;;
    *) echo "unknown option $1" >&2; usage ;;
  esac
  shift
done
if [ -z "$gguf" ] || [ -z "$out" ]; then usage; fi
case "$device" in cuda|cpu) ;; *) echo "--device must be cuda or cpu" >&2; exit 2 ;; esac
mkdir -p "$out"
out=$(cd "$out" && pwd)
: > "$out/commands.txt"
rm -f "$out"/*_c*.json "$out"/*_c*.txt "$out"/*.tokens.json "$out"/*.startup_s "$out/make.txt" "$out/summary.json"
started_at=$(date +%s)

log() { echo "[serve_peer $(( $(date +%s) - started_at ))s] $*" >&2; }

if [ -n "$make_config" ] && [ ! -f "$gguf" ]; then
  make_cmd=(python3 "$here/make_random_gguf.py" "$make_config" "$gguf")
  [ -n "$vocab_from" ] && make_cmd+=(--vocab-from "$vocab_from")
  printf 'model:\n  %s\n' "${make_cmd[*]}" >> "$out/commands.txt"
  log "writing $gguf: ${make_cmd[*]}"
  timeout 300 "${make_cmd[@]}" 2>&1 | tee "$out/make.txt" >&2 || { echo "could not write $gguf" >&2; exit 1; }
fi
[ -f "$gguf" ] || { echo "no such GGUF: $gguf" >&2; exit 2; }

# Largest concurrency: the slots each server gets.
max_conc=$(tr ',' '\n' <<< "$concurrencies" | sort -n | tail -1)
slot_ctx=$(( prompt_max + output_max + 64 ))  # + BOS and the word list's tokenization slack
total_ctx=$(( max_conc * slot_ctx ))
if [ -z "$kv_cache_gb" ]; then
  # Room for as many KV tokens as llama-server's context, plus 10%, at corvid's own bytes per
  # token (`corvid inspect` says; its KV elements may be wider than llama.cpp's F16).
  kv_kib=""
  [ -n "$corvid" ] && kv_kib=$(timeout 60 "$corvid" inspect "$gguf" 2>/dev/null \
                               | sed -n 's/^KV per token: *\([0-9.]*\) KiB.*/\1/p')
  kv_cache_gb=$(python3 - "$here" "$gguf" "$total_ctx" "$kv_kib" <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
from make_random_gguf import read_metadata, scalar_value
tokens, kib = int(sys.argv[3]), sys.argv[4]
if kib:
    per_token = float(kib) * 1024
else:  # F16 K and V from the GGUF's shape
    meta = read_metadata(sys.argv[2])
    def get(key):
        for k, v in meta.items():
            if k.endswith(key):
                return scalar_value(v)
        raise SystemExit(f"no {key} in the GGUF")
    heads = get(".attention.head_count")
    per_token = 2 * get(".block_count") * get(".attention.head_count_kv") * (get(".embedding_length") // heads) * 2
print(f"{max(0.25, per_token * tokens * 1.1 / 2**30):.2f}")
EOF
) || { echo "could not size the KV cache from $gguf; pass --kv-cache-gb" >&2; exit 2; }
fi
if [ "$device" = cpu ] && [ -z "$threads" ]; then threads=$(nproc); fi

# 0 when url answers 200 within 5 s.
http_ok() {
  python3 -c 'import sys, urllib.request
try:
    sys.exit(0 if urllib.request.urlopen(sys.argv[1], timeout=5).status == 200 else 1)
except Exception:
    sys.exit(1)' "$1"
}

server_pid="" start_limit=$start_timeout
# start_server NAME PORT LOG CMD...: starts it in the background, waits for /health; 0 when ready.
start_server() {
  local name=$1 port=$2 logfile=$3; shift 3
  if http_ok "http://127.0.0.1:$port/health"; then
    log "port $port already answers /health: something else is running there"; return 1
  fi
  printf '%s:\n  %s\n' "$name" "$*" >> "$out/commands.txt"
  log "starting $name: $*"
  "$@" > "$logfile" 2>&1 &
  server_pid=$!
  local t0 waited=0
  t0=$(date +%s)
  while ! http_ok "http://127.0.0.1:$port/health"; do
    if ! kill -0 "$server_pid" 2>/dev/null; then
      wait "$server_pid"; log "$name exited (status $?) before it was ready; log tail:"
      tail -n 30 "$logfile" >&2; server_pid=""; return 1
    fi
    if [ "$waited" -ge "$start_limit" ]; then
      log "$name not ready after ${start_limit}s; log tail:"; tail -n 30 "$logfile" >&2
      stop_server "$name"; return 1
    fi
    sleep 1; waited=$(( $(date +%s) - t0 ))
  done
  waited=$(( $(date +%s) - t0 ))
  log "$name ready after ${waited}s"
  echo "$waited" > "$out/$name.startup_s"
  # The same text through both servers' /tokenize: summary.md says whether the ids agree.
  python3 -c 'import json, sys, urllib.request
text = "Serving check: the quick brown fox, 3.14159, héllo wörld, 日本語 🦙 — time person year way."
req = urllib.request.Request(sys.argv[1], json.dumps({"content": text}).encode(), {"Content-Type": "application/json"})
print(json.dumps(json.load(urllib.request.urlopen(req, timeout=20))["tokens"]))' \
    "http://127.0.0.1:$port/tokenize" > "$out/$name.tokens.json" 2>/dev/null || rm -f "$out/$name.tokens.json"
}

stop_server() {
  local name=$1
  [ -n "$server_pid" ] || return 0
  kill -TERM "$server_pid" 2>/dev/null
  local waited=0
  while kill -0 "$server_pid" 2>/dev/null && [ "$waited" -lt 30 ]; do sleep 1; waited=$(( waited + 1 )); done
  if kill -0 "$server_pid" 2>/dev/null; then
    log "$name still running 30s after SIGTERM: SIGKILL"; kill -KILL "$server_pid" 2>/dev/null
  fi
  wait "$server_pid" 2>/dev/null
  log "$name stopped (exit status $?)"
  server_pid=""
}
trap 'stop_server "interrupted server"; exit 130' INT TERM

write_summary() {
  python3 - "$out" "$device" "$requests" "$prompt_mean" "$prompt_max" "$output_mean" "$output_max" <<'EOF'
import glob, json, os, sys
out, device, requests, pm, pmax, om, omax = sys.argv[1:]
rows = []
for path in sorted(glob.glob(os.path.join(out, "*_c*.json"))):
    name = os.path.basename(path)[:-5]
    server, conc = name.rsplit("_c", 1)
    try:
        s = json.load(open(path))
    except ValueError:
        continue
    rows.append((0 if server == "corvid" else 1, int(conc), server, s))
rows.sort(key=lambda r: (r[1], r[0]))
def num(v, digits=1):
    return "n/a" if v is None or v != v else f"{v:.{digits}f}"
lines = [f"# corvid serve vs llama-server: {device}", "",
         f"Load: {requests} streaming /v1/completions requests per row, fixed concurrency, greedy, ignore_eos; "
         f"prompt tokens log-normal mean {pm} (max {pmax}), output tokens log-normal mean {om} (max {omax}); "
         "the same prompts and lengths for both servers (bench/serve_bench.py, seed 0).", "",
         "| server | concurrency | req/s | output tok/s | TTFT p50 ms | TTFT p99 ms | ITL p50 ms | ITL p99 ms "
         "| TPOT p50 ms | prompt / output tok | completed | errors |",
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
for _, conc, server, s in rows:
    if "skipped" in s:
        lines.append(f"| {server} | {conc} | — | — | — | — | — | — | — | — | 0/{requests} | {s['skipped']} |")
        continue
    errors = str(s["failed"]) + (f" ({s['unfinished']} unfinished at the time limit)" if s.get("unfinished") else "")
    lines.append(f"| {server} | {conc} | {num(s['request_throughput'], 2)} | {num(s['output_tok_s'])} "
                 f"| {num(s['ttft_ms']['p50'])} | {num(s['ttft_ms']['p99'])} | {num(s['itl_ms']['p50'], 2)} "
                 f"| {num(s['itl_ms']['p99'], 2)} | {num(s['tpot_ms']['p50'], 2)} "
                 f"| {num(s['mean_prompt_tokens'])} / {num(s['mean_output_tokens'])} "
                 f"| {s['completed']}/{s['requests']} | {errors} |")
first_errors = [(server, conc, s["first_error"]) for _, conc, server, s in rows if s.get("first_error")]
if first_errors:
    lines += ["", "First error of each row that had one:", ""]
    lines += [f"- {server} c={conc}: `{e[:300]}`" for server, conc, e in first_errors]
ids = {}
for name in ("corvid", "llama"):
    try:
        ids[name] = json.load(open(os.path.join(out, name + ".tokens.json")))
    except (OSError, ValueError):
        pass
if len(ids) == 2:
    same = ids["corvid"] == ids["llama"]
    lines.append(f"\nTokenization check (the same text through both servers' /tokenize): "
                 + (f"identical ids ({len(ids['corvid'])} tokens)." if same else
                    f"DIFFERENT ids: corvid {ids['corvid']}, llama-server {ids['llama']}."))
for name in ("corvid", "llama"):
    p = os.path.join(out, name + ".startup_s")
    if os.path.exists(p):
        lines.append(f"\n{name} answered /health {open(p).read().strip()} s after start.")
lines += ["", "TTFT: request sent to first streamed text; ITL: between streamed text chunks; TPOT: per request, "
          "(end - first token) / (output tokens - 1). Token counts are the servers' own (usage).", "",
          "## Environment", "", "```", open(os.path.join(out, "environment.txt")).read().rstrip(), "```", "",
          "## Commands", "", "```", open(os.path.join(out, "commands.txt")).read().rstrip(), "```", ""]
open(os.path.join(out, "summary.md"), "w").write("\n".join(lines))
json.dump([dict(server=server, concurrency=conc, **s) for _, conc, server, s in rows],
          open(os.path.join(out, "summary.json"), "w"), indent=1)
EOF
}

elapsed() { echo $(( $(date +%s) - started_at )); }

# Seconds the next measurement may take: an equal share of what the budget leaves to the
# measurements not yet run, after the server starts still to come (45 s each) and a warm-up
# and stop allowance for each measurement.
next_time_limit() {
  if [ "$budget" -le 0 ]; then echo "$run_time_limit"; return; fi
  local left=$(( budget - $(elapsed) - 45 * starts_left ))
  local share=$(( left / runs_left - warmup_time_limit - 5 ))
  if [ "$share" -lt "$run_time_limit" ]; then echo "$share"; else echo "$run_time_limit"; fi
}

# bench NAME PORT: every concurrency against the server on PORT.
bench() {
  local name=$1 port=$2 conc limit
  for conc in ${concurrencies//,/ }; do
    limit=$(next_time_limit)
    runs_left=$(( runs_left - 1 ))
    if [ "$limit" -lt 10 ]; then
      log "$name c=$conc: skipped, the time budget is spent"
      printf '{"skipped": "the --budget of %ss was spent"}\n' "$budget" > "$out/${name}_c$conc.json"
      write_summary; continue
    fi
    local cmd=(python3 "$here/serve_bench.py" --url "http://127.0.0.1:$port" --model "$model_name"
               --requests "$requests" --concurrency "$conc" --prompt-mean "$prompt_mean" --prompt-max "$prompt_max"
               --output-mean "$output_mean" --output-max "$output_max" --warmup "$conc"
               --warmup-time-limit "$warmup_time_limit" --time-limit "$limit" --json-out "$out/${name}_c$conc.json")
    printf '  %s\n' "${cmd[*]}" >> "$out/commands.txt"
    log "$name, concurrency $conc (time limit ${limit}s)"
    # The outer limit only catches a hung client: serve_bench stops itself at its limits.
    timeout -k 5 $(( limit + warmup_time_limit + 30 )) "${cmd[@]}" > "$out/${name}_c$conc.txt" 2>&1
    local rc=$?
    if [ $rc -ne 0 ]; then
      log "$name c=$conc: serve_bench failed (status $rc):"; tail -n 20 "$out/${name}_c$conc.txt" >&2
      printf '{"skipped": "serve_bench failed with status %s"}\n' "$rc" > "$out/${name}_c$conc.json"
    fi
    write_summary
  done
}

skip_all() {  # skip_all NAME REASON: a row per concurrency saying why there are no numbers.
  local conc
  for conc in ${concurrencies//,/ }; do
    printf '{"skipped": "%s"}\n' "$2" > "$out/$1_c$conc.json"; runs_left=$(( runs_left - 1 ))
  done
  write_summary
}

# start_within_budget NAME PORT LOG CMD...: start_server unless the budget cannot cover a start and a run.
start_within_budget() {
  starts_left=$(( starts_left - 1 ))
  if [ "$budget" -gt 0 ] && [ $(( budget - $(elapsed) )) -lt $(( 45 * starts_left + 60 )) ]; then
    log "$1 not started: the --budget of ${budget}s is spent"; return 1
  fi
  start_limit=$start_timeout
  if [ "$budget" -gt 0 ]; then  # leave this server's measurements at least 20 s each
    local room=$(( budget - $(elapsed) - 45 * starts_left - (20 + warmup_time_limit) * n_conc ))
    [ "$room" -lt "$start_limit" ] && start_limit=$(( room > 30 ? room : 30 ))
  fi
  start_server "$@"
}

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(hostname), $(nproc) cores"
  command -v nvidia-smi > /dev/null && timeout 20 nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  echo "gguf: $gguf ($(du -h "$gguf" | cut -f1))"
  [ -f "$out/make.txt" ] && cat "$out/make.txt"
  [ -n "$corvid" ] && echo "corvid: $(timeout 20 "$corvid" --version 2>&1 | head -1)"
  [ -n "$llama_server" ] && echo "llama-server: $(timeout 20 "$llama_server" --version 2>&1 | grep -m1 version)"
  echo "slots: $max_conc x $slot_ctx tokens of context = $total_ctx; corvid KV cache ${kv_cache_gb} GiB"
} > "$out/environment.txt" 2>&1
cat "$out/environment.txt" >&2

# measure_server NAME PORT WHAT CMD...: starts the server (log NAME.log), runs every
# concurrency against it and stops it — or, when it does not come up in the budget,
# writes the rows that say so.
measure_server() {
  local name=$1 port=$2 what=$3
  shift 3
  if start_within_budget "$name" "$port" "$out/$name.log" "$@"; then
    bench "$name" "$port"; stop_server "$name"
  else
    skip_all "$name" "$what did not start (or the budget was spent): see $name.log"
  fi
}

# Measurements and server starts still to come, for the time budget.
n_conc=$(tr ',' '\n' <<< "$concurrencies" | grep -c .)
starts_left=0
for server in ${servers//,/ }; do
  { [ "$server" = corvid ] && [ -n "$corvid" ]; } || { [ "$server" = llama ] && [ -n "$llama_server" ]; } \
    && starts_left=$(( starts_left + 1 ))
done
runs_left=$(( starts_left * n_conc ))

for server in ${servers//,/ }; do
  case "$server" in
    corvid)
      [ -n "$corvid" ] || { log "no --corvid: skipped"; continue; }
      cmd=("$corvid" serve -m "$gguf" --device "$device" --host 127.0.0.1 --port "$corvid_port"
           --served-model-name "$model_name" --max-num-seqs "$max_conc" --max-num-batched-tokens 2048
           --max-model-len "$slot_ctx" --kv-cache-gb "$kv_cache_gb")
      [ -n "$threads" ] && cmd+=(--threads "$threads")
      # shellcheck disable=SC2206  # extra flags split on spaces on purpose
      cmd+=($corvid_extra)
      measure_server corvid "$corvid_port" "corvid serve" "${cmd[@]}" ;;
    llama)
      [ -n "$llama_server" ] || { log "no --llama-server: skipped"; continue; }
      # -b 2048 / -ub 512 are llama-server's defaults, spelled out: 2048 tokens a step like corvid's budget.
      cmd=("$llama_server" -m "$gguf" --host 127.0.0.1 --port "$llama_port" -a "$model_name"
           -fa on -np "$max_conc" -c "$total_ctx" -cb -b 2048 -ub 512 --no-webui)
      if [ "$device" = cuda ]; then cmd+=(-ngl 99); else cmd+=(--device none); fi
      [ -n "$threads" ] && cmd+=(-t "$threads")
      # shellcheck disable=SC2206
      cmd+=($llama_extra)
      measure_server llama "$llama_port" llama-server "${cmd[@]}" ;;
    *) log "unknown server $server (corvid or llama)" ;;
  esac
done
write_summary
log "done: $out/summary.md"
cat "$out/summary.md"
