#!/usr/bin/env bash
# Bad CLI input gets a message naming what is wrong and a non-zero exit,
# never a crash: missing files, corrupt models, unknown input names, .npy
# files of the wrong dtype or shape, bad flags.
#   tests/e2e/cli_errors_test.sh KILN_BINARY
set -u
kiln=${1:?usage: cli_errors_test.sh KILN_BINARY}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

# expect_error DESCRIPTION EXPECTED_TEXT COMMAND...
expect_error() {
  local what=$1 text=$2
  shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ $rc -eq 0 ]; then
    echo "FAIL $what: exit 0"; failures=$((failures + 1)); return
  fi
  if [ $rc -ge 128 ]; then
    echo "FAIL $what: crashed (exit $rc)"; failures=$((failures + 1)); return
  fi
  if ! grep -qF -- "$text" "$tmp/err"; then
    echo "FAIL $what: stderr lacks '$text':"; cat "$tmp/err"; failures=$((failures + 1)); return
  fi
  echo "ok   $what"
}

# A tiny model: y = Relu(x), x: f32[2,3].
/usr/bin/python3 - "$tmp" <<'PY'
import sys, numpy as np, onnx
from onnx import helper, TensorProto
d = sys.argv[1]
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
onnx.save(m, f"{d}/relu.onnx")
np.save(f"{d}/good.npy", np.ones((2, 3), np.float32))
np.save(f"{d}/wrong_shape.npy", np.ones((3, 2), np.float32))
np.save(f"{d}/wrong_dtype.npy", np.ones((2, 3), np.int32))
open(f"{d}/truncated.npy", "wb").write(open(f"{d}/good.npy", "rb").read()[:-4])
b = open(f"{d}/relu.onnx", "rb").read()
open(f"{d}/truncated.onnx", "wb").write(b[: len(b) // 2])
open(f"{d}/garbage.onnx", "wb").write(bytes(range(256)) * 4)
PY

"$kiln" run "$tmp/relu.onnx" --input x="$tmp/good.npy" >/dev/null || { echo "FAIL good run"; failures=$((failures + 1)); }
expect_error "missing model file" "no_such.onnx: cannot open file" "$kiln" run "$tmp/no_such.onnx"
expect_error "truncated model" "truncated.onnx" "$kiln" run "$tmp/truncated.onnx"
expect_error "garbage model" "garbage.onnx" "$kiln" inspect "$tmp/garbage.onnx"
expect_error "unknown input name" "no input named 'nope'" "$kiln" run "$tmp/relu.onnx" --input nope="$tmp/good.npy"
expect_error "wrong shape" "input 'x' expects shape [2,3]" "$kiln" run "$tmp/relu.onnx" --input x="$tmp/wrong_shape.npy"
expect_error "wrong dtype" "input 'x' expects dtype f32, got i32" "$kiln" run "$tmp/relu.onnx" --input x="$tmp/wrong_dtype.npy"
expect_error "truncated npy" "truncated.npy: truncated data" "$kiln" run "$tmp/relu.onnx" --input x="$tmp/truncated.npy"
expect_error "missing npy" "missing.npy: cannot open file" "$kiln" run "$tmp/relu.onnx" --input x="$tmp/missing.npy"
expect_error "unknown flag" "unknown flag --bogus" "$kiln" run "$tmp/relu.onnx" --bogus
expect_error "bad --dim" "--dim N: 'abc' is not a non-negative integer" "$kiln" run "$tmp/relu.onnx" --dim N=abc
expect_error "unknown target" "unknown target 'gpu9'" "$kiln" run "$tmp/relu.onnx" --target gpu9
expect_error "unknown command" "unknown command 'frobnicate'" "$kiln" frobnicate
expect_error "missing kir" "nothing.kir: cannot open file" "$kiln" opt "$tmp/nothing.kir"
# Bit-flipped and truncated copies of real models: an error or a model, never
# a crash (the fuzzers go much further; this keeps the CLI path honest).
/usr/bin/python3 - "$tmp" <<'PY'
import random, sys
d = sys.argv[1]
rng = random.Random(42)
srcs = ["/usr/share/libonnx-testdata/data/node/test_lstm_with_peepholes/model.onnx",
        "/usr/share/libonnx-testdata/data/node/test_if_seq/model.onnx",
        f"{d}/relu.onnx"]
k = 0
for src in srcs:
    data = open(src, "rb").read()
    for _ in range(40):
        b = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        if rng.random() < 0.3:
            b = b[: rng.randrange(len(b))]
        open(f"{d}/mutant_{k}.onnx", "wb").write(bytes(b))
        k += 1
PY
crashes=0
for f in "$tmp"/mutant_*.onnx; do
  "$kiln" inspect "$f" >/dev/null 2>&1
  rc=$?
  if [ $rc -ge 128 ]; then echo "FAIL $f crashed kiln inspect (exit $rc)"; crashes=$((crashes + 1)); cp "$f" /tmp/; fi
done
[ $crashes -eq 0 ] && echo "ok   120 mutated models: no crash" || failures=$((failures + crashes))

# kiln ops: every op of the table compiles for the cpu target.
if ! "$kiln" ops --missing >/dev/null; then echo "FAIL kiln ops --missing lists ops"; failures=$((failures + 1)); fi
"$kiln" ops --json | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["ops"]["Conv"][0]=="microkernel", d["ops"]["Conv"]' \
  || { echo "FAIL kiln ops --json"; failures=$((failures + 1)); }
expect_error "ops unknown target" "unknown target 'tpu'" "$kiln" ops --target tpu

for cmd in run inspect opt conformance ops; do
  "$kiln" $cmd --help >/dev/null || { echo "FAIL $cmd --help"; failures=$((failures + 1)); }
done

if [ $failures -ne 0 ]; then echo "$failures failures"; exit 1; fi
echo "all CLI error checks passed"
