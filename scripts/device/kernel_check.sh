#!/usr/bin/env bash
# Runs on the device machine (its CPU has AVX-512 and VNNI): the microkernel
# unit tests on every ISA that CPU runs, then the GEMM (f32 and u8s8) and
# conv benchmarks against oneDNN at 1 and 2 threads. Pack first with
# scripts/device/pack_kernel_check.sh, then call the device tool with
# carry [".devcarry"] and the command `scripts/device/kernel_check.sh`.
set -uo pipefail
cd "$(dirname "$0")/../.."
work=/tmp/kernel_check && rm -rf $work && mkdir -p $work
tar -C $work -xJf .devcarry/kernel_check.tar.xz
export LD_LIBRARY_PATH=$work/lib
out=${OUT:-/tmp}
grep -m1 'model name' /proc/cpuinfo; nproc
grep -o -w 'avx512[a-z_0-9]*\|avx_vnni\|amx[a-z_0-9]*' /proc/cpuinfo | sort -u | tr '\n' ' '; echo
$work/kiln_kernel_tests --gtest_brief=1 2>&1 | tee $out/kernel_tests.log | tail -15
$work/gemm_bench --sizes 256,1024 --threads 1,2 --only int8 2>&1 | tee $out/gemm_int8.log
$work/gemm_bench --sizes 256,1024 --threads 1,2 --only f32 2>&1 | tee $out/gemm_f32.log
$work/conv_bench --threads 1 2>&1 | tee $out/conv.log | tail -40
# The depthwise layers on the AVX2 kernels as well: which kernel wins on an
# AVX-512 CPU, per shape (conv.cpp's convKernelsFor picks per ISA).
$work/conv_bench --threads 1 --isa avx2 --filter dw 2>&1 | tee $out/conv_dw_avx2.log
