"""Is a change to llga faster? Two builds (or one build under two
environments) timed against each other on one model, paired by round.

    /usr/bin/python3 -m bench.ab --model mobilenet_v2 --a-rev HEAD~1            # this checkout against HEAD~1
    /usr/bin/python3 -m bench.ab --model regnet_y_800mf --b-env LLGA_WINOGRAD=0  # one build, two settings
    /usr/bin/python3 -m bench.ab --model resnet18 --a DIR --b DIR2 --precision int8 --runs 30
    /usr/bin/python3 -m bench.ab --models default --a-rev main                   # every bench model, then a table

Each side is a directory holding an llga package (`--a`/`--b`; default: this
checkout), or a git revision (`--a-rev`/`--b-rev`: checked out as a worktree
under bench/.cache/ab/ and built there once, about four minutes with two
cores), plus environment variables (`--a-env K=V`, repeatable). The model is
exported once (as `make bench` does); each side runs in its own
bench.worker process, and its output is checked against PyTorch's before any
time counts. The rounds alternate A B B A ..., a block of about 100 ms of
calls each with a pause between, and the answer is the median over rounds
of B's block median over A's in the same round, with a 95% interval for
that median (the sign test's, from the rounds' order statistics): a change
is "faster" or "slower" only when the whole interval is on one side of 1.
The interval is over rounds, not processes: two processes of one build can
differ by a percent or two (the tiny model's A/A runs read 1.01x and 1.02x,
the second "B slower"), so a verdict on a difference that small wants a
second run, or an A/A run (no option) beside it.

Why a tool: this project's hosts drift by 20-40% between phases within
minutes (docs/benchmarks.md), so two builds timed one after the other, or
two processes started in turn by hand, answer with the host's phase.
With several models (`--models a,b` or `default`: the suite's), each is
timed in turn and a table ends the run, with the geometric mean of the
ratios.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

from bench import models as bench_models
from bench import suite
from bench.report import MAX_IDLE_CPU, median_interval, round_ratios

SYSTEM = {"fp32": "llga", "bf16": "llga-bf16", "int8": "llga-int8"}
TOLERANCE = {"fp32": suite.TOLERANCE, "bf16": suite.BF16_TOLERANCE, "int8": suite.INT8_TOLERANCE}
AB_CACHE = os.path.join(suite.CACHE, "ab")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def parse_env(pairs: List[str], flag: str) -> Dict[str, str]:
    env = {}
    for p in pairs:
        key, eq, value = p.partition("=")
        if not eq or not key:
            raise SystemExit(f"bench.ab: {flag} takes KEY=VALUE, got {p!r}")
        env[key] = value
    return env


def package_dir(path: str, flag: str) -> str:
    """`path` must hold a built llga package: path/llga/_llga*.so."""
    path = os.path.abspath(path)
    pkg = os.path.join(path, "llga")
    if not os.path.isfile(os.path.join(pkg, "__init__.py")):
        raise SystemExit(f"bench.ab: {flag} {path}: no llga package there (expected {pkg}/__init__.py)")
    if not any(f.startswith("_llga") and f.endswith(".so") for f in os.listdir(pkg)):
        raise SystemExit(f"bench.ab: {flag} {path}: llga is not built there (no {pkg}/_llga*.so)")
    return path


def build_rev(rev: str) -> str:
    """A worktree of `rev` under bench/.cache/ab/<commit>, built once."""
    r = subprocess.run(["git", "-C", suite.ROOT, "rev-parse", "--verify", rev + "^{commit}"], capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise SystemExit(f"bench.ab: no commit {rev!r} in {suite.ROOT}: {r.stderr.strip()}")
    sha = r.stdout.strip()
    tree = os.path.join(AB_CACHE, sha[:12])
    if not os.path.isdir(tree):
        os.makedirs(AB_CACHE, exist_ok=True)
        # (a worktree whose directory was deleted with bench/.cache is still registered until pruned)
        subprocess.run(["git", "-C", suite.ROOT, "worktree", "prune"], check=True)
        subprocess.run(["git", "-C", suite.ROOT, "worktree", "add", "--detach", tree, sha], check=True,
                       stdout=subprocess.DEVNULL)
    try:
        return package_dir(tree, rev)
    except SystemExit:
        pass
    log(f"building {rev} ({sha[:12]}) in {os.path.relpath(tree, suite.ROOT)} ...")
    build = os.path.join(tree, "build")
    for cmd in (["cmake", "-S", tree, "-B", build, "-G", "Ninja", f"-DPython3_EXECUTABLE={sys.executable}",
                 "-DCMAKE_BUILD_TYPE=RelWithDebInfo"],
                ["cmake", "--build", build, "-j", str(os.cpu_count() or 2), "--target", "_llga"]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"bench.ab: building {rev} failed ({' '.join(cmd[:2])}):\n" + (r.stdout + r.stderr)[-3000:])
    return package_dir(tree, rev)


class Side:
    def __init__(self, name: str, path: Optional[str], env: Dict[str, str]):
        self.name, self.path, self.env = name, path, env
        self.runner: Optional[suite.Runner] = None
        self.round_ms: List[float] = []
        self.times: List[float] = []
        self.llga_file: Optional[str] = None
        self.first_ms = 0.0
        self.idle_cpu = 0.0  # CPU seconds this side used while the other one's blocks ran
        self.others_wall = 0.0  # the other side's blocks' wall time

    def describe(self) -> str:
        where = os.path.relpath(self.path, suite.ROOT) if self.path else "this checkout"
        env = " ".join(f"{k}={v}" for k, v in self.env.items())
        return where + (f" with {env}" if env else "")


def run_model(model: str, args, specs) -> dict:
    """One model: both sides' workers, checked against PyTorch, then the
    alternating rounds. Returns the model's result (as --json writes it)."""
    sides = [Side(name, path, env) for name, path, env in specs]
    a, b = sides
    system = SYSTEM[args.precision]
    workdir = tempfile.mkdtemp(prefix="llga-ab-")
    try:
        log(f"exporting {model} (batch {args.batch}) ...")
        exported = suite.export(model, args.batch, workdir, False, args.threads)
        refs = exported["refs"]
        for s in sides:
            env = suite.runner_env(args.threads)
            env.pop("LLGA_BENCH_PACKAGE_DIR", None)
            env.update(s.env)
            if s.path:
                env["LLGA_BENCH_PACKAGE_DIR"] = s.path
            s.runner = suite.Runner(f"ab-{s.name}", [args.python, "-m", "bench.worker", system, workdir], workdir, env)
            try:
                ready = s.runner.recv()
            except RuntimeError as e:  # the model failed to compile or run on this side
                raise SystemExit(f"bench.ab: {model}, side {s.name} ({s.describe()}): {e}") from None
            s.llga_file = ready.get("llga_file")
            expect = os.path.join(s.path or suite.ROOT, "llga")
            if not (s.llga_file and os.path.dirname(os.path.abspath(s.llga_file)) == os.path.abspath(expect)):
                raise SystemExit(f"bench.ab: side {s.name} imported llga from {s.llga_file}, not {expect}")
            err = suite.rel_error(suite.read_outputs(system, ready, workdir), refs)
            if not err <= TOLERANCE[args.precision]:
                raise SystemExit(f"bench.ab: {model}, side {s.name} ({s.describe()}): output differs from PyTorch's "
                                 f"(relative error {err:.2e} > {TOLERANCE[args.precision]:g}); no times taken")
            s.first_ms = ready["first_call_s"] * 1e3
        est = {s.name: max(1e-6, min(s.runner.send({"cmd": "run", "n": 3})["times"])) for s in sides}
        block = max(1, min(5000, int(0.1 / max(est.values()))))
        for s in sides:  # warm-up block
            time.sleep(suite.PAUSE_S)
            s.runner.send({"cmd": "run", "n": block})
        log(f"{model}: {args.runs} rounds of {block} calls a side ...")
        for i in range(args.runs):
            for s in (sides if i % 2 == 0 else sides[::-1]):
                time.sleep(suite.PAUSE_S)
                other = b if s is a else a
                got, wall, used = suite.timed_block(s.runner, block, {other.name: other.runner})
                other.idle_cpu += used[other.name]
                other.others_wall += wall
                s.times.extend(got)
                s.round_ms.append(statistics.median(got) * 1e3)
        for s in sides:
            s.runner.close()
    finally:
        for s in sides:
            if s.runner:
                s.runner.kill()
        shutil.rmtree(workdir, ignore_errors=True)

    ratios = round_ratios(b.round_ms, a.round_ms)
    mid = statistics.median(ratios)
    lo, hi = median_interval(ratios)
    verdict = "B faster" if hi < 1 else "B slower" if lo > 1 else "no difference beyond the noise"
    # A side that keeps its cores busy while waiting (OMP_WAIT_POLICY=active
    # spins for ever) slows the other one down: then the ratio measures that.
    busy = {s.name: s.idle_cpu / s.others_wall for s in sides if s.others_wall > 0}
    spinning = [n for n, share in busy.items() if share > MAX_IDLE_CPU]
    if spinning:
        verdict = (f"not comparable: {' and '.join(spinning)} used "
                   + ", ".join(f"{busy[n]:.0%}" for n in spinning)
                   + " of a core while waiting for its next block (spinning threads), slowing the other side")
    print(f"{model}, {args.precision}, batch {args.batch}, {args.threads} threads, {args.runs} rounds")
    for s in sides:
        print(f"  {s.name}: {s.describe()}: median {statistics.median(s.times) * 1e3:.3f} ms, "
              f"best {min(s.times) * 1e3:.3f} ms ({len(s.times)} calls)")
    print(f"  B / A, paired by round: {mid:.3f}x (95% interval of the median {lo:.3f}-{hi:.3f}x): {verdict}",
          flush=True)
    return {"model": model, "block": block, "ratio": mid, "ratio_low": lo, "ratio_high": hi, "verdict": verdict,
            "idle_cpu_share": busy,
            "sides": {s.name: {"path": s.path, "env": s.env, "llga_file": s.llga_file, "first_call_ms": s.first_ms,
                               "round_ms": s.round_ms, "median_ms": statistics.median(s.times) * 1e3,
                               "min_ms": min(s.times) * 1e3} for s in sides}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--models", "--model", dest="models", required=True,
                    help=f"comma-separated; 'default': the suite's ({','.join(bench_models.DEFAULT)})")
    ap.add_argument("--precision", default="fp32", choices=tuple(SYSTEM))
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=20, help="rounds (each side one block of about 100 ms per round)")
    for side in ("a", "b"):
        ap.add_argument(f"--{side}", metavar="DIR", help="a directory holding a built llga package (default: this checkout)")
        ap.add_argument(f"--{side}-rev", metavar="REV", help="a git revision, built under bench/.cache/ab")
        ap.add_argument(f"--{side}-env", metavar="KEY=VALUE", action="append", default=[])
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args(argv)
    models = list(bench_models.DEFAULT) if args.models == "default" else args.models.split(",")
    for m in models:
        if m not in bench_models.BUILDERS:
            ap.error(f"unknown model {m!r}; known: {', '.join(bench_models.BUILDERS)}")
    if args.runs < 3 or args.batch < 1 or args.threads < 1:
        ap.error("--runs must be at least 3, --batch and --threads at least 1")
    specs = []
    for name in ("a", "b"):
        path, rev = getattr(args, name), getattr(args, f"{name}_rev")
        if path and rev:
            ap.error(f"--{name} and --{name}-rev name the same side twice")
        path = build_rev(rev) if rev else package_dir(path, f"--{name}") if path else None
        specs.append((name.upper(), path, parse_env(getattr(args, f"{name}_env"), f"--{name}-env")))
    if specs[0][1:] == specs[1][1:]:
        log("bench.ab: A and B are the same build under the same environment (an A/A run: the noise floor)")

    results = [run_model(m, args, specs) for m in models]
    geomean = math.exp(sum(math.log(r["ratio"]) for r in results) / len(results))
    if len(results) > 1:
        print("\n| model | B / A | 95% interval | verdict |\n|---|---|---|---|")
        for r in results:
            print(f"| {r['model']} | {r['ratio']:.3f}x | {r['ratio_low']:.3f}-{r['ratio_high']:.3f} | {r['verdict']} |")
        print(f"| geometric mean | {geomean:.3f}x | | |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"precision": args.precision, "batch": args.batch, "threads": args.threads, "rounds": args.runs,
                       "geomean_ratio": geomean, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
