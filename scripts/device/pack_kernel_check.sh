#!/usr/bin/env bash
# Packs what scripts/device/kernel_check.sh runs on another machine (the GPU
# machine's CPU has AVX-512 and VNNI; CI machines may not): the microkernel
# unit tests and the GEMM and conv benchmarks, with the shared libraries they
# need that are not glibc, into .devcarry/ (ignored by git; name it in the
# device tool's `carry`). Usage: scripts/device/pack_kernel_check.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx '/.devcarry/' .git/info/exclude 2>/dev/null || echo '/.devcarry/' >>.git/info/exclude
ninja -C build -j${JOBS:-2} kiln_kernel_tests
[ -f build-bench/build.ninja ] || cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_BENCH=ON
ninja -C build-bench -j${JOBS:-2} gemm_bench conv_bench
rm -rf .devcarry && mkdir -p .devcarry/stage/lib
cp build/tests/kiln_kernel_tests build-bench/bench/gemm/gemm_bench build-bench/bench/conv/conv_bench .devcarry/stage/
strip .devcarry/stage/kiln_kernel_tests .devcarry/stage/gemm_bench .devcarry/stage/conv_bench
for bin in .devcarry/stage/*_bench; do
  ldd "$bin" | awk '/=>/ {print $3}' | grep -v -E '/(libc|libm|libdl|libpthread|librt)\.so' |
    while read -r lib; do cp -Ln "$lib" .devcarry/stage/lib/; done
done
tar -C .devcarry/stage -cJf .devcarry/kernel_check.tar.xz .
rm -rf .devcarry/stage
ls -la .devcarry
