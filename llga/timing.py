"""Interleaved timing of several callables, as every llga figure is measured.

Each round calls every system once, in turn, so that drift on a noisy
machine hits all of them alike.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable, Dict, List, Mapping


def interleaved(systems: Mapping[str, Callable[[], object]], runs: int, warmup: int = 3) -> Dict[str, List[float]]:
    """{name: [seconds per call]} over `runs` rounds, after `warmup` rounds."""
    for _ in range(warmup):
        for fn in systems.values():
            fn()
    times: Dict[str, List[float]] = {name: [] for name in systems}
    for _ in range(runs):
        for name, fn in systems.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return times


def summary_ms(samples: List[float]) -> Dict[str, float]:
    return {"median": statistics.median(samples) * 1e3, "min": min(samples) * 1e3}
