"""Parse time per corpus dump (llga's C++ parser through the Python binding).

    /usr/bin/python3 bench/parse_bench.py [--models resnet18,densenet121] [--repeat 20]

Prints one row per (model, form): size, nodes, median and best parse time,
and MB/s; the dumps are generated with PyTorch first (not timed).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "py"))


def main() -> int:
    import corpus  # tests/py/corpus.py: the same dumps the tests use
    import llga

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(corpus.MODELS))
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    models = args.models.split(",")
    for model in models:
        print(f"tracing {model} ...", file=sys.stderr, flush=True)
        corpus.dumps(model)
    # PyTorch's OpenMP threads spin for a while after tracing; let them go idle
    # so they do not compete with the parser for the two cores.
    time.sleep(1.0)
    rows = []
    for model in models:
        for form, (text, _) in corpus.dumps(model).items():
            llga.parse(text)  # warm-up
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                g = llga.parse(text)
                times.append(time.perf_counter() - t0)
                nodes = len(g.nodes(recursive=True))
                del g  # destruction is not parse time
            rows.append((model, form, len(text), nodes, statistics.median(times), min(times)))
    print(f"\n{'model':<20} {'form':<8} {'KiB':>6} {'nodes':>6} {'median ms':>10} {'best ms':>8} {'MB/s':>6}")
    for model, form, size, nodes, med, best in rows:
        print(f"{model:<20} {form:<8} {size / 1024:6.0f} {nodes:6d} {med * 1e3:10.2f} {best * 1e3:8.2f} "
              f"{size / best / 1e6:6.0f}")
    largest = max(rows, key=lambda r: r[2])
    print(f"\nlargest dump: {largest[0]} {largest[1]}, {largest[2] / 1024:.0f} KiB, "
          f"median {largest[4] * 1e3:.2f} ms (target: under 20 ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
