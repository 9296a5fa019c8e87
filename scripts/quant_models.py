"""Quantized test models in the patterns ONNX Runtime's quantizer emits, with
realistic seeded inputs, for the end-to-end comparison with ONNX Runtime
(tests/e2e/test_quant_ort.py) and for reproducing by hand:

  /usr/bin/python3 scripts/quant_models.py OUT_DIR

writes OUT_DIR/<name>.onnx and OUT_DIR/<name>.<input>.npy for every case.

The patterns:
  * dynamic quantization (quantize_dynamic): DynamicQuantizeLinear of the
    activation -> MatMulInteger / ConvInteger with constant u8 or i8 weights
    -> Cast to float -> Mul by (x_scale * w_scale) -> Add bias, layers
    stacked so that one flipped rounding shows downstream;
  * static QDQ (quantize_static): QuantizeLinear/DequantizeLinear pairs
    around Conv and MatMul, weights as constant integers behind a
    DequantizeLinear (per channel for Conv), which ONNX Runtime's optimizer
    turns into QLinearConv / QLinearMatMul;
  * the QLinear ops themselves.

Inputs span a few units, some all-positive (post-ReLU activations), and
some are built so that x / scale lands exactly on .5 (scale a power of
two), which is where rounding half to even and f32-vs-f64 arithmetic show.
"""

import pathlib
import sys

import numpy as np
from onnx import TensorProto, helper, mapping, numpy_helper

OPSET = 17


def _const(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def _model(nodes, inputs, outputs, inits, opset=OPSET):
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _quant_weight(rng, shape, dtype, axis=None):
    """Float weights quantized the way the quantizer does: symmetric i8
    (zero point 0) or asymmetric u8, per tensor or per channel `axis`."""
    w = rng.normal(0, 0.3, size=shape).astype(np.float32)
    if axis is None:
        lo, hi = min(w.min(), 0.0), max(w.max(), 0.0)
        lo, hi = np.array([lo]), np.array([hi])
    else:
        red = tuple(i for i in range(w.ndim) if i != axis)
        lo, hi = np.minimum(w.min(axis=red), 0), np.maximum(w.max(axis=red), 0)
    if dtype == np.int8:
        scale = (np.maximum(hi, -lo) / 127).astype(np.float32)
        zp = np.zeros_like(scale, dtype=np.int8)
    else:
        scale = ((hi - lo) / 255).astype(np.float32)
        zp = np.clip(np.rint(-lo / scale), 0, 255).astype(np.uint8)
    bshape = [1] * w.ndim
    if axis is not None:
        bshape[axis] = -1
    info = np.iinfo(dtype)
    q = np.clip(np.rint(w / scale.reshape(bshape)) + zp.reshape(bshape).astype(np.int32), info.min,
                info.max).astype(dtype)
    if axis is None:
        return q, scale.reshape(()), zp.reshape(())
    return q, scale, zp


def tie_activations(rng, shape, positive=False):
    """Values on a grid of 1/64 spanning [-4, 3.97] (or [0, 7.97]): the
    dynamic scale is 2^-5 exactly, so half the grid points are .5 ties."""
    lo, hi = (0.0, 255 / 32) if positive else (-4.0, 255 / 32 - 4.0)
    x = rng.integers(int(lo * 64), int(hi * 64) + 1, size=shape).astype(np.float32) / 64
    flat = x.reshape(-1)
    flat[0], flat[1] = lo, hi  # pin the range, so the scale is exact
    return x


def smooth_activations(rng, shape, positive=False):
    x = rng.normal(0.3, 1.2, size=shape).astype(np.float32)
    return np.maximum(x, 0) if positive else x


def dynamic_matmul(rng, weight_type=np.int8, per_column=False, layers=2, dims=(2, 16, 64)):
    """BERT-style quantize_dynamic MatMuls: [B, S, K] @ [K, K] per layer, with
    ReLU - 0.5 between layers."""
    b, s, k = dims
    nodes, inits = [], []
    cur = "x"
    for i in range(layers):
        q, ws, wz = _quant_weight(rng, (k, k), weight_type, axis=1 if per_column else None)
        inits += [_const(f"W{i}", q), _const(f"W{i}_scale", ws), _const(f"W{i}_zp", wz),
                  _const(f"bias{i}", rng.normal(0, 0.1, size=(k,)).astype(np.float32))]
        nodes += [
            helper.make_node("DynamicQuantizeLinear", [cur], [f"xq{i}", f"xs{i}", f"xz{i}"]),
            helper.make_node("MatMulInteger", [f"xq{i}", f"W{i}", f"xz{i}", f"W{i}_zp"],
                             [f"acc{i}"]),
            helper.make_node("Cast", [f"acc{i}"], [f"accf{i}"], to=TensorProto.FLOAT),
            helper.make_node("Mul", [f"xs{i}", f"W{i}_scale"], [f"scale{i}"]),
            helper.make_node("Mul", [f"accf{i}", f"scale{i}"], [f"mm{i}"]),
            helper.make_node("Add", [f"mm{i}", f"bias{i}"], [f"y{i}"]),
        ]
        cur = f"y{i}"
        if i + 1 < layers:
            # ReLU shifted down: signed again, and exact in any arithmetic
            # (a transcendental activation would differ by an ulp between
            # runtimes and flip roundings downstream).
            inits.append(_const(f"shift{i}", np.float32(0.5)))
            nodes += [helper.make_node("Relu", [cur], [f"r{i}"]),
                      helper.make_node("Sub", [f"r{i}", f"shift{i}"], [f"a{i}"])]
            cur = f"a{i}"
    nodes.append(helper.make_node("Identity", [cur], ["y"]))
    return _model(nodes, [_f32("x", list(dims))], [_f32("y", None)], inits)


def dynamic_conv(rng, weight_type=np.uint8, layers=3, shape=(1, 8, 24, 24)):
    """Segmentation-style quantize_dynamic Convs (3x3, pads 1, one strided,
    one grouped), each followed by ReLU, so later inputs are all-positive."""
    n, c, h, w = shape
    nodes, inits = [], []
    cur = "x"
    for i in range(layers):
        group = 2 if i == 1 else 1
        m = 16 if i < layers - 1 else 4
        q, ws, wz = _quant_weight(rng, (m, c // group, 3, 3), weight_type)
        inits += [_const(f"W{i}", q), _const(f"W{i}_scale", ws), _const(f"W{i}_zp", wz),
                  _const(f"bias{i}", rng.normal(0, 0.1, size=(1, m, 1, 1)).astype(np.float32))]
        nodes += [
            helper.make_node("DynamicQuantizeLinear", [cur], [f"xq{i}", f"xs{i}", f"xz{i}"]),
            helper.make_node("ConvInteger", [f"xq{i}", f"W{i}", f"xz{i}", f"W{i}_zp"], [f"acc{i}"],
                             pads=[1, 1, 1, 1], strides=[2, 2] if i == 0 else [1, 1],
                             group=group),
            helper.make_node("Cast", [f"acc{i}"], [f"accf{i}"], to=TensorProto.FLOAT),
            helper.make_node("Mul", [f"xs{i}", f"W{i}_scale"], [f"scale{i}"]),
            helper.make_node("Mul", [f"accf{i}", f"scale{i}"], [f"conv{i}"]),
            helper.make_node("Add", [f"conv{i}", f"bias{i}"], [f"b{i}"]),
        ]
        cur = f"b{i}"
        if i + 1 < layers:
            nodes.append(helper.make_node("Relu", [cur], [f"r{i}"]))
            cur = f"r{i}"
        c = m
    nodes.append(helper.make_node("Identity", [cur], ["y"]))
    return _model(nodes, [_f32("x", list(shape))], [_f32("y", None)], inits)


def qdq_conv_matmul(rng, act_type=np.uint8, shape=(1, 4, 12, 12)):
    """quantize_static QDQ: Q/DQ on activations, per-channel i8 weights behind
    DequantizeLinear, Conv -> Relu -> Q/DQ -> Flatten -> MatMul -> Q/DQ."""
    n, c, h, w = shape
    m = 8
    act_zp = np.array(128 if act_type == np.uint8 else 0, dtype=act_type)
    wq, ws, wz = _quant_weight(rng, (m, c, 3, 3), np.int8, axis=0)
    k = m * h * w
    mq, ms, mz = _quant_weight(rng, (k, 10), np.int8)
    inits = [
        _const("x_scale", np.float32(1 / 32)), _const("x_zp", act_zp),
        _const("W", wq), _const("W_scale", ws), _const("W_zp", wz),
        _const("B", rng.integers(-200, 200, size=(m,)).astype(np.int32)),
        _const("B_scale", (ws / 32).astype(np.float32)), _const("B_zp", np.zeros(m, np.int32)),
        _const("c_scale", np.float32(0.0625)), _const("c_zp", act_zp),
        _const("M", mq), _const("M_scale", ms), _const("M_zp", mz),
        _const("y_scale", np.float32(0.125)), _const("y_zp", act_zp),
        _const("shape", np.array([n, k], np.int64)),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zp"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "x_scale", "x_zp"], ["xd"]),
        helper.make_node("DequantizeLinear", ["W", "W_scale", "W_zp"], ["Wd"], axis=0),
        helper.make_node("DequantizeLinear", ["B", "B_scale", "B_zp"], ["Bd"], axis=0),
        helper.make_node("Conv", ["xd", "Wd", "Bd"], ["conv"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv"], ["relu"]),
        helper.make_node("QuantizeLinear", ["relu", "c_scale", "c_zp"], ["cq"]),
        helper.make_node("DequantizeLinear", ["cq", "c_scale", "c_zp"], ["cd"]),
        helper.make_node("Reshape", ["cd", "shape"], ["flat"]),
        helper.make_node("DequantizeLinear", ["M", "M_scale", "M_zp"], ["Md"]),
        helper.make_node("MatMul", ["flat", "Md"], ["mm"]),
        helper.make_node("QuantizeLinear", ["mm", "y_scale", "y_zp"], ["yq"]),
        helper.make_node("DequantizeLinear", ["yq", "y_scale", "y_zp"], ["y"]),
    ]
    return _model(nodes, [_f32("x", list(shape))], [_f32("y", None)], inits)


def qlinear_ops(rng, act_type=np.uint8):
    """QLinearConv (per-channel i8 weights, bias) -> QLinearMatMul, integer
    in and out, with scales whose product is not a power of two."""
    info = np.iinfo(act_type)
    zp = np.array((info.min + info.max + 1) // 2, dtype=act_type)
    wq, ws, wz = _quant_weight(rng, (6, 3, 3, 3), np.int8, axis=0)
    mq, ms, mz = _quant_weight(rng, (10, 7), np.int8)
    inits = [
        _const("x_scale", np.float32(0.0173)), _const("x_zp", zp),
        _const("W", wq), _const("W_scale", ws), _const("W_zp", wz),
        _const("B", rng.integers(-500, 500, size=(6,)).astype(np.int32)),
        _const("c_scale", np.float32(0.0391)), _const("c_zp", zp),
        _const("M", mq), _const("M_scale", ms), _const("M_zp", mz),
        _const("y_scale", np.float32(0.0457)), _const("y_zp", zp),
    ]
    elem = mapping.NP_TYPE_TO_TENSOR_TYPE[np.dtype(act_type)]
    nodes = [
        helper.make_node("QLinearConv", ["x", "x_scale", "x_zp", "W", "W_scale", "W_zp", "c_scale",
                                         "c_zp", "B"], ["c"], pads=[1, 1, 1, 1],
                         strides=[1, 2]),
        helper.make_node("QLinearMatMul", ["c", "c_scale", "c_zp", "M", "M_scale", "M_zp",
                                           "y_scale", "y_zp"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", elem, [1, 3, 8, 20])
    y = helper.make_tensor_value_info("y", elem, None)
    return _model(nodes, [x], [y], inits)


def _ints(rng, dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, size=shape).astype(dtype)


def cases():
    """name -> (model, [input dicts]); seeded, so every call gives the same."""
    out = {}
    rng = np.random.default_rng(20240611)
    for wt in (np.int8, np.uint8):
        for per_col in (False, True):
            name = f"dyn_matmul_{np.dtype(wt).name}{'_percol' if per_col else ''}"
            model = dynamic_matmul(rng, wt, per_col)
            out[name] = (model, [{"x": tie_activations(rng, (2, 16, 64))},
                                 {"x": smooth_activations(rng, (2, 16, 64))},
                                 {"x": tie_activations(rng, (2, 16, 64), positive=True)}])
    for wt in (np.uint8, np.int8):
        name = f"dyn_conv_{np.dtype(wt).name}"
        out[name] = (dynamic_conv(rng, wt), [{"x": tie_activations(rng, (1, 8, 24, 24))},
                                             {"x": smooth_activations(rng, (1, 8, 24, 24), True)},
                                             {"x": smooth_activations(rng, (1, 8, 24, 24))}])
    for at in (np.uint8, np.int8):
        name = f"qdq_conv_matmul_{np.dtype(at).name}"
        out[name] = (qdq_conv_matmul(rng, at), [{"x": tie_activations(rng, (1, 4, 12, 12))},
                                                {"x": smooth_activations(rng, (1, 4, 12, 12))}])
        name = f"qlinear_{np.dtype(at).name}"
        out[name] = (qlinear_ops(rng, at), [{"x": _ints(rng, at, (1, 3, 8, 20))}])
    return out


def main(argv):
    if len(argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    root = pathlib.Path(argv[1])
    root.mkdir(parents=True, exist_ok=True)
    for name, (model, input_sets) in cases().items():
        (root / f"{name}.onnx").write_bytes(model.SerializeToString())
        for i, inputs in enumerate(input_sets):
            for k, v in inputs.items():
                np.save(root / f"{name}.{i}.{k}.npy", v)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
