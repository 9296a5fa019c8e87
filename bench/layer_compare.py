#!/usr/bin/env python3
"""layer_compare.py: kiln's per-step times next to ONNX Runtime's per-node
times on one corpus model, one thread count, one run of each (the inputs
bench/compare_ort.py uses), so a model's gap to ORT reads as a list of
layers.

    /usr/bin/python3 bench/layer_compare.py MODEL [--threads N] [--runs R]
                                            [--kiln BIN] [--top N]

Rows are ONNX node names. kiln names a fused step after its first node
('fused.' dropped); ORT names a node after itself or, for the nodes its
NCHWc layout pass rewrites, after the output tensor ('<tensor>_nchwc'),
which is mapped back to the Conv/Gemm/MatMul that produces it through any
activations fused after it. A row with one side 0 is work the other side
fused into a neighbour or does not have (kiln's MaxPool next to ORT's
NCHWc conv, ORT's ReorderOutput). Times are per run, in ms.
"""
import argparse
import collections
import json
import pathlib
import re
import subprocess
import sys
import tempfile

import onnx

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import compare_ort  # noqa: E402

ANCHORS = ("Conv", "Gemm", "MatMul", "ConvTranspose")
# What ORT fuses after an anchor (activations, the residual Add).
FUSED_AFTER = ("Relu", "Clip", "LeakyRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Add", "Sum")


def ort_times(opts, path, flags, tmp):
    prefix = tmp / "ort_profile"
    cmd = ["node", str(compare_ort.ORT_RUN), str(path), *flags, "--output-dir", str(tmp / "ort_out"),
           "--threads", str(opts.threads), "--repeat", str(opts.runs), "--quiet", "--profile", str(prefix)]
    compare_ort.run(cmd)
    [trace] = list(tmp.glob("ort_profile*.json"))
    events = json.loads(trace.read_text())
    # ort_run.js runs once untimed (allocations, first touches), then
    # --repeat times: the first run's nodes are left out.
    starts = sorted(e["ts"] for e in events if e.get("name") == "model_run")
    times = collections.defaultdict(float)
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time") and e["ts"] >= starts[1]:
            times[e["name"][: -len("_kernel_time")]] += e["dur"] / 1000.0 / (len(starts) - 1)
    return times


def kiln_times(opts, path, flags):
    out = subprocess.run([opts.kiln, "bench", str(path), "--profile", "--threads", str(opts.threads),
                          "--runs", str(opts.runs)] + flags, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"layer_compare.py: kiln bench failed:\n{out.stderr}")
    runs, times = None, {}
    for line in out.stdout.splitlines():
        m = re.match(r"runs\s+(\d+)", line)
        if m:
            runs = int(m.group(1))
        m = re.match(r"\s*([\d.]+) ms\s+[\d.]+%\s+(.*) node '(?:fused\.)?([^']*)'(.*)", line)
        if m:
            # A fused kernel of unnamed nodes (casts kiln inserted): its
            # kernel and ops, "k12 [Cast Relu Cast]".
            name = m.group(3) or f"{m.group(2).split()[-1]} {m.group(4).split(')', 1)[-1].strip()}"
            times[name] = times.get(name, 0.0) + float(m.group(1))
    return {k: v / runs for k, v in times.items()}


def node_namer(model_path):
    graph = onnx.load(str(model_path), load_external_data=False).graph
    producer = {out: node for node in graph.node for out in node.output}
    names = {node.name for node in graph.node}

    def name(ort_name):
        # ORT's casts around fp16 nodes it runs in f32 carry this prefix.
        ort_name = ort_name.removeprefix("InsertedPrecisionFreeCast_")
        if ort_name in names:
            return ort_name
        tensor = ort_name[: -len("_nchwc")] if ort_name.endswith("_nchwc") else ort_name
        node = producer.get(tensor)
        if node is None:
            return ort_name
        # Back through fused activations and residual Adds to the anchor;
        # anything else (a MaxPool in NCHWc) is its own row.
        frontier = [node]
        for _ in range(4):
            for n in frontier:
                if n.op_type in ANCHORS:
                    return n.name
            frontier = [producer[i] for n in frontier if n.op_type in FUSED_AFTER
                        for i in n.input if i in producer]
        return node.name

    return name, names


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--kiln", default=compare_ort.DEFAULT_KILN)
    ap.add_argument("--top", type=int, default=40, help="rows shown, slowest on kiln first (default 40)")
    opts = ap.parse_args()
    name, path, inputs = compare_ort.pick_model(opts.model)
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = pathlib.Path(tmpdir)
        flags = compare_ort.write_inputs(inputs, tmp)
        namer, nodes = node_namer(path)
        kiln = collections.defaultdict(float)
        for k, v in kiln_times(opts, path, flags).items():
            # A Gemm's matrix product step is "<node>.mm".
            kiln[k[:-3] if k.endswith(".mm") and k[:-3] in nodes else k] += v
        ort = collections.defaultdict(float)
        for k, v in ort_times(opts, path, flags, tmp).items():
            ort[namer(k)] += v
    rows = sorted(set(kiln) | set(ort), key=lambda k: -max(kiln.get(k, 0.0), ort.get(k, 0.0)))
    print(f"{name}, {opts.threads} thread(s), {opts.runs} runs each; ms per run")
    print(f"{'kiln':>8} {'ORT':>8} {'kiln/ORT':>8}  node")
    for k in rows[: opts.top]:
        a, b = kiln.get(k, 0.0), ort.get(k, 0.0)
        ratio = f"{a / b:8.2f}" if a and b else f"{'-':>8}"
        print(f"{a:8.3f} {b:8.3f} {ratio}  {k}")
    tk, to = sum(kiln.values()), sum(ort.values())
    print(f"{tk:8.3f} {to:8.3f} {tk / to:8.2f}  total of the steps / nodes ({len(rows) - min(len(rows), opts.top)} rows not shown)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
