"""One benchmark runner in its own process (so its peak RSS is its own).

    /usr/bin/python3 -m bench.worker {llga|llga-bf16|llga-int8|eager|ofi|autocast|torch-int8|llga-fx-int8} WORKDIR

Reads WORKDIR/spec.json, prepares the model, calls it once (writing its
outputs for the driver's correctness check), then answers commands on stdin,
one JSON object per line: {"cmd": "run", "n": k} -> per-call seconds;
{"cmd": "quit"} -> peak RSS (and llga's memory report). Replies are stdout
lines starting with "@@ " so that library chatter cannot be mistaken for one.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
import warnings


def reply(obj) -> None:
    sys.stdout.write("@@ " + json.dumps(obj) + "\n")
    sys.stdout.flush()


def peak_rss_kib() -> int:
    """This process's peak RSS (VmHWM). getrusage's ru_maxrss would not do:
    Linux carries the parent's figure across fork and exec."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def load_inputs(workdir: str, spec):
    import numpy as np

    return [np.load(os.path.join(workdir, i["file"])) for i in spec["inputs"]]


def load_calibration(workdir: str, spec):
    """The int8 systems' calibration: a list of input sets (bench.suite writes them)."""
    import numpy as np

    n = len(spec["inputs"][0]["calibration"])
    return [[np.load(os.path.join(workdir, i["calibration"][k])) for i in spec["inputs"]] for k in range(n)]


def prepare_llga(workdir: str, spec, threads: int, precision: str = "fp32"):
    """IR text plus a weights file: the deployment path, no PyTorch imported."""
    import numpy as np

    import llga

    llga.set_num_threads(threads)
    with open(os.path.join(workdir, "graph.txt")) as f:
        text = f.read()
    with np.load(os.path.join(workdir, "weights.npz")) as z:
        weights = {k: z[k] for k in z.files}
    xs = load_inputs(workdir, spec)
    t0 = time.perf_counter()
    if precision == "int8":
        compiled = llga.quantize(text, calibration=load_calibration(workdir, spec), params=weights)
    else:
        compiled = llga.optimize(text, params=weights, precision=precision)
    compile_s = time.perf_counter() - t0
    del weights  # the compiled graph holds what it needs

    def call():
        return compiled(*xs)

    def extra():
        split = compiled.batch_split
        return {"memory": compiled.memory, "flops": compiled.flops, "partitions": len(compiled.partitions),
                "batch_split": {"proved": split.proved, "why_not": split.why_not,
                                # (bench.ab's other build may predate lanes)
                                "sizes": {str(k): {"chunk": v.chunk, "lanes": getattr(v, "lanes", 1),
                                                   "ns_per_item": {str(c): t for c, t in v.ns_per_item.items()},
                                                   "ns_per_item_side_by_side": {
                                                       str(c): t for c, t in
                                                       getattr(v, "ns_per_item_side_by_side", {}).items()}}
                                          for k, v in split.sizes.items()}}}

    def settle():
        """A batch size's first calls measure how to split it (compiled.batch_split): these
        warm-up calls let that finish (one after another, then side by side; up
        to 8 calls a chunk where calls are fast: at most 200) before anything
        is timed. Returns how many."""
        n = 0
        items = xs[0].shape[0] if xs and getattr(xs[0], "ndim", 0) else 1
        while n < 200 and compiled.batch_split.proved and items > 1:
            size = compiled.batch_split.sizes.get(items)
            if size is not None and size.chunk:
                break
            call()
            n += 1
        return n

    assert "torch" not in sys.modules, "the llga runner must not need PyTorch"
    call.settle = settle
    return call, compile_s, extra


def fx_int8(model, xs, calibration):
    """PyTorch's FX post-training static quantization of `model` (prepare_fx,
    calibrate on `calibration`, a list of input tuples of arrays, convert_fx)
    on its x86 engine: Debian's torch has no FBGEMM, so oneDNN's (then
    qnnpack). The torch-int8 and llga-fx-int8 systems run it traced and
    frozen; ort-int8 runs its ONNX export (QDQ)."""
    import torch
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    engine = next(e for e in ("x86", "fbgemm", "onednn", "qnnpack") if e in torch.backends.quantized.supported_engines)
    torch.backends.quantized.engine = engine
    with torch.no_grad():
        prepared = prepare_fx(model.eval(), get_default_qconfig_mapping(engine), tuple(xs))
        for inputs in calibration:
            prepared(*[torch.from_numpy(c) for c in inputs])
        return convert_fx(prepared)


def prepare_torch(workdir: str, spec, threads: int, system: str):
    import torch

    from bench.models import build

    torch.set_num_threads(threads)
    model, _ = build(spec["model"], spec["batch"])
    xs = [torch.from_numpy(x) for x in load_inputs(workdir, spec)]
    t0 = time.perf_counter()
    if system == "ofi":
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            traced = torch.jit.trace(model, tuple(xs), check_trace=False)
            model = torch.jit.optimize_for_inference(torch.jit.freeze(traced))
    elif system == "autocast":  # PyTorch's bf16: autocast's casts traced into the graph, then frozen
        # Traced with autograd on: nn.MultiheadAttention's inference fast path
        # (_native_multi_head_attention, taken under no_grad) fails under
        # PyTorch 1.13's autocast ("expected scalar type BFloat16 but found
        # Float"); with grad enabled it runs its composite ops, which autocast
        # casts. The frozen graph has no autograd left; calls run under no_grad.
        with warnings.catch_warnings(), torch.enable_grad(), torch.cpu.amp.autocast(dtype=torch.bfloat16):
            warnings.simplefilter("ignore")
            traced = torch.jit.trace(model, tuple(xs), check_trace=False)
            model = torch.jit.freeze(traced)
    elif system in ("torch-int8", "llga-fx-int8"):  # PyTorch's FX post-training static quantization (its x86 engine), traced, frozen
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            quantized = fx_int8(model, xs, load_calibration(workdir, spec))
            model = torch.jit.freeze(torch.jit.trace(quantized, tuple(xs), check_trace=False))
        if system == "llga-fx-int8":  # that graph, compiled by llga (import-quantization)
            import llga

            compiled = llga.optimize(model, [x.numpy() for x in xs])
            compile_s = time.perf_counter() - t0
            arrays = [x.numpy() for x in xs]
            return (lambda: compiled(*arrays)), compile_s, lambda: {"partitions": len(compiled.partitions)}
    compile_s = time.perf_counter() - t0

    def numpy(o):
        return o.float().numpy() if o.dtype == torch.bfloat16 else o.numpy()

    def call():
        with torch.no_grad():
            out = model(*xs)
        return tuple(numpy(o) for o in out) if isinstance(out, tuple) else numpy(out)

    return call, compile_s, lambda: {}


def main(argv) -> int:
    system, workdir = argv[1], argv[2]
    # bench.ab's other build: a directory holding an llga package, imported
    # ahead of this checkout's (the ready reply names the one imported)
    other = os.environ.get("LLGA_BENCH_PACKAGE_DIR")
    if other:
        sys.path.insert(0, other)
    with open(os.path.join(workdir, "spec.json")) as f:
        spec = json.load(f)
    threads = spec["threads"]
    if system in ("llga", "llga-bf16", "llga-int8"):
        call, compile_s, extra = prepare_llga(workdir, spec, threads, {"llga-bf16": "bf16", "llga-int8": "int8"}.get(system, "fp32"))
    elif system in ("eager", "ofi", "autocast", "torch-int8", "llga-fx-int8"):
        call, compile_s, extra = prepare_torch(workdir, spec, threads, system)
    else:
        raise SystemExit(f"unknown system {system!r}")
    import numpy as np

    t0 = time.perf_counter()
    out = call()
    first_s = time.perf_counter() - t0
    outs = out if isinstance(out, tuple) else (out,)
    files = []
    for i, o in enumerate(outs):
        name = f"out-{system}-{i}.npy"
        np.save(os.path.join(workdir, name), np.asarray(o))
        files.append(name)
    settle = getattr(call, "settle", None)  # llga: let the batch split's measurement finish
    settle_calls = settle() if settle else 0
    llga_mod = sys.modules.get("llga")
    reply({"ready": True, "compile_s": compile_s, "first_call_s": first_s, "outputs": files,
           "settle_calls": settle_calls, "llga_file": getattr(llga_mod, "__file__", None)})
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["cmd"] == "run":
            times = []
            for _ in range(int(cmd["n"])):
                t0 = time.perf_counter()
                call()
                times.append(time.perf_counter() - t0)
            reply({"times": times})
        elif cmd["cmd"] == "quit":
            info = {"maxrss_kib": peak_rss_kib()}
            info.update(extra())
            reply(info)
            return 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
