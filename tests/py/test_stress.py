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
