#!/usr/bin/env bash
# Whisper on the GPU machine (issue 24), in one call per phase; binaries staged with
# `scripts/gpu-check.sh stage` into .device and carried. Writes logs and summary.txt
# to $OUT (default /tmp/whisper-gpu).
#   bench/whisper_gpu.sh tests   # CUDA tests: ops, the tiny random Whisper vs transformers, every *Cuda* test
#   bench/whisper_gpu.sh bench   # corvid bench on Whisper shapes (random weights) and transformers' peer
#   bench/whisper_gpu.sh real    # real tiny.en (models/whisper-tiny.en): GPU vs CPU tokens, transcribe times
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/whisper-gpu}
mkdir -p "$OUT"
B=${CORVID_BUILD_DIR:-.device/bin}
export LD_LIBRARY_PATH=$PWD/.device/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CORVID_TEST_SOURCE_DIR=$PWD
S=$OUT/summary.txt
TOK=models/whisper-tok  # a Whisper folder's tokenizer files only (config.json, tokenizer.json, vocabulary.txt)

case "${1:-}" in
  tests)
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee -a "$S"
    "$B/corvid_tests" --gtest_filter='*CudaWhisper*:CudaOps.Im2col*' 2>&1 | tee "$OUT/whisper_tests.log" | grep -E "whisper|OK|FAILED|PASSED" | tee -a "$S"
    # CORVID_CUDA_FILTER: narrower when tests/fixtures cannot travel (the tree's 64-MiB limit).
    timeout 420 "$B/corvid_tests" --gtest_filter="${CORVID_CUDA_FILTER:-*Cuda*}" > "$OUT/cuda_tests.log" 2>&1
    echo "${CORVID_CUDA_FILTER:-*Cuda*} tests: rc=$?; $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/cuda_tests.log" | tr '\n' ' ')" | tee -a "$S"
    grep -E "^\[  FAILED  \]" "$OUT/cuda_tests.log" | tee -a "$S"
    ;;
  bench)
    for shape in tiny base small medium large-v3 large-v3-turbo; do
      for beams in 1 5; do
        echo "== corvid $shape beams $beams" >> "$S"
        "$B/corvid" bench -m "$TOK" --dummy-shape "$shape" --device cuda -n 64 -r 3 --beams "$beams" 2>&1 | grep -E "encode|decode|rtf" | tee -a "$S"
      done
    done
    echo "== corvid large-v3 windows 8" >> "$S"
    "$B/corvid" bench -m "$TOK" --dummy-shape large-v3 --device cuda -n 16 -r 2 --windows 8 2>&1 | grep -E "encode" | tee -a "$S"
    if python3 -c "import torch, transformers" 2>/dev/null; then
      python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" | tee -a "$S"
      for shape in tiny large-v3 large-v3-turbo; do
        for dt in float16 float32; do
          timeout 200 python3 bench/whisper_torch_peer.py --shape "$shape" --dtype "$dt" --beams 1 5 --steps 32 2>&1 | grep torch | tee -a "$S"
        done
      done
    fi
    ;;
  real)
    W=models/whisper-tiny.en
    if [ -f "$W/model.bin.part-a" ]; then cat "$W/model.bin.part-a" "$W/model.bin.part-b" > "$W/model.bin"; fi
    sha256sum "$W/model.bin" | tee -a "$S"
    "$B/corvid_tests" --gtest_filter='CudaWhisper.Real*' 2>&1 | tee "$OUT/real_tests.log" | grep -E "tiny.en|OK|FAILED|PASSED" | tee -a "$S"
    for args in "--beam-size 1 --no-timestamps" "--beam-size 1" "--beam-size 5"; do
      for dev in cuda cpu; do
        echo "== transcribe long.opus $dev $args" >> "$S"
        # shellcheck disable=SC2086
        "$B/corvid" transcribe tests/data/speech/long.opus -m "$W" --device $dev $args > "$OUT/long_${dev}_${args// /_}.txt" 2> "$OUT/err.txt"
        grep "real time" "$OUT/err.txt" | tee -a "$S"
      done
    done
    "$B/corvid" bench -m "$W" --device cuda -n 64 -r 3 2>&1 | grep -E "encode|decode|rtf" | tee -a "$S"
    ;;
  *) echo "usage: bench/whisper_gpu.sh tests|bench|real" >&2; exit 2 ;;
esac
