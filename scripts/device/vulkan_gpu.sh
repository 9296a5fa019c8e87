#!/bin/bash
# Issue 12 on the GPU machine: kiln's Vulkan target on NVIDIA's driver.
# Run through the device tool from the repository root, carrying .gl (the
# Vulkan loader, see ../shared/notes/h200-vulkan.md) and .devpack (kiln and
# the shared libraries it links, packed by scripts/device/pack_kiln.sh:
# the machine cannot build kiln, it has no LLVM 19):
#
#   scripts/device/vulkan_gpu.sh [probe] [conformance]   (MODELS="resnet50 ..." to pick)
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
KD=/tmp/kilnbin
if [ ! -x "$KD/kiln" ]; then
  mkdir -p "$KD" && tar -C "$KD" -xJf .devpack/kilnpack.tar.xz || exit 1
fi
[ -x .devpack/ld.lld ] && cp .devpack/ld.lld "$KD/" # the cpu target links its kernels with it
kiln="env LD_LIBRARY_PATH=$KD PATH=$KD:$PATH $KD/kiln" # a command timeout can run
$kiln --help >/dev/null 2>&1 || { echo "kiln does not start here:"; LD_LIBRARY_PATH=$KD ldd "$KD/kiln" | grep "not found"; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader

if [[ " $* " == *" probe "* ]] && [ -f .devpack/onnxdata.tar.xz ]; then
  python3 scripts/device/vulkan_probe.py env LD_LIBRARY_PATH=$KD PATH=$KD:$PATH $KD/kiln
  mkdir -p /tmp/onnxdata && tar -C /tmp/onnxdata -xJf .devpack/onnxdata.tar.xz
  mkdir -p /tmp/pools && for t in node/test_averagepool_2d_pads pytorch-converted/test_MaxPool2d node/test_sce_NCd1d2d3d4d5_none_no_weight; do
    ln -sfn /tmp/onnxdata/data/$t /tmp/pools/$(basename $t); done
  KILN_VULKAN_TRACE=1 $kiln conformance /tmp/pools --target vulkan 2>&1 | tail -12
  [ -n "${PROBE_ONLY:-}" ] && exit 0
fi

# The ONNX node tests through the Vulkan target on this driver (the data
# travels as .devpack/onnxdata.tar.xz, from Debian's libonnx-testdata).
if [[ " $* " == *" conformance "* ]] && [ -f .devpack/onnxdata.tar.xz ]; then
  mkdir -p /tmp/onnxdata && tar -C /tmp/onnxdata -xJf .devpack/onnxdata.tar.xz
  D=/tmp/onnxdata/data
  timeout ${CONF_TIMEOUT:-400} $kiln conformance $D/node $D/pytorch-converted $D/pytorch-operator $D/simple --target vulkan \
    --expected tests/conformance/expected_interp.txt --expected tests/conformance/expected_vulkan.txt \
    > "$OUT/conformance.txt" 2>&1
  echo "conformance exit $?"; grep -E "^FAIL|^XPASS|passed" "$OUT/conformance.txt" | tail -40
fi

[ -n "${SKIP_MODELS:-}" ] && exit 0
M=/tmp/gpu_models
[ -n "${REEXPORT:-}" ] && rm -rf $M
if [ ! -f $M/bert_base.onnx ]; then
  mkdir -p $M && python3 scripts/device/gpu_models.py $M > $M/torch.jsonl 2> "$OUT/export.log" || { tail -20 "$OUT/export.log"; exit 1; }
  grep "output std" "$OUT/export.log"
fi
cp $M/torch.jsonl "$OUT/" && cat $M/torch.jsonl
for m in ${MODELS:-resnet50 mobilenet_v2 bert_base}; do
  echo "== $m"
  timeout 150 $kiln verify $M/$m.onnx --target vulkan > "$OUT/verify_$m.txt" 2>&1
  tail -3 "$OUT/verify_$m.txt"
  timeout 150 $kiln bench $M/$m.onnx --target vulkan --runs 20 --warmup 3 --json 2>&1 | tail -1 | tee -a "$OUT/bench.jsonl"
  timeout 60 $kiln bench $M/$m.onnx --target cpu --threads 16 --runs 20 --warmup 3 --json 2>&1 | tail -1 | tee -a "$OUT/bench.jsonl"
  # Where the device's time goes: each dispatch timed (vulkan_batch.cpp).
  KILN_VULKAN_PROFILE=1 timeout 100 $kiln bench $M/$m.onnx --target vulkan --runs 5 --warmup 1 > "$OUT/profile_$m.txt" 2>&1
  grep -A12 "kiln vulkan profile" "$OUT/profile_$m.txt"
done
