"""Stress: a compiled model called as a service with ever new input shapes must
not grow. Calls a small CNN `--calls` times over random image sizes (each
side 8..8+--sizes), and reports the process's RSS after the warm-up and at
the end, and the sizes of llga's per-shape structures (peak_activations,
arenas). Exits 1 when RSS grew more than --max-growth-mib after the warm-up
or a per-shape structure is unbounded.

    python3 scripts/stress.py --calls 200000 --sizes 100   # make stress (10,000 distinct sizes)
    python3 scripts/stress.py --calls 4000 --sizes 60       # the lean run in make test
"""

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=200_000)
    ap.add_argument("--sizes", type=int, default=100, help="each side takes this many values: sizes**2 shapes")
    ap.add_argument("--warmup", type=float, default=0.25, help="share of the calls before the first RSS reading")
    ap.add_argument("--max-growth-mib", type=float, default=8.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    sys.path.insert(0, ROOT)
    import numpy as np
    import torch

    import llga

    torch.manual_seed(args.seed)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                torch.nn.MaxPool2d(2), torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 4)).eval()
    x0 = torch.randn(1, 3, 16, 16)
    compiled = llga.optimize(torch.jit.trace(model, x0), [x0])
    rng = np.random.default_rng(args.seed)
    sides = rng.integers(8, 8 + args.sizes, size=(args.calls, 2))
    seen = set()
    warm = int(args.calls * args.warmup)
    base = None
    t0 = time.time()
    for i, (h, w) in enumerate(sides):
        x = rng.standard_normal((1, 3, int(h), int(w))).astype(np.float32)
        out = compiled(x)
        seen.add((int(h), int(w)))
        if i % 997 == 0:  # now and then, against PyTorch
            with torch.no_grad():
                want = model(torch.from_numpy(x)).numpy()
            if not np.allclose(out, want, rtol=1e-4, atol=1e-5):
                print(f"call {i}: wrong answer at {h}x{w}")
                return 1
        if i + 1 == warm:
            base = rss_mib()
        if (i + 1) % max(1, args.calls // 10) == 0:
            print(f"{i + 1} calls, {len(seen)} sizes, RSS {rss_mib():.1f} MiB, {time.time() - t0:.0f} s", flush=True)
    end = rss_mib()
    mem = compiled.memory
    peaks, arenas = len(mem["peak_activations"]), len(mem["arena"]) if isinstance(mem.get("arena"), dict) else 0
    print(f"{args.calls} calls over {len(seen)} distinct sizes: RSS {base:.1f} MiB after {warm} calls, "
          f"{end:.1f} MiB at the end ({end - base:+.1f}); peak_activations has {peaks} entries, arenas {arenas}")
    ok = end - base <= args.max_growth_mib and peaks <= 64 and arenas <= 8
    print("ok" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
