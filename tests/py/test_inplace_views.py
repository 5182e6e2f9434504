"""In-place ops on views: a write reaches exactly the memory PyTorch's reaches,
never the caller's arrays, and an in-place op whose input partially overlaps
what it writes is refused as PyTorch refuses it. Found by the graph fuzzer and
by probes of the rewrites that replace a value with its input."""

import importlib.util

import numpy as np
import pytest
import torch

import llga


# Writes through a view of a value that a rewrite replaced by its input: prepare-binary dropped
# x * 1 and canonicalize folded neg(neg(x)) although the result was written through a slice of
# it, so the write went into the caller's array. And (seed 161347) an in-place op on every
# other row of a tensor: strides that do not nest, which oneDNN cannot describe.
class _ViewOfMulByOneWritten(torch.nn.Module):
    def forward(self, x):
        v = (x * 1.0)[:, :, 0::2]
        v.relu_()
        return v, x * 1.0


class _ViewOfDoubleNegationWritten(torch.nn.Module):
    def forward(self, x):
        y = torch.neg(torch.neg(x))
        y[:, 0].mul_(2.0)
        return y + 0.0


class _InPlaceOnEveryOtherRow(torch.nn.Module):
    def forward(self, x):
        v = torch.sigmoid(x)[:, :, 0::2]
        v.clamp_(0.2, 0.7)
        w = (x + 1.0)[:, :, 1::2]
        w.mul_(w)
        return v, w


# canonicalize's rules that read a value later than the graph did or hand out
# another alias of it: (seed 422060) reshape(reshape(narrow(x))) with the inner
# result written by sigmoid_ (the outer one, its view, shows the write; a
# reshape of the narrow, a copy, did not), and softmax(s - max(s)) ->
# softmax(s) with s's base written through another view before the softmax.
class _ReshapeOfAWrittenReshape(torch.nn.Module):
    def forward(self, x):
        n = (x * 1.0).narrow(3, 1, 2)  # not contiguous: the reshape below copies
        v6 = n.reshape(n.shape[0], -1)
        v7 = v6.reshape(v6.shape[0], -1)
        v6.sigmoid_()
        return v7


class _ShiftedSoftmaxOfAWrittenBase(torch.nn.Module):
    def forward(self, x):
        base = x * 2.0
        v = base.view(-1)
        s = base.narrow(1, 0, 16)
        d = s - s.max(dim=-1, keepdim=True)[0]
        v.mul_(v)
        return torch.softmax(d, -1), v


@pytest.mark.parametrize("cls", [_ViewOfMulByOneWritten, _ViewOfDoubleNegationWritten, _InPlaceOnEveryOtherRow,
                                 _ReshapeOfAWrittenReshape, _ShiftedSoftmaxOfAWrittenBase])
def test_a_write_through_a_view_reaches_only_what_pytorchs_does(cls):
    m = cls().eval()
    x = torch.randn(2, 24, 6, 3)
    c = llga.optimize(torch.jit.trace(m, x), [x])
    for shape in ((2, 24, 6, 3), (2, 24, 5, 3), (1, 24, 7, 5)):  # 5 rows, every other: strides 6, 1 over 3x3
        xs = torch.randn(*shape)
        a = xs.numpy().copy()
        with torch.no_grad():
            want = m(xs.clone())
        got = c(a)
        np.testing.assert_array_equal(a, xs.numpy())  # the caller's array is not written
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-6, atol=1e-6)


class _DoubleNegation(torch.nn.Module):
    def forward(self, x):
        return torch.neg(torch.neg(x))


def test_double_negation_of_an_input_is_a_new_array():
    # PyTorch's neg(neg(x)) is a new tensor: llga must not hand the caller's own array back
    x = torch.randn(2, 3)
    c = llga.optimize(torch.jit.trace(_DoubleNegation(), x), [x])
    a = np.random.default_rng(3).standard_normal((2, 3)).astype(np.float32)
    got = c(a)
    np.testing.assert_array_equal(got, a)
    assert not np.shares_memory(got, a)


# PyTorch refuses an in-place op whose input partially overlaps the tensor it
# writes (both dense, ranges intersecting, not the same view); llga computed
# an answer that depended on its loop order. Same view, disjoint slices and a
# fresh operand still run.
OVERLAPS = {
    "y[1:].add_(y[:-1])": True,
    "y[:-1].sub_(y[1:])": True,
    "y[1:].mul_(y[:-1])": True,
    "y[:3, :3].add_(y[:3, :3].t())": True,
    "y[1:].copy_(y[:-1])": True,
    "y[:3, :3].copy_(y[:3, :3].t())": True,
    "y.add_(y[0])": True,
    "y.add_(y)": False,
    "y[2:].add_(y[:2])": False,
    "y[:, 1:].div_(y[:, :-1] + 5.0)": False,
    "y[1:].masked_fill_(y[:-1] > 0, 1.0)": False,
}


def _scripted(body, tmp_path):
    path = tmp_path / "prog.py"
    path.write_text("import torch\n\n\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
                    f"        y = x * 2.0\n        {body}\n        return y\n")
    spec = importlib.util.spec_from_file_location("prog", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.M()


@pytest.mark.parametrize("body", list(OVERLAPS))
def test_partial_overlap_in_place_is_refused_as_pytorch_refuses_it(body, tmp_path):
    m = _scripted(body, tmp_path)
    x = torch.randn(4, 3)
    if OVERLAPS[body]:
        with pytest.raises(RuntimeError, match="refer to a single memory location"):
            m(x.clone())
        # at the call, or already when optimize runs the example inputs through the graph
        with pytest.raises(llga.LlgaError, match=r"aten::\w+_ at .*prog.py.*refer to a single memory location"):
            llga.optimize(torch.jit.script(m), [x])(x.numpy().copy())
        with pytest.raises(llga.ExecutionError, match=r"aten::\w+_ at .*prog.py.*refer to a single memory location"):
            llga.optimize(torch.jit.script(m))(x.numpy().copy())
    else:
        c = llga.optimize(torch.jit.script(m), [x])
        np.testing.assert_allclose(c(x.numpy().copy()), m(x.clone()).numpy(), rtol=1e-6, atol=1e-6)
