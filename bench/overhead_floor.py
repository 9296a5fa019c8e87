#!/usr/bin/python3
"""The per-call floor: kiln and ONNX Runtime on models that do (almost)
nothing, so what is timed is the run call itself — input checks, output
allocation, the executor's loop, thread-pool hand-offs.

Three one-node models, built here with onnx.helper: Identity on f32[1] (a
view, no kernel), Add of two f32[1] (one generated kernel), and a chain of
32 Adds on f32[1] compiled at -O0, so fusion leaves them 32 steps (the cost
per step). Each is compiled to a .kiln
and timed alternately with ORT (bench/compare_ort.py's kiln_once/ort_once),
at each thread count. Run with /usr/bin/python3; see bench/README.md.
"""

import argparse
import pathlib
import statistics
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import compare_ort  # noqa: E402


def chain_model(adds):
    """x: f32[1] -> y: Identity when adds is 0, else a chain of `adds` Adds of x."""
    if adds == 0:
        nodes = [helper.make_node("Identity", ["x"], ["y"])]
    else:
        nodes, prev = [], "x"
        for i in range(adds):
            out = "y" if i == adds - 1 else f"t{i}"
            nodes.append(helper.make_node("Add", [prev, "x"], [out]))
            prev = out
    g = helper.make_graph(nodes, "floor", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--kiln", default=compare_ort.DEFAULT_KILN)
    opts = ap.parse_args()
    opts.warmup = 50
    models = {"identity": (chain_model(0), []), "add": (chain_model(1), []),
              "add x32": (chain_model(32), ["-O0"])}
    print(f"per-call floor, median over {opts.rounds} rounds of the median of {opts.runs} runs (microseconds)")
    print(f"{'model':<10}  {'threads':>7}  {'kiln us':>8}  {'ORT us':>8}  {'kiln/ORT':>8}")
    with tempfile.TemporaryDirectory(prefix="kiln-floor-") as tmp:
        tmp = pathlib.Path(tmp)
        x = tmp / "x.npy"
        np.save(x, np.array([0.5], dtype=np.float32))
        flags = ["--input", f"x={x}"]
        for name, (model, compile_flags) in models.items():
            path = tmp / f"{name.replace(' ', '_')}.onnx"
            onnx.save(model, path)
            artifact = path.with_suffix(".kiln")
            compare_ort.run([opts.kiln, "compile", path, "-o", artifact] + compile_flags)
            for threads in [int(t) for t in opts.threads.split(",")]:
                k, o = [], []
                for _ in range(opts.rounds):
                    k.append(compare_ort.kiln_once(opts, opts.kiln, artifact, flags, threads)["median_ms"])
                    o.append(compare_ort.ort_once(opts, path, flags, tmp / "ort_out", threads)["median_ms"])
                km, om = statistics.median(k) * 1000, statistics.median(o) * 1000
                print(f"{name:<10}  {threads:>7}  {km:>8.1f}  {om:>8.1f}  {km / om:>8.2f}")


if __name__ == "__main__":
    main()
