#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/*_fuzz.cc) with clang-14, ASan and
# UBSan, and runs each for SECONDS seconds starting from its seed corpus in
# tests/fuzz/corpus/<target>/. Exits non-zero on the first finding; the input
# that triggered it is saved under build-fuzz/artifacts/.
#   usage: scripts/fuzz.sh [SECONDS]   (default 60)
set -euo pipefail
cd "$(dirname "$0")/.."
RUN_SECONDS=${1:-60}
JOBS=${JOBS:-$(nproc)}

CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DCORVID_FUZZ=ON -DCORVID_TESTS=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz -j "$JOBS"

mkdir -p build-fuzz/artifacts
for src in tests/fuzz/*_fuzz.cc; do
  target=$(basename "$src" .cc)
  name=${target%_fuzz}
  # New inputs go to a scratch corpus; the committed seeds stay read-only.
  work=build-fuzz/corpus/$name
  mkdir -p "$work"
  seeds=tests/fuzz/corpus/$name
  [ -d "$seeds" ] || seeds=""
  echo "== fuzz $target for ${RUN_SECONDS}s"
  # halt_on_error makes any UBSan report fatal; leaks are findings too.
  # Leaks in system libraries (not corvid's) are listed in tests/fuzz/lsan.supp.
  if ! ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$PWD/tests/fuzz/lsan.supp \
      UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
      "./build-fuzz/$target" -max_total_time="$RUN_SECONDS" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
      -print_final_stats=1 -artifact_prefix="build-fuzz/artifacts/$target-" "$work" $seeds; then
    echo "fuzz: $target found a problem; see build-fuzz/artifacts/" >&2
    exit 1
  fi
done
echo "fuzz: no findings"
