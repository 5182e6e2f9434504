"""Stress (scripts/stress.py; make stress runs 200,000 calls): a compiled model
called with ever new input shapes keeps every per-shape structure bounded and
its RSS flat once its caches are full."""

import os
import subprocess
import sys

import numpy as np
import torch

import llga

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_per_shape_records_stay_bounded():
    # 12,000 calls over ~10,000 sizes once grew compiled.memory["peak_activations"] to
    # 10,274 entries: it keeps the 64 most recent signatures, the arenas 8.
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU()).eval()
    x = torch.randn(1, 3, 8, 8)
    c = llga.optimize(torch.jit.trace(m, x), [x])
    rng = np.random.default_rng(0)
    for i in range(150):
        xi = rng.standard_normal((1, 3, 6 + i % 15, 6 + i // 15)).astype(np.float32)
        out = c(xi)
        if i % 37 == 0:
            with torch.no_grad():
                np.testing.assert_allclose(out, m(torch.from_numpy(xi)).numpy(), rtol=1e-5, atol=1e-5)
    mem = c.memory
    assert len(mem["peak_activations"]) == 64 and len(mem["arena"]) <= 8
    # the most recent ones are the ones kept
    assert "1x3x20x15:Float" in mem["peak_activations"] and "1x3x6x6:Float" not in mem["peak_activations"]


def test_rss_stays_flat_over_thousands_of_distinct_shapes():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "stress.py"), "--calls", "8000", "--sizes", "40",
                        "--warmup", "0.5", "--max-growth-mib", "8"],
                       capture_output=True, text=True, timeout=600, env=dict(os.environ, PYTHONPATH=ROOT))
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout[-3000:] + r.stderr[-3000:]


# ---------------------------------------------------------------- threads x evictions

from concurrency import run_concurrently  # noqa: E402
from llga import _llga  # noqa: E402


class RankAware(torch.nn.Module):
    """Asks for its input's rank: scripted, it is specialized per rank and dtype."""

    def forward(self, x):
        if x.dim() > 2:
            x = x.flatten(1)
        return torch.relu(x * 2.0 - 1.0) + x.mean()


def test_threads_calling_while_specializations_are_evicted():
    # 6 ranks x 2 dtypes = 12 specializations through a cache of 8, and ever new shapes
    # within each (arenas and primitive caches evict too), from 8 threads at once: each
    # thread's answers stay right while the others evict what it runs.
    c = llga.optimize(torch.jit.script(RankAware()), [torch.randn(2, 3)])
    assert c.MAX_SPECIALIZATIONS < 12
    compiles = []
    respecialize = c._respecialize
    c._respecialize = lambda args: compiles.append(1) or respecialize(args)

    def worker(k):
        rng = np.random.default_rng(k)
        for i in range(30):
            rank = int(rng.integers(1, 7))
            dtype = (np.float32, np.float64)[int(rng.integers(2))]
            shape = tuple(int(s) for s in rng.integers(1, 5, size=rank))
            x = rng.standard_normal(shape).astype(dtype)
            flat = x.reshape(x.shape[0], -1) if rank > 2 else x
            want = np.maximum(flat * 2 - 1, 0) + flat.mean(dtype=np.float64)
            got = c(x)
            assert got.dtype == dtype and got.shape == want.shape, (k, i, shape, dtype, got.shape)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f"thread {k}, call {i}, {shape} {dtype}")

    run_concurrently(worker, 8)
    assert len(c._specializations) <= c.MAX_SPECIALIZATIONS
    assert len(compiles) > c.MAX_SPECIALIZATIONS  # some were evicted and compiled again


def test_threads_calling_a_cnn_over_more_shapes_than_its_caches_hold():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                            torch.nn.MaxPool2d(2), torch.nn.Conv2d(8, 4, 1), torch.nn.Sigmoid()).eval()
    x0 = torch.randn(1, 3, 8, 8)
    c = llga.optimize(torch.jit.trace(m, x0), [x0])
    sizes = [(1 + s % 2, 4 + 2 * s, 6 + s) for s in range(20)]  # 20 shapes: more than 16 primitives, 8 arenas
    inputs = [np.random.default_rng(s).standard_normal((b, 3, h, w), dtype=np.float32) for s, (b, h, w) in enumerate(sizes)]
    with torch.no_grad():
        wants = [m(torch.from_numpy(x)).numpy() for x in inputs]
    before = _llga.specialization_stats()["evicted"]

    def worker(k):
        order = np.random.default_rng(100 + k).permutation(len(inputs) * 2) % len(inputs)
        for j in order:
            np.testing.assert_allclose(c(inputs[j]), wants[j], rtol=1e-4, atol=1e-5, err_msg=f"thread {k}, size {sizes[j]}")

    run_concurrently(worker, 8)
    assert _llga.specialization_stats()["evicted"] > before
    mem = c.memory
    assert len(mem["arena"]) <= 8 and all(a["in_use_blocks"] == 0 for a in mem["arena"].values())
