#!/usr/bin/env bash
# A/B runs of `corvid bench` on dummy Llama-3.1-8B-shape weights, all in one device call, so that
# the lease-to-lease drift of a GPU (2-3% on the H200s seen so far, docs/benchmarks.md) never sits
# between the two sides of a comparison. Each line of the runs file is
#
#   DTYPE | bench arguments | VAR=value ... (an environment switch, or BIN=old for the other build)
#
# for example
#
#   Q4_0 | -p 0 -n 128 -r 2 | CORVID_NO_FUSED_ROPE=1
#   Q4_0 | -p 0 -n 128 -r 2 |
#   Q4_0 | -p 0 -n 128 -r 2 -d 4096 | BIN=old
#
# and prints one line per run: the run, then corvid's tg/pp line (or its error).
#
#   bench/ab_decode.sh --corvid build-cuda/corvid [--old path/to/older/corvid] [--config FILE] RUNS_FILE
#
# Put the two sides of a comparison next to each other, and repeat the baseline around the
# change: a run's stdev is ~0.5 tok/s, the spread between neighbouring runs a little more.
# Every run has a time limit (120 s), so a hang costs one line, not the call.
set -u -o pipefail

corvid="" old="" config=""
while [ $# -gt 1 ]; do
  case "$1" in
    --corvid) corvid=$2; shift 2 ;;
    --old) old=$2; shift 2 ;;
    --config) config=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
runs=${1:-}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
config=${config:-$here/../configs/llama-3.1-8b.json}
if [ -z "$corvid" ] || [ -z "$runs" ] || [ ! -f "$runs" ]; then
  echo "usage: $0 --corvid BIN [--old BIN] [--config FILE] RUNS_FILE" >&2
  exit 2
fi

while IFS='|' read -r dtype args envs; do
  dtype=$(echo "$dtype" | xargs)
  case "$dtype" in "" | \#*) continue ;; esac
  bin=$corvid
  vars=()
  for v in $envs; do
    if [ "$v" = BIN=old ]; then
      [ -n "$old" ] || { echo "$dtype [$(echo "$args" | xargs)] {$(echo "$envs" | xargs)}: no --old binary given"; continue 2; }
      bin=$old
    else
      vars+=("$v")
    fi
  done
  # shellcheck disable=SC2086  # args is a list of bench arguments
  result=$(env "${vars[@]}" timeout 120 "$bin" bench -m "$config" --dummy-weights "$dtype" --device cuda $args 2>&1 |
    grep -E "^(tg|pp)|rror" | tr '\n' ' ')
  echo "$dtype [$(echo "$args" | xargs)] {$(echo "$envs" | xargs)}: ${result:-no result}"
done < "$runs"
