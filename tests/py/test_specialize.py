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
        return torch.special.i0(x)  # no llga kernel: a dead branch for float32 inputs
    if x.is_floating_point():
        return x.sum(-1)
    return x * 3


def test_dead_branches_go_and_other_ranks_respecialize():
    s = torch.jit.script(_branchy)
    with pytest.raises(llga.UnsupportedOpError, match="aten::i0"):
        llga.optimize(s)  # without examples every branch stays
    x4 = torch.randn(1, 2, 3, 3)
    c = llga.optimize(s, (x4,))
    assert "llga::Guard" in str(c.graph) and "aten::i0" not in str(c.graph)
    np.testing.assert_array_equal(c(x4.numpy()), s(x4).numpy())
    x2 = torch.randn(3, 5)
    # a sum of 5 in another order: a few ulp of the summands', not of a result near 0
    np.testing.assert_allclose(c(x2.numpy()), s(x2).numpy(), rtol=1e-6, atol=1e-6)
    xi = torch.randint(-5, 5, (2, 3))
    np.testing.assert_array_equal(c(xi.numpy()), s(xi).numpy())
    assert len(c._specializations) == 2  # (rank 2, float32) and (rank 2, int64)
    np.testing.assert_allclose(c(x2.numpy()), s(x2).numpy(), rtol=1e-6, atol=1e-6)  # reused, not recompiled
    assert len(c._specializations) == 2
    with pytest.raises(llga.UnsupportedOpError, match="aten::i0"):  # this branch is live for float64
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


def test_trailing_defaults_come_from_the_schema():
    s = torch.jit.script(_defaults)
    c = llga.optimize(s)
    x = torch.randn(3)
    np.testing.assert_allclose(c(x.numpy()), s(x).numpy(), rtol=1e-6)
    np.testing.assert_allclose(c(x.numpy(), 0.5), s(x, 0.5).numpy(), rtol=1e-6)
    with pytest.raises(llga.InputError, match="takes 4 input"):
        c()
