#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: builds corvid with CUDA (or uses a build given by
# CORVID_BUILD_DIR), runs the CUDA tests (ops vs CPU, model vs oracle and CPU), runs
# a quick benchmark on the GPU and prints a summary.
#
#   scripts/gpu-check.sh                      # build in build-cuda, test, bench
#   CORVID_BUILD_DIR=/path/to/build scripts/gpu-check.sh   # carried build: skip building
#   CORVID_SMOLLM2_GGUF=/path/model.gguf ...  # model for the SmolLM2 parity test and the bench
#   CORVID_LOG_DIR=dir ...                    # where logs go (default: the build dir)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${CORVID_BUILD_DIR:-build-cuda}
LOGS=${CORVID_LOG_DIR:-$BUILD}
MODEL=${CORVID_SMOLLM2_GGUF:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
export CORVID_TEST_SOURCE_DIR=${CORVID_TEST_SOURCE_DIR:-$PWD}
mkdir -p "$LOGS"

if [ -z "${CORVID_BUILD_DIR:-}" ]; then
  echo "== build (CUDA)"
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCORVID_CUDA=ON >/dev/null || exit 1
  cmake --build "$BUILD" -j "$(nproc)" || exit 1
fi

echo "== GPU"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader || true

echo "== CUDA tests"
if [ -f "$MODEL" ]; then
  case "$MODEL" in /*) ;; *) MODEL="$PWD/$MODEL" ;; esac
  export CORVID_SMOLLM2_GGUF="$MODEL"
fi
"$BUILD/corvid_tests" --gtest_filter="${CORVID_TEST_FILTER:-*Cuda*}" 2>&1 | tee "$LOGS/cuda_tests.log"
tests_rc=${PIPESTATUS[0]}

bench_line=""
if [ -f "$MODEL" ]; then
  echo "== bench (GPU)"
  "$BUILD/corvid" bench -m "$MODEL" --device cuda -p 512 -n 128 -r 5 2>&1 | tee "$LOGS/bench_cuda.log"
  echo "== bench (CPU, for scale)"
  "$BUILD/corvid" bench -m "$MODEL" --device cpu -p 128 -n 32 -r 1 2>&1 | tee "$LOGS/bench_cpu.log"
  echo "== generate (GPU, greedy)"
  "$BUILD/corvid" generate -m "$MODEL" --device cuda -p "What is the capital of France?" -n 32 2>&1 | tee "$LOGS/generate.log"
  bench_line=$(grep -h -E "^(model|pp|tg)" "$LOGS/bench_cuda.log" "$LOGS/bench_cpu.log")
else
  echo "== bench skipped: no model at $MODEL"
fi

echo
echo "================ summary ================"
grep -h -E "^cuda (parity|smollm2)" "$LOGS/cuda_tests.log" || true
grep -h -E "^\[  (PASSED|FAILED|SKIPPED) " "$LOGS/cuda_tests.log" || true
[ -n "$bench_line" ] && echo "$bench_line"
echo "CUDA tests exit code: $tests_rc"
exit "$tests_rc"
