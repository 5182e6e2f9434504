"""Model files: load time against torch.jit.load, and weight pages shared
between processes.

    /usr/bin/python3 bench/load_bench.py [--models bert,resnet50] [--repeat 5]

For each model (a bench model, traced and frozen once, with PyTorch): the
TorchScript archive (torch.jit.save) and the .llga file (compiled.save after
one call, so its weights are pre-packed) are written to a temporary folder.
Then, each in a fresh process (so nothing is cached in the process; the
files are in the page cache, as for any repeated load):

* ``torch.jit.load`` time,
* ``llga.load`` time (import of llga not included: the same for torch), its
  first call (oneDNN primitive creation) and a later call,
* whether torch was imported by the llga process (it must not be),

and the memory of two processes that loaded the same .llga file and called
it once (from /proc/PID/smaps_rollup): RSS, PSS and shared clean pages of
each. Figures are medians of ``--repeat`` fresh processes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable

_TORCH_LOAD = r"""
import sys, time, json, torch
torch.set_num_threads(2)
t = time.perf_counter(); m = torch.jit.load(sys.argv[1], map_location="cpu"); dt = time.perf_counter() - t
print(json.dumps({"load": dt}))
"""

_LLGA_LOAD = r"""
import sys, time, json, numpy as np
import llga
llga.set_num_threads(2)
t = time.perf_counter(); m = llga.load(sys.argv[1]); dt = time.perf_counter() - t
z = np.load(sys.argv[2]); x = [z[k] for k in sorted(z.files, key=lambda k: int(k.split("_")[1]))]
t = time.perf_counter(); m(*x); first = time.perf_counter() - t
t = time.perf_counter(); m(*x); later = time.perf_counter() - t
out = {"load": dt, "first": first, "later": later, "torch": "torch" in sys.modules,
       "packed": m.saved.packed, "packed_used": m.saved.packed_used}
if len(sys.argv) > 3:  # hold the model and report memory when told
    sys.stdout.write(json.dumps(out) + "\n"); sys.stdout.flush()
    sys.stdin.readline()
    mem = {}
    for line in open("/proc/self/smaps_rollup"):
        k, _, v = line.partition(":")
        if k in ("Rss", "Pss", "Shared_Clean", "Private_Clean", "Private_Dirty"):
            mem[k] = int(v.split()[0]) * 1024
    print(json.dumps(mem))
else:
    print(json.dumps(out))
"""


def _run(code: str, *args: str) -> dict:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([PY, "-c", code, *args], capture_output=True, text=True, env=env, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def _two_processes(path: str, inputs: str):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    procs = [subprocess.Popen([PY, "-c", _LLGA_LOAD, path, inputs, "hold"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    for p in procs:  # both loaded and called once before either reports memory
        p.stdout.readline()
    mems = []
    for p in procs:
        p.stdin.write("\n")
        p.stdin.flush()
        mems.append(json.loads(p.stdout.readline()))
    for p in procs:
        p.wait(timeout=60)
    return mems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="bert,resnet50")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    sys.path.insert(0, ROOT)
    import numpy as np
    import torch

    import llga
    from bench import models as bench_models

    tmp = tempfile.mkdtemp(prefix="llga-load-bench-")
    rows = []
    for name in args.models.split(","):
        print(f"preparing {name} ...", file=sys.stderr, flush=True)
        model, inputs = bench_models.build(name, 1)
        inputs = inputs if isinstance(inputs, tuple) else (inputs,)
        with torch.no_grad():
            traced = torch.jit.freeze(torch.jit.trace(model, inputs, check_trace=False).eval())
        pt, ll, npz = (os.path.join(tmp, f"{name}.{ext}") for ext in ("pt", "llga", "npz"))
        torch.jit.save(traced, pt)
        compiled = llga.optimize(traced, inputs)
        compiled.save(ll)
        np.savez(npz, *[x.numpy() for x in inputs])
        del compiled, traced, model
        tl = [_run(_TORCH_LOAD, pt)["load"] for _ in range(args.repeat)]
        ls = [_run(_LLGA_LOAD, ll, npz) for _ in range(args.repeat)]
        mem = _two_processes(ll, npz)
        rows.append((name, os.path.getsize(pt), os.path.getsize(ll), statistics.median(tl),
                     statistics.median(r["load"] for r in ls), statistics.median(r["first"] for r in ls),
                     statistics.median(r["later"] for r in ls), any(r["torch"] for r in ls), ls[0]["packed"],
                     ls[0]["packed_used"], mem))
    print(f"\n{'model':<10} {'.pt MiB':>8} {'.llga MiB':>9} {'jit.load ms':>11} {'llga.load ms':>12} {'ratio':>6} "
          f"{'1st call ms':>11} {'call ms':>8} {'torch?':>6} {'pre-packed':>10}")
    for name, pts, lls, tl, ll, first, later, imported, packed, used, _ in rows:
        print(f"{name:<10} {pts / 2**20:>8.1f} {lls / 2**20:>9.1f} {tl * 1e3:>11.1f} {ll * 1e3:>12.1f} {ll / tl:>6.3f} "
              f"{first * 1e3:>11.1f} {later * 1e3:>8.1f} {'yes' if imported else 'no':>6} "
              f"{packed:>5} {'used' if used else 'no':>4}")
    print("\nTwo processes that loaded the same .llga file and called it once (MiB, /proc/PID/smaps_rollup):")
    print(f"{'model':<10} {'proc':>4} {'RSS':>8} {'PSS':>8} {'shared clean':>12} {'private':>8}")
    for name, *_, mem in rows:
        for i, m in enumerate(mem):
            print(f"{name:<10} {i:>4} {m['Rss'] / 2**20:>8.1f} {m['Pss'] / 2**20:>8.1f} {m['Shared_Clean'] / 2**20:>12.1f} "
                  f"{(m['Private_Clean'] + m['Private_Dirty']) / 2**20:>8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
