#!/usr/bin/env bash
# From a fresh machine to a running corvid: set up, build, fetch the default
# model (SmolLM2-135M-Instruct, Q4_1 GGUF) and start an interactive chat on it.
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/setup.sh
bash scripts/fetch-model.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCORVID_TESTS=OFF >/dev/null
cmake --build build -j "$(nproc)" --target corvid
exec ./build/corvid chat -m models/SmolLM2-135M-Instruct.Q4_1.gguf "$@"
