#!/usr/bin/env bash
# The runtime stays small (issue 10): libkiln_runtime.so under 1 MB once
# stripped, and it needs nothing beyond the C/C++ runtime, libm and pthreads
# (glibc 2.34+ has pthreads in libc itself).
#   runtime_size_test.sh PATH/TO/libkiln_runtime.so
set -euo pipefail
lib="$1"
limit=$((1024 * 1024))
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
strip -o "$tmp" "$lib"
size=$(stat -c %s "$tmp")
echo "libkiln_runtime.so stripped: $size bytes (limit $limit)"
[ "$size" -lt "$limit" ] || { echo "FAIL: the runtime is over 1 MB stripped" >&2; exit 1; }
allowed='^(libstdc\+\+\.so\.6|libm\.so\.6|libgcc_s\.so\.1|libc\.so\.6|libpthread\.so\.0|libdl\.so\.2|ld-linux-x86-64\.so\.2)$'
while read -r needed; do
  if ! [[ "$needed" =~ $allowed ]]; then
    echo "FAIL: the runtime needs $needed" >&2
    exit 1
  fi
done < <(readelf -d "$lib" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p')
echo "dependencies: $(readelf -d "$lib" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')"
