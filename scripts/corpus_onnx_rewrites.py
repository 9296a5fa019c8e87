"""ONNX-level rewrites that make the generated corpus's fp16 and ORT-style int8
models (used by scripts/gen_corpus.py).

Why not torch: PyTorch 1.13 on the CPU cannot run a model.half() forward
(no f16 conv or matmul kernels), so torch.onnx.export cannot trace one; users
in that position export f32 and convert the ONNX file to f16, which is what
`to_float16` does (the same rewrite as onnxconverter-common's float16
converter, keep_io_types=False). And the int8 forms ONNX Runtime's quantizer
writes (MatMulInteger, ConvInteger, DynamicQuantizeLinear, QLinearConv,
QLinearMatMul) do not come out of torch.onnx.export at all, so
`quantize_dynamic` rewrites an f32 model the way
onnxruntime.quantization.quantize_dynamic does (int8 weights, per-tensor,
symmetric; activations quantized at run time to uint8), and
`qlinear_cnn` builds a static QOperator-format CNN the way quantize_static
with QuantFormat.QOperator lays it out. `scalar_qdq_params` gives the per-tensor
QuantizeLinear/DequantizeLinear pairs of a torch QAT export scalar scales and
zero points (torch writes FakeQuantize's 1-element buffers as [1] tensors; ONNX
Runtime's QDQ fusion then builds QLinearAdd nodes that refuse them).

Everything here is deterministic: no randomness beyond what the caller seeds.
"""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F32, F16 = TensorProto.FLOAT, TensorProto.FLOAT16

# Inputs that stay f32 in an f16 model (the op requires float for them).
_KEEP_F32_INPUTS = {"Resize": {1, 2}, "Upsample": {1}}


def _retype_value_infos(values):
    for v in values:
        t = v.type.tensor_type
        if t.elem_type == F32:
            t.elem_type = F16


def to_float16(model):
    """Every f32 tensor of the graph becomes f16: initializers, Constant and
    ConstantOfShape values, Cast targets, graph inputs and outputs. Inputs an
    op needs in f32 (Resize scales) get a Cast back to f32."""
    g = model.graph
    for init in g.initializer:
        if init.data_type == F32:
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float16), init.name))
    _retype_value_infos(g.input)
    _retype_value_infos(g.output)
    del g.value_info[:]
    new_nodes = []
    for node in g.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == F32:
                a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float16), a.t.name))
            if node.op_type == "Cast" and a.name == "to" and a.i == F32:
                a.i = F16
        for idx in _KEEP_F32_INPUTS.get(node.op_type, ()):
            if idx < len(node.input) and node.input[idx]:
                cast_out = f"{node.input[idx]}__f32_for_{node.name or node.op_type}"
                new_nodes.append(helper.make_node("Cast", [node.input[idx]], [cast_out], to=F32))
                node.input[idx] = cast_out
        new_nodes.append(node)
    del g.node[:]
    g.node.extend(new_nodes)
    return model


def scalar_qdq_params(model):
    """Per-tensor QuantizeLinear / DequantizeLinear (no `axis` attribute) with
    1-element [1] scale and zero-point initializers get them as scalars ([]),
    the per-tensor form of the ONNX spec and the one onnxruntime's quantizer
    writes. Why: torch.onnx.export writes a FakeQuantize's scale and zero point
    (1-element buffers) as [1] tensors; ONNX Runtime accepts those in Q/DQ, but
    its graph optimizer fuses DQ -> Add -> Q into QLinearAdd, whose type
    inference requires scalars, so the session fails to load ("Scale and
    Zero-point must be a scalar"). Per-channel pairs (axis set: the weights)
    keep their [C] vectors. Initializers reach the nodes directly or through
    the Identity nodes torch's exporter adds when it deduplicates equal
    constants; an initializer is reshaped only when every use of it is a
    per-tensor Q/DQ scale or zero point, else left as it is."""
    g = model.graph
    inits = {i.name: i for i in g.initializer}
    identity_src = {n.output[0]: n.input[0] for n in g.node if n.op_type == "Identity"}

    def source(name):
        while name in identity_src:
            name = identity_src[name]
        return name

    ok_uses, other_uses = {}, set()
    for n in g.node:
        per_tensor = n.op_type in ("QuantizeLinear", "DequantizeLinear") and \
            not any(a.name == "axis" for a in n.attribute)
        for slot, name in enumerate(n.input):
            if n.op_type == "Identity":
                continue
            src = source(name)
            if src not in inits:
                continue
            if per_tensor and slot in (1, 2):
                ok_uses.setdefault(src, []).append(n)
            else:
                other_uses.add(src)
    for o in g.output:
        other_uses.add(source(o.name))
    for name in ok_uses:
        init = inits[name]
        if name in other_uses or list(init.dims) != [1]:
            continue
        init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).reshape(()), name))
    del g.value_info[:]
    return model


def _sym_int8(w):
    """Symmetric per-tensor int8 quantization of a weight: (q, scale)."""
    scale = max(float(np.abs(w).max()), 1e-8) / 127.0
    q = np.clip(np.round(w / scale), -127, 127).astype(np.int8)
    return q, np.float32(scale)


def quantize_dynamic(model, op_types=("MatMul", "Conv")):
    """ORT quantize_dynamic's layout: for a MatMul (or Conv) with a constant f32
    weight, DynamicQuantizeLinear(x) -> MatMulInteger / ConvInteger(xq, wq,
    x_zero_point, w_zero_point) -> Cast(float) -> Mul(x_scale * w_scale)
    (-> Add(bias) for Conv)."""
    g = model.graph
    inits = {i.name: i for i in g.initializer}
    new_nodes, new_inits, drop = [], [], set()
    for n, node in enumerate(g.node):
        w_name = node.input[1] if len(node.input) > 1 else ""
        if node.op_type not in op_types or w_name not in inits:
            new_nodes.append(node)
            continue
        w = numpy_helper.to_array(inits[w_name])
        if w.dtype != np.float32 or (node.op_type == "MatMul" and w.ndim != 2):
            new_nodes.append(node)
            continue
        p = f"{node.name or node.op_type}_{n}_quant"
        wq, ws = _sym_int8(w)
        new_inits += [numpy_helper.from_array(wq, p + "_w"),
                      numpy_helper.from_array(np.array(ws, np.float32), p + "_ws"),
                      numpy_helper.from_array(np.array(0, np.int8), p + "_wzp")]
        drop.add(w_name)
        x = node.input[0]
        new_nodes.append(helper.make_node("DynamicQuantizeLinear", [x], [p + "_xq", p + "_xs", p + "_xzp"]))
        int_op = "MatMulInteger" if node.op_type == "MatMul" else "ConvInteger"
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        new_nodes.append(helper.make_node(int_op, [p + "_xq", p + "_w", p + "_xzp", p + "_wzp"], [p + "_i32"],
                                          **attrs))
        new_nodes.append(helper.make_node("Cast", [p + "_i32"], [p + "_f"], to=F32))
        new_nodes.append(helper.make_node("Mul", [p + "_xs", p + "_ws"], [p + "_s"]))
        if node.op_type == "Conv" and len(node.input) > 2 and node.input[2]:
            # The bias is per output channel: [C] -> [1, C, 1, ...].
            b = numpy_helper.to_array(inits[node.input[2]])
            bshape = [1, b.shape[0]] + [1] * (w.ndim - 2)
            new_inits.append(numpy_helper.from_array(b.reshape(bshape), p + "_b"))
            drop.add(node.input[2])
            new_nodes.append(helper.make_node("Mul", [p + "_f", p + "_s"], [p + "_scaled"]))
            new_nodes.append(helper.make_node("Add", [p + "_scaled", p + "_b"], list(node.output)))
        else:
            new_nodes.append(helper.make_node("Mul", [p + "_f", p + "_s"], list(node.output)))
    still_used = {i for nd in new_nodes for i in nd.input}
    kept = [i for i in g.initializer if i.name not in drop or i.name in still_used]
    del g.node[:]
    g.node.extend(new_nodes)
    del g.initializer[:]
    g.initializer.extend(kept + new_inits)
    del g.value_info[:]
    return model


def _u8_params(lo, hi):
    """uint8 asymmetric quantization parameters covering [lo, hi] (and 0)."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = max(hi - lo, 1e-8) / 255.0
    zp = int(np.clip(round(-lo / scale), 0, 255))
    return np.float32(scale), np.uint8(zp)


def qlinear_cnn(convs, fc, act_ranges, input_shape, opset):
    """A static QOperator-format CNN, as ORT quantize_static(QOperator) lays
    out conv -> relu chains: QuantizeLinear(input) -> QLinearConv per layer
    (int8 per-channel weights, int32 bias, uint8 activations; a Relu after a
    conv is absorbed by the output range starting at 0) -> DequantizeLinear
    -> GlobalAveragePool -> QuantizeLinear -> QLinearMatMul -> DequantizeLinear
    -> Add(bias).

    convs: [(weight [O,I,kh,kw] f32, bias [O] f32, stride, pad, group)],
    fc: (weight [K,N] f32, bias [N] f32), act_ranges: [(lo, hi)] for the
    input, each conv output and the pooled features (len(convs) + 2)."""
    nodes, inits = [], []

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    s, z = _u8_params(*act_ranges[0])
    const("x_scale", s), const("x_zp", z)
    nodes.append(helper.make_node("QuantizeLinear", ["input", "x_scale", "x_zp"], ["x_q"]))
    cur, cur_s, cur_z = "x_q", "x_scale", "x_zp"
    for i, (w, b, stride, pad, group) in enumerate(convs):
        ws = np.maximum(np.abs(w).reshape(w.shape[0], -1).max(axis=1), 1e-8) / 127.0
        wq = np.clip(np.round(w / ws[:, None, None, None]), -127, 127).astype(np.int8)
        in_scale = float(numpy_helper.to_array(next(t for t in inits if t.name == cur_s)))
        bq = np.round(b / (in_scale * ws)).astype(np.int32)
        os_, oz = _u8_params(*act_ranges[i + 1])
        const(f"c{i}_w", wq), const(f"c{i}_ws", ws.astype(np.float32)),
        const(f"c{i}_wzp", np.zeros(w.shape[0], np.int8)), const(f"c{i}_b", bq)
        const(f"c{i}_ys", os_), const(f"c{i}_yzp", oz)
        nodes.append(helper.make_node(
            "QLinearConv", [cur, cur_s, cur_z, f"c{i}_w", f"c{i}_ws", f"c{i}_wzp", f"c{i}_ys", f"c{i}_yzp",
                            f"c{i}_b"], [f"c{i}_y"],
            kernel_shape=list(w.shape[2:]), strides=[stride, stride], pads=[pad] * 4, group=group))
        cur, cur_s, cur_z = f"c{i}_y", f"c{i}_ys", f"c{i}_yzp"
    nodes.append(helper.make_node("DequantizeLinear", [cur, cur_s, cur_z], ["feat_f"]))
    nodes.append(helper.make_node("GlobalAveragePool", ["feat_f"], ["pooled"]))
    nodes.append(helper.make_node("Flatten", ["pooled"], ["flat"], axis=1))
    ps, pz = _u8_params(*act_ranges[-1])
    const("p_scale", ps), const("p_zp", pz)
    nodes.append(helper.make_node("QuantizeLinear", ["flat", "p_scale", "p_zp"], ["flat_q"]))
    fw, fb = fc
    fwq, fws = _sym_int8(fw)
    const("fc_w", fwq), const("fc_ws", np.array(fws, np.float32)), const("fc_wzp", np.array(0, np.int8))
    # The logits' range: a generous bound from the float weights.
    bound = float(np.abs(fw).sum(axis=0).max() * max(abs(act_ranges[-1][0]), abs(act_ranges[-1][1])))
    ys, yz = _u8_params(-bound, bound)
    const("fc_ys", ys), const("fc_yzp", yz), const("fc_b", fb.astype(np.float32))
    nodes.append(helper.make_node("QLinearMatMul", ["flat_q", "p_scale", "p_zp", "fc_w", "fc_ws", "fc_wzp",
                                                    "fc_ys", "fc_yzp"], ["logits_q"]))
    nodes.append(helper.make_node("DequantizeLinear", ["logits_q", "fc_ys", "fc_yzp"], ["logits_nb"]))
    nodes.append(helper.make_node("Add", ["logits_nb", "fc_b"], ["logits"]))
    graph = helper.make_graph(
        nodes, "qlinear_cnn",
        [helper.make_tensor_value_info("input", F32, input_shape)],
        [helper.make_tensor_value_info("logits", F32, [input_shape[0], fw.shape[1]])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="kiln gen_corpus (ORT QOperator layout)")
    model.ir_version = 8
    return model
