#!/bin/bash
# Packs build/tools/kiln (stripped) and the shared libraries it links,
# except the C library's, into .devpack/kilnpack.tar.xz (xz: the GPU machine may lack zstd) for the GPU
# machine, which has no LLVM 19 to build kiln with (vulkan_gpu.sh unpacks
# it there). About 50 MB; the device tool carries at most 64 MiB a call.
set -eu
cd "$(dirname "$0")/../.."
P=$(mktemp -d)
cp build/tools/kiln "$P/" && strip "$P/kiln"
for lib in $(ldd build/tools/kiln | awk '$3 ~ /^\// {print $3}' | grep -vE 'libc\.so|libm\.so|libgcc_s|libstdc\+\+'); do
  cp -L "$lib" "$P/"
done
grep -qx '/.devpack/' .git/info/exclude 2>/dev/null || echo '/.devpack/' >>.git/info/exclude
mkdir -p .devpack
tar -C "$P" -cf - . | xz -9e -T2 > .devpack/kilnpack.tar.xz
rm -rf "$P" .devpack/kiln
# The cpu target links its kernels with ld.lld (it needs libLLVM, packed).
cp -L "$(command -v ld.lld-19 || command -v ld.lld)" .devpack/ld.lld && strip .devpack/ld.lld
ls -la .devpack/kilnpack.tar.xz
