#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/*_fuzz.cc) with clang-14, ASan and
# UBSan, and runs each for SECONDS seconds starting from its seed corpus in
# tests/fuzz/corpus/<target>/, JOBS targets at a time. Exits non-zero if any target
# finds a problem; the input that triggered it is saved under BUILD_DIR/artifacts/.
#   usage: scripts/fuzz.sh [SECONDS] [BUILD_DIR]   (defaults: 60, build-fuzz)
# test.sh passes its ASan build (configured with CORVID_FUZZ=ON, -O0) so that one
# sanitizer build serves the unit tests and the fuzzers.
set -euo pipefail
cd "$(dirname "$0")/.."
RUN_SECONDS=${1:-60}
BUILD=${2:-build-fuzz}
JOBS=${JOBS:-$(nproc)}

if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  CC=clang-14 CXX=clang++-14 cmake -S . -B "$BUILD" -G Ninja -DCORVID_FUZZ=ON -DCORVID_TESTS=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$BUILD" -j "$JOBS" --target corvid_fuzz_targets

mkdir -p "$BUILD/artifacts" "$BUILD/fuzz-logs"
run_one() {
  local target=$1 name=${1%_fuzz}
  # New inputs go to a scratch corpus; the committed seeds stay read-only.
  local work=$BUILD/corpus/$name seeds=tests/fuzz/corpus/$name
  mkdir -p "$work"
  [ -d "$seeds" ] || seeds=""
  # halt_on_error makes any UBSan report fatal; leaks are findings too.
  # Leaks in system libraries (not corvid's) are listed in tests/fuzz/lsan.supp.
  ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$PWD/tests/fuzz/lsan.supp \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "./$BUILD/$target" -max_total_time="$RUN_SECONDS" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$BUILD/artifacts/$target-" "$work" $seeds \
    >"$BUILD/fuzz-logs/$target.log" 2>&1
}

failed=()
pids=() names=()
for src in tests/fuzz/*_fuzz.cc; do
  target=$(basename "$src" .cc)
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do sleep 1; done
  echo "== fuzz $target for ${RUN_SECONDS}s"
  run_one "$target" &
  pids+=($!) names+=("$target")
done
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then
    failed+=("${names[$i]}")
    tail -n 60 "$BUILD/fuzz-logs/${names[$i]}.log" >&2
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: ${failed[*]} found a problem; see $BUILD/artifacts/ and $BUILD/fuzz-logs/" >&2
  exit 1
fi
echo "fuzz: no findings"
