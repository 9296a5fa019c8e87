#!/usr/bin/env bash
# Configures and builds kiln (Release with debug info) into build/, with at
# most 2 parallel jobs, ccache and lld when present.
#   scripts/build.sh [extra cmake args...]
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_BASEDIR="$PWD"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
ninja -C build -j"${KILN_JOBS:-2}"
