#!/usr/bin/env bash
# The README's second command, and what CI runs: builds kiln, runs the whole
# CTest suite (unit tests, ONNX conformance, corpus models against ONNX
# Runtime, CLI errors), then fuzzes the ONNX importer for FUZZ_SECONDS
# (default 60) under ASan + UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh  # idempotent: a second run takes about a second
scripts/build.sh
(cd build && ctest --output-on-failure -j2)
scripts/fuzz.sh build-fuzz
