"""Probes NVIDIA's Vulkan driver for what made kiln's pools and per-element
losses go wrong there (but not on lavapipe): int64 division and remainder
by constants, the index arithmetic of those kernels. Builds one-node ONNX
models with the divisor as a graph constant (kiln folds it into the
kernel), runs them with `kiln run --target vulkan` and compares with numpy.
Runs on the GPU machine: python3 scripts/device/vulkan_probe.py KILN_CMD...
"""

import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def model(op, dtype, divisor, n):
    x = helper.make_tensor_value_info("x", dtype, [n])
    y = helper.make_tensor_value_info("y", dtype, [n])
    c = numpy_helper.from_array(np.array(divisor, dtype=helper.tensor_dtype_to_np_dtype(dtype)), "c")
    node = helper.make_node(op, ["x", "c"], ["y"], **({"fmod": 0} if op == "Mod" else {}))
    g = helper.make_graph([node], "probe", [x], [y], [c])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def main():
    kiln = sys.argv[1:]
    d = pathlib.Path(tempfile.mkdtemp())
    n = 4096
    for op in ["Div", "Mod"]:
        for dtype, npt in [(TensorProto.INT64, np.int64), (TensorProto.INT32, np.int32)]:
            for divisor in [3, 30, 784]:
                m = d / f"{op}_{npt.__name__}_{divisor}.onnx"
                onnx.save(model(op, dtype, divisor, n), m)
                x = np.arange(n, dtype=npt)
                np.save(d / "x.npy", x)
                out = d / "out"
                r = subprocess.run(kiln + ["run", str(m), "--target", "vulkan", "--input", f"x={d / 'x.npy'}",
                                           "--output-dir", str(out)], capture_output=True, text=True)
                if r.returncode != 0:
                    print(f"{m.name}: error {r.stderr.strip()[-200:]}")
                    continue
                y = np.load(out / "y.npy")
                want = x // divisor if op == "Div" else x % divisor
                bad = np.nonzero(y != want)[0]
                print(f"{m.name}: {'OK' if len(bad) == 0 else f'{len(bad)} wrong, first at {bad[0]}: {y[bad[0]]} vs {want[bad[0]]}'}")


if __name__ == "__main__":
    main()
