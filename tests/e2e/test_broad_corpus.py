"""The CI subset of kiln's broader corpus (CTest `corpus_broad`): models that
users make (npm packages, scripts/corpus.lock; PyTorch exports,
scripts/gen_corpus.py), each compiled ONCE to an artifact, run at every input
set (three sizes from the one artifact for symbolic dims) and compared with
ONNX Runtime (f32 rel L2 <= 1e-4; fp16 and int8 models <= 1e-2), and
`kiln run MODEL.onnx` must give the artifact's outputs bitwise. It is
scripts/corpus_report.py's check, one test per model.

CI_MODELS is a subset picked for the most distinct op forms per CI minute:
left out are models whose op forms others here already cover (ResNet-50,
RetinaNet, the BERT-base-shaped encoder, QAT ResNet-18, silero v6 and "half",
two more wake-word classifiers); `scripts/corpus_report.py` runs every model
of both corpora. Cost measured on the 2-core CI machine under load: each
model compiles in 0.2-3 s; runs of kiln and ONNX Runtime take 1-9 s per
input set, so the whole subset takes about 6-8 minutes once every model
compiles. A model listed in
tests/e2e/corpus_expected_failures.txt is expected to fail (a known mismatch
of the reference, with its reason): it is a strict xfail, so a listed model
that passes fails the test until its line is deleted.

Environment: KILN_BIN, KILN_CORPUS_DIR (scripts/fetch_corpus.sh),
KILN_GENERATED_DIR (scripts/gen_corpus.py). Run with /usr/bin/python3 -m pytest.
"""

import argparse
import os
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import corpus_report  # noqa: E402
from cpu_flags import cpu_flags  # noqa: E402

# model -> the op forms it adds to the CI (beyond the five models of test_corpus.py).
CI_MODELS = {
    # npm
    "silero_vad_legacy.onnx": "LSTM with h/c inputs, If per sample rate, 3 sizes",
    "silero_vad_op18_ifless.onnx": "opset 18 LSTM unrolled as Gemm+Split+Tanh, ReduceMean, 3 sizes",
    "oww_melspectrogram.onnx": "STFT as Conv, Clip, Log, ReduceMax, 3 audio lengths",
    "oww_embedding_model.onnx": "NHWC-style CNN: LeakyRelu, Max, MaxPool, symbolic batch",
    "oww_hey_jarvis_v0.1.onnx": "Gemm classifier with LayerNorm by hand and an If",
    "oww_timer_v0.1.onnx": "Gemm classifier ending in Softmax",
    "silero_vad_16k_op15.onnx": "opset 15 silero: scalar Add after Concat, Size/Not, 3 batch sizes",
    # generated
    "tv_mobilenet_v3_large": "HardSwish/HardSigmoid, SE, dynamic batch AND image size (opset 17)",
    "tv_shufflenet_v2_x1_0": "channel shuffle Reshape/Transpose, Split (opset 13)",
    "tv_squeezenet1_1": "ceil-mode MaxPool, Concat, dynamic image size",
    "tv_efficientnet_b0": "SiLU (Sigmoid*Mul), SE with GlobalAveragePool, depthwise 5x5 (opset 15)",
    "tv_regnet_y_400mf": "grouped conv (group width 8), SE (opset 16)",
    "tv_swin_t": "shifted windows: roll as Slice+Concat, relative position bias gather, masks (opset 17)",
    "tv_convnext_tiny": "LayerNormalization (opset 17), 7x7 depthwise, layer scale Mul",
    "tv_vit_b_16_l4": "patch conv, class token Expand+Concat, MultiheadAttention at opset 14",
    "tv_deeplabv3_mobilenet_v3_large": "dilated conv, ASPP pooling branch, Resize to dynamic size",
    "tv_lraspp_mobilenet_v3_large": "segmentation head, bilinear Resize to a dynamic size",
    "tv_ssdlite320_mobilenet_v3_large": "detection postprocessing: TopK, NonMaxSuppression, gathers",
    "ta_conformer_l4": "torchaudio Conformer: attention with padding mask from lengths, GLU, depthwise Conv1d",
    "ta_wav2vec2_base_l4": "GroupNorm as InstanceNormalization, strided Conv1d stack, grouped conv positional "
                           "embedding, Erf GELU, dynamic sample count",
    "nn_gpt2_l4": "MultiheadAttention with causal + padding masks, tanh GELU, tied LM head",
    "nn_transformer_seq2seq": "TransformerDecoder cross attention, Trilu causal mask",
    "qat_mobilenet_v2": "QDQ: QuantizeLinear/DequantizeLinear, per-channel axis",
    "fp16_bert_tiny": "f16 transformer: Erf GELU, Softmax, LayerNorm by hand in f16",
    "fp16_resnet18": "f16 Conv, MaxPool, GlobalAveragePool, Gemm",
    "fp16_mobilenet_v3_small": "f16 HardSwish/HardSigmoid, depthwise conv (opset 17)",
    "int8_dyn_bert_mini": "DynamicQuantizeLinear + MatMulInteger",
    "int8_dyn_cnn": "ConvInteger",
    "int8_qlinear_cnn": "QLinearConv (per-channel), QLinearMatMul",
}


def expected_failures():
    """name -> reason of the models expected to fail on this machine."""
    path = pathlib.Path(__file__).with_name("corpus_expected_failures.txt")
    out = {}
    flags = cpu_flags()
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, _, reason = line.partition(" ")
        reason = reason.strip()
        if reason.startswith("[cpu-lacks:"):
            condition, _, reason = reason[len("[cpu-lacks:"):].partition("]")
            if flags & set(condition.split(",")):
                continue  # the CPU has one of the flags: expected to pass here
            reason = reason.strip()
        out[name] = reason
    return out


@pytest.fixture(scope="module")
def report_args(tmp_path_factory):
    args = argparse.Namespace(
        kiln=os.environ.get("KILN_BIN", str(ROOT / "build" / "tools" / "kiln")),
        corpus=pathlib.Path(os.environ.get("KILN_CORPUS_DIR", pathlib.Path.home() / ".cache/kiln/corpus")),
        generated=pathlib.Path(os.environ.get("KILN_GENERATED_DIR",
                                              pathlib.Path.home() / ".cache/kiln/generated")),
        only="", json=None, timeout=900, keep=False, no_bitwise=False,
        work=tmp_path_factory.mktemp("broad"))
    return args


@pytest.fixture(scope="module")
def all_models(report_args):
    return {m[0]: m for m in corpus_report.models(report_args)}


def describe(rec):
    if rec["compile"] != "ok":
        return f"compile: {rec['compile']}"
    parts = [corpus_report.output_cell(rec)]
    if rec["bitwise"] not in ("yes", None):
        parts.append(f"bitwise vs kiln run MODEL.onnx: {rec['bitwise']}")
    return f"{rec.get('sets_ok', 0)}/{len(rec['sets'])} input sets match (tolerance {rec['tolerance']:.0e}): " + \
        "; ".join(parts)


@pytest.mark.parametrize("name", list(CI_MODELS))
def test_artifact_matches_onnxruntime(name, report_args, all_models, request):
    if name not in all_models:
        pytest.fail(f"{name} is not in the corpus (scripts/corpus.lock or scripts/gen_corpus.py's manifest)")
    _, source, path, sets, tol = all_models[name]
    if not path.exists():
        pytest.fail(f"{path} is missing: run scripts/setup.sh (fetch_corpus.sh, gen_corpus.py)")
    reason = expected_failures().get(name)
    if reason is not None:
        request.applymarker(pytest.mark.xfail(reason=reason, strict=True))
    rec = corpus_report.check_model(name, source, path, sets, tol, report_args)
    print(f"{name}: {rec['result']}: {describe(rec)}")
    assert rec["result"] == "PASS", describe(rec)
