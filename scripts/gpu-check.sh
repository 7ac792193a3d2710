#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: builds corvid with CUDA (or uses a build given by
# CORVID_BUILD_DIR), runs the CUDA tests (ops vs CPU, model vs oracle and CPU), runs
# a quick benchmark on the GPU and prints a summary.
#
#   scripts/gpu-check.sh                      # build in build-cuda, test, bench
#   CORVID_BUILD_DIR=/path/to/build scripts/gpu-check.sh   # carried build: skip building
#   CORVID_SMOLLM2_GGUF=/path/model.gguf ...  # model for the SmolLM2 parity test and the bench
#   CORVID_LOG_DIR=dir ...                    # where logs go (default: the build dir)
#   CORVID_DUMMY_DTYPES="BF16 Q4_0" ...       # Llama-3.1-8B-shape decode benches (dummy weights);
#                                             # default BF16 Q8_0 Q4_0 Q4_K, "" skips them
#   CORVID_LIB_DIR=dir ...                    # shared libraries the binaries need (default .device/lib if present)
#   CORVID_PEER_LLAMA_BENCH=path/llama-bench  # also run bench/peer_bench.sh: llama.cpp and corvid on the same
#   CORVID_PEER_VOCAB=ggml-vocab-llama-bpe.gguf   random GGUF files (written to CORVID_PEER_DIR, /tmp/peer-gguf)
# Where python3 can import torch, the ceilings (bench/ceilings.py: copy bandwidth, bf16 GEMM
# rate) and the PyTorch decode peer (bench/torch_decode_baseline.py) run in the same call.
#
# Built on the Debian dev machine and run on the Ubuntu GPU machine, the binaries need
# Debian's ICU 72 (and PCRE2, and the audio libraries: libsndfile and its codecs, libsamplerate) there. `scripts/gpu-check.sh stage [build-dir] [dest]` copies
# the binaries to dest/bin and those libraries (found with ldd) to dest/lib (dest: .device,
# git-ignored); then run
#   CORVID_BUILD_DIR=.device/bin scripts/gpu-check.sh     (carrying .device)
# The device tool sends the checkout its session started in: from another worktree, stage
# into that checkout's ignored folder and pass CORVID_LIB_DIR=$PWD/<dest>/lib.
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = stage ]; then
  from=${2:-build-cuda}
  dest=${3:-.device}
  mkdir -p "$dest/bin" "$dest/lib"
  for b in corvid corvid_tests corvid_gemv_bench corvid_attention_bench; do
    [ -x "$from/$b" ] && cp "$from/$b" "$dest/bin/"
  done
  # Every ICU, PCRE2 and audio library the binaries link, with its versioned names.
  ldd "$from/corvid_tests" "$from/corvid" |
    grep -oE '/[^ ]*lib(icu[a-z0-9]*|pcre2-8|sndfile|samplerate|FLAC|vorbis|vorbisenc|opus|ogg|mpg123|mp3lame)\.so[^ ]*' | sort -u |
    while read -r lib; do cp -L "$lib" "$dest/lib/"; done
  ls "$dest/bin" "$dest/lib"
  exit 0
fi

BUILD=${CORVID_BUILD_DIR:-build-cuda}
LOGS=${CORVID_LOG_DIR:-$BUILD}
MODEL=${CORVID_SMOLLM2_GGUF:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
DUMMY_DTYPES=${CORVID_DUMMY_DTYPES-BF16 Q8_0 Q4_0 Q4_K}
LIB_DIR=${CORVID_LIB_DIR:-}
[ -z "$LIB_DIR" ] && [ -d .device/lib ] && LIB_DIR=$PWD/.device/lib
[ -n "$LIB_DIR" ] && export LD_LIBRARY_PATH="$LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
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

if [ -x "$BUILD/corvid_gemv_bench" ]; then
  echo "== decode GEMV kernels at the Llama-3.1-8B shapes"
  timeout 300 "$BUILD/corvid_gemv_bench" 2>&1 | tee "$LOGS/gemv_bench.log"
fi
if [ -x "$BUILD/corvid_attention_bench" ]; then
  echo "== prefill attention at the Llama-3.1-8B shape"
  timeout 300 "$BUILD/corvid_attention_bench" 2>&1 | tee "$LOGS/attention_bench.log"
fi
for dt in $DUMMY_DTYPES; do
  echo "== Llama-3.1-8B shape, dummy $dt weights, batch-1 decode and 2048-token prefill"
  timeout 300 "$BUILD/corvid" bench -m configs/llama-3.1-8b.json --dummy-weights "$dt" --device cuda -p 0 -n 128 -r 3 \
    2>&1 | tee "$LOGS/bench_8b_$dt.log"
  # CORVID_OP_TIMES: the prompt's GPU time per op (matmul, attention, norms ...) goes to the log.
  CORVID_OP_TIMES=1 timeout 300 "$BUILD/corvid" bench -m configs/llama-3.1-8b.json --dummy-weights "$dt" --device cuda \
    -p 2048 -n 0 -r 2 2>&1 | tee -a "$LOGS/bench_8b_$dt.log"
done

if python3 -c "import torch" 2>/dev/null; then
  echo "== ceilings and the PyTorch decode peer (Llama-3.1-8B shape, bf16, CUDA graphs)"
  timeout 120 python3 bench/ceilings.py 2>&1 | tee "$LOGS/ceilings.log"
  timeout 300 python3 bench/torch_decode_baseline.py --config configs/llama-3.1-8b.json --context 128 4096 \
    --repeats 1 2>&1 | tee "$LOGS/torch_peer.log"
fi
if [ -n "${CORVID_PEER_LLAMA_BENCH:-}" ]; then
  echo "== llama.cpp and corvid on the same GGUF files"
  bench/peer_bench.sh --corvid "$BUILD/corvid" --llama-bench "$CORVID_PEER_LLAMA_BENCH" \
    ${CORVID_PEER_VOCAB:+--vocab-from "$CORVID_PEER_VOCAB"} --dir "${CORVID_PEER_DIR:-/tmp/peer-gguf}" \
    2>&1 | tee "$LOGS/peer_bench.log"
fi

serve_line=""
if [ -f "$MODEL" ]; then
  echo "== serve on the GPU (one chat completion, then SIGTERM)"
  "$BUILD/corvid" serve -m "$MODEL" --device cuda --port 18123 > "$LOGS/serve_gpu.log" 2>&1 &
  serve_pid=$!
  for _ in $(seq 1 60); do curl -sf http://127.0.0.1:18123/health >/dev/null 2>&1 && break; sleep 1; done
  reply=$(curl -s http://127.0.0.1:18123/v1/chat/completions -H 'Content-Type: application/json' \
    -d '{"messages": [{"role": "user", "content": "What is the capital of France?"}], "max_tokens": 16, "temperature": 0}')
  kill -TERM "$serve_pid" 2>/dev/null; wait "$serve_pid"; serve_rc=$?
  echo "$reply"
  serve_line="serve (GPU): $(echo "$reply" | grep -o '"content":"[^"]*"' | head -1), exit $serve_rc after SIGTERM"
fi

echo
echo "================ summary ================"
grep -h -E "^cuda (parity|smollm2)" "$LOGS/cuda_tests.log" || true
grep -h -E "^\[  (PASSED|FAILED|SKIPPED) " "$LOGS/cuda_tests.log" || true
[ -n "$bench_line" ] && echo "$bench_line"
[ -n "$serve_line" ] && echo "$serve_line"
[ -f "$LOGS/gemv_bench.log" ] && grep -E "^copy|per token" "$LOGS/gemv_bench.log"
[ -f "$LOGS/attention_bench.log" ] && grep -E "^flash .*BF16" "$LOGS/attention_bench.log"
for dt in $DUMMY_DTYPES; do
  [ -f "$LOGS/bench_8b_$dt.log" ] && echo "8B $dt: $(grep -hE "^tg|^pp|rror" "$LOGS/bench_8b_$dt.log" | tr '\n' ' ')"
  [ -f "$LOGS/bench_8b_$dt.log" ] &&
    echo "   pp2048 by op: $(grep -hE "^(matmul|attention|silu_mul|add_rms_norm|rope_store_kv) " "$LOGS/bench_8b_$dt.log" |
      awk '{printf "%s %s ", $1, $NF}')"
done
[ -f "$LOGS/ceilings.log" ] && grep -hE "^(copy|bf16 GEMM)" "$LOGS/ceilings.log"
[ -f "$LOGS/torch_peer.log" ] && grep -hE "^torch-graph" "$LOGS/torch_peer.log"
[ -f "$LOGS/peer_bench.log" ] && grep -hE "^==|^\| llama|^(tg|pp)" "$LOGS/peer_bench.log"
echo "CUDA tests exit code: $tests_rc"
exit "$tests_rc"
