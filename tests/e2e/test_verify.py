"""End-to-end tests of `kiln verify` on the model corpus (issue 5).

- verify passes on every corpus model against the interpreter and against
  ONNX Runtime (the inputs of tests/e2e/test_corpus.py, via --inputs-from);
- with KILN_DEBUG_PERTURB on a node of three corpus models, verify fails and
  --bisect names exactly the perturbed node (a stand-alone layer, and a node
  inside a fused group, reported with the group's source nodes); also with
  ONNX Runtime as the per-layer reference;
- the HTML report renders in headless Chromium to a non-blank screenshot
  with the curve's colour in it.

Environment: KILN_BIN (the kiln binary), KILN_CORPUS_DIR (default
~/.cache/kiln/corpus). Run with /usr/bin/python3 -m pytest.
"""

import json
import os
import pathlib
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from test_corpus import CASES, KILN, model_path, rng_inputs  # noqa: E402

# Models for the fault-injection runs: quick, and their work is in top-level
# nodes (silero keeps nearly all of it inside the branches of one If, where
# bisection stops at the If).
BISECT_MODELS = ["ch_ppocr_mobile_v2.0_cls_infer.onnx", "ch_PP-OCRv4_rec_infer.onnx", "ch_PP-OCRv4_det_infer.onnx"]
# The curve colours of src/verify/report.cpp (passing and failing points).
CURVE_BLUE = (0x2B, 0x6C, 0xB0)
FAIL_RED = (0xD6, 0x27, 0x28)


def save_inputs(tmp_path, name, index):
    """The test_corpus inputs of a case as DIR/<input>.npy (--inputs-from)."""
    d = tmp_path / "inputs"
    d.mkdir(exist_ok=True)
    for k, v in rng_inputs(1234 + index, CASES[name][index]).items():
        np.save(d / f"{k}.npy", v)
    return d


def verify(model, *args, env=None, expect=0):
    cmd = [KILN, "verify", str(model), *map(str, args)]
    full_env = dict(os.environ)
    full_env.pop("KILN_DEBUG_PERTURB", None)
    full_env.update(env or {})
    r = subprocess.run(cmd, capture_output=True, text=True, env=full_env)
    if r.returncode != expect:
        raise AssertionError(f"{' '.join(cmd)} {env or ''}: exit {r.returncode}, expected {expect}\n"
                             f"{r.stdout[-6000:]}\n{r.stderr}")
    return r


@pytest.mark.parametrize("reference", ["interp", "ort"])
@pytest.mark.parametrize("name,index", [(n, i) for n, sets in CASES.items() for i in range(len(sets))])
def test_verify_passes(name, index, reference, tmp_path):
    model = model_path(name)
    inputs = save_inputs(tmp_path, name, index)
    out = tmp_path / "verify.json"
    r = verify(model, "--reference", reference, "--inputs-from", inputs, "--json", out)
    doc = json.loads(out.read_text())
    assert doc["schema"] == "kiln-verify/1"
    assert doc["pass"] is True and doc["reference"] == reference and doc["target"] == "cpu"
    assert all(i["source"] != "random" for i in doc["inputs"]), doc["inputs"]
    assert doc["outputs"] and all(o["pass"] for o in doc["outputs"])
    for o in doc["outputs"]:
        print(f"{name}[{index}] vs {reference} {o['name']}: max abs {o['max_abs_err']:.3e} "
              f"rel L2 {o['rel_l2']:.3e} cosine {o['cosine']}")
    assert "PASS" in r.stdout


def clean_layers(model, tmp_path, inputs):
    out = tmp_path / "clean.json"
    verify(model, "--all-layers", "--inputs-from", inputs, "--json", out)
    doc = json.loads(out.read_text())
    layers = doc["bisect"]["layers"]
    assert layers, "no intermediate compared"
    bad = [l["node"] for l in layers if not l["value"]["pass"]]
    assert not bad, f"layers fail without a fault: {bad}"
    return layers


# Not picked for faults: control flow (bisection stops at the node), and ops a
# backend may run as views of their input, where perturbing the output in
# place would perturb the producer's value too.
VIEW_OR_CONTROL_OPS = {"If", "Loop", "Scan", "Reshape", "Flatten", "Squeeze", "Unsqueeze",
                       "Identity", "Transpose", "Slice", "Split", "Concat", "Expand"}


def pick(layers, fused):
    """A float layer in the middle of the model, alone or a fused group."""
    candidates = [l for l in layers
                  if l["value"]["dtype"] == "f32" and l["value"]["numel"] > 0
                  and l["op"] not in VIEW_OR_CONTROL_OPS
                  and (len(l["source_nodes"]) > 1 if fused else l["source_nodes"] == [l["node"]])]
    if not candidates:
        return None
    return candidates[len(candidates) // 2]


def bisect_with_fault(model, tmp_path, inputs, node, reference="interp"):
    out = tmp_path / f"fault_{reference}.json"
    r = verify(model, "--bisect", "--reference", reference, "--inputs-from", inputs, "--json", out,
               env={"KILN_DEBUG_PERTURB": node}, expect=1)
    doc = json.loads(out.read_text())
    assert doc["pass"] is False
    first = doc["bisect"]["first_divergence"]
    assert first is not None, r.stdout[-4000:]
    assert first["inputs_agree"] and not first["value"]["pass"]
    return first, r.stdout


@pytest.mark.parametrize("name", BISECT_MODELS)
def test_bisect_names_the_perturbed_node(name, tmp_path):
    model = model_path(name)
    inputs = save_inputs(tmp_path, name, 0)
    layers = clean_layers(model, tmp_path, inputs)
    layer = pick(layers, fused=False)
    assert layer, "no stand-alone float layer to perturb"
    node = layer["node"]
    first, stdout = bisect_with_fault(model, tmp_path, inputs, node)
    assert first["node"] == node and first["source_nodes"] == [node], first
    assert f"first divergence: node '{node}'" in stdout


@pytest.mark.parametrize("name", BISECT_MODELS[1:])
def test_bisect_reports_a_perturbed_fused_node_with_its_group(name, tmp_path):
    model = model_path(name)
    inputs = save_inputs(tmp_path, name, 0)
    layer = pick(clean_layers(model, tmp_path, inputs), fused=True)
    if layer is None:
        pytest.skip("no fused group in this model")
    node = layer["source_nodes"][0]
    first, _ = bisect_with_fault(model, tmp_path, inputs, node)
    assert first["node"] == layer["node"], first
    assert node in first["source_nodes"]


def test_bisect_with_onnxruntime_as_the_layer_reference(tmp_path):
    name = "ch_ppocr_mobile_v2.0_cls_infer.onnx"
    model = model_path(name)
    inputs = save_inputs(tmp_path, name, 0)
    layer = pick(clean_layers(model, tmp_path, inputs), fused=False)
    first, _ = bisect_with_fault(model, tmp_path, inputs, layer["node"], reference="ort")
    assert first["node"] == layer["node"], first


def test_unknown_perturb_node_is_an_error(tmp_path):
    model = model_path("ch_ppocr_mobile_v2.0_cls_infer.onnx")
    r = verify(model, env={"KILN_DEBUG_PERTURB": "no such node"}, expect=2)
    assert "no such node" in r.stderr


# ---- the HTML report in a browser ------------------------------------------------


def png_pixels(path):
    """(width, height, set of RGB colours) of an 8-bit RGB/RGBA PNG, decoded
    with zlib alone (no imaging library)."""
    data = pathlib.Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    prev = bytearray(stride)
    colours = set()
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        for x in range(0, stride, bpp):
            colours.add(tuple(line[x:x + 3]))
        prev = line
    return width, height, colours


def near(colours, target, tol=24):
    return any(all(abs(c[k] - target[k]) <= tol for k in range(3)) for c in colours)


def test_report_renders_in_headless_chromium(tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        pytest.fail("chromium is not installed (scripts/setup.sh installs it)")
    name = "ch_ppocr_mobile_v2.0_cls_infer.onnx"
    model = model_path(name)
    inputs = save_inputs(tmp_path, name, 0)
    layer = pick(clean_layers(model, tmp_path, inputs), fused=False)
    report = tmp_path / "report"
    # A failing run: the curve has passing (blue) and failing (red) points.
    verify(model, "--bisect", "--inputs-from", inputs, "--report", report,
           env={"KILN_DEBUG_PERTURB": layer["node"]}, expect=1)
    page = report / "report.html"
    html = page.read_text()
    assert "<svg" in html and "<script" not in html
    assert (report / "inputs").is_dir()
    shot = tmp_path / "shot.png"
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                        "--disable-background-networking", "--disable-component-update",
                        "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
                        f"--screenshot={shot}", "--window-size=1200,900", page.as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert shot.exists(), "chromium wrote no screenshot"
    width, height, colours = png_pixels(shot)
    assert (width, height) == (1200, 900)
    assert len(colours) >= 16, f"screenshot looks blank: {len(colours)} colours"
    assert near(colours, CURVE_BLUE), "the curve's blue is not in the screenshot"
    assert near(colours, FAIL_RED), "no failing point is drawn in red"
