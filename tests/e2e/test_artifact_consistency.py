"""Every corpus model compiled with `kiln compile` to a .kiln artifact, then run
three ways on the inputs of test_corpus.py (its CASES: shapes and fixed
inputs such as silero's sample rate):

  (a) the C example (examples/c: the C API through libkiln_runtime.so),
  (b) the Python module (kiln.load(...).session(threads=1).run),
  (c) `kiln run OUT.kiln --threads 1`.

The three must give bitwise identical outputs (one runtime, one code path),
and they must be within test_corpus.py's tolerance of ONNX Runtime. One
thread everywhere, so the runs are comparable. Each model compiles once.

Environment: KILN_BIN (the kiln CLI), KILN_EXAMPLE_BIN (the C example),
PYTHONPATH holding the built module (build/python), KILN_CORPUS_DIR. Run with
/usr/bin/python3 -m pytest.
"""

import json
import os
import pathlib
import sys

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import test_corpus as corpus  # noqa: E402

import kiln  # noqa: E402

KILN_EXAMPLE = os.environ.get("KILN_EXAMPLE_BIN",
                              str(corpus.ROOT / "build" / "examples" / "c" / "kiln_example"))


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """name -> the path of its artifact, compiled on first use."""
    artifacts = {}

    def get(name):
        if name not in artifacts:
            out = tmp_path_factory.mktemp("artifacts") / (pathlib.Path(name).stem + ".kiln")
            corpus.run([corpus.KILN, "compile", str(corpus.model_path(name)), "-o", str(out)])
            artifacts[name] = out
        return artifacts[name]

    return get


def describe_difference(got, want):
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"{got.dtype}{list(got.shape)} vs {want.dtype}{list(want.shape)}"
    differ = np.frombuffer(got.tobytes(), np.uint8) != np.frombuffer(want.tobytes(), np.uint8)
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    return f"{np.count_nonzero(differ)} bytes differ, max |difference| {diff.max():.3e}"


@pytest.mark.parametrize("name,index",
                         [(n, i) for n, sets in corpus.CASES.items() for i in range(len(sets))])
def test_c_python_and_cli_agree_bitwise_and_match_onnxruntime(name, index, compiled, tmp_path):
    artifact = compiled(name)
    model = kiln.load(artifact)
    inputs = corpus.rng_inputs(1234 + index, corpus.CASES[name][index])
    files, args = {}, []
    for k, v in inputs.items():
        files[k] = tmp_path / f"in_{k}.npy"
        np.save(files[k], v)
        args += ["--input", f"{k}={files[k]}"]

    corpus.run([KILN_EXAMPLE, str(artifact), *(str(files[i.name]) for i in model.inputs),
                str(tmp_path / "c")], env={**os.environ, "KILN_THREADS": "1"})
    from_python = model.session(threads=1).run(inputs)
    corpus.run([corpus.KILN, "run", str(artifact), "--threads", "1",
                "--output-dir", str(tmp_path / "cli")] + args)
    corpus.run(["node", str(corpus.ORT_RUN), str(corpus.model_path(name)),
                "--output-dir", str(tmp_path / "ort")] + args)

    manifest = json.loads((tmp_path / "ort" / "manifest.json").read_text())["outputs"]
    assert sorted(o["name"] for o in manifest) == sorted(from_python)
    for out in manifest:
        want = from_python[out["name"]]
        for label, folder in (("C example", "c"), ("kiln run", "cli")):
            got = np.load(tmp_path / folder / out["file"])
            assert got.dtype == want.dtype and got.shape == want.shape and \
                got.tobytes() == want.tobytes(), \
                f"{out['name']}: {label} vs Python: {describe_difference(got, want)}"
        ref = np.load(tmp_path / "ort" / out["file"])
        assert want.shape == ref.shape and want.dtype == ref.dtype, \
            f"{out['name']}: {want.dtype}{list(want.shape)} vs ORT {ref.dtype}{list(ref.shape)}"
        if np.issubdtype(ref.dtype, np.floating):
            err = corpus.rel_l2(want, ref)
            print(f"{name}[{index}] {out['name']}: relative L2 vs ORT {err:.3e}")
            assert err <= corpus.REL_L2_F32, f"{out['name']}: relative L2 {err:.3e}"
        else:
            np.testing.assert_array_equal(want, ref)
