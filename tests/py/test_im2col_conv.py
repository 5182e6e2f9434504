"""1-D convolutions run as im2col and one matmul (backend/dnnl/im2col.h):
where ``cpu_capabilities()["im2col_conv"]`` says it can run, a convolution
whose windows overlap at stride 2 or more with 2 MiB of weights or more takes
that path (the partition's impl says ``im2col+``), others stay on oneDNN's
convolution; either way the values are PyTorch's, with padding, bias, an
eltwise chain, a residual sum, batches, long signals (the copy goes in
chunks of rows), an unbatched input and inputs that arrive channels-first or
channels-last."""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import llga

OWN = llga.cpu_capabilities()["im2col_conv"]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def conv_impls(compiled):
    return [p.impl or "" for p in compiled.partitions if "conv" in (p.pattern or "")]


def check(m, *xs, rtol=2e-4, atol=2e-4, calls=2):
    c = llga.optimize(torch.jit.trace(m, xs), list(xs))
    with torch.no_grad():
        want = m(*xs).numpy()
    assert np.abs(want).max() > 0.1  # not an all-zero reference
    for _ in range(calls):
        np.testing.assert_allclose(c(*[x.numpy() for x in xs]), want, rtol=rtol, atol=atol)
    return c


def conv1d(cin, cout, k, stride, padding=0, bias=False, seed=0):
    torch.manual_seed(seed)
    m = nn.Conv1d(cin, cout, k, stride, padding, bias=bias).eval()
    with torch.no_grad():  # weights far from zero: a lost tap or channel would show
        m.weight.uniform_(-0.05, 0.05)
        if bias:
            m.bias.uniform_(-1, 1)
    return m


class Chain(nn.Module):
    def __init__(self, conv, act):
        super().__init__()
        self.conv, self.act = conv, act

    def forward(self, x):
        return self.act(self.conv(x))


@pytest.mark.parametrize("cin,cout,k,stride,padding,bias,length", [
    (512, 512, 3, 2, 0, False, 101),   # wav2vec2's feature extractor shape
    (512, 512, 3, 2, 1, True, 64),     # padding: zero taps at both ends
    (512, 384, 5, 2, 2, True, 37),     # 5 taps, output channels not a power of two
    (384, 512, 4, 3, 0, False, 50),    # stride 3 under 4 taps
    (512, 512, 3, 2, 0, True, 3),      # one output pixel
])
def test_overlapping_strided_windows_take_the_product(cin, cout, k, stride, padding, bias, length):
    m = conv1d(cin, cout, k, stride, padding, bias, seed=k * 100 + length)
    c = check(m, torch.randn(1, cin, length))
    impls = conv_impls(c)
    assert impls and all(i.startswith("im2col+") == OWN for i in impls), impls


@pytest.mark.parametrize("cin,cout,k,stride", [
    (512, 512, 3, 1),   # stride 1: brgconv is at the limit
    (512, 512, 2, 2),   # windows that do not overlap
    (128, 128, 3, 2),   # weights under 2 MiB
])
def test_other_convolutions_stay_on_onednn(cin, cout, k, stride):
    c = check(conv1d(cin, cout, k, stride), torch.randn(1, cin, 40))
    impls = conv_impls(c)
    assert impls and not any(i.startswith("im2col+") for i in impls), impls


@pytest.mark.parametrize("act", [nn.GELU(), nn.ReLU(), nn.Hardtanh(-0.5, 0.5)], ids=["gelu", "relu", "clip"])
def test_eltwise_chain(act):
    c = check(Chain(conv1d(512, 512, 3, 2, bias=True, seed=3), act), torch.randn(1, 512, 45))
    assert any(i.startswith("im2col+") for i in conv_impls(c)) == OWN


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = conv1d(512, 512, 3, 2, padding=1, bias=True, seed=4)

    def forward(self, x, r):
        return torch.relu(self.conv(x) + r)


def test_residual_sum():
    x, r = torch.randn(2, 512, 30), torch.randn(2, 512, 15)
    c = check(Residual(), x, r)
    assert any(i.startswith("im2col+") for i in conv_impls(c)) == OWN


def test_batches_and_channels_last_input():
    # batch 3 (rows of every image); the input transposed from [n, w, c], so
    # it arrives channels-last as strides; then channels-first
    class FromNwc(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = conv1d(512, 512, 3, 2, seed=5)

        def forward(self, x):
            return F.gelu(self.conv(x.transpose(1, 2)))

    check(FromNwc(), torch.randn(3, 33, 512))
    check(conv1d(512, 512, 3, 2, seed=6), torch.randn(3, 512, 33))


def test_unbatched_input():
    check(conv1d(512, 512, 3, 2, bias=True, seed=7), torch.randn(512, 29))


def test_new_lengths_reuse_the_packed_weights():
    # one compiled model, three signal lengths: each its own product over the same packed weights
    m = conv1d(512, 512, 3, 2, bias=True, seed=8)
    c = llga.optimize(torch.jit.trace(m, torch.randn(1, 512, 40)))
    for n in (40, 77, 40, 9):
        x = torch.randn(1, 512, n)
        with torch.no_grad():
            np.testing.assert_allclose(c(x.numpy()), m(x).numpy(), rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("seed", range(8))
def test_random_geometries(seed):
    # kernel 3 to 7, a stride under it, padding up to the kernel's half,
    # channels so that the weights reach 2 MiB, batches 1 to 3, lengths
    # from one window up
    rng = np.random.default_rng(seed)
    k = int(rng.integers(3, 8))
    stride = int(rng.integers(2, k))
    padding = int(rng.integers(0, k // 2 + 1))
    cin = int(rng.choice([256, 320, 512]))
    cout = -(-(1 << 19) // (cin * k))  # at least 2 MiB of weights
    cout += int(rng.integers(0, 40))
    length = int(rng.integers(max(1, k - 2 * padding), 300))
    batch = int(rng.integers(1, 4))
    m = conv1d(cin, cout, k, stride, padding, bias=bool(seed % 2), seed=seed)
    c = check(Chain(m, nn.GELU() if seed % 3 else nn.Identity()), torch.randn(batch, cin, length))
    impls = conv_impls(c)
    assert impls and all(i.startswith("im2col+") == OWN for i in impls), (impls, k, stride, padding, cin, cout)


@pytest.mark.skipif(not OWN, reason="im2col_conv is off here (oneDNN ISA below avx512_core or LLGA_IM2COL=0)")
@pytest.mark.parametrize("seed", range(12))
def test_every_small_geometry_with_all(monkeypatch, seed):
    # LLGA_IM2COL=all takes every 1-D convolution the path can run (not only
    # those where it pays): small channels, kernel 1, stride 1, dilation,
    # padding wider than a dilated tap
    monkeypatch.setenv("LLGA_IM2COL", "all")
    rng = np.random.default_rng(100 + seed)
    k = int(rng.integers(1, 6))
    stride = int(rng.integers(1, 4))
    dilation = int(rng.choice([1, 1, 2, 3]))
    padding = int(rng.integers(0, dilation * (k - 1) // 2 + 1))
    cin, cout = int(rng.integers(1, 40)), int(rng.integers(1, 40))
    length = int(rng.integers(max(1, dilation * (k - 1) + 1 - 2 * padding), 60))
    torch.manual_seed(seed)
    m = nn.Conv1d(cin, cout, k, stride, padding, dilation, bias=bool(seed % 2)).eval()
    c = check(m, torch.randn(int(rng.integers(1, 4)), cin, length), rtol=1e-4, atol=1e-4)
    impls = conv_impls(c)
    assert impls and all(i.startswith("im2col+") for i in impls), (impls, k, stride, dilation, padding, cin, cout)


@pytest.mark.parametrize("batch,length", [(1, 6001), (2, 2729), (3, 1001)])
def test_long_signals_go_in_chunks_of_rows(batch, length):
    # the copy holds at most 8 MiB of rows (1365 rows of 512 x 3 floats);
    # padding 1, stride 2: 6001 samples are 3001 rows (two chunks and a
    # tail of 271), two signals of 2729 are 2 x 1365 rows (two whole chunks,
    # one an image), three of 1001 are 3 x 501 (a chunk across the three
    # images, then a tail that starts inside the third); with a residual
    # and a relu
    m = Residual()
    x = torch.randn(batch, 512, length)
    r = torch.randn(batch, 512, (length + 2 - 3) // 2 + 1)
    c = check(m, x, r, calls=1)
    assert any(i.startswith("im2col+") for i in conv_impls(c)) == OWN


@pytest.mark.skipif(not OWN, reason="im2col_conv is off here (oneDNN ISA below avx512_core or LLGA_IM2COL=0)")
def test_switch_off_runs_onednns_convolution():
    code = ("import torch, numpy as np, llga, torch.nn as nn\n"
            "torch.manual_seed(0)\n"
            "m = nn.Conv1d(512, 512, 3, 2).eval()\n"
            "x = torch.randn(1, 512, 31)\n"
            "c = llga.optimize(torch.jit.trace(m, x))\n"
            "np.testing.assert_allclose(c(x.numpy()), m(x).detach().numpy(), rtol=2e-4, atol=2e-4)\n"
            "print(llga.cpu_capabilities()['im2col_conv'], [p.impl for p in c.partitions])\n")
    env = dict(os.environ, LLGA_IM2COL="0", PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("False") and "im2col" not in out.stdout, out.stdout
