#!/usr/bin/env bash
# End-to-end test of the ONNX Runtime bridge (scripts/ort/ort_run.js):
# builds small ONNX models with onnx.helper, writes random .npy inputs with
# numpy, runs the bridge and checks every output against numpy.
#
# Covers: f32 Add+Relu, an int64 op, a dtype round trip through Identity for
# every dtype the bridge supports (f16 f32 f64 i8 i16 i32 i64 u8 u16 u32 u64
# bool), Fortran-order and big-endian .npy inputs, scalar and empty tensors,
# positional inputs, output-name sanitization (incl. a collision),
# manifest.json, --list-io, --threads/--no-optimize, and error exits.
#
# Exit: 0 pass, 1 fail, 77 skip (node or onnxruntime-node not installed;
# CTest: set SKIP_RETURN_CODE 77).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BRIDGE="${KILN_ORT_RUN:-$ROOT/scripts/ort/ort_run.js}"
PY=/usr/bin/python3

if ! command -v node >/dev/null 2>&1; then
  echo "SKIP: node not found" >&2; exit 77
fi
if ! (cd "$ROOT/scripts/ort" && node -e "require('onnxruntime-node')") >/dev/null 2>&1; then
  echo "SKIP: onnxruntime-node not installed (cd scripts/ort && ONNXRUNTIME_NODE_INSTALL=skip npm ci)" >&2
  exit 77
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/kiln-ort-bridge.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

# 1. Models and inputs -------------------------------------------------------
"$PY" - "$WORK" <<'PYEOF'
import sys, os
import numpy as np
import onnx
from onnx import helper, TensorProto as T

work = sys.argv[1]
rng = np.random.default_rng(1234)

def save(model, name):
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(work, name))

# (a) f32 Add + Relu, int64 Mul, and output names that need sanitizing:
# 'out/relu:0' and 'out_relu_0' both sanitize to 'out_relu_0' -> the second
# (in output order) becomes 'out_relu_0__2'.
nodes = [
    helper.make_node('Add', ['a', 'b'], ['sum']),
    helper.make_node('Relu', ['sum'], ['out/relu:0']),
    helper.make_node('Mul', ['i', 'j'], ['out_relu_0']),
    helper.make_node('Neg', ['i'], ['int neg']),
    helper.make_node('Identity', ['j'], ['d\u00e9/j']),
]
g = helper.make_graph(
    nodes, 'addrelu',
    [helper.make_tensor_value_info('a', T.FLOAT, [2, 3, 4]),
     helper.make_tensor_value_info('b', T.FLOAT, [4]),
     helper.make_tensor_value_info('i', T.INT64, ['n']),
     helper.make_tensor_value_info('j', T.INT64, ['n'])],
    [helper.make_tensor_value_info('out/relu:0', T.FLOAT, [2, 3, 4]),
     helper.make_tensor_value_info('out_relu_0', T.INT64, ['n']),
     helper.make_tensor_value_info('int neg', T.INT64, ['n']),
     helper.make_tensor_value_info('d\u00e9/j', T.INT64, ['n'])])
save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)], ir_version=8), 'addrelu.onnx')
np.save(os.path.join(work, 'a.npy'), rng.standard_normal((2, 3, 4)).astype(np.float32))
np.save(os.path.join(work, 'b.npy'), rng.standard_normal(4).astype(np.float32))
# int64 values beyond 2^53 check that BigInt64Array is used end to end.
i = np.array([3, -7, 2**40 + 1, -(2**62) + 5, 0], dtype=np.int64)
np.save(os.path.join(work, 'i.npy'), i)
np.save(os.path.join(work, 'j.npy'), np.array([2, 3, 1, 1, 9], dtype=np.int64))

# (b) Identity round trip for every dtype.
dtypes = {
    'f16': (np.float16, T.FLOAT16), 'f32': (np.float32, T.FLOAT), 'f64': (np.float64, T.DOUBLE),
    'i8': (np.int8, T.INT8), 'i16': (np.int16, T.INT16), 'i32': (np.int32, T.INT32), 'i64': (np.int64, T.INT64),
    'u8': (np.uint8, T.UINT8), 'u16': (np.uint16, T.UINT16), 'u32': (np.uint32, T.UINT32), 'u64': (np.uint64, T.UINT64),
    'bool': (np.bool_, T.BOOL),
}
ins, outs, nodes = [], [], []
for k, (npt, tt) in dtypes.items():
    ins.append(helper.make_tensor_value_info('in_' + k, tt, [3, 5]))
    outs.append(helper.make_tensor_value_info('out_' + k, tt, [3, 5]))
    nodes.append(helper.make_node('Identity', ['in_' + k], ['out_' + k]))
    if k == 'bool':
        x = rng.integers(0, 2, (3, 5)).astype(np.bool_)
    elif np.issubdtype(npt, np.integer):
        info = np.iinfo(npt)
        x = rng.integers(info.min, info.max, (3, 5), dtype=npt, endpoint=True)
        x.flat[0], x.flat[1] = info.min, info.max
    else:
        x = rng.standard_normal((3, 5)).astype(npt)
    np.save(os.path.join(work, 'in_%s.npy' % k), x)
g = helper.make_graph(nodes, 'identity', ins, outs)
save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)], ir_version=8), 'identity.onnx')

# (c) Odd .npy layouts into one Identity model with three inputs:
# Fortran order, big-endian, a 0-d scalar; plus an empty tensor.
nodes = [helper.make_node('Identity', ['x%d' % k], ['y%d' % k]) for k in range(4)]
g = helper.make_graph(
    nodes, 'layouts',
    [helper.make_tensor_value_info('x0', T.FLOAT, [3, 4, 5]),
     helper.make_tensor_value_info('x1', T.INT32, [2, 3]),
     helper.make_tensor_value_info('x2', T.DOUBLE, []),
     helper.make_tensor_value_info('x3', T.FLOAT, [0, 3])],
    [helper.make_tensor_value_info('y%d' % k, t, s)
     for k, (t, s) in enumerate([(T.FLOAT, [3, 4, 5]), (T.INT32, [2, 3]), (T.DOUBLE, []), (T.FLOAT, [0, 3])])])
save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)], ir_version=8), 'layouts.onnx')
x0 = np.asfortranarray(rng.standard_normal((3, 4, 5)).astype(np.float32))
assert x0.flags.f_contiguous and not x0.flags.c_contiguous
np.save(os.path.join(work, 'x0.npy'), x0)
x1 = (np.arange(6).reshape(2, 3) * 1000003 - 7).astype('>i4')
assert x1.dtype.byteorder == '>'
np.save(os.path.join(work, 'x1.npy'), x1)
np.save(os.path.join(work, 'x2.npy'), np.array(3.25, dtype=np.float64))
np.save(os.path.join(work, 'x3.npy'), np.zeros((0, 3), np.float32))
PYEOF

# 2. Runs -----------------------------------------------------------------------
run() { node "$BRIDGE" "$@"; }

run "$WORK/addrelu.onnx" --list-io > "$WORK/listio.txt" || fail "--list-io failed"
grep -qx 'input a f32 \[2,3,4\]' "$WORK/listio.txt" || fail "--list-io: $(cat "$WORK/listio.txt")"
grep -qx 'input i i64 \[n\]' "$WORK/listio.txt" || fail "--list-io: $(cat "$WORK/listio.txt")"
grep -qx 'output out/relu:0 f32 \[2,3,4\]' "$WORK/listio.txt" || fail "--list-io: $(cat "$WORK/listio.txt")"

run "$WORK/addrelu.onnx" --input "a=$WORK/a.npy" --input "b=$WORK/b.npy" \
  --input "i=$WORK/i.npy" --input "j=$WORK/j.npy" --output-dir "$WORK/out1" > "$WORK/out1.txt" \
  || fail "addrelu run failed"
printf '%s\n' 'out/relu:0 f32 [2,3,4]' 'out_relu_0 i64 [5]' 'int neg i64 [5]' 'dé/j i64 [5]' > "$WORK/out1.want"
diff -u "$WORK/out1.want" "$WORK/out1.txt" || fail "addrelu: stdout differs"

# Same model, positional inputs, 1 thread, no graph optimization.
run "$WORK/addrelu.onnx" "--input=$WORK/a.npy" -i "$WORK/b.npy" -i "$WORK/i.npy" -i "$WORK/j.npy" \
  -o "$WORK/out1b" --threads 1 --no-optimize --quiet > "$WORK/out1b.txt" || fail "positional run failed"
[ ! -s "$WORK/out1b.txt" ] || fail "--quiet printed: $(cat "$WORK/out1b.txt")"

# --profile writes ORT's trace (bench/layer_compare.py reads its node times).
run "$WORK/addrelu.onnx" -i "$WORK/a.npy" -i "$WORK/b.npy" -i "$WORK/i.npy" -i "$WORK/j.npy" \
  -o "$WORK/out1c" --repeat 2 --quiet --profile "$WORK/trace" 2> "$WORK/out1c.err" || fail "--profile run failed"
grep -q '"model_run"' "$WORK"/trace*.json || fail "--profile: no trace with model_run events"
grep -q '_kernel_time' "$WORK"/trace*.json || fail "--profile: no node times in the trace"

args=()
for k in f16 f32 f64 i8 i16 i32 i64 u8 u16 u32 u64 bool; do args+=(--input "in_$k=$WORK/in_$k.npy"); done
run "$WORK/identity.onnx" "${args[@]}" --output-dir "$WORK/out2" > "$WORK/out2.txt" || fail "identity run failed"

run "$WORK/layouts.onnx" -i "x0=$WORK/x0.npy" -i "x1=$WORK/x1.npy" -i "x2=$WORK/x2.npy" -i "x3=$WORK/x3.npy" \
  -o "$WORK/out3" > "$WORK/out3.txt" || fail "layouts run failed"
printf '%s\n' 'y0 f32 [3,4,5]' 'y1 i32 [2,3]' 'y2 f64 []' 'y3 f32 [0,3]' > "$WORK/out3.want"
diff -u "$WORK/out3.want" "$WORK/out3.txt" || fail "layouts: stdout differs"

# 3. Check against numpy -------------------------------------------------------
"$PY" - "$WORK" <<'PYEOF' || fail "numpy check"
import sys, os, json
import numpy as np
w = sys.argv[1]
ld = lambda *p: np.load(os.path.join(w, *p))
def check(cond, msg):
    if not cond:
        print('FAIL:', msg, file=sys.stderr); sys.exit(1)

# (a)
files = sorted(f for f in os.listdir(os.path.join(w, 'out1')))
check(files == ['d___j.npy', 'int_neg.npy', 'manifest.json', 'out_relu_0.npy', 'out_relu_0__2.npy'], 'out1 files: %s' % files)
a, b, i, j = ld('a.npy'), ld('b.npy'), ld('i.npy'), ld('j.npy')
for d in ('out1', 'out1b'):
    r = ld(d, 'out_relu_0.npy')
    check(r.dtype == np.float32 and r.shape == (2, 3, 4), 'relu dtype/shape %s %s' % (r.dtype, r.shape))
    np.testing.assert_allclose(r, np.maximum(a + b, 0), rtol=1e-6, atol=0)
    m = ld(d, 'out_relu_0__2.npy')
    check(m.dtype == np.int64 and np.array_equal(m, i * j), 'int64 mul: %s vs %s' % (m, i * j))
    check(np.array_equal(ld(d, 'int_neg.npy'), -i), 'int64 neg')
man = json.load(open(os.path.join(w, 'out1', 'manifest.json'), encoding='utf-8'))
check([(o['name'], o['file'], o['dtype'], o['shape']) for o in man['outputs']] ==
      [('out/relu:0', 'out_relu_0.npy', 'f32', [2, 3, 4]),
       ('out_relu_0', 'out_relu_0__2.npy', 'i64', [5]),
       ('int neg', 'int_neg.npy', 'i64', [5]),
       ('d\u00e9/j', 'd___j.npy', 'i64', [5])], 'manifest: %s' % man)
check(np.array_equal(ld('out1', 'd___j.npy'), j), 'identity of j')

# (b)
for k in 'f16 f32 f64 i8 i16 i32 i64 u8 u16 u32 u64 bool'.split():
    x, y = ld('in_%s.npy' % k), ld('out2', 'out_%s.npy' % k)
    check(x.dtype == y.dtype and x.shape == y.shape, '%s: %s%s vs %s%s' % (k, x.dtype, x.shape, y.dtype, y.shape))
    check(np.array_equal(x.view(np.uint8), y.view(np.uint8)), '%s: values differ' % k)

# (c)
for k in range(4):
    x, y = ld('x%d.npy' % k), ld('out3', 'y%d.npy' % k)
    check(x.shape == y.shape and np.array_equal(x, y), 'layout %d: %s vs %s' % (k, x, y))
check(ld('out3', 'y1.npy').dtype == np.dtype('<i4'), 'big-endian input should come back little-endian')
check(ld('out3', 'y0.npy').flags.c_contiguous, 'outputs are C order')
# Headers: 64-byte aligned data like numpy writes.
for f in os.listdir(os.path.join(w, 'out3')):
    if f.endswith('.npy'):
        raw = open(os.path.join(w, 'out3', f), 'rb').read()
        hl = int.from_bytes(raw[8:10], 'little')
        check(raw[6] == 1 and (10 + hl) % 64 == 0 and raw[10 + hl - 1:10 + hl] == b'\n', 'header of ' + f)
PYEOF

# 4. Errors: non-zero exit and a message on stderr --------------------------------
expect_error() { # expect_error RC PATTERN ARGS...
  local want_rc="$1" pat="$2"; shift 2
  set +e; node "$BRIDGE" "$@" > "$WORK/err.out" 2> "$WORK/err.txt"; local rc=$?; set -e
  [ "$rc" = "$want_rc" ] || fail "expected exit $want_rc, got $rc for: $* ($(cat "$WORK/err.txt"))"
  grep -q "$pat" "$WORK/err.txt" || fail "expected '$pat' on stderr for: $*; got: $(cat "$WORK/err.txt")"
}
M="$WORK/addrelu.onnx"
IN=(-i "a=$WORK/a.npy" -i "b=$WORK/b.npy" -i "i=$WORK/i.npy")
expect_error 2 'no model given' -o "$WORK/e"
expect_error 2 'output-dir is required' "$M" "${IN[@]}"
expect_error 2 'unknown option' "$M" --frobnicate
expect_error 1 'missing input(s): j' "$M" "${IN[@]}" -o "$WORK/e"
expect_error 1 "no input 'zz'" "$M" "${IN[@]}" -i "zz=$WORK/j.npy" -o "$WORK/e"
expect_error 1 'model wants i64' "$M" "${IN[@]}" -i "j=$WORK/a.npy" -o "$WORK/e"
expect_error 1 'model wants shape' "$M" -i "a=$WORK/b.npy" -i "b=$WORK/b.npy" -i "i=$WORK/i.npy" -i "j=$WORK/j.npy" -o "$WORK/e"
expect_error 1 'not a .npy file' "$M" "${IN[@]}" -i "j=$M" -o "$WORK/e"
expect_error 1 'cannot read input file' "$M" "${IN[@]}" -i "j=$WORK/nope.npy" -o "$WORK/e"
head -c 100 "$WORK/a.npy" > "$WORK/trunc.npy"
expect_error 1 'truncated' "$M" "${IN[@]}" -i "j=$WORK/trunc.npy" -o "$WORK/e"
expect_error 1 'model file not found' "$WORK/nope.onnx" --list-io
expect_error 1 'cannot load model' "$WORK/a.npy" --list-io
# A run-time failure inside ORT (broadcast mismatch on the symbolic dim).
"$PY" -c "import numpy as np; np.save('$WORK/j3.npy', np.arange(3, dtype=np.int64))"
expect_error 1 'onnxruntime failed to run' "$M" "${IN[@]}" -i "j=$WORK/j3.npy" -o "$WORK/e"

echo "PASS: ort_bridge_test"
