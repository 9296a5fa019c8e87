"""Tests of the kiln Python module: compile, load and run a small corpus model
(the PP-OCR direction classifier), its inputs/outputs, its errors, and its
agreement with `kiln run` (bitwise) and ONNX Runtime (within tolerance).

Environment: PYTHONPATH holding the built module (build/python), KILN_BIN
(the kiln CLI), KILN_CORPUS_DIR (default ~/.cache/kiln/corpus). Run with
/usr/bin/python3 -m pytest python/tests.
"""

import os
import pathlib
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

import kiln

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
import test_corpus as corpus  # noqa: E402  (the corpus' models and input conventions)

MODEL = "ch_ppocr_mobile_v2.0_cls_infer.onnx"


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    """The classifier compiled once: (path of the .kiln, its Model)."""
    out = tmp_path_factory.mktemp("artifact") / "cls.kiln"
    model = kiln.compile(corpus.model_path(MODEL), output=out)
    return out, model


@pytest.fixture(scope="module")
def x():
    return corpus.rng_inputs(1234, corpus.CASES[MODEL][0])["x"]


def run_cli(*args):
    return corpus.run([corpus.KILN, *map(str, args)])


# -- compile and load ---------------------------------------------------------


def test_compile_writes_the_artifact_and_returns_the_model(artifact):
    path, model = artifact
    assert path.stat().st_size > 0
    assert isinstance(model, kiln.Model)
    assert "x" in repr(model)


def test_compile_defaults_the_output_to_the_model_path_with_suffix_kiln(tmp_path):
    src = tmp_path / "model.onnx"
    shutil.copy(corpus.model_path(MODEL), src)
    model = kiln.compile(str(src), opt=2)
    assert (tmp_path / "model.kiln").stat().st_size > 0
    assert [i.name for i in model.inputs] == ["x"]


def test_load_from_a_path_and_from_bytes_agree(artifact, x):
    path, _ = artifact
    a = kiln.load(path).session(threads=1).run({"x": x})
    b = kiln.load(path.read_bytes()).session(threads=1).run({"x": x})
    c = kiln.load(str(path)).session(threads=1).run({"x": x})
    for name in a:
        assert a[name].tobytes() == b[name].tobytes() == c[name].tobytes()


def test_compile_pins_dims(tmp_path):
    model = kiln.compile(corpus.model_path(MODEL), output=tmp_path / "pinned.kiln",
                         dims={"p2o.DynamicDimension.0": 1})
    assert model.inputs[0].shape[0] == 1


def test_version_names_the_runtime():
    assert kiln.version().startswith("kiln ")


# -- inputs and outputs -------------------------------------------------------


def test_inputs_and_outputs_describe_the_model(artifact):
    _, model = artifact
    (x,) = model.inputs
    assert x.name == "x"
    assert x.dtype == np.dtype(np.float32)
    assert len(x.shape) == 4 and x.shape[1] == 3
    assert all(isinstance(d, (int, str)) for d in x.shape)
    assert isinstance(x.shape[0], str), "the batch dim is symbolic"
    (out,) = model.outputs
    assert out.name == "softmax_0.tmp_0"
    assert out.dtype == np.dtype(np.float32)
    assert out.shape[1] == 2
    assert "ValueInfo(name='x'" in repr(x)


def test_run_returns_the_outputs_by_name(artifact, x):
    _, model = artifact
    outputs = model.run({"x": x})
    assert list(outputs) == ["softmax_0.tmp_0"]
    y = outputs["softmax_0.tmp_0"]
    assert y.dtype == np.float32 and y.shape == (1, 2)
    np.testing.assert_allclose(y.sum(axis=1), 1.0, rtol=1e-5)


def test_a_non_contiguous_input_gives_the_same_result(artifact, x):
    _, model = artifact
    session = model.session(threads=1)
    wide = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), np.float32)
    wide[..., ::2] = x
    strided = wide[..., ::2]
    assert not strided.flags.c_contiguous
    a = session.run({"x": x})["softmax_0.tmp_0"]
    b = session.run({"x": strided})["softmax_0.tmp_0"]
    assert a.tobytes() == b.tobytes()


def test_a_batch_of_two_runs_through_the_symbolic_dim(artifact, x):
    _, model = artifact
    session = model.session(threads=1)
    y = session.run({"x": np.concatenate([x, x[:, :, ::-1]])})["softmax_0.tmp_0"]
    assert y.shape == (2, 2)
    np.testing.assert_allclose(y[:1], session.run({"x": x})["softmax_0.tmp_0"], rtol=1e-5, atol=1e-6)


# -- agreement with kiln run and ONNX Runtime ----------------------------------


def test_outputs_are_bitwise_those_of_kiln_run(artifact, x, tmp_path):
    path, model = artifact
    np.save(tmp_path / "x.npy", x)
    run_cli("run", path, "--input", f"x={tmp_path / 'x.npy'}", "--threads", "1",
            "--output-dir", tmp_path / "cli")
    got = model.session(threads=1).run({"x": x})["softmax_0.tmp_0"]
    ref = np.load(tmp_path / "cli" / "softmax_0.tmp_0.npy")
    assert got.dtype == ref.dtype and got.shape == ref.shape
    assert got.tobytes() == ref.tobytes()


def test_outputs_match_onnxruntime(artifact, x, tmp_path):
    if shutil.which("node") is None or not (corpus.ORT_RUN.parent / "node_modules").exists():
        pytest.skip("the ONNX Runtime bridge (node scripts/ort) is not installed")
    _, model = artifact
    np.save(tmp_path / "x.npy", x)
    corpus.run(["node", str(corpus.ORT_RUN), str(corpus.model_path(MODEL)), "--input",
                f"x={tmp_path / 'x.npy'}", "--output-dir", str(tmp_path / "ort")])
    ref = np.load(tmp_path / "ort" / "softmax_0.tmp_0.npy")
    got = model.run({"x": x})["softmax_0.tmp_0"]
    assert corpus.rel_l2(got, ref) <= corpus.REL_L2_F32


def test_sessions_run_concurrently_from_threads(artifact, x):
    _, model = artifact
    expected = model.session(threads=1).run({"x": x})["softmax_0.tmp_0"].tobytes()
    results, errors = [], []

    def work():
        try:
            session = model.session(threads=1)
            for _ in range(3):
                results.append(session.run({"x": x})["softmax_0.tmp_0"].tobytes())
                results.append(model.run({"x": x})["softmax_0.tmp_0"])
        except Exception as e:  # noqa: BLE001  (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for r in results:
        if isinstance(r, bytes):
            assert r == expected
        else:
            np.testing.assert_allclose(r, np.frombuffer(expected, np.float32).reshape(r.shape),
                                       rtol=1e-5, atol=1e-6)


def test_the_python_example_runs(artifact, x, tmp_path):
    path, model = artifact
    np.save(tmp_path / "x.npy", x)
    r = corpus.run([sys.executable, str(ROOT / "examples" / "python" / "run.py"), str(path),
                    str(tmp_path / "x.npy"), str(tmp_path / "out")],
                   env={**os.environ, "KILN_THREADS": "1"})
    assert "softmax_0.tmp_0 [1, 2]" in r.stdout
    got = np.load(tmp_path / "out" / "softmax_0.tmp_0.npy")
    assert got.tobytes() == model.session(threads=1).run({"x": x})["softmax_0.tmp_0"].tobytes()


# -- errors -------------------------------------------------------------------


def test_error_is_a_runtime_error():
    assert issubclass(kiln.Error, RuntimeError)


def test_a_missing_input_is_named(artifact):
    _, model = artifact
    with pytest.raises(kiln.Error, match=r"missing input 'x'") as e:
        model.run({})
    assert e.value.status == "invalid_argument"


def test_an_unknown_input_is_named(artifact, x):
    _, model = artifact
    with pytest.raises(kiln.Error, match=r"unknown input 'y'.*the model's inputs: 'x'"):
        model.run({"x": x, "y": x})


def test_a_wrong_dtype_raises_instead_of_casting(artifact, x):
    _, model = artifact
    with pytest.raises(kiln.Error, match=r"input 'x': dtype float64, the model expects float32"):
        model.run({"x": x.astype(np.float64)})
    with pytest.raises(kiln.Error, match=r"input 'x': dtype int64"):
        model.run({"x": np.zeros(x.shape, np.int64)})


def test_a_wrong_shape_gets_the_runtimes_message(artifact):
    _, model = artifact
    with pytest.raises(kiln.Error, match=r"'x'") as e:
        model.run({"x": np.zeros((1, 4, 48, 192), np.float32)})
    assert e.value.status == "shape"
    with pytest.raises(kiln.Error, match=r"'x'.*rank") as e:
        model.run({"x": np.zeros((3, 48, 192), np.float32)})
    assert e.value.status == "shape"


def test_a_missing_file_is_an_io_error(tmp_path):
    with pytest.raises(kiln.Error, match="nothing.kiln") as e:
        kiln.load(tmp_path / "nothing.kiln")
    assert e.value.status == "io"


def test_a_file_that_is_no_artifact_is_corrupt():
    with pytest.raises(kiln.Error) as e:
        kiln.load(corpus.model_path(MODEL))
    assert e.value.status in ("corrupt", "version"), str(e.value)
    assert str(e.value)


@pytest.mark.parametrize("fraction", [0.0, 0.001, 0.5, 0.999])
def test_a_truncated_artifact_is_corrupt(artifact, tmp_path, fraction):
    data = artifact[0].read_bytes()
    cut = tmp_path / "cut.kiln"
    cut.write_bytes(data[:int(len(data) * fraction)])
    with pytest.raises(kiln.Error) as e:
        kiln.load(cut)
    assert e.value.status == "corrupt", str(e.value)
    assert str(e.value)


@pytest.mark.parametrize("where", [0.3, 0.6, 0.95])
def test_a_flipped_byte_is_corrupt(artifact, tmp_path, where):
    data = bytearray(artifact[0].read_bytes())
    data[int(len(data) * where)] ^= 0x40
    bad = tmp_path / "flipped.kiln"
    bad.write_bytes(bytes(data))
    with pytest.raises(kiln.Error) as e:
        kiln.load(bad)
    assert e.value.status == "corrupt", str(e.value)
    with pytest.raises(kiln.Error):
        kiln.load(bytes(data))


def test_compile_errors_carry_the_compilers_message(tmp_path):
    with pytest.raises(kiln.Error, match="absent.onnx") as e:
        kiln.compile(tmp_path / "absent.onnx")
    assert e.value.status == "compile"
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x00not a model" * 10)
    with pytest.raises(kiln.Error, match="garbage.onnx"):
        kiln.compile(garbage)
    assert not (tmp_path / "garbage.kiln").exists()


@pytest.mark.parametrize("kwargs,message", [
    ({"opt": 7}, "opt must be 0..3"),
    ({"dims": {"n": "one"}}, "dims must map"),
    ({"dims": [("n", 1)]}, "dims must be a dict"),
])
def test_compile_checks_its_arguments(kwargs, message):
    with pytest.raises(kiln.Error, match=message):
        kiln.compile(corpus.model_path(MODEL), output="/nonexistent/x.kiln", **kwargs)


def test_a_negative_thread_count_is_refused(artifact):
    with pytest.raises(kiln.Error, match="threads"):
        artifact[1].session(threads=-1)

