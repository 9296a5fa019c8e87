"""Realistic seeded inputs for the corpus models, shared by the end-to-end
tests (tests/e2e/test_corpus.py) and the benchmark (bench/compare_ort.py)."""

import numpy as np


def document_image(seed, height, width):
    """A seeded random 'page': light noisy paper with dark glyph-like blocks in
    lines, normalized the way PaddleOCR feeds its detector (ImageNet mean/std).

    The detector's output is a sigmoid probability map. On uniform noise every
    pixel is confidently 'no text' (logits below -8), where ONNX Runtime's
    fast sigmoid approximation differs from the exact value by up to 3x, so
    the comparison would measure ORT's approximation, not kiln. A page with
    text exercises the model the way it is used."""
    rng = np.random.default_rng(seed)
    img = np.full((height, width, 3), 235.0) + rng.normal(0, 6, (height, width, 3))
    y = 20
    while y < height - 30:
        x, h = 15, int(rng.integers(12, 22))
        while x < width - 30:
            w = int(rng.integers(6, 16))
            img[y:y + h, x:x + w] = rng.uniform(10, 60)
            x += w + int(rng.integers(2, 6)) + (int(rng.integers(15, 40)) if rng.random() < 0.1 else 0)
        y += h + int(rng.integers(14, 30))
    img = np.clip(img, 0, 255) / 255.0
    mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
    return ((img - mean) / std).transpose(2, 0, 1)[None].astype(np.float32)


# The seed of the report's input set i is REPORT_SEED + i (scripts/corpus_report.py);
# scripts/gen_corpus.py checks generated detection models against the first.
REPORT_SEED = 1000


def scene_image(rng, height, width):
    """A seeded synthetic photo, [3, H, W] in [0, 1] (torchvision detection
    models take unnormalized RGB): a sky-to-ground gradient, 6-12 solid
    objects (rectangles, ellipses, triangles) in random colors with a light
    shading, and sensor noise. Detectors see edges, corners and flat regions,
    the way a photo drives them; uniform noise drives every activation the
    same way and makes the heads' outputs degenerate."""
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float64)
    v = yy / max(height - 1, 1)
    top, bottom = rng.uniform(0.5, 0.9, 3), rng.uniform(0.1, 0.5, 3)
    img = top[:, None, None] * (1 - v) + bottom[:, None, None] * v
    for _ in range(int(rng.integers(6, 13))):
        cy, cx = rng.uniform(0, height), rng.uniform(0, width)
        h, w = rng.uniform(0.08, 0.45) * height, rng.uniform(0.08, 0.45) * width
        kind = rng.integers(0, 3)
        if kind == 0:
            mask = (np.abs(yy - cy) < h / 2) & (np.abs(xx - cx) < w / 2)
        elif kind == 1:
            mask = ((yy - cy) / (h / 2)) ** 2 + ((xx - cx) / (w / 2)) ** 2 < 1
        else:  # a triangle, apex up
            rel = (yy - (cy - h / 2)) / h
            mask = (rel >= 0) & (rel <= 1) & (np.abs(xx - cx) < rel * w / 2)
        color = rng.uniform(0, 1, 3)
        shade = 1 + 0.15 * ((xx - cx) / width - (yy - cy) / height)
        img = np.where(mask[None], color[:, None, None] * shade[None], img)
    img += rng.normal(0, 0.02, img.shape)
    return np.clip(img, 0, 1)


def generated_inputs(specs, sizes, seed):
    """Seeded inputs for a generated-corpus model (scripts/gen_corpus.py): specs
    are the manifest's input specs ({name, dtype, shape, fill}; dims are ints
    or symbolic names), sizes maps each symbolic name to its value. Returns
    name -> ndarray. Fills:
      normal / uniform (U[-1,1]) / unit (U[0,1]) / audio (N(0, 0.1)),
      scene      a synthetic photo (scene_image), for image inputs in [0, 1],
      ids:V      int token ids in [0, V),
      mask       attention mask: ones, row b > 0 padded (zeros) at its end,
      lengths:INPUT:AXIS  valid lengths of INPUT along AXIS: row 0 full, later
                 rows shorter (they pair with the padding of that input)."""
    rng = np.random.default_rng(seed)
    dims = {}
    for spec in specs:
        for axis, d in enumerate(spec["shape"]):
            dims[f"{spec['name']}:{axis}"] = sizes[d] if isinstance(d, str) else d
    out = {}
    for spec in specs:
        shape = [sizes[d] if isinstance(d, str) else d for d in spec["shape"]]
        fill = spec["fill"]
        if fill == "normal":
            a = rng.standard_normal(shape)
        elif fill == "uniform":
            a = rng.uniform(-1.0, 1.0, shape)
        elif fill == "unit":
            a = rng.uniform(0.0, 1.0, shape)
        elif fill == "audio":
            a = rng.normal(0.0, 0.1, shape)
        elif fill == "scene":  # [3, H, W] or [N, 3, H, W]
            a = np.stack([scene_image(rng, shape[-2], shape[-1]) for _ in range(int(np.prod(shape[:-3])))])
            a = a.reshape(shape)
        elif fill.startswith("ids:"):
            a = rng.integers(0, int(fill[4:]), shape)
        elif fill == "mask":
            a = np.ones(shape)
            for b in range(1, shape[0]):
                a[b, shape[1] - max(1, shape[1] * b // (2 * shape[0])):] = 0
        elif fill.startswith("lengths:"):
            _, other, axis = fill.split(":")
            full = dims[f"{other}:{axis}"]
            a = np.array([max(1, full - (full * b) // (2 * shape[0])) for b in range(shape[0])])
        else:
            raise ValueError(f"{spec['name']}: unknown fill '{fill}'")
        out[spec["name"]] = a.astype(np.dtype(spec["dtype"]))
    return out


def _audio(rng, shape, scale=0.1):
    return rng.normal(0.0, scale, shape).astype(np.float32)


def npm_cases():
    """Input sets for every model of the npm corpus (scripts/corpus.lock), for
    scripts/corpus_report.py: name -> {"tolerance", "sets": [{input: ndarray}]}.
    The first set is the realistic default; a model with symbolic dims has
    three sets at different sizes, all run on one artifact. Seeded."""
    rng = np.random.default_rng(1234)
    f32 = np.float32
    sr16, sr8 = np.array(16000, np.int64), np.array(8000, np.int64)

    def uni(*shape):
        return rng.uniform(-1.0, 1.0, shape).astype(f32)

    def silero(batch, n, sr, state=128, legacy=False, with_sr=True):
        s = {"input": _audio(rng, (batch, n))}
        if with_sr:
            s["sr"] = sr
        if legacy:
            s["h"], s["c"] = uni(2, batch, 64), uni(2, batch, 64)
        else:
            s["state"] = uni(2, batch, state)
        return s

    cases = {
        "silero_vad_v5.onnx": [silero(1, 512, sr16), silero(2, 512, sr16), silero(1, 256, sr8)],
        "silero_vad_v6.onnx": [silero(1, 512, sr16), silero(2, 512, sr16), silero(1, 256, sr8)],
        "silero_vad_legacy.onnx": [silero(1, 512, sr16, legacy=True), silero(2, 1536, sr16, legacy=True),
                                   silero(1, 256, sr8, legacy=True)],
        "silero_vad_16k_op15.onnx": [silero(1, 512, sr16), silero(2, 512, sr16), silero(3, 512, sr16)],
        "silero_vad_half.onnx": [silero(1, 512, None, with_sr=False), silero(2, 512, None, with_sr=False),
                                 silero(4, 512, None, with_sr=False)],
        "silero_vad_op18_ifless.onnx": [silero(1, 512, sr16), silero(2, 512, sr16), silero(1, 256, sr8)],
        "ch_PP-OCRv4_det_infer.onnx": [{"x": document_image(7, 256, 320)}, {"x": document_image(8, 192, 256)},
                                       {"x": np.concatenate([document_image(9, 320, 224)] * 2)}],
        "ch_PP-OCRv4_rec_infer.onnx": [{"x": uni(1, 3, 48, 320)}, {"x": uni(2, 3, 48, 160)},
                                       {"x": uni(1, 3, 48, 480)}],
        "ch_ppocr_mobile_v2.0_cls_infer.onnx": [{"x": uni(1, 3, 48, 192)}, {"x": uni(3, 3, 48, 192)},
                                                {"x": uni(2, 3, 48, 96)}],
        "yolov8n.onnx": [{"images": rng.uniform(0.0, 1.0, (1, 3, 640, 640)).astype(f32)}],
        # openWakeWord feeds int16-scaled audio (not normalized) to the
        # melspectrogram model; 1280 samples (80 ms at 16 kHz) per call.
        "oww_melspectrogram.onnx": [{"input": _audio(rng, (1, 1280), 3000.0)},
                                    {"input": _audio(rng, (1, 16000), 3000.0)},
                                    {"input": _audio(rng, (2, 4000), 3000.0)}],
        # 76 mel frames x 32 bins per window, values like melspec/10 + 2.
        "oww_embedding_model.onnx": [{"input_1": rng.uniform(0.0, 4.0, (b, 76, 32, 1)).astype(f32)}
                                     for b in (1, 2, 4)],
        "oww_hey_jarvis_v0.1.onnx": [{"x.1": uni(1, 16, 96)}],
        "oww_alexa_v0.1.onnx": [{"onnx::Flatten_0": uni(1, 16, 96)}],
        "oww_timer_v0.1.onnx": [{"onnx::Flatten_0": uni(1, 34, 96)}],
        "oww_hello_deepa.onnx": [{"onnx::Flatten_0": uni(1, 25, 96)}],
    }
    return {name: {"tolerance": 1e-4, "sets": sets} for name, sets in cases.items()}
