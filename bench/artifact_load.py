#!/usr/bin/env python3
"""Load-to-first-result time of an artifact, against one steady inference.

    PYTHONPATH=build/python /usr/bin/python3 bench/artifact_load.py MODEL.kiln [--runs N]

Prints: load (mmap, checks, code dlopen, weight packing), first inference,
steady inference (median of N), and the overhead = load + first - steady,
which issue 4 bounds at 50 ms for YOLOv8n. Each load is a fresh kiln.load in
this process (the file is in the page cache after the first).
"""
import argparse
import statistics
import time

import numpy as np

import kiln


def inputs_for(model, rng):
    feeds = {}
    for info in model.inputs:
        shape = [d if isinstance(d, int) else 1 for d in info.shape]
        feeds[info.name] = rng.standard_normal(shape).astype(info.dtype)
    return feeds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("artifact")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    overheads, loads, firsts, steadies = [], [], [], []
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        model = kiln.load(args.artifact)
        t1 = time.perf_counter()
        feeds = inputs_for(model, rng)
        t2 = time.perf_counter()
        model.run(feeds)
        t3 = time.perf_counter()
        steady = []
        for _ in range(args.runs):
            s = time.perf_counter()
            model.run(feeds)
            steady.append(time.perf_counter() - s)
        load, first, med = (t1 - t0) * 1e3, (t3 - t2) * 1e3, statistics.median(steady) * 1e3
        loads.append(load); firsts.append(first); steadies.append(med)
        overheads.append(load + first - med)
        del model
    print(f"load {statistics.median(loads):.2f} ms, first inference {statistics.median(firsts):.2f} ms, "
          f"steady inference {statistics.median(steadies):.2f} ms (medians of {args.rounds} rounds)")
    print(f"load + first - steady = {statistics.median(overheads):.2f} ms")


if __name__ == "__main__":
    main()
