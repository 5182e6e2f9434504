"""Values that depend on the input shapes alone (passes/mark_shape_only.cpp)
are computed on the first call of each input signature and kept with its
memory plan; later calls of that signature skip the ops that made them
(ShapeValues in runtime/plan.h). Checked against PyTorch call after call, as
the signature changes and comes back, under batch splitting, from several
threads at once, and for what a caller may write into."""

import threading

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import llga


class ShiftedMask(nn.Module):
    """Swin's shifted-window mask, rebuilt from the input's size each call,
    added to the data (x: [B, 16, n, n], n a multiple of the window 4)."""

    def __init__(self, window=4, shift=2):
        super().__init__()
        self.window, self.shift = window, shift

    def forward(self, x):
        n = x.size(-1)
        m = x.new_zeros((n, n))
        cuts = ((0, -self.window), (-self.window, -self.shift), (-self.shift, None))
        count = 0
        for h in cuts:
            for w in cuts:
                m[h[0]:h[1], w[0]:w[1]] = count
                count += 1
        m = m.view(n // self.window, self.window, n // self.window, self.window).permute(0, 2, 1, 3)
        m = m.reshape(-1, self.window * self.window)
        m = m.unsqueeze(1) - m.unsqueeze(2)
        m = m.masked_fill(m != 0, -100.0).masked_fill(m == 0, 0.0)
        scale = (x.size(1) // 2) ** -0.5
        scores = x.reshape(x.size(0), -1, m.size(-1), m.size(-1))  # [B, windows, L, L] for 16 channels
        return torch.softmax(scores * scale + m, -1)


def ops_run(compiled, x):
    with llga.profiler.profile():
        out = compiled(x)
    names = [e["name"] for e in llga.profiler.events() if e["depth"] >= 0]
    llga.profiler.clear()
    return out, names


def reference(model, x):
    with torch.no_grad():
        return model(torch.from_numpy(x)).numpy()


def compiled_mask(seed, split="off"):
    torch.manual_seed(seed)
    model = ShiftedMask().eval()
    compiled = llga.optimize(torch.jit.trace(model, torch.randn(1, 16, 8, 8)))
    compiled.set_batch_split(split)
    return model, compiled, np.random.default_rng(seed)


def test_mask_is_built_once_per_signature():
    model, compiled, rng = compiled_mask(0)
    shapes = [(1, 16, 8, 8), (1, 16, 8, 8), (1, 16, 8, 8), (2, 16, 12, 12), (2, 16, 12, 12), (1, 16, 8, 8), (2, 16, 12, 12)]
    seen = set()
    for shape in shapes:
        x = rng.standard_normal(shape, dtype=np.float32)
        out, names = ops_run(compiled, x)
        np.testing.assert_allclose(out, reference(model, x), rtol=1e-5, atol=1e-6)
        built = "aten::masked_fill" in names and "aten::new_zeros" in names
        assert built == (shape not in seen), (shape, names)  # built on a signature's first call only
        assert "aten::softmax" in names or any(n.startswith("llga::") for n in names)  # the data path runs
        seen.add(shape)


def test_marked_in_the_compiled_graph():
    compiled = llga.optimize(torch.jit.trace(ShiftedMask().eval(), torch.randn(1, 16, 8, 8)))
    text = str(compiled.graph)
    assert "aten::new_zeros[shape_only=1]" in text and "aten::masked_fill[shape_only=1]" in text
    assert "aten::softmax[shape_only=1]" not in text


def test_batch_split_chunks_keep_their_own():
    model, compiled, rng = compiled_mask(1, split="auto")
    for _ in range(12):  # the split measures chunk sizes as it goes: several signatures
        x = rng.standard_normal((9, 16, 8, 8), dtype=np.float32)
        np.testing.assert_allclose(compiled(x), reference(model, x), rtol=1e-5, atol=1e-6)


def test_threads_racing_on_the_first_call():
    model, compiled, rng = compiled_mask(2)
    xs = [rng.standard_normal((2, 16, 8, 8), dtype=np.float32) for _ in range(4)]
    errors = []

    def work(x):
        try:
            for _ in range(5):
                np.testing.assert_allclose(compiled(x), reference(model, x), rtol=1e-5, atol=1e-6)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(x,)) for x in xs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


class ReturnsShapeTensor(nn.Module):
    def forward(self, x):
        ramp = torch.arange(x.size(1), dtype=torch.float32)
        offsets = torch.zeros(x.size(1)) + 1.0
        return x + offsets, ramp * 2, offsets.view(1, -1)


def test_returned_shape_values_are_the_callers_own():
    compiled = llga.optimize(torch.jit.trace(ReturnsShapeTensor(), torch.randn(2, 5)))
    x = np.ones((2, 5), np.float32)
    for _ in range(4):
        y, ramp, offsets = compiled(x)
        np.testing.assert_array_equal(y, np.full((2, 5), 2, np.float32))
        np.testing.assert_array_equal(ramp, np.arange(5, dtype=np.float32) * 2)
        np.testing.assert_array_equal(offsets, np.ones((1, 5), np.float32))
        ramp[...] = -1  # a caller writing into what it got changes nothing for the next call
        offsets[...] = -1


class WritesIntoShapeTensor(nn.Module):
    def forward(self, x):
        acc = torch.zeros(x.size(0), x.size(1))
        acc.add_(x)  # data written into a tensor made from sizes
        base = torch.ones(x.size(1))
        early = x * base  # read before the fill below
        base.fill_(3.0)
        return acc * 2, early + base


def test_tensors_written_with_data_are_rebuilt():
    model = WritesIntoShapeTensor()
    compiled = llga.optimize(torch.jit.script(model))
    rng = np.random.default_rng(3)
    for _ in range(4):
        x = rng.standard_normal((3, 4), dtype=np.float32)
        acc, out = compiled(x)
        ref_acc, ref_out = model(torch.from_numpy(x))
        np.testing.assert_allclose(acc, ref_acc.numpy(), rtol=1e-6)
        np.testing.assert_allclose(out, ref_out.numpy(), rtol=1e-6)


@pytest.mark.parametrize("size", [224, 256])
def test_swin_block_sizes(size):
    # torchvision's shifted-window attention at a size whose windows need no
    # padding and at one whose windows do (its pads, roll and mask all shape-only)
    from torchvision.models.swin_transformer import ShiftedWindowAttention

    torch.manual_seed(4)
    block = ShiftedWindowAttention(32, [7, 7], [3, 3], 4).eval()
    side = size // 16
    x = torch.randn(1, side, side, 32)
    compiled = llga.optimize(torch.jit.trace(block, x))
    for s in (side, side + 3, side):
        xi = torch.randn(1, s, s, 32)
        with torch.no_grad():
            want = block(xi).numpy()
        for _ in range(2):
            np.testing.assert_allclose(compiled(xi.numpy()), want, rtol=1e-4, atol=1e-5)
