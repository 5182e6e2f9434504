"""llga latency next to PyTorch eager, measured in the same run (a quick check;
the benchmark suite is `python -m bench`).

    /usr/bin/python3 bench/runtime_bench.py [--model resnet50] [--batch 1] [--runs 30]

Runs are interleaved (llga, torch, llga, torch, ...) after a warm-up, with 2
threads for both; prints median and min, and the ratio.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    import numpy as np
    import torch

    import llga
    from llga import zoo
    from llga.timing import interleaved, summary_ms

    torch.set_num_threads(args.threads)
    llga.set_num_threads(args.threads)
    model = zoo.torchvision_model(args.model)
    x = torch.randn(args.batch, 3, 224, 224)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(model, x, check_trace=False)
    t0 = time.perf_counter()
    compiled = llga.optimize(traced)
    compile_s = time.perf_counter() - t0
    xn = x.numpy()
    with torch.no_grad():
        ref = model(x).numpy()
    out = compiled(xn)
    err = float(np.abs(out - ref).max() / np.abs(ref).max())
    if err > 1e-4:
        print(f"llga differs from PyTorch (relative error {err:.2e}); not timing", file=sys.stderr)
        return 1
    with torch.no_grad():
        times = interleaved({"llga": lambda: compiled(xn), "torch": lambda: model(x)}, args.runs)
    med = {k: summary_ms(v)["median"] for k, v in times.items()}
    best = {k: summary_ms(v)["min"] for k, v in times.items()}
    print(f"{args.model}, batch {args.batch}, {args.threads} threads, {args.runs} interleaved runs "
          f"(llga compile {compile_s * 1e3:.0f} ms, relative error {err:.1e})")
    print(f"{'system':<22} {'median ms':>10} {'min ms':>8}")
    print(f"{'llga':<22} {med['llga']:10.1f} {best['llga']:8.1f}")
    print(f"{'PyTorch eager':<22} {med['torch']:10.1f} {best['torch']:8.1f}")
    print(f"llga / PyTorch eager: {med['llga'] / med['torch']:.2f}x (median)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
