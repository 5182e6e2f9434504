"""Faults during a call: an allocation that fails anywhere inside a call
(llga's buffers, a partition's intermediates) raises MemoryError naming the op,
frees what the call held (no block of the memory planner's arena stays in
use), keeps the plan, and leaves the compiled model giving the same answers;
and a real out-of-memory under RLIMIT_AS does the same in a subprocess."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import llga
from llga import _llga

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Block(torch.nn.Module):
    """Partitions with intermediates, a residual, a pool and a linear head."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.c2 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        y = torch.relu(self.bn(self.c1(x)))
        y = torch.relu(self.c2(y) + y)
        z = torch.nn.functional.max_pool2d(y, 2).mean(dim=(2, 3))
        return torch.softmax(self.fc(z), dim=-1), y[:, :2] * 0.5


@pytest.fixture
def disarmed():
    yield
    _llga._fail_activation_allocation_after(-1)


@pytest.mark.parametrize("planning", [True, False], ids=["planned", "heap"])
def test_every_failing_allocation_raises_memory_error_and_the_model_stays_usable(planning, disarmed):
    was = llga.memory_planning()
    llga.set_memory_planning(planning)
    try:
        torch.manual_seed(0)
        m = Block().eval()
        x = torch.randn(2, 3, 12, 12)
        c = llga.optimize(torch.jit.trace(m, x))
        xn = x.numpy()
        for _ in range(3):  # warm-up, recorded, planned
            want = [o.copy() for o in c(xn)]
        with torch.no_grad():
            for g, w in zip(want, m(x)):
                np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-5)
        failures = 0
        for n in range(1000):
            _llga._fail_activation_allocation_after(n)
            try:
                got = c(xn)
            except MemoryError as e:
                assert isinstance(e, llga.OutOfMemoryError) and isinstance(e, llga.ExecutionError)
                assert "out of memory" in str(e) and ("aten::" in str(e) or "llga::" in str(e)), str(e)
                failures += 1
            else:
                assert _llga._fail_activation_allocation_after(-1), "a call that allocated no more"
                for g, w in zip(got, want):
                    np.testing.assert_array_equal(g, w)
                break
            if planning:
                (arena,) = c.memory["arena"].values()
                assert arena["in_use_blocks"] == 0, arena
            again = c(xn)  # usable, and the same answers bit for bit
            for g, w in zip(again, want):
                np.testing.assert_array_equal(g, w)
        assert failures >= 5  # every op's allocation was a failure point
        if planning:
            (arena,) = c.memory["arena"].values()
            assert arena["failed_calls"] == failures and arena["deviations"] == 0 and not arena["disabled"], arena
            assert arena["planned_calls"] >= failures + 1 and arena["in_use_blocks"] == 0, arena
    finally:
        llga.set_memory_planning(was)


OOM_CHILD = textwrap.dedent("""
    import resource, sys
    import numpy as np, torch, llga
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
                            torch.nn.Conv2d(16, 16, 3, padding=1)).eval()
    x = torch.randn(1, 3, 32, 32)
    c = llga.optimize(torch.jit.trace(m, x), [x])
    small = [c(x.numpy()).copy() for _ in range(3)][-1]
    big = np.random.default_rng(0).standard_normal((16, 3, 384, 384), dtype=np.float32)  # out: 151 MB per conv
    vm = int(open("/proc/self/statm").read().split()[0]) * 4096
    resource.setrlimit(resource.RLIMIT_AS, (vm + 160 * 2**20, resource.RLIM_INFINITY))
    for attempt in range(3):
        try:
            c(big)
            print("NO ERROR")
            sys.exit(1)
        except MemoryError as e:
            print(type(e).__name__, "|", str(e)[:200])
        np.testing.assert_array_equal(c(x.numpy()), small)  # still usable under the limit
    resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY,) * 2)
    want = m(torch.from_numpy(big[:2])).detach().numpy()
    np.testing.assert_allclose(c(big[:2]), want, rtol=1e-4, atol=1e-4)
    for sig, a in c.memory["arena"].items():
        assert a["in_use_blocks"] == 0 and not a["disabled"], (sig, a)
    print("OK")
""")


@pytest.mark.skipif(bool(os.environ.get("LLGA_SANITIZER")),
                    reason="a sanitizer's shadow memory needs more address space than any RLIMIT_AS that bites")
def test_out_of_memory_under_rlimit_as_raises_memory_error_and_the_model_stays_usable():
    r = subprocess.run([sys.executable, "-c", OOM_CHILD], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PYTHONPATH=ROOT))
    assert r.returncode == 0 and r.stdout.strip().endswith("OK"), r.stdout[-2000:] + r.stderr[-3000:]
    lines = [ln for ln in r.stdout.splitlines() if "|" in ln]
    assert len(lines) == 3 and all(ln.startswith("OutOfMemoryError | ") for ln in lines), r.stdout
    # an op names itself; the batch split (16 images in chunks) names the output it could not assemble
    assert all("out of memory" in ln and ("aten::" in ln or "batch split" in ln or "memory plan" in ln)
               for ln in lines), r.stdout
