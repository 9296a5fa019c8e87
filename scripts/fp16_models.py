"""Half-precision test models for the end-to-end comparison with ONNX
Runtime (tests/e2e/test_fp16_ort.py), and a converter of f32 models to f16:

  /usr/bin/python3 scripts/fp16_models.py OUT_DIR        # the test models
  /usr/bin/python3 scripts/fp16_models.py --convert IN.onnx OUT.onnx

The test models keep their tensors in f16 (or bf16) end to end, weights
included, and use the ops kiln computes in f32 only (conv, matmul, gemm,
pooling, normalizations, resize, reductions, softmax, recurrent layers)
between elementwise ones, so the legalize-precision pass has work to do at
every step.

The converter turns every f32 tensor of a model (inputs, outputs,
initializers, Constant values, Cast targets, value infos) into f16, except
the inputs that ONNX requires to be f32 whatever the data type (Resize's
scales and roi are left alone the same way); it is the hand-written
equivalent of onnxconverter_common's float16 conversion for plain models.
"""

import pathlib
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def _const(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def _h(rng, shape, scale=0.3):
    return rng.normal(0, scale, size=shape).astype(np.float16)


def conv_net(rng, elem=TensorProto.FLOAT16):
    """Conv -> BatchNorm -> Relu -> MaxPool -> grouped strided Conv -> Relu
    -> ConvTranspose (x2 up) -> AveragePool -> ReduceMean -> MatMul + bias ->
    Softmax, all in 16 bits."""
    dt = np.float16
    inits = [
        _const("w1", _h(rng, (8, 3, 3, 3))), _const("b1", _h(rng, (8,), 0.1)),
        _const("bn_s", (1 + _h(rng, (8,), 0.1)).astype(dt)), _const("bn_b", _h(rng, (8,), 0.1)),
        _const("bn_m", _h(rng, (8,), 0.1)), _const("bn_v", (1 + np.abs(_h(rng, (8,), 0.2))).astype(dt)),
        _const("w2", _h(rng, (16, 4, 3, 3))), _const("b2", _h(rng, (16,), 0.1)),
        _const("wt", _h(rng, (16, 12, 2, 2))),
        _const("wg", _h(rng, (12, 10))), _const("bg", _h(rng, (10,), 0.1)),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "bn_s", "bn_b", "bn_m", "bn_v"], ["bn"]),
        helper.make_node("Relu", ["bn"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2],
                         group=2),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("ConvTranspose", ["r2", "wt"], ["ct"], strides=[2, 2]),
        helper.make_node("AveragePool", ["ct"], ["ap"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("ReduceMean", ["ap"], ["rm"], axes=[2, 3], keepdims=0),
        helper.make_node("MatMul", ["rm", "wg"], ["mg"]),
        helper.make_node("Add", ["mg", "bg"], ["g"]),
        helper.make_node("Softmax", ["g"], ["y"], axis=-1),
    ]
    graph = helper.make_graph(nodes, "conv_net",
                              [helper.make_tensor_value_info("x", elem, [1, 3, 32, 32])],
                              [helper.make_tensor_value_info("y", elem, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def transformer_block(rng, elem=TensorProto.FLOAT16):
    """LayerNorm -> MatMul + bias -> Relu -> MatMul + bias -> residual Add ->
    attention-like MatMul of the block with itself transposed -> Softmax ->
    MatMul, with an LSTM over the sequence as a second output."""
    d = 32
    inits = [
        _const("ln_s", (1 + _h(rng, (d,), 0.1)).astype(np.float16)), _const("ln_b", _h(rng, (d,), 0.1)),
        _const("w1", _h(rng, (d, 64), 0.2)), _const("b1", _h(rng, (64,), 0.1)),
        _const("w2", _h(rng, (64, d), 0.2)), _const("b2", _h(rng, (d,), 0.1)),
        _const("inv", np.array(1 / np.sqrt(d), np.float16)),
        _const("lw", _h(rng, (1, 4 * 16, d), 0.2)), _const("lr", _h(rng, (1, 4 * 16, 16), 0.2)),
        _const("lb", _h(rng, (1, 8 * 16), 0.1)),
    ]
    nodes = [
        helper.make_node("LayerNormalization", ["x", "ln_s", "ln_b"], ["ln"], axis=-1),
        helper.make_node("MatMul", ["ln", "w1"], ["m1"]),
        helper.make_node("Add", ["m1", "b1"], ["a1"]),
        helper.make_node("Relu", ["a1"], ["r1"]),
        helper.make_node("MatMul", ["r1", "w2"], ["m2"]),
        helper.make_node("Add", ["m2", "b2"], ["a2"]),
        helper.make_node("Add", ["a2", "x"], ["h"]),
        helper.make_node("Transpose", ["h"], ["ht"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["h", "ht"], ["att"]),
        helper.make_node("Mul", ["att", "inv"], ["att_s"]),
        helper.make_node("Softmax", ["att_s"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "h"], ["y"]),
        helper.make_node("Transpose", ["h"], ["hs"], perm=[1, 0, 2]),
        helper.make_node("LSTM", ["hs", "lw", "lr", "lb"], ["", "gh"], hidden_size=16),
    ]
    graph = helper.make_graph(nodes, "transformer_block",
                              [helper.make_tensor_value_info("x", elem, [2, 8, d])],
                              [helper.make_tensor_value_info("y", elem, None),
                               helper.make_tensor_value_info("gh", elem, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


# Inputs that stay f32 in a 16-bit model: (op, input index).
_KEEP_F32 = {("Resize", 1), ("Resize", 2), ("Upsample", 1)}


def convert_to_f16(model):
    """A copy of `model` with its f32 tensors in f16 (see the file comment)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    keep = set()
    for n in m.graph.node:
        for i, name in enumerate(n.input):
            if (n.op_type, i) in _KEEP_F32 and name:
                keep.add(name)

    def fix_type(vi):
        t = vi.type.tensor_type
        if t.elem_type == TensorProto.FLOAT and vi.name not in keep:
            t.elem_type = TensorProto.FLOAT16

    for vi in list(m.graph.input) + list(m.graph.output) + list(m.graph.value_info):
        fix_type(vi)
    for i, init in enumerate(m.graph.initializer):
        if init.data_type == TensorProto.FLOAT and init.name not in keep:
            arr = numpy_helper.to_array(init).astype(np.float16)
            m.graph.initializer[i].CopyFrom(numpy_helper.from_array(arr, init.name))
    for n in m.graph.node:
        for a in n.attribute:
            if n.op_type == "Constant" and a.name == "value" and a.t.data_type == TensorProto.FLOAT \
                    and n.output[0] not in keep:
                arr = numpy_helper.to_array(a.t).astype(np.float16)
                a.t.CopyFrom(numpy_helper.from_array(arr, a.t.name))
            if n.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = TensorProto.FLOAT16
    return m


def cases():
    """name -> (model, [input dicts]); seeded."""
    rng = np.random.default_rng(7)
    out = {
        "conv_net_f16": (conv_net(rng), [{"x": rng.normal(0, 1, (1, 3, 32, 32)).astype(np.float16)}]),
        "transformer_f16": (transformer_block(rng),
                            [{"x": rng.normal(0, 1, (2, 8, 32)).astype(np.float16)}]),
    }
    return out


def main(argv):
    if len(argv) == 4 and argv[1] == "--convert":
        onnx.save(convert_to_f16(onnx.load(argv[2])), argv[3])
        return 0
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
