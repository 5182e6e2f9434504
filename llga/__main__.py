"""llga's command line: ``/usr/bin/python3 -m llga COMMAND ...``.

    python -m llga compile MODEL [--input SHAPE_OR_NPY ...] [--precision fp32|bf16|auto|int8]
                           [--calibration NPY_OR_NPZ ...] -o OUT.llga [--threads N]
    python -m llga run MODEL [--input SHAPE_OR_NPY ...] [-o OUT] [--threads N]
    python -m llga inspect MODEL [--input SHAPE_OR_NPY ...] [--json] [--threads N]
    python -m llga profile MODEL [--input SHAPE ...] [--runs 10] [--threads 2] [--trace t.json]
    python -m llga ops [--markdown]

``ops`` lists every op kind llga runs (llga.supported_ops()): one line each,
or with ``--markdown`` the table docs/ops.md holds.

MODEL is a TorchScript file saved with ``torch.jit.save`` (loaded with
``torch.jit.load(map_location="cpu")``, in eval mode; where PyTorch is not
installed, read with ``llga.load_torchscript``: traced models), a torchvision model
name (``llga.zoo.TORCHVISION_MODELS``; seeded random weights), traced with
``torch.jit.trace`` on the inputs, or a model file ``compile`` wrote
(``.llga``: loaded with ``llga.load``, without PyTorch and without compiling).

``compile`` compiles the model with ``llga.optimize`` (``--precision``; int8
with ``llga.quantize``, calibrated on the ``--calibration`` batches: a
``.npy`` file per batch of a one-input model, or an ``.npz`` whose arrays are
a batch's inputs in order), calls it once on the inputs (so that its weights
are stored pre-packed) and saves it to ``-o OUT.llga``.

Each ``--input`` (repeat it, in the model's argument order) is a ``.npy`` file
or a shape such as ``1x3x224x224``: a random standard-normal float32 array,
seeded with the input's position (0, 1, ...). A torchvision model's default
input is one 1x3x224x224 array; a TorchScript file needs its inputs given.

``run`` compiles the model with ``llga.optimize``, calls it once and writes the
outputs. Outputs are flattened in order (tuples, lists and dict values, depth
first). With ``-o OUT.npy``: one output goes to ``OUT.npy``; several go to
``OUT_0.npy``, ``OUT_1.npy``, ... (``.npy`` is added to OUT if missing), and a
line per file written is printed. Without ``-o``: one line per output (shape,
dtype, min, max, mean). Then a timing line (load, compile and first call, in
ms). All on stdout.

``inspect`` compiles the model, calls it once on the inputs (so that oneDNN's
implementations and the memory figures are known) and prints the partitions,
the ops left outside partitions (with the fuse pass's reasons), memory
(weights, weight cache, released weights, peak activations, planned arena) and
the pass pipeline; ``--json`` prints the same as one JSON object.

``profile`` compiles the model, runs it once, then ``--runs`` times under the
profiler, and prints the ExecTime and Unimpl tables (``--trace``: also a Chrome
trace). Its ``--input`` takes shapes only (default 1x3x224x224, for a file too).

User errors (a missing or unreadable file, an unknown model name, a bad shape,
inputs that do not fit the model, ops llga cannot run, a compile or execution
error, an output path that cannot be written) print one line on stderr,
``llga COMMAND: ...``, and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import warnings
from dataclasses import asdict


class UserError(Exception):
    """Something the user can fix: printed as one line, exit status 2."""


def _one_line(text: str, first_only: bool = False) -> str:
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    if not lines:
        return ""
    return lines[0] if first_only else "; ".join(lines)


def _describe_llga_error(e) -> str:
    from llga.errors import UnsupportedOpError

    if isinstance(e, UnsupportedOpError):
        first = _one_line(e, first_only=True).rstrip(":")
        kinds = ", ".join(sorted(e.ops))
        return f"{first}: {kinds}" if kinds else first
    return _one_line(e)


def _shape(text: str):
    """Parses 1x3x224x224 into a tuple of positive ints (argparse type for profile)."""
    try:
        return _parse_shape(text)
    except UserError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _parse_shape(text: str):
    if not re.fullmatch(r"\s*-?\d+(\s*[xX]\s*-?\d+)*\s*", text):
        raise UserError(f"expected a shape like 1x3x224x224, got {text!r}")
    dims = tuple(int(d) for d in text.lower().split("x"))
    if any(d <= 0 for d in dims):
        raise UserError(f"expected positive dims like 1x3x224x224, got {text!r}")
    return dims


def _fmt_shape(shape) -> str:
    return "x".join(map(str, shape)) if len(shape) else "scalar"


def _read_inputs(specs):
    """[(label, numpy array)] for --input values: .npy paths or shapes."""
    import numpy as np

    out = []
    for i, text in enumerate(specs):
        if text.lower().endswith(".npy") or os.path.exists(text):
            try:
                arr = np.load(text, allow_pickle=False)
            except Exception as e:  # noqa: BLE001 - whatever numpy says, the file is unreadable
                raise UserError(f"cannot read --input {text!r} as a .npy file: {_one_line(e, True)}") from None
            if not isinstance(arr, np.ndarray):  # an .npz archive
                arr.close()
                raise UserError(f"--input {text!r} is not a .npy file (one array); got an .npz archive")
            out.append((text, arr))
            continue
        try:
            shape = _parse_shape(text)
        except UserError as e:
            if "positive" in str(e):
                raise UserError(f"--input {text!r}: dimensions must be positive, as in 1x3x224x224") from None
            raise UserError(f"--input {text!r} is neither a .npy file nor a shape such as 1x3x224x224") from None
        try:
            arr = np.random.default_rng(i).standard_normal(shape, dtype=np.float32)
        except (MemoryError, ValueError) as e:
            raise UserError(f"--input {text!r}: cannot make a random array of that shape: "
                            f"{_one_line(e, True)}") from None
        out.append((_fmt_shape(shape), arr))
    return out


def _is_model_file(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(8) == b"\x89LLGA\r\n\x1a"
    except OSError:
        return False


def _resolve_model(model: str):
    """("file", path), ("llga", path) or ("torchvision", name); checked without importing torch."""
    from llga import zoo

    if os.path.isdir(model):
        raise UserError(f"{model!r} is a directory, not a TorchScript file")
    if os.path.exists(model):
        return ("llga" if model.endswith(".llga") or _is_model_file(model) else "file"), model
    if model in zoo.TORCHVISION_MODELS:
        return "torchvision", model
    if os.sep in model or "/" in model or os.path.splitext(model)[1]:
        raise UserError(f"no such file: {model!r}")
    raise UserError(f"unknown model {model!r}: neither a file nor a torchvision model name "
                    f"({', '.join(zoo.TORCHVISION_MODELS)})")


def _load_saved(model: str):
    import llga

    try:
        return llga.load(model)
    except (llga.FormatError, OSError) as e:
        raise UserError(f"cannot load {model!r}: {_one_line(e, True)}") from None


def _saved_inputs(compiled):
    """Random inputs (seeded by position) of the shapes and dtypes a loaded
    model was compiled for, when its graph records them all; else None."""
    import numpy as np

    spec = compiled.example_inputs_spec  # what it was compiled with, when given
    if spec and all(s is not None for s in spec):
        out = []
        for i, (shape, dtype) in enumerate(spec):
            rng = np.random.default_rng(i)
            dt = np.dtype(dtype)
            arr = (rng.integers(0, 2, size=shape) if dt.kind in "iub" else rng.standard_normal(shape)).astype(dt)
            out.append((f"{_fmt_shape(tuple(shape))} (its example input's shape)", arr))
        return out
    dtypes = {"Float": np.float32, "Double": np.float64, "Long": np.int64, "Int": np.int32}
    out = []
    for i, v in enumerate(v for v in compiled.graph.inputs if v.type.kind != "Class"):
        t = v.type
        sizes = t.sizes if t.is_tensor else None
        if sizes is None or any(d is None for d in sizes) or t.dtype not in dtypes:
            return None
        rng = np.random.default_rng(i)
        if t.dtype in ("Long", "Int"):
            arr = rng.integers(0, 2, size=sizes).astype(dtypes[t.dtype])
        else:
            arr = rng.standard_normal(sizes).astype(dtypes[t.dtype])
        out.append((f"{_fmt_shape(tuple(sizes))} (from the file)", arr))
    return out


def _load_model(kind: str, model: str, arrays):
    """The TorchScript object to compile (a loaded CompiledGraph for a .llga
    file), and how to name it."""
    if kind == "llga":
        return _load_saved(model), f"{model} (saved llga model)"
    if kind == "file" and not _has_torch():  # read the archive ourselves
        import llga

        try:
            return llga.load_torchscript(model), f"{model} (read without PyTorch)"
        except (llga.FormatError, OSError) as e:
            raise UserError(f"cannot load {model!r} as TorchScript without PyTorch: {_one_line(e, True)}") from None
    import torch

    if kind == "file":
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                obj = torch.jit.load(model, map_location="cpu").eval()
        except Exception as e:  # noqa: BLE001 - any load failure is a usage error here
            raise UserError(f"cannot load {model!r} as TorchScript (a torch.jit.save file): "
                            f"{_one_line(e, True)}") from None
        return obj, model
    from llga import zoo

    try:
        net = zoo.torchvision_model(model)
    except ImportError as e:
        raise UserError(f"torchvision model {model!r} needs torchvision: {_one_line(e, True)}") from None
    xs = tuple(torch.from_numpy(a) for a in arrays)
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            obj = torch.jit.trace(net, xs, check_trace=False)
    except Exception as e:  # noqa: BLE001 - the model rejects these inputs
        shapes = ", ".join(f"{a.dtype} {_fmt_shape(a.shape)}" for a in arrays)
        raise UserError(f"cannot trace {model} on the inputs ({shapes}): {_one_line(e, True)}") from None
    return obj, f"torchvision {model} (random weights)"


def _has_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def _set_threads(n, torch_too: bool = True) -> None:
    if n is None:
        return
    import llga

    llga.set_num_threads(n)
    if torch_too and _has_torch():
        import torch

        torch.set_num_threads(n)


def _prepare(args):
    """Checks and reads everything it can before importing torch, then loads
    the model: (TorchScript object, its name, [(label, array)])."""
    kind, model = _resolve_model(args.model)
    if kind == "llga":  # no torch
        _set_threads(args.threads, torch_too=False)
        compiled = _load_saved(model)
        inputs = _read_inputs(args.input) if args.input else _saved_inputs(compiled)
        if inputs is None:
            raise UserError(f"{model!r} does not record complete input shapes: pass each input with --input SHAPE "
                            "or --input FILE.npy")
        return compiled, f"{model} (saved llga model)", inputs
    if kind == "file" and not args.input:
        raise UserError(f"{model!r} is a TorchScript file: pass each of its inputs with --input SHAPE "
                        "(e.g. --input 1x3x224x224) or --input FILE.npy")
    inputs = _read_inputs(args.input or ["1x3x224x224"])
    _set_threads(args.threads)
    obj, what = _load_model(kind, model, [a for _, a in inputs])
    return obj, what, inputs


def _compile_and_call(obj, arrays):
    """(compiled, outputs, {"compile_ms", "first_call_ms"})."""
    import llga

    t0 = time.perf_counter()
    compiled = obj if isinstance(obj, llga.CompiledGraph) else llga.optimize(obj)  # a loaded model is compiled
    t1 = time.perf_counter()
    out = compiled(*arrays)
    t2 = time.perf_counter()
    compile_ms = 0.0 if compiled is obj else (t1 - t0) * 1e3  # a loaded model is not compiled again
    return compiled, out, {"compile_ms": compile_ms, "first_call_ms": (t2 - t1) * 1e3}


def _flatten(out, label="out"):
    """[(label, numpy array)] depth first: out, out[0], out[1]['logits'], ..."""
    import numpy as np

    if isinstance(out, (tuple, list)):
        return [item for i, o in enumerate(out) for item in _flatten(o, f"{label}[{i}]")]
    if isinstance(out, dict):
        return [item for k, o in out.items() for item in _flatten(o, f"{label}[{k!r}]")]
    return [(label, np.asarray(out))]


def _summary(arr) -> str:
    import numpy as np

    head = f"shape {_fmt_shape(arr.shape)} {arr.dtype}"
    if arr.size == 0 or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        return head
    if np.iscomplexobj(arr):
        return f"{head} mean {complex(arr.mean()):.6g}"
    return f"{head} min {float(arr.min()):.6g} max {float(arr.max()):.6g} mean {float(arr.mean(dtype=np.float64)):.6g}"


def _check_writable(path: str) -> None:
    """Fails early (before loading anything) for a path whose directory is missing or read-only."""
    if not os.path.basename(path) or os.path.isdir(path):
        raise UserError(f"cannot write {path!r}: it names a directory, not a file")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise UserError(f"cannot write {path!r}: directory {os.path.dirname(path)!r} does not exist")
    if not os.access(parent, os.W_OK):
        raise UserError(f"cannot write {path!r}: directory {parent!r} is not writable")


def _out_stem(path: str) -> str:
    """OUT without its .npy suffix, once OUT.npy is known to be writable."""
    if path.endswith(("/", os.sep)) or os.path.isdir(path):
        raise UserError(f"cannot write {path!r}: it names a directory, not a file")
    stem = path[:-4] if path.lower().endswith(".npy") else path
    _check_writable(stem + ".npy")
    return stem


def run(args) -> int:
    import numpy as np

    stem = _out_stem(args.output) if args.output is not None else None
    t0 = time.perf_counter()
    obj, what, inputs = _prepare(args)
    load_ms = (time.perf_counter() - t0) * 1e3
    _, out, times = _compile_and_call(obj, [a for _, a in inputs])
    outputs = _flatten(out)
    if stem is None:
        for label, arr in outputs:
            print(f"{label}: {_summary(arr)}")
    else:
        for i, (label, arr) in enumerate(outputs):
            path = f"{stem}.npy" if len(outputs) == 1 else f"{stem}_{i}.npy"
            try:
                np.save(path, arr, allow_pickle=False)
            except (OSError, ValueError) as e:
                raise UserError(f"cannot write {path!r}: {_one_line(e, True)}") from None
            print(f"wrote {path} ({label}: {_summary(arr)})")
    print(f"{what}, input {' '.join(f'{a.dtype} {_fmt_shape(a.shape)}' for _, a in inputs)}: "
          f"load {load_ms:.1f} ms, compile {times['compile_ms']:.1f} ms, first call {times['first_call_ms']:.1f} ms")
    return 0


def _read_calibration(paths, n_inputs: int):
    """Calibration batches for llga.quantize: a .npy per batch (one-input
    models) or an .npz whose arrays (in their stored order) are a batch's inputs."""
    import numpy as np

    batches = []
    for path in paths:
        try:
            data = np.load(path, allow_pickle=False)
        except Exception as e:  # noqa: BLE001 - whatever numpy says, the file is unreadable
            raise UserError(f"cannot read --calibration {path!r}: {_one_line(e, True)}") from None
        arrays = [data] if isinstance(data, np.ndarray) else [data[k] for k in data.files]
        if len(arrays) != n_inputs:
            raise UserError(f"--calibration {path!r} holds {len(arrays)} array(s); the model takes {n_inputs} "
                            "input(s) (a .npy for one input, an .npz with one array per input)")
        batches.append(tuple(arrays) if n_inputs > 1 else arrays[0])
    return batches


def compile_(args) -> int:
    import llga

    out = args.output
    if not out.endswith(".llga"):
        raise UserError(f"-o {out!r}: a model file's name ends in .llga")
    _check_writable(out)
    if args.precision == "int8" and not args.calibration:
        raise UserError("--precision int8 needs --calibration batches (a .npy or .npz file each) to choose "
                        "activation scales from")
    if args.calibration and args.precision != "int8":
        raise UserError("--calibration is for --precision int8")
    kind, _ = _resolve_model(args.model)
    if kind == "llga":
        raise UserError(f"{args.model!r} is compiled already (a .llga file): compile takes a TorchScript file "
                        "or a torchvision model name")
    t0 = time.perf_counter()
    obj, what, inputs = _prepare(args)
    arrays = [a for _, a in inputs]
    load_ms = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    if args.precision == "int8":
        compiled = llga.quantize(obj, _read_calibration(args.calibration, len(arrays)), example_inputs=arrays)
    else:
        compiled = llga.optimize(obj, arrays, precision=args.precision)  # calls it once: weights get pre-packed
    compile_ms = (time.perf_counter() - t0) * 1e3
    try:
        compiled.save(out)
    except OSError as e:
        raise UserError(f"cannot write {out!r}: {_one_line(e, True)}") from None
    parts = compiled.partitions
    precisions = sorted({p.precision for p in parts})
    print(f"wrote {out} ({_bytes(os.path.getsize(out))}): {what}, input "
          f"{' '.join(f'{a.dtype} {_fmt_shape(a.shape)}' for a in arrays)}, {len(parts)} partition(s) "
          f"({', '.join(precisions) or 'none'}), precision {compiled.precision}")
    print(f"load {load_ms:.1f} ms, compile and first call {compile_ms:.1f} ms")
    return 0


def _inspect_report(compiled, what, inputs, times, load_ms):
    return {
        "model": what,
        "inputs": [{"source": label, "dtype": str(a.dtype), "shape": list(a.shape)} for label, a in inputs],
        "timing": {"load_ms": load_ms, **times},
        "partitions": [asdict(p) for p in compiled.partitions],
        "unfused": compiled.unfused,
        "memory": compiled.memory,
        "passes": [{"name": r.name, "changed": r.changed, "seconds": r.seconds, "nodes_before": r.before.nodes,
                    "nodes_after": r.after.nodes} for r in compiled.passes],
        "saved": None if compiled.saved is None else {
            "path": compiled.saved.path, "meta": compiled.saved.meta, "manifest": compiled.saved.manifest,
            "file_bytes": compiled.saved.file_bytes, "weight_bytes": compiled.saved.weight_bytes,
            "tensors": compiled.saved.tensors, "packed": compiled.saved.packed,
            "packed_used": compiled.saved.packed_used, "same_cpu": compiled.saved.same_cpu},
    }


def _bytes(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit} ({n} bytes)"
    return f"{n} bytes"


def inspect(args) -> int:
    t0 = time.perf_counter()
    obj, what, inputs = _prepare(args)
    load_ms = (time.perf_counter() - t0) * 1e3
    compiled, _, times = _compile_and_call(obj, [a for _, a in inputs])
    report = _inspect_report(compiled, what, inputs, times, load_ms)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{what}, input {' '.join(f'{a.dtype} {_fmt_shape(a.shape)}' for _, a in inputs)}: "
          f"load {load_ms:.1f} ms, compile {times['compile_ms']:.1f} ms, first call {times['first_call_ms']:.1f} ms")
    if compiled.saved is not None:
        print(f"\n{compiled.saved!r}")
    parts = compiled.partitions
    print(f"\nPartitions ({len(parts)}):")
    print(parts if parts else "  (none)")
    unfused = report["unfused"]
    print(f"\nOps outside partitions ({sum(v['count'] for v in unfused.values())}):")
    if not unfused:
        print("  (none)")
    for kind, v in unfused.items():
        reasons = "; ".join(f"{r} (x{n})" if n > 1 else r for r, n in v["reasons"].items())
        print(f"  {kind} x{v['count']}: {reasons}")
    mem = report["memory"]
    print("\nMemory:")
    for key in ("weights", "weight_cache", "released"):
        print(f"  {key:<17} {_bytes(mem[key])}")
    for sig, n in mem["peak_activations"].items():
        print(f"  {'peak_activations':<17} {_bytes(n)} for {sig}")
    for sig, a in mem["arena"].items():
        rest = ", ".join(f"{k} {v}" for k, v in a.items() if k != "bytes")
        print(f"  {'arena':<17} {_bytes(a.get('bytes', 0))} for {sig}: {rest}")
    print(f"\nPasses ({len(compiled.passes)}):")
    print(compiled.passes)
    return 0


def profile(args) -> int:
    import numpy as np
    import torch

    import llga

    torch.set_num_threads(args.threads)
    llga.set_num_threads(args.threads)
    if args.trace:
        _check_writable(args.trace)
    shapes = args.input or [(1, 3, 224, 224)]
    xs = [np.random.default_rng(i).standard_normal(s, dtype=np.float32) for i, s in enumerate(shapes)]
    kind, model = _resolve_model(args.model)
    obj, what = _load_model(kind, model, xs)
    t0 = time.perf_counter()
    compiled = obj if isinstance(obj, llga.CompiledGraph) else llga.optimize(obj)
    compile_s = time.perf_counter() - t0
    compiled(*xs)  # warm-up: primitives built, weights reordered
    with llga.profiler.profile():
        t0 = time.perf_counter()
        for _ in range(args.runs):
            compiled(*xs)
        wall = (time.perf_counter() - t0) / args.runs
    print(f"{what}, input {' '.join('x'.join(map(str, s)) for s in shapes)}, {args.threads} threads: "
          f"compiled in {compile_s * 1e3:.0f} ms, {wall * 1e3:.2f} ms per call over {args.runs} profiled runs\n")
    print(llga.profiler.stats("ExecTime"))
    print("\nUnimpl:")
    print(llga.profiler.stats("Unimpl"))
    if args.trace:
        try:
            llga.profiler.export_chrome_trace(args.trace)
        except OSError as e:
            raise UserError(f"cannot write {args.trace!r}: {_one_line(e, True)}") from None
        print(f"\nChrome trace written to {args.trace}")
    return 0


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return n


_MODEL_HELP = ("a TorchScript file (torch.jit.save), a torchvision model name (random weights) or a model file "
               "(.llga, from compile)")
_INPUT_HELP = ("a .npy file or a shape such as 1x3x224x224 (random standard-normal float32, seeded); repeat for "
               "several inputs, in order. Default for a torchvision model: 1x3x224x224; a file needs its inputs")


def _model_arguments(p: argparse.ArgumentParser) -> None:
    """MODEL, --input and --threads, as run and inspect take them."""
    p.add_argument("model", help=_MODEL_HELP)
    p.add_argument("--input", action="append", metavar="SHAPE_OR_NPY", help=_INPUT_HELP)
    p.add_argument("--threads", type=_positive, metavar="N", help="threads for oneDNN and PyTorch (default: theirs)")


def _parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    ap = argparse.ArgumentParser(prog="python -m llga", description=__doc__, formatter_class=fmt)
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    p = sub.add_parser(
        "compile", formatter_class=fmt, help="compile a model and save it to one .llga file (llga.load reads it)",
        description="Compiles MODEL (a TorchScript file or a torchvision model name) on the inputs, calls it once "
                    "(so that its\nweights are stored in the primitives' layouts) and saves it to -o OUT.llga, "
                    "which `run`, `inspect`\nand llga.load read without PyTorch. --precision int8 quantizes with "
                    "llga.quantize, calibrated\non --calibration batches (a .npy per batch of a one-input model, or "
                    "an .npz with one array per input).")
    _model_arguments(p)
    p.add_argument("--precision", choices=("fp32", "bf16", "auto", "int8"), default="fp32",
                   help="fp32 (default), bf16 (needs a CPU with bf16 kernels), auto, or int8 (with --calibration)")
    p.add_argument("--calibration", action="append", metavar="NPY_OR_NPZ",
                   help="a calibration batch for --precision int8 (repeat: one file per batch)")
    p.add_argument("-o", "--output", metavar="OUT.llga", required=True, help="the model file to write")

    p = sub.add_parser(
        "run", formatter_class=fmt, help="compile a model, call it once, print or save its outputs",
        description="Compiles MODEL with llga.optimize, calls it once on the inputs and writes the outputs.\n\n"
                    "Outputs are flattened in order (tuples, lists and dict values, depth first). With -o OUT.npy, "
                    "one output\ngoes to OUT.npy and several to OUT_0.npy, OUT_1.npy, ... (.npy is added if "
                    "missing). Without -o, one line\nper output: shape, dtype, min, max, mean. Then a timing line "
                    "(load, compile and first call, in ms).\nAll on stdout; errors are one line on stderr, "
                    "exit status 2.")
    _model_arguments(p)
    p.add_argument("-o", "--output", metavar="OUT", help="write the outputs as .npy files (see above)")

    p = sub.add_parser(
        "inspect", formatter_class=fmt, help="compile a model and show its partitions, memory and passes",
        description="Compiles MODEL, calls it once on the inputs (so that oneDNN's implementations and the "
                    "memory figures\nare known) and prints the partitions, the ops left outside partitions and "
                    "why, memory (weights,\nweight cache, released weights, peak activations and the planned arena "
                    "per input signature) and the\npass pipeline. --json prints the same as one JSON object with "
                    "keys model, inputs, timing,\npartitions, unfused, memory and passes.")
    _model_arguments(p)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")

    p = sub.add_parser("profile", help="compile a model, run it under the profiler, print where the time goes")
    p.add_argument("model", help=_MODEL_HELP)
    p.add_argument("--input", type=_shape, action="append",
                   help="an input shape such as 1x3x224x224 (repeat for several inputs; default 1x3x224x224)")
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--trace", help="also write a Chrome trace (Perfetto, chrome://tracing) here")

    p = sub.add_parser("ops", help="list the op kinds llga runs, with how and their dtypes")
    p.add_argument("--markdown", action="store_true", help="print docs/ops.md's table")
    return ap


def ops(args) -> int:
    from llga import ops as ops_table

    if args.markdown:
        sys.stdout.write(ops_table.markdown())
        return 0
    for o in ops_table.supported_ops():
        print(f"{o.kind:45s} {o.via:9s} {','.join(o.dtypes)}")
    return 0


def main(argv=None) -> int:
    ap = _parser()
    args = ap.parse_args(argv)
    if args.cmd == "profile" and args.runs <= 0:
        ap.error("--runs must be positive")
    command = {"compile": compile_, "run": run, "inspect": inspect, "profile": profile, "ops": ops}[args.cmd]
    from llga.errors import CompileError, ExecutionError, InputError, UnsupportedOpError

    try:
        return command(args)
    except UserError as e:
        message = _one_line(e)
    except (InputError, UnsupportedOpError, CompileError, ExecutionError) as e:
        message = f"{type(e).__name__}: {_describe_llga_error(e)}"
    sys.stdout.flush()
    print(f"llga {args.cmd}: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
