#!/usr/bin/env bash
# The README's second command, and what CI runs: builds kiln, fuzzes the ONNX
# importer and the IR parser for FUZZ_SECONDS each (default 60) under ASan +
# UBSan, then runs the whole CTest suite (unit tests, ONNX conformance, the
# corpus models against ONNX Runtime, IR round trips, CLI errors). CTest's
# summary is the last line. scripts/tsan.sh runs two concurrent sessions of
# one artifact under ThreadSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh # idempotent: a second run takes about a second
scripts/build.sh
scripts/fuzz.sh build-fuzz
scripts/tsan.sh build-tsan # two concurrent sessions under ThreadSanitizer
cd build && ctest --output-on-failure -j2
