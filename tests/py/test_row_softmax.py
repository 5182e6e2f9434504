"""llga's softmax over the last dim (backend/dnnl/row_softmax.h): a softmax
outside an attention partition runs it where llga.cpu_capabilities() says
`llga_softmax` (oneDNN's ISA avx512_core or later, LLGA_OWN_SOFTMAX not 0),
else oneDNN's softmax. Checked against PyTorch, with the decision read from
the kernel log."""

import subprocess
import sys
import os

import numpy as np
import pytest
import torch
from torch import nn

import llga

OWN = llga.cpu_capabilities()["llga_softmax"]


class Softmax(nn.Module):
    def __init__(self, dim=-1, log=False):
        super().__init__()
        self.dim, self.log = dim, log

    def forward(self, x):
        y = x * 2.0  # a softmax alone on a graph input is fine too; this keeps it off the input's buffer
        return torch.log_softmax(y, self.dim) if self.log else torch.softmax(y, self.dim)


def run(model, x):
    with torch.no_grad():
        traced = torch.jit.trace(model.eval(), x, check_trace=False)
        ref = model(x).numpy()
    compiled = llga.optimize(traced)
    compiled.set_batch_split("off")
    llga.profiler.kernel_log.enable()
    try:
        out = compiled(x.numpy())
        impls = [e["impl"] for e in llga.profiler.kernel_log.entries() if e["op"] in ("aten::softmax", "aten::log_softmax")]
    finally:
        llga.profiler.kernel_log.disable()
        llga.profiler.kernel_log.clear()
    return out, ref, impls


@pytest.mark.parametrize("shape", [(3, 1), (5, 15), (2, 16), (7, 17), (64, 3, 49, 49), (4, 1000), (2, 3, 40000), (0, 5)])
def test_last_dim(shape):
    torch.manual_seed(0)
    x = torch.randn(*shape) * 4
    out, ref, impls = run(Softmax(), x)
    np.testing.assert_allclose(out, ref, rtol=2e-6, atol=1e-7)
    if x.numel():
        assert impls == ["llga_softmax:avx512" if OWN else None], impls


@pytest.mark.skipif(not OWN, reason="oneDNN's softmax keeps a NaN to its own element where PyTorch's row is NaN")
def test_non_finite_rows():
    # a NaN, or +inf, makes its row NaN; -inf entries give 0; a row of -inf is NaN (as PyTorch)
    x = torch.randn(6, 37)
    x[0, 3] = float("nan")
    x[1, 36] = float("inf")
    x[2, :5] = float("-inf")
    x[3, :] = float("-inf")
    x[4, :] = -1e30
    x[5, 20] = 1e30
    out, ref, _ = run(Softmax(), x)
    np.testing.assert_allclose(out, ref, rtol=2e-6, atol=1e-7, equal_nan=True)
    assert np.isnan(out[[0, 1, 3]]).all() and not np.isnan(out[[2, 4, 5]]).any()


@pytest.mark.parametrize("dim,log", [(1, False), (0, False), (-1, True)])
def test_other_dims_and_log_softmax_stay_on_onednn(dim, log):
    x = torch.randn(4, 9, 33)
    out, ref, impls = run(Softmax(dim, log), x)
    np.testing.assert_allclose(out, ref, rtol=2e-5, atol=1e-5)  # oneDNN's AVX2 log_softmax: 4e-6 off on values near -10
    assert impls == [None], impls


@pytest.mark.skipif(not OWN, reason="llga's softmax does not run on this CPU (llga.cpu_capabilities())")
def test_switch_off():
    # LLGA_OWN_SOFTMAX=0: oneDNN's softmax, the same result within a rounding
    code = (
        "import numpy as np, torch, llga\n"
        "m = torch.jit.trace(torch.nn.Softmax(-1), torch.randn(8, 49))\n"
        "c = llga.optimize(m); c.set_batch_split(\"off\")\n"
        "llga.profiler.kernel_log.enable(); x = np.random.rand(8, 49).astype(np.float32)\n"
        "y = c(x); print([e['impl'] for e in llga.profiler.kernel_log.entries()])\n"
        "np.testing.assert_allclose(y, torch.softmax(torch.from_numpy(x), -1).numpy(), rtol=2e-6)\n"
    )
    env = dict(os.environ, LLGA_OWN_SOFTMAX="0")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[None]", r.stdout
