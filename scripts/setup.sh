#!/usr/bin/env bash
# Installs what corvid needs to build and test. Safe to run twice: it only
# installs what is missing.
set -euo pipefail

APT_PACKAGES=(build-essential cmake ninja-build pkg-config git unzip ca-certificates
  nlohmann-json3-dev libpcre2-dev libicu-dev libcli11-dev libgtest-dev libgmock-dev
  clang-14 libclang-rt-14-dev libboost-dev python3 python3-pip
  chromium chromium-driver)  # the web chat page's browser test (tests/py/test_web_chat.py)
PIP_PACKAGES=(numpy tokenizers==0.22.1 pytest gguf openai anthropic==2.16.0 selenium==4.43.0)

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
if ! $PY -c "import numpy, tokenizers, pytest, gguf, openai, anthropic, selenium" 2>/dev/null; then
  echo "setup: installing Python test tools: ${PIP_PACKAGES[*]}"
  $PY -m pip install -q "${PIP_PACKAGES[@]}" 2>/dev/null ||
    $PY -m pip install -q --break-system-packages "${PIP_PACKAGES[@]}"
fi
echo "setup: ok"
