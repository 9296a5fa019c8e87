#!/usr/bin/python3
"""Runs a compiled .kiln artifact on .npy inputs with the kiln Python module,
prints each output, and optionally writes it.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/run.py MODEL.kiln INPUT.npy... [OUTPUT_DIR]

The .npy files feed the model's inputs in order; a last argument not ending in
.npy is a directory where each output is written as <name>.npy (bytes outside
[A-Za-z0-9._-] become '_', as with `kiln run --output-dir`). KILN_THREADS sets
the session's threads (default 0: the physical cores).
"""

import os
import pathlib
import re
import sys

import numpy as np

import kiln


def main(argv):
    if len(argv) < 2:
        sys.exit("usage: run.py MODEL.kiln INPUT.npy... [OUTPUT_DIR]")
    out_dir = None if argv[-1].endswith(".npy") else pathlib.Path(argv.pop())
    model = kiln.load(argv[0])
    if len(argv) - 1 != len(model.inputs):
        sys.exit(f"run.py: the model has {len(model.inputs)} inputs, got {len(argv) - 1} .npy files")
    inputs = {info.name: np.load(path) for info, path in zip(model.inputs, argv[1:])}
    session = model.session(threads=int(os.environ.get("KILN_THREADS", "0")))
    outputs = session.run(inputs)
    if out_dir:
        out_dir.mkdir(parents=True, exist_ok=True)
    for name, value in outputs.items():
        print(name, list(value.shape), *value.reshape(-1)[:5], "..." if value.size > 5 else "")
        if out_dir:
            file = re.sub(rb"[^A-Za-z0-9._-]", b"_", name.encode()).decode()
            np.save(out_dir / (file + ".npy"), value)


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except kiln.Error as e:
        sys.exit(f"run.py: {e}")
