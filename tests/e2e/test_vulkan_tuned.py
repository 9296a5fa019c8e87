"""The Vulkan target's tuned conv and matmul shaders (codegen/vulkan/gemm_shader.h)
against kiln's interpreter, on lavapipe in CI (KILN_VULKAN_DEVICE picks
another device), with fresh random inputs each run (the seed is printed).

Each case is a small model built here whose Conv or MatMul (with the
epilogue kiln's passes fuse into it) must run on a tuned shader -- the
`kiln bench` summary counts those steps -- and verify within f32
tolerance. The cases cover the forms and their edges: tiles of 32 and 64,
partial tiles, asymmetric pads, strides, dilations, groups, depthwise (the
direct conv), Conv1d, each epilogue kind (bias, ReLU, SiLU, HardSwish,
Clip, LeakyRelu, Tanh, GELU, a residual Add), MatMul batch dims that
broadcast differently on each side, 1-D operands, and GEMVs (the direct
matmul). Environment: KILN_BIN. Run with /usr/bin/python3 -m pytest.
"""

import os
import pathlib
import random
import re
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ROOT = pathlib.Path(__file__).resolve().parents[2]
KILN = os.environ.get("KILN_BIN", str(ROOT / "build/tools/kiln"))
F = TensorProto.FLOAT


def epilogue(kind, y, nodes, inits, out_shape):
    """Appends nodes applying `kind` to y; returns the output name and any
    extra graph inputs."""
    extra = []
    if kind == "none":
        return y, extra
    if kind == "relu":
        nodes.append(helper.make_node("Relu", [y], ["e"]))
    elif kind == "silu":
        nodes += [helper.make_node("Sigmoid", [y], ["s"]), helper.make_node("Mul", [y, "s"], ["e"])]
    elif kind == "hardswish":
        nodes.append(helper.make_node("HardSwish", [y], ["e"]))
    elif kind == "clip":
        inits += [numpy_helper.from_array(np.float32(-0.5), "lo"), numpy_helper.from_array(np.float32(0.75), "hi")]
        nodes.append(helper.make_node("Clip", [y, "lo", "hi"], ["e"]))
    elif kind == "leakyrelu":
        nodes.append(helper.make_node("LeakyRelu", [y], ["e"], alpha=0.1))
    elif kind == "tanh":
        nodes.append(helper.make_node("Tanh", [y], ["e"]))
    elif kind == "gelu":  # the erf form torch exports
        inits += [numpy_helper.from_array(np.float32(1.4142135), "sq2"), numpy_helper.from_array(np.float32(1.0), "one"),
                  numpy_helper.from_array(np.float32(0.5), "half")]
        nodes += [helper.make_node("Div", [y, "sq2"], ["g0"]), helper.make_node("Erf", ["g0"], ["g1"]),
                  helper.make_node("Add", ["g1", "one"], ["g2"]), helper.make_node("Mul", [y, "g2"], ["g3"]),
                  helper.make_node("Mul", ["g3", "half"], ["e"])]
    elif kind == "residual_relu":
        extra.append(helper.make_tensor_value_info("r", F, out_shape))
        nodes += [helper.make_node("Add", [y, "r"], ["ra"]), helper.make_node("Relu", ["ra"], ["e"])]
    else:
        raise ValueError(kind)
    return "e", extra


def conv_model(rng, n, c, spatial, k, kernel, strides, pads, dil, groups, kind):
    w = rng.standard_normal((k, c // groups, *kernel)).astype(np.float32) * 0.3
    b = rng.standard_normal(k).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], strides=strides, pads=pads, dilations=dil,
                              group=groups)]
    out = [n, k] + [(spatial[i] + pads[i] + pads[i + len(spatial)] - dil[i] * (kernel[i] - 1) - 1) // strides[i] + 1
                    for i in range(len(spatial))]
    name, extra = epilogue(kind, "y", nodes, inits, out)
    g = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", F, [n, c, *spatial])] + extra,
                          [helper.make_tensor_value_info(name, F, out)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def matmul_model(rng, a_shape, b_shape, const_b, kind, bias):
    inits, nodes, inputs = [], [], [helper.make_tensor_value_info("a", F, a_shape)]
    if const_b:
        inits.append(numpy_helper.from_array(rng.standard_normal(b_shape).astype(np.float32) * 0.2, "bm"))
    else:
        inputs.append(helper.make_tensor_value_info("bm", F, b_shape))
    nodes.append(helper.make_node("MatMul", ["a", "bm"], ["y"]))
    out = list(np.matmul(np.zeros(a_shape, np.float32), np.zeros(b_shape, np.float32)).shape)
    y = "y"
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(b_shape[-1]).astype(np.float32), "bias"))
        nodes.append(helper.make_node("Add", ["y", "bias"], ["yb"]))
        y = "yb"
    name, extra = epilogue(kind, y, nodes, inits, out)
    g = helper.make_graph(nodes, "mm", inputs + extra, [helper.make_tensor_value_info(name, F, out)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


CONV_CASES = {
    # name: (N, C, spatial, K, kernel, strides, pads, dilations, groups, epilogue)
    "tile32_partial_relu": (2, 16, [13, 11], 32, [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1, "relu"),
    "stride2_asymmetric_pads_silu": (1, 32, [40, 40], 64, [3, 3], [2, 2], [1, 0, 2, 1], [1, 1], 1, "silu"),
    "dilated_residual": (1, 24, [20, 20], 48, [3, 3], [1, 1], [2, 2, 2, 2], [2, 2], 1, "residual_relu"),
    "depthwise_direct_hardswish": (1, 32, [16, 16], 32, [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 32, "hardswish"),
    "groups2_pointwise_clip": (1, 32, [9, 9], 64, [1, 1], [1, 1], [0, 0, 0, 0], [1, 1], 2, "clip"),
    "conv1d_leakyrelu": (2, 8, [50], 20, [5], [2], [2, 2], [1], 1, "leakyrelu"),
    "tile64_pointwise": (1, 16, [112, 112], 128, [1, 1], [1, 1], [0, 0, 0, 0], [1, 1], 1, "relu"),
    "stem_7x7_stride2": (1, 3, [64, 64], 32, [7, 7], [2, 2], [3, 3, 3, 3], [1, 1], 1, "none"),
}

MATMUL_CASES = {
    # name: (A shape, B shape, B constant, epilogue, bias)
    "broadcast_batch_dims": ([3, 1, 37, 50], [1, 4, 50, 29], False, "none", False),
    "folded_rows_gelu": ([2, 3, 4, 70, 65], [65, 33], True, "gelu", True),
    "vector_left": ([65], [2, 65, 7], False, "none", False),
    "gemv_direct_tanh": ([1, 5, 300], [300, 17], True, "tanh", True),
    "tile64_batched": ([4, 512, 128], [4, 128, 512], False, "none", False),
    "linear_residual": ([2, 40, 96], [96, 96], True, "residual_relu", True),
}


def verify(model, tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    bench = subprocess.run([KILN, "bench", str(path), "--target", "vulkan", "--runs", "1", "--warmup", "0"],
                           capture_output=True, text=True, timeout=600)
    assert bench.returncode == 0, bench.stdout + bench.stderr
    tuned = re.search(r"(\d+) conv/matmul steps on tuned shaders", bench.stdout + bench.stderr)
    assert tuned and int(tuned.group(1)) >= 1, "no step ran on a tuned shader:\n" + bench.stdout + bench.stderr
    seed = random.SystemRandom().randrange(1 << 30)
    r = subprocess.run([KILN, "verify", str(path), "--target", "vulkan", "--seed", str(seed), "--rtol", "1e-4"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "PASS" in r.stdout, f"seed {seed}\n{r.stdout}{r.stderr}"


@pytest.mark.parametrize("name", sorted(CONV_CASES))
def test_conv_on_tuned_shader(name, tmp_path):
    rng = np.random.default_rng()
    verify(conv_model(rng, *CONV_CASES[name]), tmp_path)


@pytest.mark.parametrize("name", sorted(MATMUL_CASES))
def test_matmul_on_tuned_shader(name, tmp_path):
    rng = np.random.default_rng()
    verify(matmul_model(rng, *MATMUL_CASES[name]), tmp_path)
