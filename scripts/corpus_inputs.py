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
