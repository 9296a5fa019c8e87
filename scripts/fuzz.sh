#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for
# FUZZ_SECONDS (default 60) on a seed corpus; then replays the checked-in
# regression inputs. Exit status is non-zero on any crash.
#   scripts/fuzz.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-fuzz}
seconds=${FUZZ_SECONDS:-60}
cc=$(command -v clang-19 || command -v clang)
cxx=$(command -v clang++-19 || command -v clang++)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
  -DKILN_BUILD_FUZZERS=ON -DKILN_SANITIZE=ON -DKILN_BUILD_TESTS=OFF >/dev/null
ninja -C "$build" -j2 onnx_import_fuzzer

seeds="$build/fuzz-seeds/onnx"
if [ ! -d "$seeds" ]; then
  mkdir -p "$seeds"
  for m in /usr/share/libonnx-testdata/data/node/*/model.onnx; do
    cp "$m" "$seeds/$(basename "$(dirname "$m")").onnx"
  done
fi
# Regression inputs: every crash found so far, replayed first.
"$build/fuzz/onnx_import_fuzzer" -runs=0 fuzz/regressions/onnx_import/* 2>&1 | tail -n 2
work="$build/fuzz-work/onnx"
mkdir -p "$work"
"$build/fuzz/onnx_import_fuzzer" -max_total_time="$seconds" -rss_limit_mb=4096 -timeout=20 \
  -max_len=65536 -print_final_stats=1 -artifact_prefix="$build/" "$work" "$seeds" 2>&1 | tail -n 12
