"""The torchvision sweeps' worker protocol (scripts/zoo_sweep.py,
scripts/zoo_precision.py): each model runs in a subprocess of its own (the
largest need several GiB, and a crash must not end the sweep), which prints
its result as one JSON line after ROW; the parent reads it back, or makes an
error row of how the worker ended."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROW = "ZOO-ROW "
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def emit(name: str, make_row, max_error: int = 300) -> int:
    """In the worker: print make_row()'s row, or an error row naming the exception."""
    try:
        row = make_row()
    except Exception as e:  # noqa: BLE001 - reported in the table
        row = {"model": name, "error": f"{type(e).__name__}: {' '.join(str(e).split())[:max_error]}"}
    print(ROW + json.dumps(row), flush=True)
    return 0


def collect(script: str, name: str, args: list, timeout: float) -> dict:
    """In the parent: run `script --one name *args` and return its row."""
    try:
        r = subprocess.run([sys.executable, os.path.abspath(script), "--one", name, *args], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"model": name, "error": f"no result in {timeout / 60:.0f} minutes"}
    line = next((l for l in r.stdout.splitlines() if l.startswith(ROW)), None)
    if line:
        return json.loads(line[len(ROW):])
    return {"model": name, "error": f"worker exit {r.returncode}: {r.stdout.strip().splitlines()[-1:]}"}


def commit() -> str:
    """HEAD's short hash, or "unknown"."""
    return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True).stdout.strip() or "unknown"
