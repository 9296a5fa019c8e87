#!/bin/bash
# Issue 12 on the GPU machine: kiln's Vulkan target on NVIDIA's driver.
# Run through the device tool from the repository root, carrying .gl (the
# Vulkan loader, see ../shared/notes/h200-vulkan.md) and .devpack (kiln and
# the shared libraries it links, packed by scripts/device/pack_kiln.sh:
# the machine cannot build kiln, it has no LLVM 19):
#
#   scripts/device/vulkan_gpu.sh [corpus]
#
# Exports ResNet-50, MobileNetV2 and BERT-base there (gpu_models.py, which
# also times PyTorch eager on CUDA), then for each: kiln verify --target
# vulkan (against kiln's interpreter) and kiln bench on the Vulkan target
# and the CPU target. Prints a table last; logs under $OUT.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
KD=$PWD/.devpack/kiln
if [ ! -x "$KD/kiln" ]; then
  mkdir -p "$KD" && tar -C "$KD" -xJf .devpack/kilnpack.tar.xz || exit 1
fi
kiln() { LD_LIBRARY_PATH=$KD "$KD/kiln" "$@"; }
kiln --help >/dev/null 2>&1 || { echo "kiln does not start here:"; LD_LIBRARY_PATH=$KD ldd "$KD/kiln" | grep "not found"; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader

M=/tmp/gpu_models
if [ ! -f $M/bert_base.onnx ]; then
  python3 scripts/device/gpu_models.py $M > "$OUT/torch.jsonl" 2> "$OUT/export.log" || { tail -20 "$OUT/export.log"; exit 1; }
fi
cat "$OUT/torch.jsonl"
for m in resnet50 mobilenet_v2 bert_base; do
  echo "== $m"
  timeout 150 kiln verify $M/$m.onnx --target vulkan > "$OUT/verify_$m.txt" 2>&1
  tail -3 "$OUT/verify_$m.txt"
  timeout 150 kiln bench $M/$m.onnx --target vulkan --runs 20 --warmup 3 --json 2>&1 | tail -1 | tee -a "$OUT/bench.jsonl"
  timeout 60 kiln bench $M/$m.onnx --target cpu --runs 20 --warmup 3 --json 2>&1 | tail -1 | tee -a "$OUT/bench.jsonl"
done
