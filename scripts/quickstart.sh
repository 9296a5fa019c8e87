#!/usr/bin/env bash
# The README's first command: installs every dependency (Debian packages, the
# ONNX Runtime bridge, the npm model corpus, the PyTorch-generated corpus),
# builds kiln, and runs it on the
# bundled default model (silero VAD v5, 512 samples of random audio at 16 kHz).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
corpus=${KILN_CORPUS_DIR:-$HOME/.cache/kiln/corpus}
build/tools/kiln run "$corpus/silero_vad_v5.onnx" --dim input_1=512 \
  --input sr=examples/silero/sr_16000.npy --seed 1
