"""Command line: ``/usr/bin/python3 -m llga profile MODEL --input 1x3x224x224``.

MODEL is a saved TorchScript file (``torch.jit.save``) or a torchvision model
name (random weights). Prints the profiler's ExecTime table and Unimpl.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings


def _shape(text: str):
    try:
        dims = tuple(int(d) for d in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a shape like 1x3x224x224, got {text!r}") from None
    if not dims or any(d <= 0 for d in dims):
        raise argparse.ArgumentTypeError(f"expected positive dims like 1x3x224x224, got {text!r}")
    return dims


def profile(args) -> int:
    import numpy as np
    import torch

    import llga
    from llga import zoo

    torch.set_num_threads(args.threads)
    llga.set_num_threads(args.threads)
    shapes = args.input or [(1, 3, 224, 224)]
    xs = [torch.from_numpy(np.random.default_rng(i).standard_normal(s, dtype=np.float32)) for i, s in enumerate(shapes)]
    if os.path.exists(args.model):
        try:
            obj = torch.jit.load(args.model, map_location="cpu").eval()
        except Exception as e:  # noqa: BLE001 - any load failure is a usage error here
            print(f"llga profile: cannot load {args.model!r} as TorchScript: {e}", file=sys.stderr)
            return 2
        what = args.model
    elif args.model in zoo.TORCHVISION_MODELS:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            obj = torch.jit.trace(zoo.torchvision_model(args.model), tuple(xs), check_trace=False)
        what = f"torchvision {args.model} (random weights)"
    else:
        print(f"llga profile: {args.model!r} is neither a file nor a torchvision model "
              f"({', '.join(zoo.TORCHVISION_MODELS)})", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    compiled = llga.optimize(obj)
    compile_s = time.perf_counter() - t0
    arrays = [x.numpy() for x in xs]
    compiled(*arrays)  # warm-up: primitives built, weights reordered
    with llga.profiler.profile():
        t0 = time.perf_counter()
        for _ in range(args.runs):
            compiled(*arrays)
        wall = (time.perf_counter() - t0) / args.runs
    print(f"{what}, input {' '.join('x'.join(map(str, s)) for s in shapes)}, {args.threads} threads: "
          f"compiled in {compile_s * 1e3:.0f} ms, {wall * 1e3:.2f} ms per call over {args.runs} profiled runs\n")
    print(llga.profiler.stats("ExecTime"))
    print("\nUnimpl:")
    print(llga.profiler.stats("Unimpl"))
    if args.trace:
        llga.profiler.export_chrome_trace(args.trace)
        print(f"\nChrome trace written to {args.trace}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m llga", description="llga command line")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("profile", help="compile a model, run it under the profiler, print where the time goes")
    p.add_argument("model", help="a TorchScript file (torch.jit.save) or a torchvision model name")
    p.add_argument("--input", type=_shape, action="append",
                   help="an input shape such as 1x3x224x224 (repeat for several inputs; default 1x3x224x224)")
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--trace", help="also write a Chrome trace (Perfetto, chrome://tracing) here")
    args = ap.parse_args(argv)
    if args.cmd == "profile":
        if args.runs <= 0:
            ap.error("--runs must be positive")
        return profile(args)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
