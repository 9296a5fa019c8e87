#!/usr/bin/env python3
"""ab_kiln.py: two kiln binaries side by side on corpus models, for a
change's before/after on this noisy machine. Rounds alternate the binaries
(`kiln bench --json` on the corpus inputs bench/compare_ort.py uses); the
min over rounds of each binary's min latency is the figure (noise only ever
adds time), with the median of medians next to it.

    /usr/bin/python3 bench/ab_kiln.py --old OLD_KILN [--new build/tools/kiln] \
        --models int8_qlinear_cnn,tv_regnet_y_400mf [--threads 1] [--rounds 3] [--runs 20]
"""
import argparse
import pathlib
import statistics
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import compare_ort  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", required=True, help="baseline kiln binary")
    ap.add_argument("--new", default=compare_ort.DEFAULT_KILN, help="kiln binary under test")
    ap.add_argument("--models", required=True, help="comma-separated corpus model names")
    ap.add_argument("--threads", default="1")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=2)
    opts = ap.parse_args()
    sel = argparse.Namespace(corpus=str(compare_ort.DEFAULT_CORPUS), generated=str(compare_ort.DEFAULT_GENERATED),
                             models=opts.models, public=False)
    print(f"{'model':34} {'old min':>9} {'new min':>9} {'new/old':>8}   {'old med':>9} {'new med':>9}")
    ratios = []
    for name, path, inputs in compare_ort.pick_models(sel):
        with tempfile.TemporaryDirectory() as tmp:
            flags = compare_ort.write_inputs(inputs, pathlib.Path(tmp))
            mins = {"old": [], "new": []}
            meds = {"old": [], "new": []}
            for _ in range(opts.rounds):
                for side, binary in (("old", opts.old), ("new", opts.new)):
                    r = compare_ort.kiln_once(opts, binary, str(path), flags, opts.threads)
                    mins[side].append(r["min_ms"])
                    meds[side].append(r["median_ms"])
        old, new = min(mins["old"]), min(mins["new"])
        ratios.append(new / old)
        print(f"{name:34} {old:9.3f} {new:9.3f} {new / old:8.2f}   "
              f"{statistics.median(meds['old']):9.3f} {statistics.median(meds['new']):9.3f}")
    if len(ratios) > 1:
        print(f"{'geomean new/old':34} {'':9} {'':9} {compare_ort.geomean(ratios):8.2f}")


if __name__ == "__main__":
    main()
