"""Binary ops on operands oneDNN's binary cannot take as they lie (strided
views, broadcasts of the first operand, strided in-place destinations) run in
llga's own strided loop (ops/binary.cpp: stridedBinaryF32): rows shared among
the threads in ranges, each range's rows found by an odometer, long rows in
chunks. Every case is checked against PyTorch, at sizes that run on one
thread and on two, with row counts that do not divide into the ranges."""

import numpy as np
import pytest
import torch
from torch import nn

import llga


def check(model, *xs):
    with torch.no_grad():
        traced = torch.jit.trace(model.eval(), [x.clone() for x in xs], check_trace=False)
        ref = model(*[x.clone() for x in xs])
    compiled = llga.optimize(traced)
    for _ in range(2):  # the second call runs on the memory plan
        out = compiled(*[x.numpy().copy() for x in xs])
        np.testing.assert_allclose(out, ref.numpy(), rtol=1e-6, atol=1e-6)


class ScaledHeads(nn.Module):
    """Swin's q: a head of a packed qkv product (a strided view of rows of
    `head` floats) times a 0-dim scale computed from a size."""

    def __init__(self, windows, tokens, heads, head):
        super().__init__()
        self.shape = (windows, tokens, 3, heads, head)

    def forward(self, qkv, c):
        q = qkv.reshape(self.shape).permute(2, 0, 3, 1, 4)[0]
        return q * (c.size(0) // self.shape[3]) ** -0.5


@pytest.mark.parametrize("windows,tokens,heads,head", [(64, 49, 3, 32), (4, 49, 12, 32), (2, 7, 3, 5), (33, 13, 2, 3)])
def test_scaled_head_view(windows, tokens, heads, head):
    qkv = torch.randn(windows, tokens, 3 * heads * head)
    check(ScaledHeads(windows, tokens, heads, head), qkv, torch.randn(heads * head))


class Op(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


OPS = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "max": torch.maximum,
    "min": torch.minimum,
}


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("shape", [(5, 6, 7, 9), (40, 30, 17, 3), (3, 2, 41000)])
def test_transposed_operands(op, shape):
    # a transposed view and a broadcast row: no two dims merge, or (the last
    # shape) rows longer than a chunk of 16384
    fn = OPS[op]

    def f(x, y):
        return fn(x.transpose(0, 1), y[:1])

    x = torch.randn(shape[1], shape[0], *shape[2:])
    y = torch.rand(2, *shape[1:]) + 0.5
    check(Op(f), x, y)


@pytest.mark.parametrize("op", ["add", "sub", "mul"])
@pytest.mark.parametrize("shape", [(2, 3, 5, 5), (4, 8, 65, 65), (1, 2, 3, 33000)])
def test_first_operand_broadcasts(op, shape):
    fn = OPS[op]

    def f(row, x):
        return fn(row, x.transpose(1, 2))

    x = torch.randn(shape[0], shape[2], shape[1], shape[3])
    row = torch.randn(1, 1, 1, shape[3])
    check(Op(f), row, x)


@pytest.mark.parametrize("shape", [(1, 3, 8, 8), (2, 8, 50, 50), (1, 2, 3, 20000)])
def test_in_place_into_a_strided_slice(shape):
    # mvit's attn[:, :, 1:, 1:] += rel_pos: a destination whose rows are apart
    def f(attn, rel):
        attn[:, :, 1:, 1:] += rel
        return attn * 1.0

    attn = torch.randn(*shape)
    rel = torch.randn(shape[0], shape[1], shape[2] - 1, shape[3] - 1)
    check(Op(f), attn, rel)


@pytest.mark.parametrize("width", [9, 33, 1001])
def test_every_other_column_of_odd_rows(width):
    # steps that interleave: x[..., ::2] of an odd width
    def f(x, y):
        x[..., ::2] *= y
        return x + 0.0

    x = torch.randn(7, 5, width)
    y = torch.randn(5, (width + 1) // 2)
    check(Op(f), x, y)
