"""`kiln verify --target vulkan` on every corpus model, one line each: PASS,
FAIL (with the verify summary) or the error that stopped it (a kernel past
the driver's loop budget, a compile error). The same inputs as
bench/compare_ort.py feeds ONNX Runtime. KILN_VULKAN_DEVICE picks the
device (lavapipe by default here).

  /usr/bin/python3 bench/vulkan_corpus.py [--models a,b] [--kiln build/tools/kiln]
"""

import argparse
import pathlib
import subprocess
import sys
import tempfile

import compare_ort


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=None, help="comma-separated model names (default: all)")
    ap.add_argument("--kiln", default=str(pathlib.Path(__file__).resolve().parents[1] / "build/tools/kiln"))
    ap.add_argument("--timeout", type=int, default=900)
    args = ap.parse_args()
    sel = argparse.Namespace(corpus=str(compare_ort.DEFAULT_CORPUS), generated=str(compare_ort.DEFAULT_GENERATED),
                             models=args.models, public=False)
    passed = total = 0
    for name, path, inputs in compare_ort.pick_models(sel):
        total += 1
        with tempfile.TemporaryDirectory() as d:
            flags = compare_ort.write_inputs(inputs, pathlib.Path(d))
            try:
                r = subprocess.run([args.kiln, "verify", *flags, str(path), "--target", "vulkan"],
                                   capture_output=True, text=True, timeout=args.timeout)
            except subprocess.TimeoutExpired:
                print(f"{name:40s} TIMEOUT", flush=True)
                continue
        if r.returncode == 0 and "PASS" in r.stdout:
            passed += 1
            result = "PASS"
        elif "FAIL" in r.stdout:
            result = "FAIL " + r.stdout.strip().splitlines()[-1]
        else:
            result = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
        print(f"{name:40s} {result[:240]}", flush=True)
    print(f"{passed} of {total} pass")
    return 0


if __name__ == "__main__":
    sys.exit(main())
