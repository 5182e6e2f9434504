"""Scripted loops in llga next to PyTorch's TorchScript interpreter (same run,
interleaved rounds, both with the same thread count): the interpreter's cost
per trip, where kernels do not hide it.

    /usr/bin/python3 -m bench.script_bench [--trips 1000] [--runs 40] [--write FILE.md]

Each program's result is checked against PyTorch's before it is timed.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trips", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--write", default=None, help="also write the table (markdown) here")
    args = ap.parse_args(argv)

    import numpy as np
    import torch

    import llga
    from bench.script_programs import PROGRAMS
    from llga.timing import interleaved, summary_ms

    torch.set_num_threads(args.threads)
    llga.set_num_threads(args.threads)
    x = torch.randn(4, 4, generator=torch.Generator().manual_seed(0))
    xn = x.numpy()
    rows, ratios, failed = [], [], False
    for name, (fn, what) in PROGRAMS.items():
        compiled = llga.optimize(fn, example_inputs=(x, args.trips))
        got, want = compiled(xn, args.trips), fn(x, args.trips).numpy()
        err = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
        if not err <= 1e-5:
            print(f"{name}: llga differs from PyTorch (relative error {err:.2e}); not timed", file=sys.stderr)
            failed = True
            continue
        t = interleaved({"llga": lambda: compiled(xn, args.trips), "torch": lambda: fn(x, args.trips)}, args.runs)
        med = {k: summary_ms(v)["median"] for k, v in t.items()}
        ratio = med["llga"] / med["torch"]
        ratios.append(ratio)
        rows.append(f"| {name} | {what} | {med['llga'] * 1e3 / args.trips:.2f} | "
                    f"{med['torch'] * 1e3 / args.trips:.2f} | {ratio:.2f}x |")
    head = [f"Scripted loops, {args.trips} trips, {args.threads} threads, median of {args.runs} interleaved rounds.",
            "", "| program | work per trip | llga us/trip | PyTorch us/trip | llga / PyTorch |", "|---|---|---|---|---|"]
    geo = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else float("nan")
    text = "\n".join(head + rows + ["", f"geometric mean llga / PyTorch: {geo:.2f}x"])
    print(text)
    if args.write:
        with open(args.write, "w") as f:
            f.write(text + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
