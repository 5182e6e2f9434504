"""specialize-inputs: a scripted program's rank and dtype queries answered
from the example inputs, dead branches gone before the unsupported-op check,
and another specialization compiled when a call's inputs differ."""

from typing import Optional

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import llga


def _branchy(x: torch.Tensor) -> torch.Tensor:
    if x.dim() == 4:
        return F.interpolate(x, scale_factor=2.0, mode="nearest") * 2
    if x.dtype == torch.float64:
        return torch.special.erfcx(x)  # no llga kernel: a dead branch for float32 inputs
    if x.is_floating_point():
        return x.sum(-1)
    return x * 3


def test_dead_branches_go_and_other_ranks_respecialize():
    s = torch.jit.script(_branchy)
    with pytest.raises(llga.UnsupportedOpError, match="aten::special_erfcx"):
        llga.optimize(s)  # without examples every branch stays
    x4 = torch.randn(1, 2, 3, 3)
    c = llga.optimize(s, (x4,))
    assert "llga::Guard" in str(c.graph) and "aten::special_erfcx" not in str(c.graph)
    np.testing.assert_array_equal(c(x4.numpy()), s(x4).numpy())
    x2 = torch.randn(3, 5)
    # a sum of 5 in another order: a few ulp of the summands', not of a result near 0
    np.testing.assert_allclose(c(x2.numpy()), s(x2).numpy(), rtol=1e-6, atol=1e-6)
    xi = torch.randint(-5, 5, (2, 3))
    np.testing.assert_array_equal(c(xi.numpy()), s(xi).numpy())
    assert len(c._specializations) == 2  # (rank 2, float32) and (rank 2, int64)
    np.testing.assert_allclose(c(x2.numpy()), s(x2).numpy(), rtol=1e-6, atol=1e-6)  # reused, not recompiled
    assert len(c._specializations) == 2
    with pytest.raises(llga.UnsupportedOpError, match="aten::special_erfcx"):  # this branch is live for float64
        c(x2.double().numpy())
    np.testing.assert_array_equal(c(x4.numpy()), s(x4).numpy())  # the first specialization still serves


def test_specializations_are_bounded():
    s = torch.jit.script(_branchy)
    c = llga.optimize(s, (torch.randn(1, 2, 3, 3),))
    for rank in range(1, 12):
        x = torch.randn(*([2] * rank))
        np.testing.assert_allclose(c(x.numpy()), s(x).numpy(), rtol=1e-5, atol=1e-5)
    assert len(c._specializations) == c.MAX_SPECIALIZATIONS


def test_guard_checks_every_call_of_the_plan():
    s = torch.jit.script(_branchy)
    c = llga.optimize(s, (torch.randn(3, 4),))
    with pytest.raises(llga.errors.SpecializationMismatch, match="specialized for rank 2"):
        c._impl.run([np.zeros((2, 2, 2), np.float32)])


def _defaults(x: torch.Tensor, scale: float = 2.0, n: int = 3, tag: Optional[str] = None) -> torch.Tensor:
    return x * scale + n + (0 if tag is None else len(tag))


class _ContiguousOfAWrittenValue(torch.nn.Module):
    # PyTorch lays v out in x's order: for a row-major x, c is v itself and
    # sees the mul_; for a transposed x, c is a copy and does not
    def forward(self, x):
        v = x * 2.0
        c = v.contiguous()
        v.mul_(3.0)
        return c + 0.0


class _PermutedPieceWritten(torch.nn.Module):
    # graph fuzzer seed 454649 (scripted, compiled without examples): a piece
    # of a split, permuted, then relu6 and contiguous, and a write into the
    # relu6 through a slice: the copy must not see it
    def forward(self, x):
        a = torch.split(x, 3, 1)[0].permute(0, 2, 1)
        r = F.relu6(a)
        c = r.contiguous()
        r[:, :2].mul_(-1.0)
        return c * 1.0, r + 0.0


def _orders():
    rng = np.random.default_rng(3)
    row_major = rng.standard_normal((2, 6, 5), dtype=np.float32)
    transposed = rng.standard_normal((2, 5, 6), dtype=np.float32).transpose(0, 2, 1)
    outer = rng.standard_normal((6, 5, 2), dtype=np.float32).transpose(2, 0, 1)
    return {"row-major": row_major, "transposed": transposed, "batch innermost": outer}


@pytest.mark.parametrize("cls", [_ContiguousOfAWrittenValue, _PermutedPieceWritten])
@pytest.mark.parametrize("example", [None, "row-major", "transposed"])
def test_what_contiguous_aliases_follows_each_calls_memory_order(cls, example):
    s = torch.jit.script(cls())
    arrays = _orders()
    c = llga.optimize(s, None if example is None else [arrays[example]])
    assert "orders=" in str(c.graph)  # observable-layouts guards the order it took
    for order, x in list(arrays.items()) * 2:  # the second round reuses the specializations
        want = s(torch.from_numpy(x))
        got = c(x)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-6, atol=1e-6, err_msg=f"called in {order} order")
    taken = {"row-major" if example is None else example}
    assert len(c._specializations) == len(set(arrays) - taken)


class _ConvReshapedThenWritten(torch.nn.Module):
    # graph fuzzer seed 501074: PyTorch's convolution of a channels-last
    # input is channels-last, so the reshape copies and misses the relu_
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 3, 3, 3) * 0.3)

    def forward(self, x):
        v = F.conv2d(x, self.w, None, 1, 1)
        r = v.reshape(v.shape[0], -1)
        v.relu_()
        return r * 1.0


class _WhereThenChannelsLastWritten(torch.nn.Module):
    # where() and the comparison in it follow x's order (seed 501131's pattern without its loop),
    # and a product with a row-major weight follows its first operand (seed 500944)
    def __init__(self):
        super().__init__()
        self.register_buffer("k", torch.rand(2, 3, 4, 5) + 0.5)

    def forward(self, x):
        w = torch.where(x > 0.2, x, x * 0.3) * self.k
        c = w.contiguous(memory_format=torch.channels_last)
        c.mul_(1.5)
        return w + 0.0, c + 0.0


class _LoopValueReshapedThenWritten(torch.nn.Module):
    # a loop-carried value: its order is not followed, so only row-major inputs are taken
    def forward(self, x):
        v = x * 1.0
        for _ in range(2):
            v = torch.tanh(v) + x * 0.5
        r = v.reshape(v.shape[0], -1)
        v.relu_()
        return r * 1.0


def _images():
    rng = np.random.default_rng(4)
    row_major = rng.standard_normal((2, 3, 4, 5), dtype=np.float32)
    channels_last = np.ascontiguousarray(rng.standard_normal((2, 3, 4, 5), dtype=np.float32).transpose(0, 2, 3, 1))
    return {"row-major": row_major, "channels-last": channels_last.transpose(0, 3, 1, 2)}


@pytest.mark.parametrize("cls", [_ConvReshapedThenWritten, _WhereThenChannelsLastWritten])
def test_convolutions_where_and_products_follow_a_channels_last_call(cls):
    s = torch.jit.script(cls().eval())
    c = llga.optimize(s)
    for order, x in _images().items():
        with torch.no_grad():
            want = s(torch.from_numpy(x))
        got = c(x)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-5, err_msg=f"called {order}")


def test_an_order_the_pass_cannot_follow_is_refused_clearly():
    s = torch.jit.script(_LoopValueReshapedThenWritten())
    c = llga.optimize(s)
    images = _images()
    with torch.no_grad():
        np.testing.assert_allclose(c(images["row-major"]), s(torch.from_numpy(images["row-major"])).numpy(), rtol=1e-6)
    with pytest.raises(llga.errors.SpecializationMismatch, match=r"row-major inputs.*C-contiguous"):
        c(images["channels-last"])
    with pytest.raises(llga.errors.SpecializationMismatch, match="C-contiguous"):  # compiled for such examples
        llga.optimize(s, [images["channels-last"]])


def test_a_saved_model_refuses_an_order_it_was_not_compiled_for(tmp_path):
    s = torch.jit.script(_ContiguousOfAWrittenValue())
    arrays = _orders()
    c = llga.optimize(s, [arrays["row-major"]])
    c.save(tmp_path / "m.llga")
    loaded = llga.load(tmp_path / "m.llga")
    np.testing.assert_array_equal(loaded(arrays["row-major"]), c(arrays["row-major"]))
    with pytest.raises(llga.errors.SpecializationMismatch, match=r"strides \(30, 1, 6\).*order \(0, 1, 2\)"):
        loaded(arrays["transposed"])


def test_traced_modules_keep_their_traced_aliasing_in_any_order():
    # a trace records the mul_ on what aliased at the trace (c itself), so the
    # traced module multiplies c whatever the order; llga follows the trace
    arrays = _orders()
    t = torch.jit.trace(_ContiguousOfAWrittenValue(), torch.from_numpy(arrays["row-major"]))
    c = llga.optimize(t, [arrays["row-major"]])
    assert "orders=" not in str(c.graph)
    for order, x in arrays.items():
        np.testing.assert_allclose(c(x), t(torch.from_numpy(x)).numpy(), rtol=1e-6, err_msg=order)


def test_trailing_defaults_come_from_the_schema():
    s = torch.jit.script(_defaults)
    c = llga.optimize(s)
    x = torch.randn(3)
    np.testing.assert_allclose(c(x.numpy()), s(x).numpy(), rtol=1e-6)
    np.testing.assert_allclose(c(x.numpy(), 0.5), s(x, 0.5).numpy(), rtol=1e-6)
    with pytest.raises(llga.InputError, match="takes 4 input"):
        c()
