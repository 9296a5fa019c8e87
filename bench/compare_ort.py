#!/usr/bin/python3
"""Side-by-side latency of kiln and ONNX Runtime (CPU) on the model corpus.

Every model of both corpora (npm: scripts/corpus.lock; generated:
scripts/gen_corpus.py), or a subset, runs on its first input set from
scripts/corpus_inputs.py (the realistic default: a 16 kHz audio chunk, a
document page, a 640x640 image, batch 1 at 224x224...). Each model is
compiled once to a .kiln artifact (compile time reported); then, for several
rounds and for each thread count, `kiln bench MODEL.kiln --json` and
`node scripts/ort/ort_run.js --repeat R --threads N --quiet` (ORT graph
optimizations on) run ALTERNATELY on the same input files, so drift in
machine load hits both sides alike. Each side's figure is the median over
rounds of its per-round median latency. Per thread count the table shows kiln
ms, ORT ms and kiln/ORT (< 1: kiln is faster), then the geometric mean of the
ratios over all models and over the heavy ones (ORT >= 1 ms at the fewest
threads, where overhead does not decide), and the models above 1.2.

With --baseline KILN_OLD a second kiln binary (an older build) joins the
alternation on the .onnx file, and the table adds its time, its ratio to ORT
and new/old: a change's speed claim measured in one run, against the same ORT
runs.

Run with /usr/bin/python3 (it needs numpy). See bench/README.md.
"""

import argparse
import json
import math
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import re
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
ORT_RUN = ROOT / "scripts" / "ort" / "ort_run.js"
DEFAULT_KILN = os.environ.get("KILN_BIN", str(ROOT / "build" / "tools" / "kiln"))
sys.path.insert(0, str(ROOT / "scripts"))
import corpus_report  # noqa: E402

DEFAULT_CORPUS = pathlib.Path(os.environ.get("KILN_CORPUS_DIR", pathlib.Path.home() / ".cache/kiln/corpus"))
DEFAULT_GENERATED = pathlib.Path(
    os.environ.get("KILN_GENERATED_DIR", pathlib.Path.home() / ".cache/kiln/generated"))
# The five models kiln's first tests were built on (--public).
PUBLIC = ["silero_vad_v5", "ch_PP-OCRv4_det_infer", "ch_PP-OCRv4_rec_infer",
          "ch_ppocr_mobile_v2.0_cls_infer", "yolov8n"]
HEAVY_MS = 1.0  # ORT latency from which a model counts as heavy
OUTLIER = 1.2   # kiln/ORT above this is listed


def stem(name):
    return name[:-5] if name.endswith(".onnx") else name


def pick_models(opts):
    """(name, path, first input set) of the chosen models, npm first."""
    args = argparse.Namespace(corpus=pathlib.Path(opts.corpus), generated=pathlib.Path(opts.generated), only="")
    found = [(stem(name), path, sets) for name, _, path, sets, _ in corpus_report.models(args)]
    wanted = [s.strip() for s in opts.models.split(",") if s.strip()] if opts.models else []
    if opts.public:
        wanted += PUBLIC
    if wanted:
        by_name = {m[0]: m for m in found}
        unknown = [w for w in wanted if stem(w) not in by_name]
        if unknown:
            sys.exit(f"compare_ort.py: unknown model(s) {', '.join(unknown)}; known: "
                     + ", ".join(by_name))
        found = [by_name[stem(w)] for w in dict.fromkeys(wanted)]
    missing = [str(p) for _, p, _ in found if not p.exists()]
    if missing:
        sys.exit("compare_ort.py: missing models (run scripts/setup.sh: fetch_corpus.sh, gen_corpus.py): "
                 + ", ".join(missing))
    if any(sets is None for _, _, sets in found):
        sys.exit("compare_ort.py: a model has no input sets in scripts/corpus_inputs.py")
    return [(name, path, sets[0]) for name, path, sets in found]


def pick_model(name):
    """(name, path, input sets) of one corpus model, for the one-model tools
    (profile_model.py, layer_compare.py)."""
    sel = argparse.Namespace(corpus=str(DEFAULT_CORPUS), generated=str(DEFAULT_GENERATED),
                             models=name, public=False)
    [picked] = pick_models(sel)
    return picked


def write_inputs(inputs, outdir):
    args = []
    for i, (name, value) in enumerate(inputs.items()):
        f = outdir / f"in_{i}.npy"
        np.save(f, value)
        args += ["--input", f"{name}={f}"]
    return args


def run(cmd):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"compare_ort.py: {' '.join(map(str, cmd))} failed ({r.returncode}):\n{r.stderr}")
    return r


def kiln_once(opts, binary, model, inputs, threads):
    r = run([binary, "bench", model, "--json", "--threads", threads, "--runs", opts.runs,
             "--warmup", opts.warmup] + inputs)
    return json.loads(r.stdout)


TIME_RE = re.compile(r"time_ms min=([\d.]+) median=([\d.]+) mean=([\d.]+)")


def ort_once(opts, model, inputs, outdir, threads):
    # ort_run.js makes one untimed run, then times --repeat more.
    r = run(["node", ORT_RUN, model, "--output-dir", outdir, "--repeat", opts.runs, "--threads", threads,
             "--quiet"] + inputs)
    m = TIME_RE.search(r.stderr)
    if not m:
        sys.exit(f"compare_ort.py: no time_ms line from ort_run.js:\n{r.stderr}")
    return {"min_ms": float(m.group(1)), "median_ms": float(m.group(2)), "mean_ms": float(m.group(3))}


def geomean(values):
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def measure(opts, name, path, inputs, tmp):
    """One model: compile once, then the alternating rounds at every thread count."""
    mdir = tmp / name
    mdir.mkdir()
    flags = write_inputs(inputs, mdir)
    artifact = mdir / "model.kiln"
    t0 = time.time()
    run([opts.kiln, "compile", path, "-o", artifact])
    compile_s = time.time() - t0
    rows = {}
    for threads in opts.thread_counts:
        kiln_r, ort_r, base_r = [], [], []
        for r in range(opts.rounds):
            print(f"[{name}] threads {threads} round {r + 1}/{opts.rounds}", file=sys.stderr, flush=True)
            kiln_r.append(kiln_once(opts, opts.kiln, artifact, flags, threads))
            if opts.baseline:
                base_r.append(kiln_once(opts, opts.baseline, path, flags, threads))
            ort_r.append(ort_once(opts, path, flags, mdir / "ort_out", threads))
        k = statistics.median(x["median_ms"] for x in kiln_r)
        o = statistics.median(x["median_ms"] for x in ort_r)
        row = {"model": name, "threads": threads, "kiln_ms": k, "ort_ms": o, "ratio": k / o,
               "compile_s": round(compile_s, 2),
               "kiln_round_medians_ms": [x["median_ms"] for x in kiln_r],
               "ort_round_medians_ms": [x["median_ms"] for x in ort_r]}
        if base_r:
            b = statistics.median(x["median_ms"] for x in base_r)
            row.update(baseline_ms=b, baseline_ratio=b / o, new_over_baseline=k / b)
        rows[threads] = row
    return rows


def summary(rows, heavy_names):
    heavy = [r for r in rows if r["model"] in heavy_names]
    out = {"model_count": len(rows), "geomean_ratio": geomean(r["ratio"] for r in rows),
           "heavy_models": len(heavy), "geomean_heavy_ratio": geomean(r["ratio"] for r in heavy),
           "above_outlier": [r["model"] for r in rows if r["ratio"] > OUTLIER]}
    if rows and "baseline_ms" in rows[0]:
        out["geomean_baseline_ratio"] = geomean(r["baseline_ratio"] for r in rows)
        out["geomean_new_over_baseline"] = geomean(r["new_over_baseline"] for r in rows)
    return out


def print_table(opts, threads, rows, s):
    width = max(len("model"), max(len(r["model"]) for r in rows))
    print(f"\nkiln (artifact) vs ONNX Runtime (CPU, graph optimizations on); threads={threads} "
          f"runs={opts.runs} rounds={opts.rounds}" + (f"; baseline {opts.baseline}" if opts.baseline else ""))
    base_head = f"  {'base ms':>10}  {'base/ORT':>8}  {'new/base':>8}" if opts.baseline else ""
    print(f"{'model':<{width}}  {'kiln ms':>10}  {'ORT ms':>10}  {'kiln/ORT':>8}" + base_head)
    for r in rows:
        base = (f"  {r['baseline_ms']:>10.3f}  {r['baseline_ratio']:>8.2f}  {r['new_over_baseline']:>8.2f}"
                if opts.baseline else "")
        mark = "  <" if r["ratio"] > OUTLIER else ""
        print(f"{r['model']:<{width}}  {r['kiln_ms']:>10.3f}  {r['ort_ms']:>10.3f}  {r['ratio']:>8.2f}" + base + mark)
    base = (f"  {'':>10}  {s['geomean_baseline_ratio']:>8.2f}  {s['geomean_new_over_baseline']:>8.2f}"
            if opts.baseline else "")
    print(f"{'geomean':<{width}}  {'':>10}  {'':>10}  {s['geomean_ratio']:>8.2f}" + base)
    print(f"{'geomean heavy':<{width}}  {'':>10}  {'':>10}  {s['geomean_heavy_ratio']:>8.2f}"
          f"   ({s['heavy_models']} of {s['model_count']} models: ORT >= {HEAVY_MS:g} ms at "
          f"{min(opts.thread_counts)} thread(s))")
    print(f"above {OUTLIER}: {', '.join(s['above_outlier']) or 'none'}")


def print_saved(opts, saved):
    opts.runs, opts.rounds, opts.baseline = saved["runs"], saved["rounds"], saved["baseline"]
    opts.thread_counts = [int(t) for t in saved["threads"]]
    for t, data in saved["threads"].items():
        print_table(opts, int(t), data["models"], data)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default="1,2", help="thread counts for both sides, comma-separated (default 1,2)")
    ap.add_argument("--runs", type=int, default=10, help="timed runs per side per round (default 10)")
    ap.add_argument("--warmup", type=int, default=1,
                    help="kiln warm-up runs per round (default 1, like ort_run.js's untimed first run)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating kiln/ORT rounds (default 3)")
    ap.add_argument("--models", default="", help="comma-separated subset, e.g. yolov8n,tv_resnet50")
    ap.add_argument("--public", action="store_true", help="the five models of kiln's first tests")
    ap.add_argument("--kiln", default=DEFAULT_KILN, help="kiln binary (default $KILN_BIN or build/tools/kiln)")
    ap.add_argument("--baseline", default="",
                    help="a second (older) kiln binary timed in the same alternation, on the .onnx")
    ap.add_argument("--corpus", default=str(DEFAULT_CORPUS), help="npm model dir (default $KILN_CORPUS_DIR)")
    ap.add_argument("--generated", default=str(DEFAULT_GENERATED),
                    help="generated model dir (default $KILN_GENERATED_DIR)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the tables")
    ap.add_argument("--table", default="", metavar="FILE",
                    help="print the tables of an earlier --json result instead of measuring")
    opts = ap.parse_args()
    if opts.table:
        return print_saved(opts, json.loads(pathlib.Path(opts.table).read_text()))
    try:
        opts.thread_counts = [int(t) for t in opts.threads.split(",") if t.strip()]
    except ValueError:
        sys.exit(f"compare_ort.py: --threads takes numbers, got '{opts.threads}'")
    if not opts.thread_counts or min(opts.thread_counts) < 1 or opts.runs < 1 or opts.rounds < 1 \
            or opts.warmup < 0:
        sys.exit("compare_ort.py: --threads, --runs and --rounds must be >= 1, --warmup >= 0")
    for binary in [opts.kiln] + ([opts.baseline] if opts.baseline else []):
        if not pathlib.Path(binary).exists():
            sys.exit(f"compare_ort.py: no kiln binary at {binary} (build it or pass --kiln/--baseline)")

    by_threads = {t: [] for t in opts.thread_counts}
    with tempfile.TemporaryDirectory(prefix="kiln-bench-") as tmp:
        for name, path, inputs in pick_models(opts):
            for t, row in measure(opts, name, path, inputs, pathlib.Path(tmp)).items():
                by_threads[t].append(row)

    # Heavy by ORT's time at the fewest threads, so every table has one set.
    first = by_threads[min(opts.thread_counts)]
    heavy_names = {r["model"] for r in first if r["ort_ms"] >= HEAVY_MS}
    summaries = {t: summary(rows, heavy_names) for t, rows in by_threads.items()}
    if opts.json:
        print(json.dumps({"runs": opts.runs, "warmup": opts.warmup, "rounds": opts.rounds,
                          "baseline": opts.baseline or None, "heavy_ms": HEAVY_MS,
                          "threads": {str(t): {"models": by_threads[t], **summaries[t]}
                                      for t in opts.thread_counts}}, indent=1))
        return
    for t in opts.thread_counts:
        print_table(opts, t, by_threads[t], summaries[t])


if __name__ == "__main__":
    main()
