#!/usr/bin/env bash
# corvid against llama.cpp on the same random-weight GGUF files (Llama-3.1-8B shape by
# default), batch 1: decode at short context and after 4096 tokens, prefill at 512 and
# 2048 tokens. The way the issue-4 peer tables in docs/benchmarks.md were made.
#
#   bench/peer_bench.sh --corvid build-cuda/corvid --llama-bench path/to/llama-bench \
#       --vocab-from path/to/ggml-vocab-llama-bpe.gguf [--types "Q4_0 Q4_K Q8_0 F16"] \
#       [--config configs/llama-3.1-8b.json] [--dir /tmp/g] [--device cuda|cpu]
#
# Each file is written by bench/make_random_gguf.py (every matrix in the one type, norms
# F32, the vocabulary of --vocab-from) and read by both engines, llama.cpp first. Either
# side may be left out (--corvid "" or --llama-bench ""), so the two can run in separate
# calls on one machine as long as --dir still holds the files. Files stay in --dir.
# llama-bench: -ngl 99 -fa 1 (all layers on the GPU, flash attention); --device cpu runs
# both engines on the CPU instead (llama-bench -ngl 0).
set -u -o pipefail

corvid="" llama="" vocab="" types="Q4_0 Q4_K Q8_0 F16" config="" dir=/tmp/peer-gguf device=cuda
while [ $# -gt 0 ]; do
  case "$1" in
    --corvid) corvid=$2; shift 2 ;;
    --llama-bench) llama=$2; shift 2 ;;
    --vocab-from) vocab=$2; shift 2 ;;
    --types) types=$2; shift 2 ;;
    --config) config=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
config=${config:-$here/../configs/llama-3.1-8b.json}
if [ -z "$corvid" ] && [ -z "$llama" ]; then
  echo "usage: $0 [--corvid BIN] [--llama-bench BIN] [--vocab-from GGUF] [--types T...] [--config FILE] [--dir DIR]" \
    "[--device cuda|cpu]" >&2
  exit 2
fi
case "$device" in
  cuda) ngl=99 ;;
  cpu) ngl=0 ;;
  *) echo "--device must be cuda or cpu" >&2; exit 2 ;;
esac
mkdir -p "$dir"
for t in $types; do
  f=$dir/$t.gguf
  if [ ! -f "$f" ]; then
    python3 "$here/make_random_gguf.py" "$config" "$f" --type "$t" ${vocab:+--vocab-from "$vocab"} >/dev/null ||
      { echo "$t: could not write $f"; continue; }
  fi
  if [ -n "$llama" ]; then
    echo "== llama.cpp $t"
    timeout 300 "$llama" -m "$f" -ngl "$ngl" -fa 1 -p 512,2048 -n 128 -r 2 -o md 2>&1 | grep -E "^\| llama"
    timeout 300 "$llama" -m "$f" -ngl "$ngl" -fa 1 -p 0 -n 128 -d 4096 -r 1 -o md 2>&1 | grep -E "^\| llama"
  fi
  if [ -n "$corvid" ]; then
    echo "== corvid $t"
    for args in "-p 0 -n 128 -r 2" "-p 0 -n 64 -d 4096 -r 1" "-p 512 -n 0 -r 2" "-p 2048 -n 0 -r 2"; do
      # shellcheck disable=SC2086  # the arguments are words
      timeout 300 "$corvid" bench -m "$f" --device "$device" $args 2>&1 | grep -E "^(tg|pp)|rror"
    done
  fi
done
