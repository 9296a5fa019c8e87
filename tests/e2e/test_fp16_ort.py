"""Half-precision models against ONNX Runtime: the models of
scripts/fp16_models.py (f16 tensors end to end, f16 weights), and a corpus
model converted to f16 by the same script, compiled for the CPU (through
the legalize-precision pass) and run three ways, as in test_quant_ort.py:
the interpreter, the compiler in memory and a compiled artifact. Outputs
must stay f16 and within REL_L2 of ONNX Runtime, which widens the same ops
to f32 on the CPU.

Environment: KILN_BIN (the kiln binary), KILN_CORPUS_DIR (default
~/.cache/kiln/corpus). Run with /usr/bin/python3 -m pytest.
"""

import json
import os
import pathlib
import sys

import numpy as np
import onnx
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from test_quant_ort import KILN, ORT_RUN, ROOT, rel_l2, run  # noqa: E402

sys.path.insert(0, str(ROOT / "scripts"))
import fp16_models  # noqa: E402

CORPUS = pathlib.Path(os.environ.get("KILN_CORPUS_DIR", pathlib.Path.home() / ".cache/kiln/corpus"))
REL_L2 = 1e-2
CASES = fp16_models.cases()
CORPUS_F16 = {"ch_ppocr_mobile_v2.0_cls_infer.onnx": {"x": (1, 3, 48, 192)}}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """name -> (model path, artifact path, [input dicts]), built once."""
    root = tmp_path_factory.mktemp("fp16_models")
    out = {}
    for name, (model, input_sets) in CASES.items():
        path = root / f"{name}.onnx"
        path.write_bytes(model.SerializeToString())
        out[name] = (path, input_sets)
    rng = np.random.default_rng(3)
    for name, shapes in CORPUS_F16.items():
        src = CORPUS / name
        if not src.exists():
            pytest.fail(f"{src} is missing: run scripts/fetch_corpus.sh")
        path = root / (pathlib.Path(name).stem + "_f16.onnx")
        onnx.save(fp16_models.convert_to_f16(onnx.load(src)), path)
        inputs = {k: rng.uniform(-1, 1, s).astype(np.float16) for k, s in shapes.items()}
        out[path.stem] = (path, [inputs])
    for name, (path, sets) in list(out.items()):
        artifact = root / f"{name}.kiln"
        run([KILN, "compile", path, "-o", artifact])
        out[name] = (path, artifact, sets)
    return out


NAMES = list(CASES) + [pathlib.Path(n).stem + "_f16" for n in CORPUS_F16]


@pytest.mark.parametrize("way", ["interp", "cpu", "artifact"])
@pytest.mark.parametrize("name", NAMES)
def test_f16_model_matches_onnxruntime(name, way, models, tmp_path):
    model, artifact, input_sets = models[name]
    args = []
    for k, v in input_sets[0].items():
        f = tmp_path / f"in_{k}.npy"
        np.save(f, v)
        args += ["--input", f"{k}={f}"]
    run(["node", ORT_RUN, model, "--output-dir", tmp_path / "ort", "--threads", "1"] + args)
    if way == "artifact":
        run([KILN, "run", artifact, "--output-dir", tmp_path / "kiln"] + args)
    else:
        run([KILN, "run", model, "--target", way, "--output-dir", tmp_path / "kiln"] + args)
    manifest = json.loads((tmp_path / "ort" / "manifest.json").read_text())["outputs"]
    for out in manifest:
        ref = np.load(tmp_path / "ort" / out["file"])
        got = np.load(tmp_path / "kiln" / out["file"])
        assert got.dtype == np.float16 and ref.dtype == np.float16, f"{got.dtype} vs {ref.dtype}"
        assert got.shape == ref.shape
        err = rel_l2(got, ref)
        print(f"{name} {way} {out['name']}: relative L2 {err:.3e}")
        assert err <= REL_L2, f"{out['name']}: relative L2 {err:.3e} > {REL_L2}"


def test_artifact_has_no_interpreter_steps(models):
    """The f16 models compile completely: `kiln compile` succeeded above,
    which it refuses for programs that need the interpreter at run time."""
    for name in NAMES:
        assert models[name][1].exists()
