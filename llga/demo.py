"""The main demo: trace torchvision's resnet18, import it into llga, run it.

    /usr/bin/python3 -m llga.demo [--model resnet18] [--form inlined|graph|frozen]
"""

from __future__ import annotations

import argparse
import collections
import time
import warnings

import numpy as np


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m llga.demo", description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--form", default="inlined", choices=["graph", "inlined", "frozen"])
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args(argv)

    import torch

    import llga
    from llga import zoo
    from llga.timing import interleaved, summary_ms

    torch.set_num_threads(2)
    print(f"tracing torchvision {args.model} (random weights) ...", flush=True)
    model = zoo.torchvision_model(args.model)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(model, torch.randn(1, 3, 224, 224), check_trace=False)
        obj = torch.jit.freeze(traced) if args.form == "frozen" else traced
    tgraph = {"graph": obj.graph, "inlined": obj.inlined_graph, "frozen": obj.graph}[args.form]
    text = tgraph.str()

    # Parse time: best of a few runs of the C++ parser on the same text.
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        graph = llga.parse(text)
        times.append(time.perf_counter() - t0)
    _, weights = llga.import_torch(obj, inline=args.form != "graph")
    if args.form == "graph":  # the module form calls submodules: run the inlined graph
        obj = traced

    counts = collections.Counter(n.kind for n in graph.nodes(recursive=True))
    total = sum(counts.values())
    print(f"\n{args.model} ({args.form} graph): {len(text) / 1024:.0f} KiB of IR text, {total} nodes, "
          f"parsed in {min(times) * 1e3:.2f} ms (best of {len(times)})")
    print("\ninputs:")
    for v in graph.inputs:
        print(f"  %{v.name} : {v.type}")
    print("outputs:")
    for v in graph.outputs:
        print(f"  %{v.name} : {v.type}")
    print(f"\nnodes by kind ({len(counts)} kinds):")
    width = max(len(k) for k in counts)
    for kind, n in counts.most_common():
        print(f"  {kind:<{width}}  {n:5d}  {'#' * max(1, round(40 * n / max(counts.values())))}")
    nbytes = sum(a.nbytes for a in weights.values())
    print(f"\nweights: {len(weights)} tensors, {nbytes / 2**20:.1f} MiB, shared with torch (no copy)")
    print(f"verifier: {'ok' if not graph.verify() else graph.verify()}")
    print(f"round trip: str(llga.parse(text)) == text -> {str(graph) == text}")

    # Run it: llga (fused partitions on oneDNN) next to PyTorch, interleaved.
    x = torch.randn(1, 3, 224, 224)
    t0 = time.perf_counter()
    compiled = llga.optimize(obj)
    compile_s = time.perf_counter() - t0
    xn = x.numpy()
    t0 = time.perf_counter()
    out = compiled(xn)
    first_s = time.perf_counter() - t0
    with torch.no_grad():
        ref = model(x).numpy()
    diff = float(np.abs(out - ref).max())
    print(f"\nllga.optimize: {compile_s * 1e3:.0f} ms; first call {first_s * 1e3:.0f} ms")
    print(f"max |llga - torch| = {diff:.2e} (relative {diff / float(np.abs(ref).max()):.2e})")

    parts = compiled.partitions
    print(f"\npartitions: {len(parts)} (layouts from the first call; 'kept' = handed on without a reorder)")
    print("  " + repr(parts).replace("\n", "\n  "))
    for kind, info in compiled.unfused.items():
        print(f"  outside: {kind} x{info['count']}: {'; '.join(info['reasons'])}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ofi = torch.jit.optimize_for_inference(torch.jit.freeze(traced))
    with torch.no_grad():
        ofi(x)
        times = interleaved({"llga (fused)": lambda: compiled(xn), "PyTorch eager": lambda: model(x),
                             "PyTorch frozen+OFI": lambda: ofi(x)}, args.runs)
    print(f"\nlatency over {args.runs} interleaved runs, {torch.get_num_threads()} threads (median / min):")
    for name, samples in times.items():
        s = summary_ms(samples)
        print(f"  {name:<18} {s['median']:7.1f} / {s['min']:6.1f} ms")
    mem = compiled.memory  # after the timed calls: the memory planner has its arena by now
    peak = max(mem["peak_activations"].values(), default=0)
    arena = next(iter(mem["arena"].values()), {})
    print(f"\nmemory: weights still held {mem['weights'] / 2**20:.1f} MiB (released after the first call, only "
          f"used reordered: {mem['released'] / 2**20:.1f} MiB), weight cache (primitive layouts) "
          f"{mem['weight_cache'] / 2**20:.1f} MiB;\n  activations: peak {peak / 2**20:.1f} MiB, static arena "
          f"{arena.get('bytes', 0) / 2**20:.1f} MiB ({arena.get('blocks', 0)} buffers at planned offsets, "
          f"{arena.get('planned_calls', 0)} calls served from it); {compiled.flops / 1e9:.2f} GFLOP per call")
    print("\nmore: `make bench` (vs ONNX Runtime), `python -m llga profile resnet18`, notebooks/*.ipynb")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
