"""llga's own one-row product (backend/dnnl/gemv.h): a linear or a matmul
with a constant weight and one row of input, and a 1x1 convolution on one
pixel of one image (squeeze-excite), with an eltwise chain of its steps or
none, run it where ``cpu_capabilities()["llga_gemv"]`` says it can, else
oneDNN's matmul or convolution; either way the values are PyTorch's. The weights it packs are a blocked layout like
any primitive's: compaction keeps them alone, a later batch runs oneDNN's
kernel from them, and a model file carries them."""

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import llga

OWN = "llga_gemv"


def own_expected() -> bool:
    return llga.cpu_capabilities()["llga_gemv"]


def own_bf16_expected() -> bool:
    return llga.cpu_capabilities()["llga_gemv_bf16"]


def impls(compiled):
    return [p.impl or "" for p in compiled.partitions]


def check(m, *xs, rtol=1e-5, atol=1e-5, calls=3):
    c = llga.optimize(torch.jit.trace(m, xs), list(xs))
    with torch.no_grad():
        want = m(*xs)
    want = [t.numpy() for t in want] if isinstance(want, tuple) else [want.numpy()]
    for _ in range(calls):  # the first call packs (and compaction follows it)
        got = c(*[x.numpy() for x in xs])
        got = list(got) if isinstance(got, (tuple, list)) else [got]
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return c


@pytest.mark.parametrize("k,n,bias", [(1280, 1000, True), (2048, 1000, False), (768, 1000, True), (17, 33, True),
                                      (1, 5, True), (5, 1, False), (4, 16, True), (64, 15, True), (3, 17, False)])
def test_one_row_linear(k, n, bias):
    # panel edges (n = 15, 16, 17, 33), k below, at and past the 4-row step,
    # with and without a bias; weights and inputs far from zero (a lost row
    # or panel would show)
    torch.manual_seed(k * 7 + n)
    m = nn.Linear(k, n, bias=bias).eval()
    with torch.no_grad():
        m.weight.uniform_(-1, 1)
        if bias:
            m.bias.uniform_(-2, 2)
    c = check(m, torch.randn(1, k), rtol=1e-4, atol=1e-4)
    assert any(OWN in i for i in impls(c)) == own_expected(), impls(c)


@pytest.mark.parametrize("k,n,act", [(1280, 1000, None), (7, 3, None), (17, 33, "relu"), (33, 70, "sigmoid"),
                                     (1, 5, None), (16, 16, "silu")])
def test_one_row_linear_in_bf16(k, n, act):
    # bf16's arithmetic: x and the weights rounded to bf16 (to nearest even),
    # products summed in fp32; against that done in float64, and the
    # decision from the capability (else oneDNN's bf16 matmul: its sums in
    # another order, the same tolerance)
    torch.manual_seed(k + n)
    lin = nn.Linear(k, n).eval()
    tail = {None: nn.Identity(), "relu": nn.ReLU(), "sigmoid": nn.Sigmoid(), "silu": nn.SiLU()}[act]
    m, x = nn.Sequential(lin, tail).eval(), torch.randn(1, k)
    if not llga.cpu_capabilities()["bf16"]:
        pytest.skip("oneDNN has no bf16 kernels here")
    c = llga.optimize(torch.jit.trace(m, x), [x], precision="bf16")
    with torch.no_grad():
        want = tail(x.to(torch.bfloat16).double() @ lin.weight.to(torch.bfloat16).double().T + lin.bias.double())
    for _ in range(3):
        np.testing.assert_allclose(c(x.numpy()), want.numpy(), rtol=1e-5, atol=1e-5 * float(want.abs().max()) + 1e-6)
    assert any("llga_gemv:avx512_bf16" in i for i in impls(c)) == own_bf16_expected(), impls(c)


def test_the_switch_and_onednn_agree(monkeypatch):
    torch.manual_seed(1)
    m, x = nn.Linear(300, 70).eval(), torch.randn(1, 300)
    expected = own_expected()
    own = check(m, x)
    monkeypatch.setenv("LLGA_GEMV", "0")  # read when a product is first run
    assert not own_expected()
    theirs = check(m, x)
    assert not any(OWN in i for i in impls(theirs)), impls(theirs)
    assert any(OWN in i for i in impls(own)) == expected, impls(own)
    np.testing.assert_allclose(own(x.numpy()), theirs(x.numpy()), rtol=1e-5, atol=1e-5)


def test_a_classifier_on_a_token_and_on_a_strided_row():
    # vit's head reads x[:, 0] (a row of a larger tensor); a row with a
    # stride between its elements is copied first
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.head = nn.Linear(96, 40)
            self.other = nn.Linear(96, 24)

        def forward(self, x, y):
            return self.head(x[:, 0]), self.other(y[..., 1])

    torch.manual_seed(2)
    check(M().eval(), torch.randn(1, 7, 96), torch.randn(1, 96, 3))


def test_matmul_with_a_constant_matrix_and_a_vector():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(200, 90))

        def forward(self, v, r):
            return torch.matmul(v, self.w), torch.matmul(r, self.w)

    torch.manual_seed(3)
    check(M().eval(), torch.randn(200), torch.randn(1, 200), rtol=1e-4, atol=1e-4)


def test_non_finite_inputs_stay_in_their_columns():
    # an inf times a weight is +-inf in every column (NaN where the weight is
    # 0, and in the zero-padded columns past n, which are never stored)
    torch.manual_seed(4)
    m = nn.Linear(40, 21).eval()
    with torch.no_grad():
        m.weight[3, 5] = 0.0
    x = torch.randn(1, 40)
    x[0, 5] = float("inf")
    c = check(m, x)
    out = c(x.numpy())
    assert np.isnan(out[0, 3]) and np.isinf(out[0, :3]).all(), out
    x[0, 5] = float("nan")
    assert np.isnan(c(x.numpy())).all()


@pytest.mark.parametrize("act", ["relu", "leaky", "sigmoid", "silu", "hardsigmoid", "clamp", "relu6"])
def test_one_row_linear_with_its_chain(act):
    # the chain's steps run on the panels before the store; inputs from -6 to 6
    acts = {"relu": torch.relu, "leaky": lambda y: F.leaky_relu(y, 0.2), "sigmoid": torch.sigmoid, "silu": F.silu,
            "hardsigmoid": F.hardsigmoid, "clamp": lambda y: torch.clamp(y, -0.5, 0.75), "relu6": F.relu6}

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(96, 50)

        def forward(self, x):
            return acts[act](self.a(x))

    torch.manual_seed(5)
    m = M().eval()
    with torch.no_grad():
        m.a.weight.uniform_(-0.2, 0.2)
    c = check(m, torch.rand(1, 96) * 12 - 6)
    assert any(OWN in i for i in impls(c)) == own_expected(), impls(c)


def test_other_chains_and_more_rows_stay_on_onednn():
    # the decision's limits: a chain with an op outside the steps (tanh, BERT's
    # pooler), binary operands (a tensor; scalars, kept as binary ops), and
    # two rows run oneDNN's matmul
    class M(nn.Module):
        def __init__(self, tail):
            super().__init__()
            self.a = nn.Linear(64, 48)
            self.tail = tail

        def forward(self, x, r):
            return self.tail(self.a(x), r)

    torch.manual_seed(6)
    for tail in (lambda y, r: torch.tanh(y), lambda y, r: torch.relu(y + r), lambda y, r: y * 0.5 - 1):
        for rows in (1, 2):
            c = check(M(tail).eval(), torch.randn(rows, 64), torch.randn(rows, 48))
            assert not any(OWN in i for i in impls(c)), impls(c)
    c = check(M(lambda y, r: torch.relu(y)).eval(), torch.randn(2, 64), torch.randn(2, 48))
    assert not any(OWN in i for i in impls(c)), impls(c)


class _SqueezeExcite(nn.Module):
    """A squeeze-excite block as efficientnet and regnet have it: pool, 1x1
    convolution, activation, 1x1 convolution, gate, scale."""

    def __init__(self, c=96, squeeze=24, act=F.silu, gate=torch.sigmoid):
        super().__init__()
        self.fc1, self.fc2 = nn.Conv2d(c, squeeze, 1), nn.Conv2d(squeeze, c, 1)
        self.act, self.gate = act, gate

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        return x * self.gate(self.fc2(self.act(self.fc1(s))))


@pytest.mark.parametrize("act,gate", [(F.silu, torch.sigmoid), (torch.relu, torch.sigmoid),
                                      (torch.relu, F.hardsigmoid), (lambda y: F.leaky_relu(y, 0.1), torch.sigmoid)])
@pytest.mark.parametrize("channels_last", [False, True])
def test_squeeze_excite_convolutions_on_one_pixel(act, gate, channels_last):
    # the two 1x1 convolutions on one pixel of one image run the one-row
    # product with their activations; two images, oneDNN's convolution
    torch.manual_seed(7)
    m = _SqueezeExcite(act=act, gate=gate).eval()
    with torch.no_grad():
        for conv in (m.fc1, m.fc2):
            conv.weight.uniform_(-0.3, 0.3)
            conv.bias.uniform_(-1, 1)
    x = torch.randn(1, 96, 7, 9) * 3
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    c = check(m, x)
    convs = [p for p in c.partitions if "aten::_convolution" in p.ops]
    assert len(convs) == 2 and all((OWN in (p.impl or "")) == own_expected() for p in convs), \
        [(p.ops, p.impl) for p in convs]
    if own_expected() and not llga.cpu_capabilities()["isa"].startswith("avx512"):
        # on AVX2 the product writes its pixel (24 and 96 channels) as the nChw8c around it: the gate's
        # multiply then reads a blocked map, not a reordered one
        assert all("dst nChw8c (kept)" in p.layouts for p in convs), [p.layouts for p in convs]
    for x2 in (torch.randn(2, 96, 7, 9), x):  # another batch (compacted Oihw16o weights into oneDNN's), then back
        with torch.no_grad():
            np.testing.assert_allclose(c(x2.numpy()), m(x2).numpy(), rtol=1e-5, atol=1e-5)


def test_squeeze_excite_on_every_other_channel_and_through_a_model_file(tmp_path):
    # the pooled pixel's channels with a stride of 2 (copied dense first);
    # the compacted Oihw16o weights saved and loaded
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Conv2d(48, 40, 1)

        def forward(self, x):
            return torch.sigmoid(self.fc(F.adaptive_avg_pool2d(x, 1)[:, ::2]))

    torch.manual_seed(9)
    m, x = M().eval(), torch.randn(1, 96, 6, 6) * 4
    c = check(m, x)
    assert [OWN in (p.impl or "") for p in c.partitions if "aten::_convolution" in p.ops] == [own_expected()]
    c.save(tmp_path / "se.llga")
    loaded = llga.load(tmp_path / "se.llga")
    for x2 in (x, torch.randn(3, 96, 6, 6), x):
        with torch.no_grad():
            np.testing.assert_allclose(loaded(x2.numpy()), m(x2).numpy(), rtol=1e-5, atol=1e-5)


def test_convolutions_the_product_does_not_take():
    # padding (the pixel's neighbours are zeros), groups, a 3x3 kernel and a
    # residual operand stay on oneDNN's convolution
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.padded = nn.Conv2d(32, 16, 1, padding=1)
            self.grouped = nn.Conv2d(32, 16, 1, groups=2)
            self.wide = nn.Conv2d(32, 16, 3, padding=1)
            self.res = nn.Conv2d(32, 32, 1)

        def forward(self, x):
            s = F.adaptive_avg_pool2d(x, 1)
            return self.padded(s), self.grouped(s), self.wide(s), self.res(s) + s

    torch.manual_seed(8)
    c = check(M().eval(), torch.randn(1, 32, 5, 5))
    impl = [p.impl or "" for p in c.partitions if "aten::_convolution" in p.ops]
    assert len(impl) == 4 and not any(OWN in i for i in impl), impl


def test_compacted_panels_serve_another_batch_and_a_model_file(tmp_path):
    # after the first call the plain weight is let go for the packed panels;
    # batch 4 then runs oneDNN's kernel reordered from the panels, batch 1
    # the panels again, and a saved model carries them
    torch.manual_seed(6)
    m = nn.Sequential(nn.Flatten(), nn.Linear(128, 100)).eval()
    x1 = torch.randn(1, 2, 64)
    c = llga.optimize(torch.jit.trace(m, x1), [x1])
    for x in (x1, x1, torch.randn(4, 2, 64), x1, torch.randn(3, 2, 64), x1):
        with torch.no_grad():
            np.testing.assert_allclose(c(x.numpy()), m(x).numpy(), rtol=1e-5, atol=1e-5)
    c.save(tmp_path / "m.llga")
    loaded = llga.load(tmp_path / "m.llga")
    for x in (x1, torch.randn(2, 2, 64), x1):
        with torch.no_grad():
            np.testing.assert_allclose(loaded(x.numpy()), m(x).numpy(), rtol=1e-5, atol=1e-5)
    assert any(OWN in i for i in impls(loaded)) == own_expected(), impls(loaded)
    # the other way round: compacted into oneDNN's layout by a batch of 4 first, then packed from it
    c4 = llga.optimize(torch.jit.trace(m, x1), [x1])
    for x in (torch.randn(4, 2, 64), torch.randn(4, 2, 64), x1, x1):
        with torch.no_grad():
            np.testing.assert_allclose(c4(x.numpy()), m(x).numpy(), rtol=1e-5, atol=1e-5)
    assert any(OWN in i for i in impls(c4)) == own_expected(), impls(c4)
