#!/usr/bin/env bash
# tsan.sh: runs two sessions of one artifact concurrently under
# ThreadSanitizer. Builds only the runtime library and the test in
# build-tsan (no compiler: the artifact comes from the normal build's
# `kiln compile`). Called by scripts/test.sh after the main build.
#
#   scripts/tsan.sh [BUILD_DIR]   (default build-tsan; the kiln binary is build/tools/kiln)
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-build-tsan}"
corpus="${KILN_CORPUS_DIR:-$HOME/.cache/kiln/corpus}"
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_TSAN=ON \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build "$dir" -j2 --target concurrent_sessions_test
build/tools/kiln compile "$corpus/ch_ppocr_mobile_v2.0_cls_infer.onnx" -o "$dir/cls.kiln" \
  --dim p2o.DynamicDimension.0=1 --dim p2o.DynamicDimension.1=48 --dim p2o.DynamicDimension.2=192
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" "$dir/tests/concurrent_sessions_test" "$dir/cls.kiln" 2
