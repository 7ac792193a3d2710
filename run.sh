#!/usr/bin/env bash
# From a fresh machine to a running corvid: set up, build, fetch the default
# model (SmolLM2-135M-Instruct, Q4_1 GGUF) and serve it (OpenAI-compatible API on
# http://127.0.0.1:8080; the server prints a sample curl). Extra flags go to `corvid serve`.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh
bash scripts/fetch-model.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCORVID_TESTS=OFF -DCORVID_CUDA_PTX_ONLY=OFF >/dev/null
cmake --build build -j "$(nproc)" --target corvid
exec ./build/corvid serve -m models/SmolLM2-135M-Instruct.Q4_1.gguf "$@"
