#!/usr/bin/python3
"""corpus_report.py: every model of kiln's two corpora (npm: scripts/corpus.lock;
generated: scripts/gen_corpus.py) compiled to an artifact, run, and compared
with ONNX Runtime; prints one table row per model.

  /usr/bin/python3 scripts/corpus_report.py [--kiln PATH] [--only NAME,...]
      [--json FILE|-] [--timeout S] [--work DIR] [--no-bitwise]

For each model:
  1. `kiln compile MODEL -o MODEL.kiln` (symbolic dims stay symbolic);
     a failure is reported with the first error line, then the next model.
  2. For each input set (seeded; scripts/corpus_inputs.py makes them: the npm
     models' sets, the generated models' specs from the manifest; a model
     with symbolic dims has three sizes, all run on the ONE artifact):
     `kiln run MODEL.kiln --threads 1` and `node scripts/ort/ort_run.js MODEL`
     on the same .npy files; per output the relative L2 error against ORT
     (floats) or exact equality (integers, bool).
  3. `kiln run MODEL.onnx --threads 1` on the first set must give bitwise
     the artifact's outputs (one compiler, one runtime).
A model passes when it compiles, every set runs on both sides, shapes and
dtypes agree, integers are equal and the worst relative L2 is within its
tolerance (f32 1e-4; fp16 and int8 models 1e-2), and the bitwise check holds.

Columns: model, source (npm / gen), compile (ok, or the first error line),
sizes (sets that match / sets), worst rel L2 per output over the sets
(`=` exact integers, `!` a mismatch of shape, dtype or integers), tolerance,
bitwise (yes / no / -), result (PASS / FAIL / ERROR).

Environment: KILN_BIN, KILN_CORPUS_DIR, KILN_GENERATED_DIR as for the tests.
Exit status: 0 always when the report was made (the table is the result);
2 usage error.
"""

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from corpus_inputs import REPORT_SEED, generated_inputs, npm_cases  # noqa: E402

ORT_RUN = ROOT / "scripts" / "ort" / "ort_run.js"


def rel_l2(got, want):
    got, want = got.astype(np.float64), want.astype(np.float64)
    if not np.all(np.isfinite(want)) or not np.all(np.isfinite(got)):
        same = np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(
            got[~np.isfinite(got)], want[~np.isfinite(want)]) if got.shape == want.shape else False
        if not same:
            return float("inf")
        fin = np.isfinite(want)
        got, want = got[fin], want[fin]
    denom = np.linalg.norm(want)
    return float(np.linalg.norm(got - want) / (denom if denom > 0 else 1.0))


def first_error_line(text):
    for line in text.splitlines():
        s = line.strip()
        if s and ("error" in s.lower() or "unsupported" in s.lower() or "not " in s.lower()):
            return s[:300]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0][:300] if lines else "(no message)"


def describe_failing_node(model, message):
    """For a compile error naming a node (`node 'NAME' (Op)`), the node's
    attributes and its inputs' dtypes and shapes from ONNX shape inference
    ('?' unknown), so the table says which FORM of the op is missing."""
    import re
    m = re.search(r"node '([^']*)' \((\w+)\)", message)
    if not m:
        return None
    try:
        import onnx
        from onnx import shape_inference
        proto = shape_inference.infer_shapes(onnx.load(str(model)))
    except Exception as e:  # the description is a convenience, never a failure
        return f"(cannot describe the node: {e})"
    name, op = m.group(1), m.group(2)

    def find(graph, depth):
        for n in graph.node:
            if n.op_type == op and (n.name == name or (not name and not n.name)):
                return n, graph, depth
            for a in n.attribute:
                subs = [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)
                for g in subs:
                    r = find(g, depth + 1)
                    if r:
                        return r
        return None

    found = find(proto.graph, 0)
    if not found:
        return None
    node, graph, depth = found
    types = {}
    for g in (proto.graph, graph):
        for v in list(g.input) + list(g.value_info) + list(g.output):
            t = v.type.tensor_type
            dims = [str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?") for d in t.shape.dim]
            types[v.name] = onnx.TensorProto.DataType.Name(t.elem_type).lower() + \
                (f"[{','.join(dims)}]" if t.HasField("shape") else "[rank ?]")
        for i in g.initializer:
            types[i.name] = onnx.TensorProto.DataType.Name(i.data_type).lower() + \
                f"[{','.join(map(str, i.dims))}] const"
    attrs = ", ".join(f"{a.name}={onnx.helper.get_attribute_value(a)!r}"[:60] for a in node.attribute
                      if a.type != onnx.AttributeProto.GRAPH)
    ins = ", ".join(types.get(i, "?") if i else "-" for i in node.input)
    where = f" (in a subgraph, depth {depth})" if depth else ""
    return f"{op}({ins}){' {' + attrs + '}' if attrs else ''}{where}"


def uncompiled_nodes(model, inputs, work, args):
    """Every node the cpu target cannot compile, from the compile error of
    `kiln inspect --target cpu` (which lists them all at once): 'node 'name'
    (Op) (input types): why' lines, or None when it compiles."""
    ok, out = run([args.kiln, "inspect", model, "--target", "cpu"], args.timeout)
    lines = [line.strip() for line in out.splitlines() if line.startswith("  node '")]
    return lines or None


def uncompiled_forms(lines):
    """Distinct 'Op(input dtypes and ranks): why' forms with their counts: node
    names dropped, shapes reduced to ranks ('f32[4d]'; '[*]' unranked), so
    one line stands for every size of a form."""
    import re

    def rank(m):
        body = m.group(1)
        if body == "*":
            return "[*]"
        return f"[{0 if body == '' else body.count(',') + 1}d]"
    forms = {}
    for line in lines:
        form = re.sub(r"^node '[^']*' \((\w+)\) ", r"\1", line)
        form = re.sub(r"\[([^\]]*)\]", rank, form)
        forms[form] = forms.get(form, 0) + 1
    return forms


def run(cmd, timeout, env=None):
    """(ok, combined output); a timeout or a crash is a failure, never raised."""
    try:
        r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return False, f"timed out after {timeout} s"
    except OSError as e:
        return False, f"cannot run {cmd[0]}: {e}"
    out = r.stderr + r.stdout
    if r.returncode < 0:
        return False, f"killed by signal {-r.returncode}: " + first_error_line(out)
    return r.returncode == 0, out


def load_outputs(folder, manifest_outputs):
    return {o["name"]: np.load(folder / o["file"]) for o in manifest_outputs}


def compare_set(model, artifact, inputs, work, args, index):
    """One input set: kiln (artifact) vs ORT. Returns (per-output results, error or None, artifact outputs)."""
    d = work / f"set{index}"
    d.mkdir(parents=True, exist_ok=True)
    flags = []
    for name, arr in inputs.items():
        f = d / f"in_{len(flags) // 2}.npy"
        np.save(f, arr)
        flags += ["--input", f"{name}={f}"]
    ok, out = run(["node", ORT_RUN, model, "--threads", "1", "--output-dir", d / "ort"] + flags, args.timeout)
    if not ok:
        return {}, "ORT: " + first_error_line(out), None
    ok, out = run([args.kiln, "run", artifact, "--threads", "1", "--output-dir", d / "kiln"] + flags, args.timeout)
    if not ok:
        return {}, "kiln run: " + first_error_line(out), None
    outputs = json.loads((d / "ort" / "manifest.json").read_text())["outputs"]
    results, got_all = {}, {}
    for o in outputs:
        want = np.load(d / "ort" / o["file"])
        path = d / "kiln" / o["file"]
        if not path.exists():
            results[o["name"]] = {"error": "missing output"}
            continue
        got = np.load(path)
        got_all[o["name"]] = got
        if got.shape != want.shape or got.dtype != want.dtype:
            results[o["name"]] = {"error": f"{got.dtype}{list(got.shape)} vs ORT {want.dtype}{list(want.shape)}"}
        elif np.issubdtype(want.dtype, np.floating) and want.size > 1 and np.all(want == want.flat[0]):
            # A random-weight model can be degenerate (a zero-initialized
            # classifier): equal outputs would pass without testing anything.
            results[o["name"]] = {"error": f"degenerate: every element is {want.flat[0]} (fix the model)"}
        elif np.issubdtype(want.dtype, np.floating):
            results[o["name"]] = {"rel_l2": rel_l2(got, want)}
        else:
            bad = int(np.count_nonzero(got != want))
            results[o["name"]] = {"exact": bad == 0} if bad == 0 else {"error": f"{bad} of {want.size} differ"}
    return results, None, (d, flags, outputs, got_all)


def check_model(name, source, model, sets, tolerance, args):
    rec = {"model": name, "source": source, "tolerance": tolerance, "compile": None, "sets": [],
           "outputs": {}, "bitwise": None, "result": "ERROR"}
    work = args.work / name.replace(".onnx", "")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    artifact = work / "model.kiln"
    t0 = time.time()
    ok, out = run([args.kiln, "compile", model, "-o", artifact], args.timeout)
    rec["compile_s"] = round(time.time() - t0, 1)
    if not ok:
        rec["compile"] = first_error_line(out)
        rec["failing_node"] = describe_failing_node(model, rec["compile"])
        t1 = time.time()
        rec["uncompiled"] = uncompiled_nodes(model, sets[0], work, args)
        rec["inspect_s"] = round(time.time() - t1, 1)
        rec["total_s"] = round(time.time() - t0, 1)
        return rec
    rec["compile"] = "ok"
    first = None
    for i, inputs in enumerate(sets):
        results, err, extra = compare_set(model, artifact, inputs, work, args, i)
        shapes = {k: list(v.shape) for k, v in inputs.items()}
        rec["sets"].append({"inputs": shapes, "error": err, "outputs": results})
        if i == 0 and extra:
            first = extra
        for oname, r in results.items():
            agg = rec["outputs"].setdefault(oname, {"rel_l2": 0.0, "errors": []})
            if "rel_l2" in r:
                agg["rel_l2"] = max(agg["rel_l2"], r["rel_l2"])
            if "error" in r:
                agg["errors"].append(f"set {i}: {r['error']}")
            if "exact" in r:
                agg["exact"] = True
    if first and not args.no_bitwise:
        d, flags, outputs, got = first
        ok, out = run([args.kiln, "run", model, "--threads", "1", "--output-dir", d / "onnx"] + flags, args.timeout)
        if not ok:
            rec["bitwise"] = "kiln run MODEL.onnx: " + first_error_line(out)
        else:
            same = all((d / "onnx" / o["file"]).exists() and o["name"] in got and
                       np.load(d / "onnx" / o["file"]).tobytes() == got[o["name"]].tobytes() for o in outputs)
            rec["bitwise"] = "yes" if same else "no"
    good_sets = sum(1 for s in rec["sets"] if not s["error"] and all("error" not in r for r in s["outputs"].values())
                    and all(r.get("rel_l2", 0.0) <= tolerance for r in s["outputs"].values()))
    rec["sets_ok"] = good_sets
    if any(s["error"] for s in rec["sets"]):
        rec["result"] = "ERROR"
    elif good_sets == len(sets) and rec["bitwise"] in ("yes", None):
        rec["result"] = "PASS"
    else:
        rec["result"] = "FAIL"
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    rec["total_s"] = round(time.time() - t0, 1)
    return rec


def models(args):
    """(name, source, path, input sets, tolerance) for both corpora, npm first."""
    found = []
    lock = ROOT / "scripts" / "corpus.lock"
    cases = npm_cases()
    for line in lock.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name = line.split()[0]
        case = cases.get(name)
        if case is None:
            found.append((name, "npm", args.corpus / name, None, 1e-4))
        else:
            found.append((name, "npm", args.corpus / name, case["sets"], case["tolerance"]))
    manifest_path = args.generated / "manifest.json"
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text())
        for name, e in sorted(manifest.get("models", {}).items()):
            sets = [generated_inputs(e["inputs"], sizes, REPORT_SEED + i) for i, sizes in enumerate(e["sizes"])]
            found.append((name, "gen", args.generated / e["file"], sets, e["tolerance"]))
    else:
        print(f"corpus_report: warning: no {manifest_path}: run scripts/gen_corpus.py", file=sys.stderr)
    if args.only:
        want = set(args.only.split(","))
        found = [m for m in found if m[0] in want or m[0].replace(".onnx", "") in want]
    return found


def output_cell(rec):
    parts = []
    for oname, agg in rec["outputs"].items():
        short = oname if len(oname) <= 24 else "…" + oname[-23:]
        if agg["errors"]:
            parts.append(f"{short}!{agg['errors'][0]}")
        elif agg.get("exact") and agg["rel_l2"] == 0.0:
            parts.append(f"{short}=")
        else:
            parts.append(f"{short} {agg['rel_l2']:.1e}")
    set_errors = [s["error"] for s in rec["sets"] if s["error"]]
    if set_errors:
        parts.insert(0, set_errors[0])
    return "; ".join(parts)


def print_table(records):
    header = ["model", "src", "compile", "sizes", "worst rel L2 per output (vs ORT)", "tol", "bitwise", "result"]
    rows = []
    for r in records:
        sizes = f"{r.get('sets_ok', 0)}/{len(r['sets'])}" if r["compile"] == "ok" else "-"
        rows.append([r["model"].replace(".onnx", ""), r["source"], r["compile"] if r["compile"] == "ok"
                     else "FAIL: " + r["compile"], sizes, output_cell(r) if r["compile"] == "ok" else "",
                     f"{r['tolerance']:.0e}", r["bitwise"] or "-", r["result"]])
    widths = [min(max(len(str(row[i])) for row in rows + [header]), 60 if i in (2, 4) else 200)
              for i in range(len(header))]
    line = lambda cells: " | ".join(str(c)[:widths[i]].ljust(widths[i]) if i < len(cells) - 1 else str(c)
                                    for i, c in enumerate(cells))
    print(line(header))
    print("-+-".join("-" * w for w in widths))
    for row in rows:
        print(line(row))
    counts = {k: sum(1 for r in records if r["result"] == k) for k in ("PASS", "FAIL", "ERROR")}
    compiled = sum(1 for r in records if r["compile"] == "ok")
    print(f"\n{len(records)} models: {compiled} compile, {counts['PASS']} pass, {counts['FAIL']} fail, "
          f"{counts['ERROR']} error")
    long = [r for r in records if r["compile"] != "ok" and len(r["compile"]) > widths[2]]
    if long:
        print("\ncompile errors in full:")
        for r in long:
            print(f"  {r['model']}: {r['compile']}")
            if r.get("failing_node"):
                print(f"      node: {r['failing_node']}")
    missing = [r for r in records if r.get("uncompiled")]
    if missing:
        print("\nevery node the cpu target cannot compile (kiln inspect --target cpu), by distinct form:")
        for r in missing:
            print(f"  {r['model']}: {len(r['uncompiled'])} nodes")
            for form, n in sorted(uncompiled_forms(r["uncompiled"]).items(), key=lambda kv: -kv[1]):
                print(f"      {n:4d} x {form}")
        totals = {}
        for r in missing:
            for form in uncompiled_forms(r["uncompiled"]):
                op = form.split("(", 1)[0]
                totals.setdefault(op, set()).add(r["model"].replace(".onnx", ""))
        print("\nops the cpu target cannot compile, by how many models they block:")
        for op, ms in sorted(totals.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            print(f"  {op:28} {len(ms):3d}  {', '.join(sorted(ms))}")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", default=os.environ.get("KILN_BIN", str(ROOT / "build" / "tools" / "kiln")))
    ap.add_argument("--corpus", type=pathlib.Path,
                    default=pathlib.Path(os.environ.get("KILN_CORPUS_DIR", pathlib.Path.home() / ".cache/kiln/corpus")))
    ap.add_argument("--generated", type=pathlib.Path, default=pathlib.Path(
        os.environ.get("KILN_GENERATED_DIR", pathlib.Path.home() / ".cache/kiln/generated")))
    ap.add_argument("--only", default="", help="comma-separated model names (with or without .onnx)")
    ap.add_argument("--json", help="also write the records as JSON to FILE ('-': stdout, no table)")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per command (default 1800)")
    ap.add_argument("--work", type=pathlib.Path, help="scratch directory (default: a temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep artifacts and outputs in the work directory")
    ap.add_argument("--no-bitwise", action="store_true", help="skip the kiln run MODEL.onnx check")
    args = ap.parse_args(argv)
    if not pathlib.Path(args.kiln).exists():
        print(f"corpus_report: error: kiln binary {args.kiln} not found (build first or pass --kiln)",
              file=sys.stderr)
        return 2
    tmp = None
    if args.work is None:
        tmp = tempfile.TemporaryDirectory(prefix="kiln-corpus-report-")
        args.work = pathlib.Path(tmp.name)
    records = []
    for name, source, path, sets, tol in models(args):
        if not path.exists():
            rec = {"model": name, "source": source, "tolerance": tol, "compile": "model file missing (fetch or "
                   "generate it)", "sets": [], "outputs": {}, "bitwise": None, "result": "ERROR"}
        elif sets is None:
            rec = {"model": name, "source": source, "tolerance": tol, "compile": "no input sets defined in "
                   "scripts/corpus_inputs.py", "sets": [], "outputs": {}, "bitwise": None, "result": "ERROR"}
        else:
            try:
                rec = check_model(name, source, path, sets, tol, args)
            except Exception as e:  # one broken model never stops the report
                rec = {"model": name, "source": source, "tolerance": tol, "compile": f"report error: {e}",
                       "sets": [], "outputs": {}, "bitwise": None, "result": "ERROR"}
        records.append(rec)
        if args.json != "-":
            print(f"corpus_report: {name}: {rec['result']} (compile {rec['compile'][:100]})",
                  file=sys.stderr, flush=True)
    if args.json == "-":
        json.dump(records, sys.stdout, indent=1)
        print()
    else:
        if args.json:
            pathlib.Path(args.json).write_text(json.dumps(records, indent=1) + "\n")
        print_table(records)
    if tmp:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
