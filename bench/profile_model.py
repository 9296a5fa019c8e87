#!/usr/bin/env python3
"""profile_model.py: `kiln bench --profile` on a corpus model with its first
realistic input set (the inputs bench/compare_ort.py uses), to see which
steps take the time.

    /usr/bin/python3 bench/profile_model.py MODEL [--threads N] [--runs R] [--kiln BIN]
"""
import argparse
import pathlib
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import compare_ort  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--kiln", default=compare_ort.DEFAULT_KILN)
    ap.add_argument("--top", type=int, default=25, help="slowest steps shown (default 25)")
    opts = ap.parse_args()
    _, path, inputs = compare_ort.pick_model(opts.model)
    with tempfile.TemporaryDirectory() as tmp:
        flags = compare_ort.write_inputs(inputs, pathlib.Path(tmp))
        out = subprocess.run([opts.kiln, "bench", str(path), "--profile", "--threads", str(opts.threads),
                              "--runs", str(opts.runs)] + flags, capture_output=True, text=True)
    lines = (out.stdout + out.stderr).splitlines()
    print("\n".join(lines[:opts.top + 12]))
    return out.returncode


if __name__ == "__main__":
    sys.exit(main())
