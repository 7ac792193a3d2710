#!/usr/bin/env bash
# Installs what corvid needs to build and test. Safe to run twice: it only
# installs what is missing.
set -euo pipefail

APT_PACKAGES=(build-essential cmake ninja-build pkg-config git unzip curl ca-certificates
  nlohmann-json3-dev libpcre2-dev libicu-dev libcli11-dev libgtest-dev libgmock-dev
  clang-14 libclang-rt-14-dev libboost-dev python3 python3-pip
  libsndfile1-dev libsamplerate0-dev libeigen3-dev zlib1g-dev)
PIP_PACKAGES=(numpy tokenizers==0.22.1 pytest gguf openai anthropic==2.16.0 jsonschema)
PY_MODULES="numpy, tokenizers, pytest, gguf, openai, anthropic, jsonschema"
# --tests (test.sh): also the web chat page's browser test (tests/py/test_web_chat.py),
# which a machine that only serves does not need.
if [ "${1:-}" = --tests ]; then
  APT_PACKAGES+=(chromium chromium-driver)
  PIP_PACKAGES+=(selenium==4.43.0)
  PY_MODULES+=", selenium"
fi

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup: installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

PY=${PYTHON:-python3}
if ! $PY -c "import $PY_MODULES" 2>/dev/null; then
  echo "setup: installing Python test tools: ${PIP_PACKAGES[*]}"
  $PY -m pip install -q "${PIP_PACKAGES[@]}" 2>/dev/null ||
    $PY -m pip install -q --break-system-packages "${PIP_PACKAGES[@]}"
fi
bash "$(dirname "$0")/build-xgrammar.sh"
echo "setup: ok"
