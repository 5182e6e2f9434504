"""Where llga and ONNX Runtime spend one model's time, convolution by
convolution, from each system's own profiler.

    /usr/bin/python3 -m bench.op_compare --model mobilenet_v2 [--batch 1] [--threads 2] [--runs 50] [--rounds 5] [--top 25]

Exports the model as `make bench` does (IR text + weights for llga, ONNX for
ONNX Runtime), profiles N calls of each (llga's profiler in this process;
ONNX Runtime's per-node profile from bench/ort_runner.js in its own, as in the
bench) in blocks, the two systems in turn (--rounds), then prints:

- each system's per-call wall time and the sum of its recorded op times
  (profiling itself costs some; the ratio of the sums is not the bench's),
- the convolutions paired by output and weight shape, in program order
  among those of one shape (one node or partition each on both sides, batch
  norm folded in both; activations and residual adds fused where each system
  fuses them: ORT runs swish as a separate QuickGelu), with each side's mean
  time and their ratio, largest llga - ORT difference first,
- every other op kind's total on each side.

This is a tool for deciding what to work on, not a benchmark: the figures
carry the profilers' overhead and the host's noise. The paired ratios of
`make bench` are the measure.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from typing import Dict, List, Optional, Tuple

import numpy as np

from bench import suite
from bench.worker import load_inputs

CONV_OPS = ("aten::_convolution", "aten::conv2d", "aten::conv1d", "aten::conv3d")


class LlgaSide:
    """llga in this process: the model compiled from the exported IR text and
    weights (the bench's path), profiled a block of calls at a time."""

    def __init__(self, workdir: str, spec: dict, threads: int):
        import llga

        self.llga = llga
        llga.set_num_threads(threads)
        with open(os.path.join(workdir, "graph.txt")) as f:
            text = f.read()
        with np.load(os.path.join(workdir, "weights.npz")) as z:
            weights = {k: z[k] for k in z.files}
        self.xs = load_inputs(workdir, spec)
        self.compiled = llga.optimize(text, params=weights)
        for _ in range(5):
            self.compiled(*self.xs)
        self.calls = 0
        self.per_part: Dict[int, float] = {}  # ns over every profiled call
        self.other_ns: Dict[str, float] = {}

    def timed(self, n: int) -> List[float]:
        import time

        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            self.compiled(*self.xs)
            times.append(time.perf_counter() - t0)
        return times

    def profiled(self, n: int) -> None:
        with self.llga.profiler.profile():
            for _ in range(n):
                self.compiled(*self.xs)
        self.calls += n
        for e in self.llga.profiler.events():
            if e["depth"] != 0:
                continue
            if e["partition"] >= 0:
                self.per_part[e["partition"]] = self.per_part.get(e["partition"], 0.0) + e["dur_ns"]
            else:
                self.other_ns[e["name"]] = self.other_ns.get(e["name"], 0.0) + e["dur_ns"]

    def result(self, wall_us: float) -> dict:
        parts = self.compiled.partitions
        other = {k: v / self.calls / 1e3 for k, v in self.other_ns.items()}
        convs, total = [], sum(other.values())
        for idx, ns in sorted(self.per_part.items()):
            p = parts[idx]
            us = ns / self.calls / 1e3
            total += us
            if any(k in CONV_OPS for k in p.ops):
                out = p.outputs[0][1] if p.outputs else None
                weight = p.inputs[1][1] if len(p.inputs) > 1 else None  # the anchor's weight (a constant input)
                convs.append({"out": tuple(out) if out else None, "weight": tuple(weight) if weight else None, "us": us,
                              "what": p.pattern, "impl": p.impl})
            else:
                key = f"partition:{p.pattern}"
                other[key] = other.get(key, 0.0) + us
        return {"wall_us": wall_us, "sum_us": total, "convs": convs, "other": other}


def ort_runner(workdir: str, spec: dict, ort_dir: str, threads: int) -> "suite.Runner":
    """ONNX Runtime in its own process (bench/ort_runner.js), every call
    profiled from the first."""
    spec = dict(spec, ort_profile=os.path.join(workdir, "ort-profile"))
    with open(os.path.join(workdir, "spec.json"), "w") as f:
        json.dump(spec, f)
    runner = suite.Runner("ort", ["node", os.path.join(suite.ROOT, "bench", "ort_runner.js"), workdir, ort_dir],
                          workdir, suite.runner_env(threads))
    try:
        runner.recv()
        runner.send({"cmd": "run", "n": 5})
    except BaseException:
        runner.kill()
        raise
    return runner


def ort_result(runner: "suite.Runner", calls: int, wall_us: float) -> dict:
    """The profile of every call the runner made (`calls`: the first, the
    warm-up and the timed ones), per call."""
    done = runner.close()
    if not done.get("profile_file"):
        raise RuntimeError("ONNX Runtime wrote no profile")
    with open(done["profile_file"]) as f:
        events = json.load(f)
    convs, other, total = [], {}, 0.0
    for e in events:
        if e.get("cat") != "Node" or not e.get("name", "").endswith("_kernel_time"):
            continue
        args = e.get("args", {})
        op = args.get("op_name", "?")
        us = e["dur"] / calls
        total += us
        if op in ("Conv", "FusedConv", "QLinearConv"):
            shapes = [next(iter(s.values())) for s in args.get("input_type_shape", [])]
            outs = [next(iter(s.values())) for s in args.get("output_type_shape", [])]
            node = e["name"][: -len("_kernel_time")]
            found = next((c for c in convs if c["node"] == node), None)
            if found:
                found["us"] += us
            else:
                convs.append({"node": node, "out": tuple(outs[0]) if outs else None,
                              "weight": tuple(shapes[1]) if len(shapes) > 1 else None, "us": us, "what": op})
        else:
            other[op] = other.get(op, 0.0) + us
    return {"wall_us": wall_us, "sum_us": total, "convs": convs, "other": other}


def interleaved(workdir: str, spec: dict, ort_dir: str, threads: int, runs: int, rounds: int):
    """Both systems in turn, `rounds` times: llga unprofiled, llga profiled,
    ONNX Runtime (always profiled), a block of runs / rounds calls each, so
    that a slow phase of the host lands on both sides' figures rather than
    on whichever system it caught (run one after the other, the two sides'
    mobilenet_v2 convolutions read 0.85x in one run and regnet_y_800mf's
    1.18x in another, from host phases alone). Returns each side's result
    and the per-call ratio paired by round."""
    block = max(1, runs // rounds)
    runner = ort_runner(workdir, spec, ort_dir, threads)
    ort_calls = 6  # the first call and the warm-up
    try:
        side = LlgaSide(workdir, spec, threads)
        l_times, o_times, ratios = [], [], []
        for _ in range(rounds):
            lt = side.timed(block)
            side.profiled(block)
            ot = runner.send({"cmd": "run", "n": block})["times"]
            ort_calls += block
            l_times += lt
            o_times += ot
            ratios.append(statistics.median(lt) / statistics.median(ot))
    except BaseException:
        runner.kill()
        raise
    o = ort_result(runner, ort_calls, statistics.median(o_times) * 1e6)
    return side.result(statistics.median(l_times) * 1e6), o, ratios


def pair(lc: List[dict], oc: List[dict]) -> List[Tuple[int, dict, dict]]:
    """llga's convolutions with ONNX Runtime's: by output and weight shape,
    in program order among those of one shape (the two may order a block's
    branches differently). (index in llga's order, llga's, ORT's)."""
    queues: Dict[tuple, List[dict]] = {}
    for b in oc:
        queues.setdefault((b["out"], b["weight"]), []).append(b)
    rows = []
    for i, a in enumerate(lc):
        q = queues.get((a["out"], a["weight"]))
        if q:
            rows.append((i, a, q.pop(0)))
    return rows


def kernel_text(weight: Optional[Tuple[int, ...]], out: Optional[Tuple[int, ...]]) -> str:
    if not weight or len(weight) < 3:
        return "?"
    k = "x".join(str(d) for d in weight[2:])
    groups = ""
    if out and len(out) > 1 and weight[1] == 1 and out[1] > 1:
        groups = " dw"
    return f"{k}{groups} {weight[1]}->{weight[0]}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=50, help="profiled calls per system, over the rounds")
    ap.add_argument("--rounds", type=int, default=5, help="blocks per system, the two systems in turn")
    ap.add_argument("--top", type=int, default=25, help="convolution rows to print, largest llga - ORT first")
    args = ap.parse_args(argv)

    ort = suite.setup_ort(lambda m: print(m, file=sys.stderr))
    if "module_dir" not in ort:
        print(f"op_compare: ONNX Runtime unavailable: {ort.get('error')}", file=sys.stderr)
        return 1
    workdir = tempfile.mkdtemp(prefix="llga-opcmp-")
    try:
        exported = suite.export(args.model, args.batch, workdir, True, args.threads)
        spec = exported["spec"]
        if spec["onnx_error"]:
            print(f"op_compare: torch.onnx.export failed: {spec['onnx_error']}", file=sys.stderr)
            return 1
        l_, o, ratios = interleaved(workdir, spec, ort["module_dir"], args.threads, args.runs, args.rounds)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    block = max(1, args.runs // args.rounds)
    print(f"{args.model}, batch {args.batch}, {args.threads} threads, {args.rounds} rounds of {block} profiled "
          f"calls each, the two systems in turn")
    print(f"  per call (median): llga {l_['wall_us']:.0f} us unprofiled, ORT {o['wall_us']:.0f} us while "
          f"profiling; llga / ORT by round {statistics.median(ratios):.2f}x "
          f"({min(ratios):.2f}-{max(ratios):.2f})")
    print(f"  recorded ops: llga {l_['sum_us']:.0f} us, ORT {o['sum_us']:.0f} us")
    lc, oc = l_["convs"], o["convs"]
    print(f"\nConvolutions: llga {len(lc)} partitions {sum(c['us'] for c in lc):.0f} us, "
          f"ORT {len(oc)} nodes {sum(c['us'] for c in oc):.0f} us")
    rows = pair(lc, oc)
    head = f"  {'#':>3}  {'output':<16} {'kernel':<18} {'llga us':>8} {'ORT us':>8} {'ratio':>6}  llga impl / ORT op"
    print(head)
    for i, a, b in sorted(rows, key=lambda r: -(r[1]["us"] - r[2]["us"]))[: args.top]:
        out = "x".join(str(d) for d in (a["out"] or ()))
        print(f"  {i:>3}  {out:<16} {kernel_text(b['weight'], b['out']):<18} {a['us']:>8.1f} {b['us']:>8.1f} "
              f"{a['us'] / b['us'] if b['us'] else float('inf'):>5.2f}x  {a['impl'] or a['what']} / {b['what']}")
    unpaired = len(lc) - len(rows)
    if unpaired or len(oc) != len(rows):
        print(f"  unpaired: llga {unpaired}, ORT {len(oc) - len(rows)} (no convolution of the same output and "
              f"weight shape on the other side)")
    print("\nEverything else (us per call):")
    for name, side in (("llga", l_), ("ORT", o)):
        items = sorted(side["other"].items(), key=lambda kv: -kv[1])
        print(f"  {name}: " + ", ".join(f"{k} {v:.0f}" for k, v in items if v >= 1.0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
