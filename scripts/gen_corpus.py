#!/usr/bin/python3
"""gen_corpus.py: kiln's generated model corpus, made the way users make
models: PyTorch modules (torchvision, torchaudio, torch.nn) with seeded random
weights, exported with torch.onnx.export at opsets 13-17, some with dynamic
axes; plus fake-quant (QAT) models exported as QDQ, fp16 and ORT-style int8
models (scripts/corpus_onnx_rewrites.py says why those are ONNX rewrites).

  /usr/bin/python3 scripts/gen_corpus.py [--out DIR] [--only NAME,...] [--check] [--list] [--force]

DIR defaults to ${KILN_GENERATED_DIR:-~/.cache/kiln/generated}. Each model is
written to DIR/<name>.onnx; DIR/manifest.json records, per model, its file's
sha256, opset, kind (f32, fp16, int8), tolerance against ONNX Runtime, its
inputs (name, dtype, shape with symbolic dims by name, how to fill them) and,
for symbolic dims, three sizes to test (the first is the realistic default).

A model is (re)generated only when its file is missing, its sha256 differs
from the manifest's, or its recipe version (GENERATOR_VERSION + the model's
own) changed; so a second run takes seconds. Generation is deterministic
(seeded weights, one thread): same torch, same bytes.

Needs Debian's python3-torch 1.13, python3-torchvision 0.14,
python3-torchaudio 0.13 (scripts/setup.sh installs them) and python3-onnx.
Nothing is downloaded: every model is built with weights=None.

  --check   exit 0 when every model is present and current, 1 otherwise
  --list    print the models with their input specs and exit
  --force   regenerate the selected models even when current
Exit status: 0 done, 1 some model failed to generate, 2 usage error.
"""

import argparse
import hashlib
import io
import json
import os
import pathlib
import sys
import time
import traceback
import types
import warnings

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from corpus_inputs import REPORT_SEED, generated_inputs  # noqa: E402

GENERATOR_VERSION = 1
SCRIPT_DIR = pathlib.Path(__file__).resolve().parent
DEFAULT_OUT = pathlib.Path(os.environ.get("KILN_GENERATED_DIR", pathlib.Path.home() / ".cache/kiln/generated"))
TOL_F32, TOL_LOW = 1e-4, 1e-2


class Input:
    """One model input: dims are ints or symbolic names; fill is how inputs are
    made (scripts/corpus_report.py reads it): normal, uniform, unit (U[0,1]),
    audio (N(0, 0.1)), ids:V (int64 in [0, V)), mask (int64 attention mask,
    row b>0 padded at the end), lengths (int64 lengths, the first full)."""

    def __init__(self, name, dtype, shape, fill="normal"):
        self.name, self.dtype, self.shape, self.fill = name, dtype, list(shape), fill

    def spec(self):
        return {"name": self.name, "dtype": self.dtype, "shape": self.shape, "fill": self.fill}


class Recipe:
    def __init__(self, name, build, inputs, opset, sizes=None, outputs=None, kind="f32", note="",
                 version=1, seed=0, post=None, randomize_bn=True, tune=None):
        self.name, self.build, self.inputs, self.opset = name, build, inputs, opset
        self.sizes = sizes or [{}]
        self.outputs, self.kind, self.note, self.version, self.seed = outputs, kind, note, version, seed
        self.post = post  # onnx.ModelProto -> onnx.ModelProto (fp16 / int8 rewrites)
        self.randomize_bn = randomize_bn
        self.tune = tune  # (module, recipe) -> None, after the BN statistics, before export

    def tolerance(self):
        return TOL_F32 if self.kind == "f32" else TOL_LOW

    def recipe_version(self):
        return f"{GENERATOR_VERSION}.{self.version}"


# ---- model builders ------------------------------------------------------------------------------

def randomize_norm_stats(module, gen):
    """Random BatchNorm running statistics and affine parameters (seeded), so
    folded BN is not the identity and activations stay in a sane range."""
    import torch
    for m in module.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.running_mean is not None:
            n = m.running_mean.shape[0]
            m.running_mean.copy_(torch.randn(n, generator=gen) * 0.1)
            m.running_var.copy_(torch.rand(n, generator=gen) + 0.5)
            if m.affine:
                m.weight.data.copy_(torch.rand(n, generator=gen) + 0.5)
                m.bias.data.copy_(torch.randn(n, generator=gen) * 0.1)


def transformer_init(module, seed):
    """BERT/GPT-2's initialization (weights and biases N(0, 0.02), LayerNorm
    gains 1 + N(0, 0.1)), seeded, for every parameter: nn.TransformerEncoder
    deep-copies one layer, so without this all layers would share weights
    (and the exporter would store them once) and the biases would be 0."""
    import torch
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in module.modules():
            for name, p in m.named_parameters(recurse=False):
                noise = torch.randn(p.shape, generator=gen)
                if isinstance(m, torch.nn.LayerNorm) and name == "weight":
                    p.copy_(1.0 + 0.1 * noise)
                else:
                    p.copy_(0.02 * noise)
    return module


def tv(name, **kw):
    def build():
        import torchvision
        return getattr(torchvision.models, name)(weights=None, **kw)
    return build


def vit_b_16_layers(n):
    def build():
        import torchvision
        return torchvision.models.VisionTransformer(image_size=224, patch_size=16, num_layers=n, num_heads=12,
                                                    hidden_dim=768, mlp_dim=3072)
    return build


def undo_degenerate_init(module, recipe):
    """Parameters that an architecture initializes to one constant value get
    values a trained model would have, so every layer shows in the outputs:
    torchvision's ViT zero-initializes its classifier (every logit is exactly
    0, so a test of it compares zeros), ConvNeXt starts its layer scales at
    1e-6 (every block's contribution vanishes under the residual). Of the
    parameters with more than one element, all equal: a Linear/Conv weight
    becomes N(0, 1/fan_in), a norm's gain 1 + N(0, 0.1), a layer scale
    U(0.1, 1), anything else (a class token) N(0, 0.02), as the model's own
    embeddings start. Biases stay: trained biases are small."""
    import torch
    gen = torch.Generator().manual_seed(recipe.seed + 3)
    changed = []
    with torch.no_grad():
        for mod_name, m in module.named_modules():
            for name, p in m.named_parameters(recurse=False):
                if p.numel() < 2 or name.endswith("bias") or float(p.max()) != float(p.min()):
                    continue
                noise = torch.randn(p.shape, generator=gen)
                if isinstance(m, (torch.nn.Linear, torch.nn.modules.conv._ConvNd)) and name == "weight":
                    p.copy_(noise / p[0].numel() ** 0.5)
                elif isinstance(m, (torch.nn.LayerNorm, torch.nn.GroupNorm)) and name == "weight":
                    p.copy_(1 + 0.1 * noise)
                elif "scale" in name:
                    p.copy_(0.1 + 0.9 * torch.rand(p.shape, generator=gen))
                else:
                    p.copy_(0.02 * noise)
                changed.append(f"{mod_name}.{name}")
    print(f"gen_corpus: {recipe.name}: {len(changed)} constant-initialized parameters randomized "
          f"({', '.join(changed[:3])}{', ...' if len(changed) > 3 else ''})", flush=True)


class OutDict:
    """Wraps a module returning a dict (segmentation) so export sees a tensor."""

    def __new__(cls, inner, key):
        import torch

        class Wrap(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = inner

            def forward(self, x):
                return self.inner(x)[key]
        return Wrap()


def seg(name):
    def build():
        import torchvision
        m = getattr(torchvision.models.segmentation, name)(weights=None, weights_backbone=None)
        return OutDict(m, "out")
    return build


def detection(name, **kw):
    def build():
        import torch
        import torchvision

        class Det(torch.nn.Module):
            """One image in, boxes/scores/labels out (the list-of-dicts API flattened)."""

            def __init__(self):
                super().__init__()
                self.inner = getattr(torchvision.models.detection, name)(weights=None, weights_backbone=None, **kw)

            def forward(self, image):
                out = self.inner([image])[0]
                return out["boxes"], out["scores"], out["labels"]
        return Det()
    return build


def _head_final_convs(det):
    """The last conv of the classification and of the regression head (one
    per feature level for SSDlite, one shared by every level for RetinaNet)."""
    head = det.head
    if hasattr(head.classification_head, "cls_logits"):
        return [head.classification_head.cls_logits], [head.regression_head.bbox_reg]
    return ([seq[-1] for seq in head.classification_head.module_list],
            [seq[-1] for seq in head.regression_head.module_list])


def _recalibrate_batch_norms(det, images):
    """BatchNorm running statistics set to the activations' own (one batch of
    images through the model with only the BatchNorms in training mode), as
    training leaves them. Random statistics let activations drift through the
    depth until ReLU6 / HardSwish saturate or die, so whole regions of the
    image get identical features and identical (tied) scores."""
    import torch
    bns = [m for m in det.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None  # a plain average over the batch
        bn.train()
    with torch.no_grad():
        det(images)
    for bn in bns:
        bn.eval()


def _pre_bias_outputs(det, convs, images):
    """Each conv's outputs without its bias, over every call of it (all
    levels), as one flat tensor per conv, from running det on images."""
    import torch
    got = {id(c): [] for c in convs}

    def hook(conv, _inputs, out):
        got[id(conv)].append((out - conv.bias[None, :, None, None]).flatten())
    hooks = [c.register_forward_hook(hook) for c in convs]
    try:
        with torch.no_grad():
            det(images)
    finally:
        for h in hooks:
            h.remove()
    return [torch.cat(got[id(c)]) for c in convs]


def _rescale(convs, outputs, std, bias_of_channel, tail=5.0):
    """conv weights scaled so the conv's output (over the calibration images)
    has standard deviation std (or less: no output further than tail * std
    from the mean, since random features have heavy tails and a RetinaNet
    logit 20 above its prior is a score of exactly 1.0 in f32) and the given
    per-channel mean."""
    import torch
    with torch.no_grad():
        for conv, out in zip(convs, outputs):
            centered = out - out.mean()
            a = min(std / float(out.std()), tail * std / float(centered.abs().max()))
            conv.weight.mul_(a)
            channels = torch.arange(conv.out_channels)
            conv.bias.copy_(bias_of_channel(channels) - a * float(out.mean()))


def _largest_gap_threshold(scores, want):
    """A score threshold that lets about `want` scores through, in the widest
    relative gap between consecutive scores near that rank (so no score is
    near it), and the gap's relative width."""
    s = np.sort(scores)[::-1].astype(np.float64)
    lo, hi = max(1, int(want * 0.6)), min(len(s) - 1, int(want * 1.4))
    gaps = [(s[i - 1] / s[i], i) for i in range(lo, hi)]
    ratio, i = max(gaps)
    return float(np.sqrt(s[i - 1] * s[i])), ratio - 1.0


def _nms_inputs(det, image):
    """(boxes, scores, labels, iou_threshold) that postprocessing passes to
    batched_nms when det runs on image (torch, not exported)."""
    import torch
    import torchvision.ops.boxes as box_ops
    seen, real = [], box_ops.batched_nms

    def record(boxes, scores, idxs, iou_threshold):
        seen.append((boxes.numpy().astype(np.float64), scores.numpy(), idxs.numpy(), iou_threshold))
        return real(boxes, scores, idxs, iou_threshold)
    box_ops.batched_nms = record
    try:
        with torch.no_grad():
            det([image])
    finally:
        box_ops.batched_nms = real
    return seen[0]


def _iou_margin(boxes, labels, threshold):
    """How close any IoU of two same-label boxes comes to the NMS threshold."""
    margin = np.inf
    for label in np.unique(labels):
        b = boxes[labels == label]
        if len(b) < 2:
            continue
        area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
        w = np.clip(np.minimum(b[:, None, 2], b[None, :, 2]) - np.maximum(b[:, None, 0], b[None, :, 0]), 0, None)
        h = np.clip(np.minimum(b[:, None, 3], b[None, :, 3]) - np.maximum(b[:, None, 1], b[None, :, 1]), 0, None)
        inter = w * h
        iou = inter / np.maximum(area[:, None] + area[None, :] - inter, 1e-12)
        off = ~np.eye(len(b), dtype=bool)
        margin = min(margin, float(np.abs(iou[off] - threshold).min()))
    return margin


def tune_detection(cls_std, reg_std, candidates, background_logit=None):
    """Makes a randomly initialized torchvision detector well-conditioned, the
    way trained weights are: untrained, its heads' last convs give logits of
    std ~5 (RetinaNet: every score saturates to exactly 1.0, so TopK and NMS
    order ties) or ~0.08 (SSDlite: every softmax score is ~1/91), and box
    deltas of std ~6 (boxes clipped to the image edges). On calibration
    images (synthetic photos, the report's among them) the BatchNorm statistics are
    recalibrated (_recalibrate_batch_norms) and the heads' last convs are
    rescaled so the logits spread
    over a few units (std cls_std around the head's prior bias: RetinaNet's
    -log(99); SSDlite's background class at background_logit, the others at
    0) and the deltas stay near the anchors (std reg_std). Then score_thresh
    is set so about `candidates` scores of the report's input pass it (fewer
    than per-level / per-class topk_candidates and detections_per_img, so
    neither TopK cuts), in the widest gap between scores there, and the NMS
    IoUs of those candidates are checked to stay clear of nms_thresh: every
    decision of the postprocessing then has a margin far above f32 rounding
    and ONNX Runtime's approximate Sigmoid."""
    def tune(module, recipe):
        import torch
        det = module.inner
        specs, name = [i.spec() for i in recipe.inputs], recipe.inputs[0].name
        # The report's own input is among the calibration images, so the
        # conditioning holds on the input that is checked, not only near it.
        calib = [torch.from_numpy(generated_inputs(specs, recipe.sizes[0], seed)[name])
                 for seed in [recipe.seed + 11 + i for i in range(3)] + [REPORT_SEED]]
        _recalibrate_batch_norms(det, calib)
        cls_convs, reg_convs = _head_final_convs(det)
        k = det.head.classification_head.num_columns if background_logit is not None else 0
        if background_logit is None:
            prior = float(cls_convs[0].bias[0])
            cls_bias = lambda ch: torch.full(ch.shape, prior)
        else:
            cls_bias = lambda ch: torch.where(ch % k == 0, torch.tensor(background_logit), torch.tensor(0.0))
        _rescale(cls_convs, _pre_bias_outputs(det, cls_convs, calib), cls_std, cls_bias)
        _rescale(reg_convs, _pre_bias_outputs(det, reg_convs, calib), reg_std, lambda ch: torch.zeros(ch.shape))

        image = torch.from_numpy(generated_inputs(specs, recipe.sizes[0], REPORT_SEED)[name])
        logits = []
        hook = det.head.classification_head.register_forward_hook(lambda m, i, o: logits.append(o))
        with torch.no_grad():
            module(image)
        hook.remove()
        scores = torch.sigmoid(logits[0]) if background_logit is None else torch.softmax(logits[0], -1)[..., 1:]
        det.score_thresh, gap = _largest_gap_threshold(scores.flatten().numpy(), candidates)
        boxes, cand_scores, labels, iou_thresh = _nms_inputs(det, image)
        margin = _iou_margin(boxes, labels, iou_thresh)
        kept = len(module(image)[0])
        print(f"gen_corpus: {recipe.name}: score_thresh {det.score_thresh:.6g} (gap {gap:.1e} relative), "
              f"{len(cand_scores)} candidates, {kept} detections, NMS IoU margin {margin:.1e}", flush=True)
        if gap < 1e-4 or margin < 1e-4 or len(cand_scores) >= min(det.topk_candidates, det.detections_per_img):
            raise RuntimeError(f"{recipe.name}: postprocessing decisions too close to call (score gap {gap:.1e}, "
                               f"IoU margin {margin:.1e}, {len(cand_scores)} candidates)")
    return tune


def wav2vec2_small():
    import torch
    import torchaudio

    class W2V(torch.nn.Module):
        def __init__(self):
            super().__init__()
            # wav2vec2-base's layer shapes (group-norm extractor, 768 wide,
            # 12 heads), 4 of its 12 transformer layers to keep the file small.
            self.inner = torchaudio.models.wav2vec2_model(
                extractor_mode="group_norm", extractor_conv_layer_config=None, extractor_conv_bias=False,
                encoder_embed_dim=768, encoder_projection_dropout=0.0, encoder_pos_conv_kernel=128,
                encoder_pos_conv_groups=16, encoder_num_layers=4, encoder_num_heads=12,
                encoder_attention_dropout=0.0, encoder_ff_interm_features=3072, encoder_ff_interm_dropout=0.0,
                encoder_dropout=0.0, encoder_layer_norm_first=False, encoder_layer_drop=0.0, aux_num_out=32)

            self.inner.encoder._preprocess = types.MethodType(w2v_preprocess, self.inner.encoder)

        def forward(self, waveforms, lengths):
            return self.inner(waveforms, lengths)
    return W2V()


def w2v_preprocess(self, features, lengths=None):
    """torchaudio 0.13's Encoder._preprocess, but zeroing the padded frames with
    masked_fill: its `x[mask] = 0.0` exports as a Where whose [B, T] condition
    does not broadcast against [B, T, C] (ONNX Runtime rejects the model too)."""
    import torch
    x = self.feature_projection(features)
    mask = None
    if lengths is not None:
        b, t, _ = x.shape
        pad = torch.arange(t).expand(b, t) >= lengths[:, None]
        x = x.masked_fill(pad[:, :, None], 0.0)
        mask = (-10000.0 * pad[:, None, None, :].to(dtype=features.dtype)).expand(b, 1, t, t)
    return x, mask


def conformer_small():
    import torch
    import torchaudio
    from torchaudio.models import conformer as conformer_mod

    # torchaudio 0.13 builds the padding mask with int(lengths.max().item()),
    # which tracing freezes to the export's length; the same mask from the
    # input's own time dim keeps the sequence length symbolic.
    def lengths_to_padding_mask(lengths, max_length):
        return torch.arange(max_length, dtype=lengths.dtype).expand(lengths.shape[0], max_length) >= lengths[:, None]

    class Conf(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = torchaudio.models.Conformer(input_dim=80, num_heads=4, ffn_dim=256, num_layers=4,
                                                     depthwise_conv_kernel_size=31, dropout=0.0)

        def forward(self, features, lengths):
            saved = conformer_mod._lengths_to_padding_mask
            conformer_mod._lengths_to_padding_mask = lambda l: lengths_to_padding_mask(l, features.shape[1])
            try:
                return self.inner(features, lengths)
            finally:
                conformer_mod._lengths_to_padding_mask = saved
    return Conf()


def bert_like(layers=4, vocab=8192, hidden=768, heads=12, ffn=3072, max_pos=512):
    def build():
        import torch

        class Bert(torch.nn.Module):
            """BERT-base-shaped encoder: token + position + segment embeddings,
            LayerNorm, post-LN GELU TransformerEncoder layers, key padding mask
            from attention_mask, a tanh pooler."""

            def __init__(self):
                super().__init__()
                self.tok = torch.nn.Embedding(vocab, hidden)
                self.pos = torch.nn.Embedding(max_pos, hidden)
                self.seg = torch.nn.Embedding(2, hidden)
                self.norm = torch.nn.LayerNorm(hidden, eps=1e-12)
                layer = torch.nn.TransformerEncoderLayer(hidden, heads, ffn, dropout=0.0, activation="gelu",
                                                         batch_first=True, layer_norm_eps=1e-12)
                self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
                self.pool = torch.nn.Linear(hidden, hidden)

            def forward(self, input_ids, attention_mask, token_type_ids):
                positions = torch.arange(input_ids.shape[1]).unsqueeze(0)
                x = self.norm(self.tok(input_ids) + self.pos(positions) + self.seg(token_type_ids))
                h = self.encoder(x, src_key_padding_mask=attention_mask == 0)
                return h, torch.tanh(self.pool(h[:, 0]))
        return transformer_init(Bert(), 5)
    return build


def gpt2_like(layers=4, vocab=8192, hidden=768, heads=12, max_pos=1024):
    def build():
        import torch

        class Block(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.ln1 = torch.nn.LayerNorm(hidden)
                self.attn = torch.nn.MultiheadAttention(hidden, heads, dropout=0.0, batch_first=True)
                self.ln2 = torch.nn.LayerNorm(hidden)
                self.mlp = torch.nn.Sequential(torch.nn.Linear(hidden, 4 * hidden),
                                               torch.nn.GELU(approximate="tanh"),
                                               torch.nn.Linear(4 * hidden, hidden))

            def forward(self, x, causal, padding):
                h = self.ln1(x)
                x = x + self.attn(h, h, h, attn_mask=causal, key_padding_mask=padding, need_weights=False)[0]
                return x + self.mlp(self.ln2(x))

        class GPT2(torch.nn.Module):
            """GPT-2-shaped decoder: pre-LN blocks of nn.MultiheadAttention with
            a causal mask (built from the sequence length) and a padding mask
            from attention_mask, tied LM head."""

            def __init__(self):
                super().__init__()
                self.wte = torch.nn.Embedding(vocab, hidden)
                self.wpe = torch.nn.Embedding(max_pos, hidden)
                self.blocks = torch.nn.ModuleList(Block() for _ in range(layers))
                self.ln_f = torch.nn.LayerNorm(hidden)

            def forward(self, input_ids, attention_mask):
                t = input_ids.shape[1]
                x = self.wte(input_ids) + self.wpe(torch.arange(t).unsqueeze(0))
                causal = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
                padding = attention_mask == 0
                for b in self.blocks:
                    x = b(x, causal, padding)
                return torch.matmul(self.ln_f(x), self.wte.weight.t())
        return transformer_init(GPT2(), 6)
    return build


def seq2seq_like():
    import torch

    class Seq2Seq(torch.nn.Module):
        """nn.Transformer encoder-decoder (TransformerDecoder with cross
        attention, causal target mask), small: d=256, 4 heads, 2+2 layers."""

        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(1000, 256)
            self.core = torch.nn.Transformer(256, 4, 2, 2, 1024, dropout=0.0, batch_first=True)
            self.head = torch.nn.Linear(256, 1000)

        def forward(self, src_ids, tgt_ids):
            t = tgt_ids.shape[1]
            mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
            return self.head(self.core(self.emb(src_ids), self.emb(tgt_ids), tgt_mask=mask))
    return transformer_init(Seq2Seq(), 7)


def qat(name):
    """A torchvision quantizable model, fused and prepared for QAT with
    ONNX-exportable fake quantization (uint8 0..255 activations, int8 per-channel
    symmetric weights), observers run on seeded batches, then frozen; export
    writes each FakeQuantize as a QuantizeLinear/DequantizeLinear pair (qat_post
    then makes the per-tensor pairs' [1] scales and zero points scalars, which
    ONNX Runtime's QDQ fusion needs)."""
    def build():
        import torch
        import torchvision
        from torch.ao import quantization as q
        m = getattr(torchvision.models.quantization, name)(weights=None, quantize=False)
        m.train()
        m.fuse_model(is_qat=True)
        randomize_norm_stats(m, torch.Generator().manual_seed(1))
        act = q.FakeQuantize.with_args(observer=q.MovingAverageMinMaxObserver, quant_min=0, quant_max=255,
                                       dtype=torch.quint8, qscheme=torch.per_tensor_affine, reduce_range=False)
        m.qconfig = q.QConfig(activation=act, weight=q.default_per_channel_weight_fake_quant)
        q.prepare_qat(m, inplace=True)
        gen = torch.Generator().manual_seed(7)
        with torch.no_grad():
            for _ in range(3):
                m(torch.randn(2, 3, 224, 224, generator=gen))
        m.apply(q.disable_observer)
        m.apply(torch.nn.intrinsic.qat.freeze_bn_stats)
        return m
    return build


def small_cnn():
    import torch
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, 2, 1), torch.nn.ReLU(), torch.nn.Conv2d(16, 32, 3, 2, 1), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 32, 3, 1, 1, groups=4), torch.nn.ReLU(), torch.nn.Conv2d(32, 64, 1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10))


def build_qlinear_cnn(opset):
    """The small CNN above, calibrated on seeded inputs, in ORT's QOperator layout."""
    import torch
    from corpus_onnx_rewrites import qlinear_cnn
    torch.manual_seed(11)
    m = small_cnn().eval()
    calib = torch.randn(8, 3, 64, 64, generator=torch.Generator().manual_seed(12))
    ranges, convs, x = [(float(calib.min()), float(calib.max()))], [], calib
    with torch.no_grad():
        for layer in m:
            x = layer(x)
            if isinstance(layer, torch.nn.Conv2d):
                convs.append((layer.weight.numpy().copy(), layer.bias.numpy().copy(), layer.stride[0],
                              layer.padding[0], layer.groups))
            if isinstance(layer, torch.nn.ReLU):
                ranges.append((0.0, float(x.max())))
            if isinstance(layer, torch.nn.Flatten):
                ranges.append((float(x.min()), float(x.max())))
        fc = m[-1]
        return qlinear_cnn(convs, (fc.weight.numpy().T.copy(), fc.bias.numpy().copy()), ranges,
                           ["batch", 3, 64, 64], opset)


def fp16_post(model):
    from corpus_onnx_rewrites import to_float16
    return to_float16(model)


def qat_post(model):
    from corpus_onnx_rewrites import scalar_qdq_params
    return scalar_qdq_params(model)


def int8_dynamic_post(model):
    from corpus_onnx_rewrites import quantize_dynamic
    return quantize_dynamic(model)


# ---- the corpus ------------------------------------------------------------------------------------

def image(batch="batch", size=(224, 224)):
    return [Input("input", "float32", [batch, 3, *size])]


BATCH3 = [{"batch": 1}, {"batch": 2}, {"batch": 3}]
HW3 = [{"batch": 1, "height": 224, "width": 224}, {"batch": 2, "height": 160, "width": 192},
       {"batch": 1, "height": 256, "width": 320}]
TEXT3 = [{"batch": 1, "seq": 128}, {"batch": 2, "seq": 37}, {"batch": 4, "seq": 64}]
AUDIO3 = [{"batch": 1, "samples": 16000}, {"batch": 2, "samples": 8000}, {"batch": 1, "samples": 24000}]

RECIPES = [
    Recipe("tv_resnet50", tv("resnet50"), image(), 13, BATCH3, ["logits"],
           note="torchvision ResNet-50 (full size)"),
    Recipe("tv_mobilenet_v3_large", tv("mobilenet_v3_large"), image(size=("height", "width")), 17, HW3,
           ["logits"], note="torchvision MobileNetV3-Large: HardSwish, HardSigmoid, SE; dynamic batch and size"),
    Recipe("tv_efficientnet_b0", tv("efficientnet_b0"), image(), 15, BATCH3, ["logits"],
           note="torchvision EfficientNet-B0: SiLU, SE, depthwise conv"),
    Recipe("tv_regnet_y_400mf", tv("regnet_y_400mf"), image(), 16, BATCH3, ["logits"],
           note="torchvision RegNetY-400MF: grouped conv, SE"),
    Recipe("tv_shufflenet_v2_x1_0", tv("shufflenet_v2_x1_0"), image(), 13, BATCH3, ["logits"],
           note="torchvision ShuffleNetV2 x1.0: channel shuffle (Reshape/Transpose), chunk"),
    Recipe("tv_squeezenet1_1", tv("squeezenet1_1"), image(size=("height", "width")), 14, HW3, ["logits"],
           note="torchvision SqueezeNet 1.1: ceil-mode MaxPool, Concat, dynamic size"),
    Recipe("tv_vit_b_16_l4", vit_b_16_layers(4), image(), 14, BATCH3, ["logits"], version=2,
           tune=undo_degenerate_init,
           note="torchvision ViT-B/16 shapes, 4 of its 12 encoder layers (the full one is 330 MB)"),
    Recipe("tv_swin_t", tv("swin_t"), image(), 17, BATCH3, ["logits"],
           note="torchvision Swin-T (full size): shifted windows (roll), relative position bias"),
    Recipe("tv_convnext_tiny", tv("convnext_tiny"), image(), 17, BATCH3, ["logits"], version=2,
           tune=undo_degenerate_init,
           note="torchvision ConvNeXt-T (full size): 7x7 depthwise conv, LayerNorm(opset 17), layer scale"),
    Recipe("tv_deeplabv3_mobilenet_v3_large", seg("deeplabv3_mobilenet_v3_large"),
           image(size=("height", "width")), 16,
           [{"batch": 1, "height": 256, "width": 256}, {"batch": 2, "height": 192, "width": 224},
            {"batch": 1, "height": 320, "width": 240}], ["out"],
           note="torchvision DeepLabV3 (MobileNetV3-Large backbone): ASPP dilated conv, bilinear Resize"),
    Recipe("tv_lraspp_mobilenet_v3_large", seg("lraspp_mobilenet_v3_large"), image(size=("height", "width")), 15,
           [{"batch": 1, "height": 256, "width": 256}, {"batch": 2, "height": 192, "width": 224},
            {"batch": 1, "height": 320, "width": 240}], ["out"],
           note="torchvision LR-ASPP (MobileNetV3-Large)"),
    Recipe("tv_ssdlite320_mobilenet_v3_large", detection("ssdlite320_mobilenet_v3_large"),
           [Input("image", "float32", [3, 320, 320], "scene")], 13, None, ["boxes", "scores", "labels"],
           version=2, tune=tune_detection(cls_std=1.5, reg_std=1.0, candidates=150, background_logit=3.0),
           note="torchvision SSDlite320 with its postprocessing (Softmax, TopK, NonMaxSuppression, gathers); "
                "heads' last convs rescaled so scores spread and boxes stay near the anchors, score_thresh in a "
                "gap of the scores (tune_detection), a synthetic photo as input"),
    Recipe("tv_retinanet_resnet50_fpn", detection("retinanet_resnet50_fpn", min_size=320, max_size=320),
           [Input("image", "float32", [3, 320, 320], "scene")], 13, None, ["boxes", "scores", "labels"],
           version=2, tune=tune_detection(cls_std=1.5, reg_std=0.2, candidates=150),
           note="torchvision RetinaNet ResNet-50 FPN at 320x320 (the default is 800), with postprocessing "
                "(TopK per level, NonMaxSuppression); heads' last convs rescaled so scores spread and boxes stay "
                "near the anchors, score_thresh in a gap of the scores (tune_detection), a synthetic photo as input"),
    Recipe("ta_wav2vec2_base_l4", wav2vec2_small,
           [Input("waveforms", "float32", ["batch", "samples"], "audio"),
            Input("lengths", "int64", ["batch"], "lengths:waveforms:1")], 14, AUDIO3, ["emissions", "out_lengths"],
           version=2, note="torchaudio wav2vec2-base shapes (GroupNorm conv extractor, conv positional embedding), "
                "4 of its 12 layers, 32-way CTC head; padding mask from lengths"),
    Recipe("ta_conformer_l4", conformer_small,
           [Input("features", "float32", ["batch", "frames", 80]),
            Input("lengths", "int64", ["batch"], "lengths:features:1")], 15,
           [{"batch": 1, "frames": 200}, {"batch": 2, "frames": 97}, {"batch": 3, "frames": 150}],
           ["output", "out_lengths"],
           note="torchaudio Conformer, 4 layers, 80-dim, 4 heads, depthwise conv 31; padding mask from lengths"),
    Recipe("nn_bert_base_l4", bert_like(),
           [Input("input_ids", "int64", ["batch", "seq"], "ids:8192"),
            Input("attention_mask", "int64", ["batch", "seq"], "mask"),
            Input("token_type_ids", "int64", ["batch", "seq"], "ids:2")], 14, TEXT3,
           ["last_hidden_state", "pooler_output"],
           version=2, note="nn.TransformerEncoder shaped like BERT-base (768, 12 heads, 3072 FFN, GELU), 4 of 12 layers, "
                "8192-token vocabulary; key padding mask from attention_mask"),
    Recipe("nn_gpt2_l4", gpt2_like(),
           [Input("input_ids", "int64", ["batch", "seq"], "ids:8192"),
            Input("attention_mask", "int64", ["batch", "seq"], "mask")], 15, TEXT3, ["logits"],
           version=2, note="nn.MultiheadAttention decoder shaped like GPT-2 small (768, 12 heads, pre-LN, tanh GELU), "
                "4 of 12 layers, 8192-token vocabulary; causal + padding masks"),
    Recipe("nn_transformer_seq2seq", seq2seq_like,
           [Input("src_ids", "int64", ["batch", "src_len"], "ids:1000"),
            Input("tgt_ids", "int64", ["batch", "tgt_len"], "ids:1000")], 16,
           [{"batch": 1, "src_len": 32, "tgt_len": 16}, {"batch": 2, "src_len": 17, "tgt_len": 9},
            {"batch": 3, "src_len": 48, "tgt_len": 1}], ["logits"],
           version=2, note="nn.Transformer encoder-decoder (TransformerDecoder, cross attention), d=256, 2+2 layers"),
    Recipe("qat_mobilenet_v2", qat("mobilenet_v2"), image(), 13, BATCH3, ["logits"], kind="int8", randomize_bn=False,
           post=qat_post, version=2,
           note="torchvision quantizable MobileNetV2, QAT fake-quant exported as QDQ "
                "(per-channel int8 weights, uint8 activations; per-tensor scales and zero points as scalars)"),
    Recipe("qat_resnet18", qat("resnet18"), image(), 13, BATCH3, ["logits"], kind="int8", randomize_bn=False,
           post=qat_post, version=2,
           note="torchvision quantizable ResNet-18, QAT fake-quant exported as QDQ "
                "(per-tensor scales and zero points as scalars)"),
    Recipe("fp16_resnet18", tv("resnet18"), image(), 13, BATCH3, ["logits"], kind="fp16", post=fp16_post,
           version=2, note="torchvision ResNet-18 in f16 (f32 export converted: torch 1.13 has no CPU f16 kernels)"),
    Recipe("fp16_mobilenet_v3_small", tv("mobilenet_v3_small"), image(), 17, BATCH3, ["logits"], kind="fp16",
           post=fp16_post, version=2, note="torchvision MobileNetV3-Small in f16"),
    Recipe("fp16_bert_tiny", bert_like(layers=2, vocab=1024, hidden=128, heads=2, ffn=512),
           [Input("input_ids", "int64", ["batch", "seq"], "ids:1024"),
            Input("attention_mask", "int64", ["batch", "seq"], "mask"),
            Input("token_type_ids", "int64", ["batch", "seq"], "ids:2")], 14, TEXT3,
           ["last_hidden_state", "pooler_output"], kind="fp16", post=fp16_post,
           version=3, note="BERT-tiny-shaped encoder (128, 2 heads, 2 layers) in f16"),
    Recipe("int8_dyn_bert_mini", bert_like(layers=4, vocab=4096, hidden=256, heads=4, ffn=1024),
           [Input("input_ids", "int64", ["batch", "seq"], "ids:4096"),
            Input("attention_mask", "int64", ["batch", "seq"], "mask"),
            Input("token_type_ids", "int64", ["batch", "seq"], "ids:2")], 14, TEXT3,
           ["last_hidden_state", "pooler_output"], kind="int8", post=int8_dynamic_post,
           version=2, note="BERT-mini-shaped encoder (256, 4 heads, 4 layers), ORT quantize_dynamic layout: "
                "DynamicQuantizeLinear + MatMulInteger"),
    Recipe("int8_dyn_cnn", small_cnn, [Input("input", "float32", ["batch", 3, 64, 64])], 13, BATCH3, ["logits"],
           kind="int8", post=int8_dynamic_post,
           note="small CNN, ORT quantize_dynamic layout for Conv: DynamicQuantizeLinear + ConvInteger"),
    Recipe("int8_qlinear_cnn", None, [Input("input", "float32", ["batch", 3, 64, 64])], 13, BATCH3, ["logits"],
           kind="int8", note="small CNN in ORT's static QOperator layout: QLinearConv (per-channel), "
                             "QLinearMatMul, Quantize/DequantizeLinear"),
]


# ---- export ----------------------------------------------------------------------------------------

def export(recipe):
    """The ONNX bytes of one recipe."""
    import onnx
    import torch
    if recipe.name == "int8_qlinear_cnn":
        model = build_qlinear_cnn(recipe.opset)
        onnx.checker.check_model(model)
        return model.SerializeToString()
    torch.manual_seed(recipe.seed)
    module = recipe.build()
    if recipe.randomize_bn:
        randomize_norm_stats(module, torch.Generator().manual_seed(recipe.seed + 1))
    module.eval()
    if recipe.tune:
        recipe.tune(module, recipe)
    specs = [i.spec() for i in recipe.inputs]
    arrays = generated_inputs(specs, recipe.sizes[0], recipe.seed)
    args = tuple(torch.from_numpy(arrays[i.name]) for i in recipe.inputs)
    names = [i.name for i in recipe.inputs]
    dynamic = {}
    for inp in recipe.inputs:
        for axis, d in enumerate(inp.shape):
            if isinstance(d, str):
                dynamic.setdefault(inp.name, {})[axis] = d
    buf = io.BytesIO()
    # Exported with autograd on: torch 1.13's fused inference fast path of
    # nn.TransformerEncoderLayer / MultiheadAttention (no_grad only) has no
    # ONNX export.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, buf, opset_version=recipe.opset, input_names=names,
                          output_names=recipe.outputs, dynamic_axes=dynamic or None, do_constant_folding=True)
    model = onnx.load_from_string(buf.getvalue())
    if recipe.post:
        model = recipe.post(model)
        model = onnx.shape_inference.infer_shapes(model)
    model.producer_name = "kiln gen_corpus.py (torch.onnx.export)"
    model.producer_version = f"torch {torch.__version__}"
    onnx.checker.check_model(model)
    return model.SerializeToString()


def manifest_entry(recipe, data):
    inputs = [i.spec() for i in recipe.inputs]
    if recipe.kind == "fp16":  # exported with f32 inputs, converted to f16 after
        inputs = [dict(i, dtype="float16") if i["dtype"] == "float32" else i for i in inputs]
    return {
        "file": f"{recipe.name}.onnx",
        "sha256": hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
        "recipe_version": recipe.recipe_version(),
        "opset": recipe.opset,
        "kind": recipe.kind,
        "tolerance": recipe.tolerance(),
        "inputs": inputs,
        "sizes": recipe.sizes,
        "note": recipe.note,
    }


def current(entry, recipe, out):
    f = out / f"{recipe.name}.onnx"
    if not entry or entry.get("recipe_version") != recipe.recipe_version() or not f.exists():
        return False
    return hashlib.sha256(f.read_bytes()).hexdigest() == entry.get("sha256")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT)
    ap.add_argument("--only", default="", help="comma-separated model names")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args(argv)
    selected = RECIPES
    if args.only:
        want = set(args.only.split(","))
        unknown = want - {r.name for r in RECIPES}
        if unknown:
            print(f"gen_corpus: error: unknown model(s): {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
        selected = [r for r in RECIPES if r.name in want]
    if args.list:
        for r in selected:
            print(f"{r.name:34} opset {r.opset} {r.kind:5} " +
                  " ".join(f"{i.name}:{i.dtype}{i.shape}" for i in r.inputs))
        return 0

    out = args.out
    manifest_path = out / "manifest.json"
    manifest = {"models": {}}
    if manifest_path.exists():
        try:
            manifest = json.loads(manifest_path.read_text())
        except ValueError:
            pass
    entries = manifest.setdefault("models", {})
    stale = [r for r in selected if args.force or not current(entries.get(r.name), r, out)]
    if args.check:
        for r in selected:
            print(f"gen_corpus: {'stale' if r in stale else 'ok'} {r.name}")
        return 1 if stale else 0
    if not stale:
        print(f"gen_corpus: all {len(selected)} models current in {out}")
        return 0

    import torch
    torch.set_num_threads(1)
    out.mkdir(parents=True, exist_ok=True)
    failed = []
    for r in stale:
        t0 = time.time()
        try:
            data = export(r)
        except Exception as e:  # report and go on with the next model
            failed.append(r.name)
            print(f"gen_corpus: FAILED {r.name}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
                  file=sys.stderr)
            if os.environ.get("KILN_GEN_DEBUG"):
                traceback.print_exc()
            continue
        tmp = out / f".{r.name}.onnx.part"
        tmp.write_bytes(data)
        tmp.replace(out / f"{r.name}.onnx")
        entries[r.name] = manifest_entry(r, data)
        manifest.update({"generator": "scripts/gen_corpus.py", "generator_version": GENERATOR_VERSION,
                         "torch": torch.__version__})
        tmpm = out / ".manifest.json.part"
        tmpm.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        tmpm.replace(manifest_path)
        print(f"gen_corpus: ok {r.name} ({len(data) / 1e6:.1f} MB, {time.time() - t0:.0f} s)", flush=True)
    if failed:
        print(f"gen_corpus: error: {len(failed)} model(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
