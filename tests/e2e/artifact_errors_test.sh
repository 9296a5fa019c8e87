#!/usr/bin/env bash
# Bad artifacts get clear errors and a non-zero exit from `kiln run`, never a
# crash: truncated, bit-flipped, wrong format version, not an artifact, and
# wrong input shapes.   artifact_errors_test.sh KILN
set -uo pipefail
kiln="$1"
corpus="${KILN_CORPUS_DIR:-$HOME/.cache/kiln/corpus}"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
"$kiln" compile "$corpus/ch_ppocr_mobile_v2.0_cls_infer.onnx" -o "$dir/m.kiln" || exit 1
failures=0
expect() { # expect NAME PATTERN FILE [ARGS...]
  local name="$1" pattern="$2" file="$3"; shift 3
  out="$("$kiln" run "$file" "$@" 2>&1)"; rc=$?
  if [ $rc -ne 1 ] || ! grep -q -- "$pattern" <<<"$out"; then
    echo "FAIL $name: rc=$rc, output: $out"; failures=$((failures + 1))
  else
    echo "ok   $name: $(tail -1 <<<"$out")"
  fi
}
size=$(stat -c %s "$dir/m.kiln")
head -c $((size / 2)) "$dir/m.kiln" > "$dir/truncated.kiln"
expect truncated "truncated" "$dir/truncated.kiln"
cp "$dir/m.kiln" "$dir/flipped.kiln"
printf '\xff' | dd of="$dir/flipped.kiln" bs=1 seek=$((size - 100)) conv=notrunc status=none
expect bit-flip "checksum mismatch" "$dir/flipped.kiln"
cp "$dir/m.kiln" "$dir/version.kiln"
printf '\x07' | dd of="$dir/version.kiln" bs=1 seek=8 conv=notrunc status=none
expect version "format version 7" "$dir/version.kiln"
head -c 100 /dev/urandom > "$dir/random.kiln"
printf 'KILNART\0' | dd of="$dir/random.kiln" bs=1 conv=notrunc status=none
expect garbage "format version\|truncated\|header" "$dir/random.kiln"
exit $failures
