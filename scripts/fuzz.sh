#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan), replays the
# checked-in regression inputs (every crash found so far), then runs each
# fuzzer for FUZZ_SECONDS (default 60) on a seed corpus: the ONNX node-test
# models for the importer, tests/lit/ir/*.kir for the IR parser,
# tests/lit/kernel/*.kir for the Kernel IR parser and the checked-in .kiln
# files under fuzz/regressions/artifact_loader for the artifact loader. Exit
# status is non-zero on any crash.
#   scripts/fuzz.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-fuzz}
seconds=${FUZZ_SECONDS:-60}
cc=$(command -v clang-19 || command -v clang)
cxx=$(command -v clang++-19 || command -v clang++)
export CCACHE_BASEDIR="$PWD"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
  -DKILN_BUILD_FUZZERS=ON -DKILN_SANITIZE=ON -DKILN_BUILD_TESTS=OFF >/dev/null
ninja -C "$build" -j2 onnx_import_fuzzer ir_parser_fuzzer kernel_ir_parser_fuzzer artifact_loader_fuzzer

seeds="$build/fuzz-seeds"
if [ ! -d "$seeds/onnx_import" ]; then
  mkdir -p "$seeds/onnx_import" "$seeds/ir_parser"
  for m in /usr/share/libonnx-testdata/data/node/*/model.onnx; do
    cp "$m" "$seeds/onnx_import/$(basename "$(dirname "$m")").onnx"
  done
fi
cp tests/lit/ir/*.kir "$seeds/ir_parser/"
mkdir -p "$seeds/kernel_ir_parser"
cp tests/lit/kernel/*.kir "$seeds/kernel_ir_parser/"
mkdir -p "$seeds/artifact_loader"
cp fuzz/regressions/artifact_loader/* "$seeds/artifact_loader/"

# fuzz NAME: replay regressions, then explore for $seconds.
fuzz() {
  local name=$1 bin="$build/fuzz/${1}_fuzzer"
  echo "== $name: regression inputs"
  "$bin" -runs=0 fuzz/regressions/"$name"/* 2>&1 | grep -E "Running:|Executed|ERROR" | tail -n 2
  echo "== $name: fuzzing for ${seconds}s"
  mkdir -p "$build/fuzz-work/$name"
  "$bin" -max_total_time="$seconds" -rss_limit_mb=4096 -timeout=20 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$build/$name-" \
    "$build/fuzz-work/$name" "$seeds/$name" >"$build/$name.log" 2>&1 ||
    { tail -n 40 "$build/$name.log"; echo "fuzz: $name found a crash (see above)"; return 1; }
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$build/$name.log"
}
fuzz onnx_import
fuzz ir_parser
fuzz kernel_ir_parser
fuzz artifact_loader
echo "fuzz: no crashes"
