#!/usr/bin/python3
"""Side-by-side latency of kiln and ONNX Runtime (CPU) on the model corpus.

For each model: seeded inputs of a realistic shape are written as .npy once;
then, for several rounds, `kiln bench --json` and
`node scripts/ort/ort_run.js --repeat R --threads N --quiet` (ORT graph
optimizations on) are run ALTERNATELY on the same files with the same thread
count, so that drift in machine load hits both sides alike. Each side's figure
is the median over rounds of its per-round median latency; the table shows
kiln ms, ORT ms and the ratio kiln/ORT (lower is better for kiln; < 1 means
kiln is faster), plus the geometric mean of the ratios. With --baseline
KILN_OLD a second kiln binary (an older build) joins the alternation, and
the table adds its time, its ratio to ORT and new/old: a change's speed
claim measured in one run, against the same ORT runs.

Run with /usr/bin/python3 (it needs numpy). See bench/README.md.
"""

import argparse
import json
import math
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
ORT_RUN = ROOT / "scripts" / "ort" / "ort_run.js"
DEFAULT_KILN = os.environ.get("KILN_BIN", str(ROOT / "build" / "tools" / "kiln"))
sys.path.insert(0, str(ROOT / "scripts"))
from corpus_inputs import document_image  # noqa: E402

DEFAULT_CORPUS = pathlib.Path(
    os.environ.get("KILN_CORPUS_DIR", pathlib.Path.home() / ".cache/kiln/corpus"))


# model file -> input name -> (dtype, shape) for seeded uniform [-1, 1) values,
# or a fixed ndarray. Shapes as in tests/e2e/test_corpus.py.
CASES = {
    "silero_vad_v5.onnx": {"input": (np.float32, (1, 512)),
                           "state": (np.float32, (2, 1, 128)),
                           "sr": np.array(16000, dtype=np.int64)},
    "ch_PP-OCRv4_det_infer.onnx": {"x": lambda: document_image(7, 256, 320)},
    "ch_PP-OCRv4_rec_infer.onnx": {"x": (np.float32, (1, 3, 48, 320))},
    "ch_ppocr_mobile_v2.0_cls_infer.onnx": {"x": (np.float32, (1, 3, 48, 192))},
    "yolov8n.onnx": {"images": (np.float32, (1, 3, 640, 640))},
}


def stem(name):
    return name[:-5] if name.endswith(".onnx") else name


def pick_models(spec):
    if not spec:
        return list(CASES)
    chosen = []
    for want in (s.strip() for s in spec.split(",") if s.strip()):
        hits = [m for m in CASES if stem(m) == stem(want)] or [m for m in CASES if want in m]
        if len(hits) != 1:
            sys.exit(f"compare_ort.py: --models: '{want}' matches {len(hits)} of: "
                     + ", ".join(stem(m) for m in CASES))
        chosen.append(hits[0])
    return chosen


def write_inputs(model, seed, outdir):
    rng = np.random.default_rng(seed)
    args = []
    for name, spec in CASES[model].items():
        if callable(spec):
            value = spec()
        elif isinstance(spec, np.ndarray):
            value = spec
        else:
            dtype, shape = spec
            value = rng.uniform(-1.0, 1.0, size=shape).astype(dtype)
        f = outdir / f"in_{name}.npy"
        np.save(f, value)
        args += ["--input", f"{name}={f}"]
    return args


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"compare_ort.py: {' '.join(map(str, cmd))} failed ({r.returncode}):\n{r.stderr}")
    return r


def kiln_once(opts, model, inputs, binary=None):
    r = run([binary or opts.kiln, "bench", str(model), "--json", "--target", opts.target,
             "--threads", str(opts.threads), "--runs", str(opts.runs),
             "--warmup", str(opts.warmup)] + inputs)
    return json.loads(r.stdout)


TIME_RE = re.compile(r"time_ms min=([\d.]+) median=([\d.]+) mean=([\d.]+)")


def ort_once(opts, model, inputs, outdir):
    # ort_run.js makes one untimed run, then times --repeat more.
    r = run(["node", str(ORT_RUN), str(model), "--output-dir", str(outdir),
             "--repeat", str(opts.runs), "--threads", str(opts.threads), "--quiet"] + inputs)
    m = TIME_RE.search(r.stderr)
    if not m:
        sys.exit(f"compare_ort.py: no time_ms line from ort_run.js:\n{r.stderr}")
    return {"min_ms": float(m.group(1)), "median_ms": float(m.group(2)), "mean_ms": float(m.group(3))}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1, help="threads for both sides (default 1)")
    ap.add_argument("--runs", type=int, default=10, help="timed runs per side per round (default 10)")
    ap.add_argument("--warmup", type=int, default=1,
                    help="kiln warm-up runs per round (default 1, like ort_run.js's untimed first run)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating kiln/ORT rounds (default 3)")
    ap.add_argument("--target", default="cpu", help="kiln target (default cpu)")
    ap.add_argument("--models", default="", help="comma-separated subset, e.g. yolov8n,silero_vad_v5")
    ap.add_argument("--seed", type=int, default=1234, help="input seed (default 1234)")
    ap.add_argument("--kiln", default=DEFAULT_KILN, help="kiln binary (default $KILN_BIN or build/tools/kiln)")
    ap.add_argument("--baseline", default="",
                    help="a second (older) kiln binary timed in the same alternation")
    ap.add_argument("--corpus", default=str(DEFAULT_CORPUS), help="model dir (default $KILN_CORPUS_DIR)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    opts = ap.parse_args()
    if opts.threads < 1 or opts.runs < 1 or opts.rounds < 1 or opts.warmup < 0:
        sys.exit("compare_ort.py: --threads, --runs and --rounds must be >= 1, --warmup >= 0")
    if not pathlib.Path(opts.kiln).exists():
        sys.exit(f"compare_ort.py: no kiln binary at {opts.kiln} (build it or pass --kiln)")

    rows = []
    with tempfile.TemporaryDirectory(prefix="kiln-bench-") as tmp:
        tmp = pathlib.Path(tmp)
        for i, name in enumerate(pick_models(opts.models)):
            model = pathlib.Path(opts.corpus) / name
            if not model.exists():
                sys.exit(f"compare_ort.py: {model} is missing: run scripts/fetch_corpus.sh")
            mdir = tmp / stem(name)
            mdir.mkdir()
            inputs = write_inputs(name, opts.seed + i, mdir)
            kiln_rounds, ort_rounds, base_rounds = [], [], []
            for r in range(opts.rounds):
                print(f"[{stem(name)}] round {r + 1}/{opts.rounds}", file=sys.stderr, flush=True)
                kiln_rounds.append(kiln_once(opts, model, inputs))
                if opts.baseline:
                    base_rounds.append(kiln_once(opts, model, inputs, opts.baseline))
                ort_rounds.append(ort_once(opts, model, inputs, mdir / "ort_out"))
            k = statistics.median(x["median_ms"] for x in kiln_rounds)
            o = statistics.median(x["median_ms"] for x in ort_rounds)
            if base_rounds:
                b = statistics.median(x["median_ms"] for x in base_rounds)
                extra = {"baseline_ms": b, "baseline_ratio": b / o, "new_over_baseline": k / b}
            else:
                extra = {}
            rows.append({**extra, 
                "model": stem(name),
                "kiln_ms": k,
                "ort_ms": o,
                "ratio": k / o,
                "kiln_import_ms": statistics.median(x["import_ms"] for x in kiln_rounds),
                "kiln_compile_ms": statistics.median(x["compile_ms"] for x in kiln_rounds),
                "kiln_round_medians_ms": [x["median_ms"] for x in kiln_rounds],
                "ort_round_medians_ms": [x["median_ms"] for x in ort_rounds],
            })

    def gmean(key):
        return math.exp(sum(math.log(r[key]) for r in rows) / len(rows))
    geomean = gmean("ratio")
    if opts.json:
        out = {"target": opts.target, "threads": opts.threads, "runs": opts.runs, "warmup": opts.warmup,
               "rounds": opts.rounds, "models": rows, "geomean_ratio": geomean}
        if opts.baseline:
            out.update(baseline=opts.baseline, geomean_baseline_ratio=gmean("baseline_ratio"),
                       geomean_new_over_baseline=gmean("new_over_baseline"))
        print(json.dumps(out, indent=1))
        return
    width = max(len("model"), max(len(r["model"]) for r in rows))
    print(f"kiln --target {opts.target} vs ONNX Runtime (CPU, graph optimizations on); "
          f"threads={opts.threads} runs={opts.runs} rounds={opts.rounds}"
          + (f"; baseline {opts.baseline}" if opts.baseline else ""))
    base_head = f"  {'base ms':>10}  {'base/ORT':>10}  {'new/base':>10}" if opts.baseline else ""
    print(f"{'model':<{width}}  {'kiln ms':>12}  {'ORT ms':>10}  {'kiln/ORT':>10}" + base_head)
    for r in rows:
        base = (f"  {r['baseline_ms']:>10.3f}  {r['baseline_ratio']:>10.2f}  {r['new_over_baseline']:>10.2f}"
                if opts.baseline else "")
        print(f"{r['model']:<{width}}  {r['kiln_ms']:>12.3f}  {r['ort_ms']:>10.3f}  {r['ratio']:>10.2f}" + base)
    base = (f"  {'':>10}  {gmean('baseline_ratio'):>10.2f}  {gmean('new_over_baseline'):>10.2f}"
            if opts.baseline else "")
    print(f"{'geomean':<{width}}  {'':>12}  {'':>10}  {geomean:>10.2f}" + base)


if __name__ == "__main__":
    main()
