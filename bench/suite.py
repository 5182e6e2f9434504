"""llga against PyTorch (eager, frozen + optimize_for_inference), ONNX Runtime
and the machine's limit, in one run.

    /usr/bin/python3 -m bench [--models resnet50,bert] [--batch 1,16] [--runs 10] [--quick]

Each system runs in its own process (its own peak RSS), all with the same
thread count; timing rounds are interleaved between the systems so drift hits
all alike. Each system's outputs are checked against PyTorch eager before its
times count. Writes bench/results/run-<time>.{json,md,png} and latest.* (--latest NAME: NAME.*).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
import warnings
from typing import Dict, List, Optional

import numpy as np

from bench import models as bench_models
from bench import report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.path.join(ROOT, "bench", ".cache")
RESULTS = os.path.join(ROOT, "bench", "results")
ORT_VERSION = "1.30.0"
SYSTEMS = ("llga", "ofi", "eager", "ort")
# --precision bf16 adds these: llga.optimize(precision="bf16"), and PyTorch's
# autocast bf16 (traced under torch.cpu.amp.autocast, then frozen)
BF16_SYSTEMS = ("llga-bf16", "autocast")
# --precision int8 adds these: llga.quantize, and PyTorch's FX post-training
# static quantization (prepare_fx, calibrate, convert_fx on its x86 engine:
# onednn in Debian's build, which has no fbgemm; traced and frozen), both calibrated on the same CALIBRATION_SETS input sets
# and llga-fx-int8: that PyTorch int8 graph itself, compiled by llga.optimize
# (import-quantization); ort-int8: ONNX Runtime on its ONNX export (QDQ:
# QuantizeLinear/DequantizeLinear around float ops, which ORT fuses)
INT8_SYSTEMS = ("llga-int8", "torch-int8", "llga-fx-int8", "ort-int8")
ORT_SYSTEMS = ("ort", "ort-int8")
CALIBRATION_SETS = 8
LABELS = {"llga": "llga", "ofi": "PyTorch frozen+OFI", "eager": "PyTorch eager", "ort": "ONNX Runtime",
          "llga-bf16": "llga bf16", "autocast": "PyTorch autocast bf16", "llga-int8": "llga int8",
          "torch-int8": "PyTorch int8 (FX)", "llga-fx-int8": "llga on PyTorch's int8 graph",
          "ort-int8": "ONNX Runtime int8 (QDQ export)"}
PAUSE_S = 0.2  # between timing blocks of different systems
TOLERANCE = 1e-3  # relative to the output's largest magnitude; tests hold llga to 1e-4
# bf16 systems against PyTorch's fp32 eager: bf16 keeps 8 bits of mantissa
# (tests/py/test_precision.py: corpus models within 1.5% of fp32 llga)
BF16_TOLERANCE = 3e-2
# int8 systems: 8-bit activations and weights (tests/py/test_quantize.py:
# corpus CNNs at logit cosine >= 0.99 against fp32)
INT8_TOLERANCE = 1e-1


# ----------------------------------------------------------------- set-up

def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def setup_ort(log) -> Dict[str, str]:
    """Installs onnxruntime-node into bench/.cache (once); {"module_dir"} or {"error"}."""
    module_dir = os.path.join(CACHE, "node_modules")
    lib = os.path.join(module_dir, "onnxruntime-node", "bin", "napi-v6", "linux", "x64", "libonnxruntime.so.1")
    pkg = os.path.join(module_dir, "onnxruntime-node", "package.json")
    if os.path.exists(pkg) and json.loads(_read(pkg)).get("version") == ORT_VERSION and os.path.exists(lib):
        return {"module_dir": module_dir}
    if not shutil.which("node") or not shutil.which("npm"):
        return {"error": "node/npm not found (scripts/bootstrap.sh bench installs them)"}
    os.makedirs(CACHE, exist_ok=True)
    log(f"installing onnxruntime-node@{ORT_VERSION} into {CACHE} (npm, --ignore-scripts)")
    r = subprocess.run(["npm", "install", "--ignore-scripts", "--no-audit", "--no-fund", "--prefix", CACHE,
                        f"onnxruntime-node@{ORT_VERSION}"], capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists(lib):
        return {"error": f"npm install failed: {(r.stderr or r.stdout).strip()[-400:]}"}
    return {"module_dir": module_dir}


def machine_info() -> Dict[str, object]:
    info: Dict[str, object] = {"platform": platform.platform(), "cpus": os.cpu_count()}
    try:
        cpuinfo = _read("/proc/cpuinfo")
        for line in cpuinfo.splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                info["isa"] = sorted(f for f in flags if f.startswith(("avx512f", "avx512_bf16", "amx", "avx2")))
                break
        for line in _read("/proc/meminfo").splitlines():
            if line.startswith("MemTotal"):
                info["mem_gib"] = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    import llga
    import llga.precision

    # oneDNN's ISA and how bf16 runs on it: "native" (AVX512-BF16 or AMX), "emulated" (AVX-512), or "none"
    info["onednn_isa"] = llga.cpu_capabilities()["isa"]
    info["bf16_path"] = ("native" if llga.precision.native_bf16() else
                         "emulated" if llga.cpu_capabilities()["bf16"] else "none")
    info["auto_precision"] = llga.precision.resolve("auto").used  # what precision="auto" takes here (measured)
    return info


def versions(ort_dir: Optional[str]) -> Dict[str, str]:
    import torch

    import llga

    v = {"llga": llga.__version__, "torch": torch.__version__, "numpy": np.__version__,
         "python": platform.python_version()}
    try:
        v["node"] = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    if ort_dir:
        v["onnxruntime-node"] = json.loads(_read(os.path.join(ort_dir, "onnxruntime-node", "package.json")))["version"]
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "libdnnl-dev"], capture_output=True, text=True)
        v["onednn"] = out.stdout.strip()
    except OSError:
        pass
    return v


def machine_limit(threads: int, runs: int) -> Dict[str, dict]:
    import llga
    from llga import _llga

    llga.set_num_threads(threads)
    # The PERFORMANCE.md microbenchmark: 1x256x56x56, 3x3, 256 out, format_tag::any.
    return {dt: _llga.conv_throughput(1, 256, 56, 56, 256, 3, dt, runs) for dt in ("f32", "bf16")}


# ----------------------------------------------------------------- runners

class Runner:
    """One system in its own process, speaking bench/worker.py's protocol."""

    def __init__(self, system: str, argv: List[str], workdir: str, env):
        self.system = system
        self.log_path = os.path.join(workdir, f"{system}.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                     env=env, cwd=ROOT)

    def recv(self) -> dict:
        while True:
            line = self.proc.stdout.readline()
            if not line:
                self.proc.wait()
                self.log.close()
                tail = _read(self.log_path).strip().splitlines()[-6:]
                raise RuntimeError(f"{self.system} runner exited ({self.proc.returncode}): " + " | ".join(tail))
            if line.startswith("@@ "):
                return json.loads(line[3:])

    def send(self, obj) -> dict:
        self.proc.stdin.write(json.dumps(obj) + "\n")
        self.proc.stdin.flush()
        return self.recv()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def close(self) -> dict:
        try:
            return self.send({"cmd": "quit"})
        finally:
            self.proc.wait(timeout=60)
            self.proc.stdin.close()
            self.proc.stdout.close()
            self.log.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed_block(runner: "Runner", n: int, others: Dict[str, "Runner"]):
    """n calls on `runner`: their times, the block's wall time, and the CPU
    seconds each of `others` used meanwhile (they only wait on their stdin
    then: more means threads left spinning, which the block's times carry)."""
    before = {o: cpu_seconds(q.proc.pid) for o, q in others.items()}
    wall0 = time.perf_counter()
    times = runner.send({"cmd": "run", "n": n})["times"]
    wall = time.perf_counter() - wall0
    return times, wall, {o: cpu_seconds(q.proc.pid) - before[o] for o, q in others.items()}


def runner_env(threads: int):
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
               PYTHONPATH=ROOT + os.pathsep + env.get("PYTHONPATH", ""))
    return env


def read_outputs(system: str, ready: dict, workdir: str) -> List[np.ndarray]:
    outs = []
    for o in ready["outputs"]:
        if system in ORT_SYSTEMS:
            dt = {"float32": np.float32, "int64": np.int64}[o["dtype"]]
            outs.append(np.fromfile(os.path.join(workdir, o["file"]), dtype=dt).reshape(o["shape"]))
        else:
            outs.append(np.load(os.path.join(workdir, o)))
    return outs


def rel_error(outs: List[np.ndarray], refs: List[np.ndarray]) -> float:
    if len(outs) != len(refs):
        return math.inf
    worst = 0.0
    for o, r in zip(outs, refs):
        if o.shape != r.shape:
            return math.inf
        scale = float(np.abs(r).max()) or 1.0
        worst = max(worst, float(np.abs(o.astype(np.float64) - r).max()) / scale)
    return worst


# ----------------------------------------------------------------- one model

def export(name: str, batch: int, workdir: str, want_onnx: bool, threads: int, want_int8_onnx: bool = False) -> dict:
    """Builds the model, writes inputs, IR text + weights and the ONNX file;
    returns the spec plus PyTorch's reference outputs."""
    import torch

    import llga

    torch.set_num_threads(threads)
    model, inputs = bench_models.build(name, batch)
    spec = {"model": name, "batch": batch, "threads": threads, "inputs": []}
    rng = np.random.default_rng(1)
    for i, x in enumerate(inputs):
        a = x.numpy()
        np.save(os.path.join(workdir, f"in{i}.npy"), a)
        a.tofile(os.path.join(workdir, f"in{i}.raw"))
        # calibration sets for the int8 systems: float inputs drawn anew with the
        # input's mean and spread (never the timed input itself), others as they are
        calib = []
        for k in range(CALIBRATION_SETS):
            c = (rng.standard_normal(a.shape) * a.std() + a.mean()).astype(a.dtype) if a.dtype.kind == "f" else a
            np.save(os.path.join(workdir, f"calib{k}-{i}.npy"), c)
            calib.append(f"calib{k}-{i}.npy")
        spec["inputs"].append({"file": f"in{i}.npy", "raw": f"in{i}.raw", "dtype": str(a.dtype),
                               "shape": list(a.shape), "calibration": calib})
    with torch.no_grad():
        ref = model(*inputs)
    refs = [r.numpy() for r in (ref if isinstance(ref, tuple) else (ref,))]
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(model, tuple(inputs), check_trace=False)
    graph, weights = llga.import_torch(traced)
    with open(os.path.join(workdir, "graph.txt"), "w") as f:
        f.write(traced.inlined_graph.str())
    np.savez(os.path.join(workdir, "weights.npz"), **weights)
    spec["onnx_error"] = None
    if want_onnx:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(model, tuple(inputs), os.path.join(workdir, "model.onnx"), opset_version=14,
                                  do_constant_folding=True)
        except Exception as e:  # noqa: BLE001 - reported in the results, the others still run
            spec["onnx_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    spec["onnx_int8_error"] = None
    if want_int8_onnx:  # PyTorch's int8 model (as torch-int8 builds it) exported as QDQ ONNX
        from bench.worker import fx_int8

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                calibration = [[np.load(os.path.join(workdir, inp["calibration"][k])) for inp in spec["inputs"]]
                               for k in range(CALIBRATION_SETS)]
                quantized = fx_int8(bench_models.build(name, batch)[0], inputs, calibration)
                torch.onnx.export(quantized, tuple(inputs), os.path.join(workdir, "model-int8.onnx"), opset_version=13)
        except Exception as e:  # noqa: BLE001 - reported in the results, the others still run
            spec["onnx_int8_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    with open(os.path.join(workdir, "spec.json"), "w") as f:
        json.dump(spec, f)
    return {"spec": spec, "refs": refs}


def run_model(name: str, batch: int, threads: int, args, ort: dict, limit: dict, bar) -> dict:
    workdir = os.path.join(CACHE, "work", f"{name}-b{batch}-t{threads}")
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    systems = [s for s in args.systems if s not in ORT_SYSTEMS or "module_dir" in ort]
    tag = f"{name} b{batch} t{threads}"
    bar.set_description(f"{tag}: export")
    exported = export(name, batch, workdir, "ort" in systems, threads, "ort-int8" in systems)
    spec, refs = exported["spec"], exported["refs"]
    result: dict = {"model": name, "batch": batch, "threads": threads,
                    "description": bench_models.DESCRIPTIONS.get(name, name), "systems": {}}
    for s in ORT_SYSTEMS:
        if s in args.systems and "module_dir" not in ort:
            result["systems"][s] = {"ok": False, "error": ort.get("error")}
    if spec["onnx_error"] and "ort" in systems:
        systems.remove("ort")
        result["systems"]["ort"] = {"ok": False, "error": "torch.onnx.export failed: " + spec["onnx_error"]}
    if spec["onnx_int8_error"] and "ort-int8" in systems:
        systems.remove("ort-int8")
        result["systems"]["ort-int8"] = {"ok": False, "error": "torch.onnx.export of PyTorch's int8 model failed: " +
                                         spec["onnx_int8_error"]}
    bar.update(1)

    env = runner_env(threads)
    runners: Dict[str, Runner] = {}
    try:
        for s in systems:
            bar.set_description(f"{tag}: start {s}")
            if s == "ort":
                argv = ["node", os.path.join(ROOT, "bench", "ort_runner.js"), workdir, ort["module_dir"]]
            elif s == "ort-int8":
                argv = ["node", os.path.join(ROOT, "bench", "ort_runner.js"), workdir, ort["module_dir"], "model-int8.onnx",
                        "ort-int8"]
            else:
                argv = [args.python, "-m", "bench.worker", s, workdir]
            r = Runner(s, argv, workdir, env)
            try:
                ready = r.recv()
            except RuntimeError as e:
                result["systems"][s] = {"ok": False, "error": str(e)}
                continue
            err = rel_error(read_outputs(s, ready, workdir), refs)
            tol = BF16_TOLERANCE if s in BF16_SYSTEMS else INT8_TOLERANCE if s in INT8_SYSTEMS else TOLERANCE
            entry = {"compile_s": ready["compile_s"], "first_call_ms": ready["first_call_s"] * 1e3, "rel_err": err,
                     "ok": err <= tol, "settle_calls": ready.get("settle_calls", 0)}
            if not entry["ok"]:
                entry["error"] = (f"output differs from PyTorch eager (relative error {err:.2e} > {tol:g}); "
                                  "times not counted")
            result["systems"][s] = entry
            runners[s] = r
        bar.update(1)

        # Calls per block: about 100 ms of work, so tiny models are not timed one
        # call at a time. Between blocks the driver pauses briefly: thread pools
        # (OpenMP's, ORT's) spin for a while after their work, and that spinning
        # must not land on the next system's time.
        est = {s: max(1e-6, result["systems"][s]["first_call_ms"] / 1e3) for s in runners}
        for s, r in runners.items():
            # warm; the fastest of three calls, so that one slow call (a busy machine)
            # does not shrink the blocks to single cold calls
            est[s] = max(1e-6, min(r.send({"cmd": "run", "n": 3})["times"]))
        block = {s: max(1, min(5000, int(0.1 / est[s]))) for s in runners}
        rounds = {s: max(3, min(args.runs, int(args.max_seconds / (est[s] * block[s])))) for s in runners}
        times: Dict[str, List[float]] = {s: [] for s in runners}
        round_ms: Dict[str, List[float]] = {s: [] for s in runners}  # each round's block median
        for s, r in runners.items():  # warm-up block
            time.sleep(PAUSE_S)
            r.send({"cmd": "run", "n": block[s]})
        # CPU each runner used while another one's blocks ran (it only waits
        # on its stdin then: more means its threads were left spinning, and
        # the other side's times carry that)
        idle_cpu = {s: 0.0 for s in runners}
        others_wall = {s: 0.0 for s in runners}
        for i in range(max(rounds.values(), default=0)):
            bar.set_description(f"{tag}: round {i + 1}")
            for s, r in runners.items():
                if i < rounds[s]:
                    time.sleep(PAUSE_S)
                    got, wall, used = timed_block(r, block[s], {o: q for o, q in runners.items() if o != s})
                    for o, cpu in used.items():
                        idle_cpu[o] += cpu
                        others_wall[o] += wall
                    times[s].extend(got)
                    round_ms[s].append(statistics.median(got) * 1e3)
            bar.update(args.runs / max(rounds.values()))
        for s, r in runners.items():
            entry = result["systems"][s]
            try:
                info = r.close()
            except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:  # keep the times measured
                info = {"maxrss_kib": 0}
                entry["close_error"] = str(e)
            entry["maxrss_mib"] = info["maxrss_kib"] / 1024
            entry["calls"] = len(times[s])
            if others_wall[s] > 0:
                entry["idle_cpu_share"] = idle_cpu[s] / others_wall[s]
            if entry["ok"]:
                entry["median_ms"] = statistics.median(times[s]) * 1e3
                entry["min_ms"] = min(times[s]) * 1e3
                entry["round_ms"] = round_ms[s]
            if s == "llga" and "flops" in info:
                result["flops"] = info["flops"]
                result["llga_memory"] = info["memory"]
                result["llga_partitions"] = info["partitions"]
                result["llga_batch_split"] = info.get("batch_split")
    finally:
        for r in runners.values():
            r.kill()
    result["paired"] = paired_ratios(result["systems"])
    if "llga-bf16" in result["systems"]:
        result["paired_bf16"] = paired_ratios(result["systems"], "llga-bf16")
    if "llga-int8" in result["systems"]:
        result["paired_int8"] = paired_ratios(result["systems"], "llga-int8")
    flops = result.get("flops")
    for s, entry in result["systems"].items():
        if flops and entry.get("median_ms"):
            entry["gflops"] = flops / (entry["median_ms"] * 1e-3) * 1e-9
            entry["pct_limit"] = 100 * entry["gflops"] / limit["f32"]["gflops"]
    if flops:
        result["floor_ms"] = flops / (limit["f32"]["gflops"] * 1e9) * 1e3
    bar.update(1)
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return result


def paired_ratios(systems: Dict[str, dict], base: str = "llga") -> Dict[str, float]:
    """llga's time over each peer's, paired by round: the median over rounds of
    llga's block median divided by the peer's block median of the same round
    (the two blocks run within a second of each other). A slow phase of the
    machine that lasts a few rounds then moves both sides of its ratios, where
    the ratio of the two overall medians can swing with it (resnet50 read 0.86x,
    0.97x and 1.25x in three back-to-back runs on a busy day)."""
    llga = systems.get(base, {})
    out = {}
    for s, entry in systems.items():
        if s == base or not (llga.get("ok") and entry.get("ok")):
            continue
        pairs = report.round_ratios(llga.get("round_ms", []), entry.get("round_ms", []))
        if pairs:
            out[s] = statistics.median(pairs)
    return out


# ----------------------------------------------------------------- main

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=None, help=f"comma-separated (default: {','.join(bench_models.DEFAULT)})")
    ap.add_argument("--batch", default="1", help="comma-separated batch sizes (16 for throughput)")
    ap.add_argument("--runs", type=int, default=20, help="timed rounds per system (each a block of about 100 ms of calls, or one call)")
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "int8"),
                    help="bf16: also llga bf16 and PyTorch autocast bf16; int8: also llga.quantize and PyTorch FX "
                         "int8 (columns next to fp32 llga and ORT)")
    ap.add_argument("--threads", default="2",
                    help="comma-separated thread counts (1,2: each model at each, and the scaling from the first to the last)")
    ap.add_argument("--max-seconds", type=float, default=60.0,
                    help="per system and model: fewer rounds (at least 3) when they would take longer")
    ap.add_argument("--quick", action="store_true", help=f"{','.join(bench_models.QUICK)}, 5 rounds: about a minute")
    ap.add_argument("--out", default=RESULTS)
    ap.add_argument("--latest", default="latest", help="the name the run is also copied to in --out (latest.md, ...)")
    ap.add_argument("--keep", action="store_true", help="keep the exported files under bench/.cache/work")
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args(argv)
    if args.quick:
        args.models = args.models or ",".join(bench_models.QUICK)
        args.runs = min(args.runs, 5)
    names = (args.models or ",".join(bench_models.DEFAULT)).split(",")
    for n in names:
        if n not in bench_models.BUILDERS:
            ap.error(f"unknown model {n!r}; known: {', '.join(bench_models.BUILDERS)}")
    batches = [int(b) for b in args.batch.split(",")]
    try:
        threads = [int(t) for t in args.threads.split(",")]
    except ValueError:
        ap.error(f"--threads takes comma-separated counts, got {args.threads!r}")
    if any(t < 1 for t in threads):
        ap.error("--threads: counts must be at least 1")
    args.systems = args.systems.split(",")
    if args.precision == "bf16":
        args.systems += [s for s in BF16_SYSTEMS if s not in args.systems]
    if args.precision == "int8":
        args.systems += [s for s in INT8_SYSTEMS if s not in args.systems]
    for s in args.systems:
        if s not in SYSTEMS + BF16_SYSTEMS + INT8_SYSTEMS:
            ap.error(f"unknown system {s!r}; known: {', '.join(SYSTEMS + BF16_SYSTEMS + INT8_SYSTEMS)}")

    from tqdm import tqdm

    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    started = datetime.datetime.now()
    ort = setup_ort(log) if any(s in args.systems for s in ORT_SYSTEMS) else {"error": "not asked for"}
    if "error" in ort and any(s in args.systems for s in ORT_SYSTEMS):
        log(f"ONNX Runtime unavailable: {ort['error']}")
    log("measuring the machine's limit (oneDNN convolution, f32 and bf16) ...")
    limit = machine_limit(max(threads), 20)
    run = {"date": started.isoformat(timespec="seconds"), "command": "python -m bench " + " ".join(argv or sys.argv[1:]),
           "threads": threads, "machine": machine_info(), "versions": versions(ort.get("module_dir")),
           "limit": limit, "results": []}
    jobs = [(n, b, t) for t in threads for b in batches for n in names]
    with tqdm(total=len(jobs) * (3 + args.runs), file=sys.stderr, unit="step", dynamic_ncols=True) as bar:
        for name, batch, t in jobs:
            try:
                run["results"].append(run_model(name, batch, t, args, ort, limit, bar))
            except Exception as e:  # noqa: BLE001 - one model failing must not lose the others
                log(f"{name} batch {batch}, {t} threads failed: {type(e).__name__}: {e}")
                run["results"].append({"model": name, "batch": batch, "threads": t,
                                       "error": f"{type(e).__name__}: {e}", "systems": {}})
    run["seconds"] = (datetime.datetime.now() - started).total_seconds()
    paths = report.write(run, args.out, started.strftime("%Y%m%d-%H%M%S"), args.latest)
    print(report.markdown(run))
    for p in paths:
        print(f"wrote {os.path.relpath(p, ROOT)}")
    llga_ok = all(r.get("systems", {}).get("llga", {}).get("ok") for r in run["results"])
    return 0 if llga_ok else 1
