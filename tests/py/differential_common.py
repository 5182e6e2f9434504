"""Generators shared by the differential op test (test_differential.py) and
its case tables (differential_*.py): tensors of random shape (0-size dims
included) and layout (plain, transposed, sliced), broadcasting pairs, and
Case, one op's function plus the strategy for its inputs."""

import os

import torch
from hypothesis import strategies as st

EXAMPLES = int(os.environ.get("LLGA_OPS_EXAMPLES", "200"))
DTYPES = {"float32": torch.float32, "int64": torch.int64, "bool": torch.bool}

# ---------------------------------------------------------------- generators


@st.composite
def shapes(draw, min_dims=0, max_dims=4):
    return tuple(draw(st.lists(st.integers(0, 5), min_size=min_dims, max_size=max_dims)))


@st.composite
def tensors(draw, dtype, shape=None, positive=False):
    """A tensor of `shape` (drawn if None), possibly a transposed or sliced view."""
    shape = draw(shapes()) if shape is None else shape
    layout = draw(st.sampled_from(["plain", "transposed", "sliced"]))
    full = list(shape)
    if layout == "sliced" and full:
        full[-1] = full[-1] * 2
    if layout == "transposed" and len(full) >= 2:
        full[-1], full[-2] = full[-2], full[-1]
    seed = draw(st.integers(0, 2**31 - 1))
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        t = torch.rand(full, generator=g) > 0.5
    elif dtype == torch.int64:
        t = torch.randint(-6, 7, full, generator=g)
    else:
        t = torch.randn(full, generator=g) * 3
        if positive:
            t = t.abs() + 0.1
    if layout == "sliced" and full:
        t = t[..., ::2]
    if layout == "transposed" and len(full) >= 2:
        t = t.transpose(-1, -2)
    assert tuple(t.shape) == tuple(shape)
    return t


seeds = st.integers(0, 2**31 - 1)


def rare(draw):
    """True about one draw in twelve: an operand PyTorch rejects."""
    return draw(st.integers(0, 11)) == 0


@st.composite
def relayout(draw, t):
    """t's values in a random layout: plain, transposed or sliced."""
    layout = draw(st.sampled_from(["plain", "transposed", "sliced"]))
    if layout == "transposed" and t.dim() >= 2:
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    if layout == "sliced" and t.dim() >= 1:
        return t.repeat_interleave(2, -1)[..., ::2]
    return t


@st.composite
def broadcast_pair(draw, dtype_a, dtype_b):
    shape = draw(shapes(1, 4))
    other = [d if draw(st.booleans()) else 1 for d in shape]
    other = other[draw(st.integers(0, len(other))):]
    if draw(st.booleans()):
        shape, other = tuple(other), tuple(shape)
    return draw(tensors(dtype_a, tuple(shape))), draw(tensors(dtype_b, tuple(other)))


class Case:
    """fn(*tensors), traced once per rank combination (scripted with
    script=True); args(dtype) a strategy for its inputs. The op kind the case
    is filed under must appear in the imported graph (``kinds`` names other
    kinds that must appear too)."""

    def __init__(self, fn, args, rtol=1e-4, atol=1e-5, script=False, kinds=(), ir=None):
        self.fn, self.args, self.rtol, self.atol = fn, args, rtol, atol
        self.script, self.kinds = script, tuple(kinds)
        # ir: TorchScript IR text llga compiles instead of tracing fn (for op
        # kinds PyTorch's tracer and scripting rename, e.g. swapaxes ->
        # transpose, that still occur in the graphs of real models).
        self.ir = ir


def unary(fn, positive=False, **kw):
    return Case(fn, lambda dt: st.tuples(tensors(dt, positive=positive)), **kw)


def binary(fn, **kw):
    return Case(fn, lambda dt: broadcast_pair(dt, dt), **kw)


def reduction(fn, **kw):
    return Case(fn, lambda dt: st.tuples(tensors(dt, None)), **kw)


def ranked(fn, **kw):
    """Inputs of rank 2..4 with a non-empty first and second dim."""
    return Case(fn, lambda dt: st.tuples(tensors(dt, None)).filter(
        lambda a: a[0].dim() >= 2 and a[0].shape[0] > 0 and a[0].shape[1] > 0), **kw)


def last_dim(fn, **kw):
    """Inputs of rank >= 1 with a non-empty last dim."""
    return Case(fn, lambda dt: st.tuples(tensors(dt, None)).filter(lambda a: a[0].dim() >= 1 and a[0].shape[-1] > 0), **kw)
