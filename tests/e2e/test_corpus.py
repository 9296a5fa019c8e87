"""End-to-end tests on the real model corpus (scripts/corpus.lock).

For each model and each kiln target (interp: the reference interpreter; cpu:
the compiler): seeded random inputs -> `kiln run --target T` and ONNX
Runtime (scripts/ort/ort_run.js) on the same .npy files -> every output
compared by relative L2 error (<= 1e-4 for f32; exact for integers). And the
printed IR of each model must round-trip: print -> parse -> print is
byte-identical.

Environment: KILN_BIN (the kiln binary), KILN_CORPUS_DIR (default
~/.cache/kiln/corpus). Run with /usr/bin/python3 -m pytest.
"""

import json
import os
import pathlib
import subprocess

import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
KILN = os.environ.get("KILN_BIN", str(ROOT / "build" / "tools" / "kiln"))
CORPUS = pathlib.Path(os.environ.get("KILN_CORPUS_DIR", pathlib.Path.home() / ".cache/kiln/corpus"))
ORT_RUN = ROOT / "scripts" / "ort" / "ort_run.js"
REL_L2_F32 = 1e-4

sys.path.insert(0, str(ROOT / "scripts"))
from corpus_inputs import document_image  # noqa: E402


def rng_inputs(seed, specs):
    """specs: name -> (dtype, shape) or name -> fixed ndarray."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, spec in specs.items():
        if isinstance(spec, np.ndarray):
            out[name] = spec
        else:
            dtype, shape = spec
            out[name] = rng.uniform(-1.0, 1.0, size=shape).astype(dtype)
    return out


# name -> list of input sets (each a dict of input name -> spec). Shapes are
# realistic for the model; silero runs at 16 kHz and 8 kHz so both sides of
# its sample-rate If nodes execute.
CASES = {
    "silero_vad_v5.onnx": [
        {"input": (np.float32, (1, 512)), "state": (np.float32, (2, 1, 128)),
         "sr": np.array(16000, dtype=np.int64)},
        {"input": (np.float32, (1, 256)), "state": (np.float32, (2, 1, 128)),
         "sr": np.array(8000, dtype=np.int64)},
    ],
    "ch_PP-OCRv4_det_infer.onnx": [{"x": document_image(7, 256, 320)}],
    "ch_PP-OCRv4_rec_infer.onnx": [{"x": (np.float32, (1, 3, 48, 320))}],
    "ch_ppocr_mobile_v2.0_cls_infer.onnx": [{"x": (np.float32, (1, 3, 48, 192))}],
    "yolov8n.onnx": [{"images": (np.float32, (1, 3, 640, 640))}],
}


def model_path(name):
    p = CORPUS / name
    if not p.exists():
        pytest.fail(f"{p} is missing: run scripts/fetch_corpus.sh")
    return p


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))} failed ({r.returncode}):\n{r.stderr}")
    return r


def rel_l2(a, b):
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    denom = np.linalg.norm(b)
    return np.linalg.norm(a - b) / (denom if denom > 0 else 1.0)


@pytest.mark.parametrize("target", ["interp", "cpu"])
@pytest.mark.parametrize("name,index", [(n, i) for n, sets in CASES.items() for i in range(len(sets))])
def test_matches_onnxruntime(name, index, target, tmp_path):
    model = model_path(name)
    inputs = rng_inputs(1234 + index, CASES[name][index])
    args = []
    for k, v in inputs.items():
        f = tmp_path / f"in_{k}.npy"
        np.save(f, v)
        args += ["--input", f"{k}={f}"]
    run([KILN, "run", str(model), "--target", target, "--output-dir", str(tmp_path / "kiln")] + args)
    run(["node", str(ORT_RUN), str(model), "--output-dir", str(tmp_path / "ort")] + args)
    manifest = json.loads((tmp_path / "ort" / "manifest.json").read_text())["outputs"]
    assert manifest, "onnxruntime produced no outputs"
    for out in manifest:
        ref = np.load(tmp_path / "ort" / out["file"])
        got = np.load(tmp_path / "kiln" / out["file"])
        assert got.shape == ref.shape, f"{out['name']}: shape {got.shape} vs {ref.shape}"
        assert got.dtype == ref.dtype, f"{out['name']}: dtype {got.dtype} vs {ref.dtype}"
        if np.issubdtype(ref.dtype, np.floating):
            err = rel_l2(got, ref)
            print(f"{name}[{index}] {target} {out['name']}: relative L2 {err:.3e}")
            assert err <= REL_L2_F32, f"{out['name']}: relative L2 {err:.3e} > {REL_L2_F32}"
        else:
            np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("name", list(CASES))
def test_printed_ir_round_trips(name, tmp_path):
    model = model_path(name)
    first = run([KILN, "opt", str(model)]).stdout
    kir = tmp_path / "model.kir"
    kir.write_text(first)
    second = run([KILN, "opt", str(kir)]).stdout
    assert first == second, "print -> parse -> print changed the text"
