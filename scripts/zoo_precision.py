#!/usr/bin/python3
"""Every torchvision classifier in llga's low precision: bf16 or int8
coverage and logits against PyTorch's fp32, or PyTorch's own int8 graphs.

    python3 scripts/zoo_precision.py --precision bf16|int8|pytorch-int8 [--models a,b] [--write docs/zoo-bf16.md]

Each model runs in its own subprocess, traced, with random weights (as
llga.zoo builds them) at the input size llga.zoo.torchvision_example gives
(128x128, 224 for vit/swin/maxvit, 299 for inception). bf16 compiles with
llga.optimize(precision="bf16"); int8 with llga.quantize, calibrated on 4
random batches drawn like the inputs, never the inputs themselves.
pytorch-int8 quantizes the model with PyTorch's FX flow (prepare_fx with
onednn's default mapping, those 4 batches, convert_fx: PyTorch's int8 form,
quantized:: ops with packed weights), traces and freezes it, compiles that
graph with llga.optimize and compares llga's logits with PyTorch's int8
ones (a model PyTorch's FX cannot trace is reported as such, not as
llga's failure). Per model:
- the partitions the precision pass put in bf16 (int8) and how many ran on
  bf16 (int8) kernels (the rest say "fp32: why" in their `detail`);
- over 2 inputs, the lowest cosine similarity and the largest error
  (relative to the largest magnitude) of llga's logits against PyTorch
  fp32's, and the fewest of PyTorch's top-5 classes in llga's top 5. The
  bars are the issues': cosine >= 0.999 for bf16 (#22), >= 0.99 for int8
  on CNNs with random weights (#23);
- llga's own kernels among those partitions' (the impl names).
No times: at these input sizes they are not the benchmark's (the last
stage of resnet18 at 128x128 is its weights' bandwidth); `python -m bench
--precision bf16|int8` measures speed.
Exit status 1 if a model fails to compile or run, falls back to fp32 in
more than a tenth of its low-precision partitions, or has a cosine below
the bar; 2 if this CPU has no kernels for the precision (nothing is run).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import zoo_rows  # noqa: E402

MIN_COSINE = {"bf16": 0.999, "int8": 0.99, "pytorch-int8": 0.99}
PYTORCH_FAILED = "PyTorch: "  # an error row PyTorch's own flow raised (FX tracing), not llga
MAX_FALLBACK = 0.1
TOP = 5


def unsupported(precision: str):
    """Why this CPU cannot run the precision, or None."""
    import llga

    caps = llga.cpu_capabilities()
    if precision == "bf16" and not caps["bf16"]:
        return f"oneDNN ISA {caps['isa']} has no bf16 kernels (precision='bf16' raises here)"
    if precision in ("int8", "pytorch-int8") and not caps["int8_signed"]:
        return f"oneDNN ISA {caps['isa']} has no VNNI int8 kernels (every int8 partition would run fp32)"
    return None


def run_one(name: str, precision: str) -> dict:
    import numpy as np
    import torch

    import llga
    from llga import zoo

    torch.set_num_threads(2)
    model, inputs, task = zoo.torchvision_any(name)
    if task != "classification":
        raise ValueError(f"{name} is a {task} model; this sweep takes classifiers")
    shape = tuple(inputs[0].shape)
    reference = model
    if precision == "pytorch-int8":
        from torch.ao.quantization import get_default_qconfig_mapping
        from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx
        torch.backends.quantized.engine = "onednn"
        g = torch.Generator().manual_seed(11)
        try:
            with torch.no_grad():
                prepared = prepare_fx(model, get_default_qconfig_mapping("onednn"), tuple(inputs))
                for _ in range(4):
                    prepared(torch.randn(shape, generator=g))
                reference = torch.jit.freeze(torch.jit.trace(convert_fx(prepared), inputs, check_trace=False).eval())
        except Exception as e:  # noqa: BLE001 - PyTorch's flow, not llga
            raise RuntimeError(PYTORCH_FAILED + f"{type(e).__name__}: {e}") from e
        compiled = llga.optimize(reference, [x.numpy() for x in inputs])
    elif precision == "int8":
        g = torch.Generator().manual_seed(11)
        calib = [[torch.randn(shape, generator=g).numpy()] for _ in range(4)]
        compiled = llga.quantize(torch.jit.trace(model, inputs, check_trace=False), calibration=calib)
    else:
        compiled = llga.optimize(torch.jit.trace(model, inputs, check_trace=False), precision=precision)
    row = {"model": name, "input": "x".join(map(str, shape))}
    cos, rel, top = [], [], []
    for s in range(2):
        x = torch.randn(shape, generator=torch.Generator().manual_seed(100 + s))
        with torch.no_grad():
            try:
                want = reference(x).double().numpy().ravel()
            except Exception as e:  # noqa: BLE001 - PyTorch's int8 model itself (regnet_x_16gf: a negative dimension)
                if precision != "pytorch-int8":
                    raise
                raise RuntimeError(PYTORCH_FAILED + f"its int8 model: {type(e).__name__}: {' '.join(str(e).split()[-12:])}") from e
        got = np.asarray(compiled(x.numpy()), dtype=np.float64).ravel()
        if got.shape != want.shape or not np.isfinite(got).all():
            raise ValueError(f"logits of shape {got.shape} (finite: {bool(np.isfinite(got).all())}), PyTorch's {want.shape}")
        cos.append(float(got @ want / (np.linalg.norm(got) * np.linalg.norm(want) + 1e-300)))
        rel.append(float(np.abs(got - want).max() / (np.abs(want).max() + 1e-300)))
        top.append(len(set(np.argsort(-got)[:TOP]) & set(np.argsort(-want)[:TOP])))
    low = [p for p in compiled.partitions if p.precision == precision.replace("pytorch-", "")]
    fell_back = [p for p in low if p.detail.startswith("fp32")]  # a kernel's fallback says "fp32: why"
    row["partitions"] = len(low)
    row["ran_low"] = len(low) - len(fell_back)
    row["fallbacks"] = sorted({p.detail for p in fell_back})[:3]
    row["llga_kernels"] = sorted({part for p in low for part in (p.impl or "").split("+") if part.startswith("llga")})
    row["cosine"], row["max_rel_err"], row["top5"] = min(cos), max(rel), min(top)
    return row


def pytorch_failed(row: dict) -> bool:
    return PYTORCH_FAILED in row.get("error", "")


def passed(row: dict, precision: str) -> bool:
    if "error" in row:
        return False
    n = row["partitions"]
    return n > 0 and row["ran_low"] >= (1 - MAX_FALLBACK) * n and row["cosine"] >= MIN_COSINE[precision]


def markdown(rows: list, precision: str, commit: str, cmd: str) -> str:
    import llga

    caps = llga.cpu_capabilities()
    bar = MIN_COSINE[precision]
    title = ("llga on PyTorch's own int8 graphs (convert_fx) of every torchvision classifier"
             if precision == "pytorch-int8" else f"llga {precision} on every torchvision classifier")
    out = [f"# {title}", "",
           f"`{cmd}` at {commit}, oneDNN ISA `{caps['isa']}`, "
           f"{os.cpu_count()} CPUs ({llga.get_num_threads()} threads), "
           f"{time.strftime('%Y-%m-%d')}. Written by `scripts/zoo_precision.py` (its docstring says how).", "",
           f"| model | input | {precision} partitions | ran {precision} | llga's own kernels | cosine | max rel. err. "
           f"| top-5 overlap | status |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            what, why = ("not run (PyTorch's own flow failed)", r["error"].split(PYTORCH_FAILED, 1)[1][:90]) \
                if pytorch_failed(r) else ("FAIL", r["error"])
            out.append(f"| {r['model']} | | | | | | | | {what}: {why} |")
            continue
        kernels = ", ".join(k.split(":")[0] for k in r["llga_kernels"]) or "-"
        status = "ok" if passed(r, precision) else "FAIL" + (f": {'; '.join(r['fallbacks'])}" if r["fallbacks"] else "")
        out.append(f"| {r['model']} | {r['input']} | {r['partitions']} | {r['ran_low']} | {kernels} "
                   f"| {r['cosine']:.5f} | {r['max_rel_err']:.3f} | {r['top5']}/{TOP} | {status} |")
    ok = [r for r in rows if passed(r, precision)]
    measured = [r for r in rows if "cosine" in r]
    pytorch_only = [r for r in rows if pytorch_failed(r)]
    if rows:
        lowest = min(measured, key=lambda r: r["cosine"], default=None)
        ref = "PyTorch int8" if precision == "pytorch-int8" else "PyTorch fp32"
        out += ["", f"{len(ok)} of {len(rows) - len(pytorch_only)} models pass against {ref}'s logits "
                    + (f"({len(pytorch_only)} not run: PyTorch's own flow failed) " if pytorch_only else "")
                    + f"(cosine >= {bar}, at most "
                    f"{MAX_FALLBACK:.0%} of {precision} partitions on fp32)"
                    + (f"; the lowest cosine {lowest['cosine']:.5f} ({lowest['model']})" if lowest else "")
                    + f". Top-5 overlap: the fewest of {ref}'s top {TOP} classes in llga's top {TOP} over the"
                    " inputs (reported, not a bar: random weights leave near-ties among the logits)."]
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--precision", choices=sorted(MIN_COSINE), required=True)
    ap.add_argument("--models", help="comma-separated names (default: every classifier torchvision lists)")
    ap.add_argument("--write", help="write the table as markdown to this file")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # the worker: one model, a JSON line out
    args = ap.parse_args()
    if args.one:
        return zoo_rows.emit(args.one, lambda: run_one(args.one, args.precision))
    why = unsupported(args.precision)
    if why:
        print(f"zoo_precision: {why}; nothing run", file=sys.stderr)
        return 2
    from llga import zoo

    catalog = zoo.torchvision_catalog()
    names = args.models.split(",") if args.models else sorted(n for n, t in catalog.items() if t == "classification")
    commit = zoo_rows.commit()
    rows = []
    for i, name in enumerate(names):
        t = time.perf_counter()
        row = zoo_rows.collect(__file__, name, ["--precision", args.precision], timeout=1800)
        rows.append(row)
        status = "ok" if passed(row, args.precision) else "not run (PyTorch)" if pytorch_failed(row) else "FAIL"
        print(f"[{i + 1}/{len(names)}] {name}: {status} "
              f"({time.perf_counter() - t:.0f} s) {row.get('error', '')}", flush=True)
    cmd = f"python3 scripts/zoo_precision.py --precision {args.precision}" + (f" --models {args.models}" if args.models else "")
    table = markdown(rows, args.precision, commit, cmd)
    print(table)
    if args.write:
        with open(args.write, "w") as f:
            f.write(table)
    return 0 if all(passed(r, args.precision) or pytorch_failed(r) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
