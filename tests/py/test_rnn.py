"""nn.LSTM / nn.GRU / nn.RNN against PyTorch: on oneDNN's RNN primitives, every
configuration a traced module can have (layers, directions, batch_first,
initial state or not, LSTM projections, unbatched input)."""

import itertools

import numpy as np
import pytest
import torch

import llga

CELLS = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU, "rnn_tanh": torch.nn.RNN, "rnn_relu": torch.nn.RNN}


def flat(v):
    if isinstance(v, (tuple, list)):
        for u in v:
            yield from flat(u)
    else:
        yield v


def run_case(cell, layers, bidirectional, batch_first, initial, proj=0, batched=True, grad=False):
    torch.manual_seed(layers * 7 + bidirectional * 3 + batch_first)
    kw = {"nonlinearity": "relu"} if cell == "rnn_relu" else {}
    if proj:
        kw["proj_size"] = proj
    m = CELLS[cell](4, 6, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first, **kw).eval()
    T, N, D = 5, 3, 2 if bidirectional else 1
    x = torch.randn((N, T, 4) if batch_first else (T, N, 4)) if batched else torch.randn(T, 4)
    args = (x,)
    if initial:
        hshape = (layers * D, N) if batched else (layers * D,)
        h = torch.randn(*hshape, proj or 6)
        args = (x, (h, torch.randn(*hshape, 6)) if cell == "lstm" else h)
    with torch.set_grad_enabled(grad):
        traced = torch.jit.trace(m, args)
    with torch.no_grad():
        want = m(*args)
    compiled = llga.optimize(traced)
    got = compiled(*[a.numpy() if isinstance(a, torch.Tensor) else tuple(b.numpy() for b in a) for a in args])
    pairs = list(zip(flat(got), flat(want)))
    assert len(pairs) == (3 if cell == "lstm" else 2)
    for g, w in pairs:
        w = w.numpy()
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    return compiled


@pytest.mark.parametrize(
    "cell,layers,bidirectional,batch_first,initial",
    list(itertools.product(CELLS, [1, 2, 3], [False, True], [False, True], [False, True])),
)
def test_recurrent(cell, layers, bidirectional, batch_first, initial):
    run_case(cell, layers, bidirectional, batch_first, initial)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_lstm_projection(bidirectional):
    run_case("lstm", 2, bidirectional, True, True, proj=3)
    run_case("lstm", 2, bidirectional, False, False, proj=3)


@pytest.mark.parametrize("cell", list(CELLS))
def test_unbatched_and_with_grad(cell):
    run_case(cell, 2, True, False, True, batched=False)
    run_case(cell, 1, False, True, False, grad=True)


@pytest.mark.parametrize("cell,primitive", [("lstm", "lstm"), ("gru", "lbr_gru"), ("rnn_tanh", "vanilla_rnn")])
def test_runs_on_onednn_rnn_primitives(cell, primitive):
    compiled = run_case(cell, 1, False, False, False)
    llga.profiler.kernel_log.clear()
    llga.profiler.kernel_log.enable()
    try:
        compiled(np.zeros((5, 3, 4), np.float32))
    finally:
        llga.profiler.kernel_log.disable()
    entries = [e for e in llga.profiler.kernel_log.entries() if e["op"] == "aten::" + cell]
    llga.profiler.kernel_log.clear()
    assert len(entries) == 1 and entries[0]["primitive"] == primitive, entries
    assert entries[0]["impl"]  # oneDNN names the implementation it ran


def test_shapes_change_between_calls():
    m = torch.nn.LSTM(4, 6, num_layers=2).eval()
    traced = torch.jit.trace(m, torch.randn(5, 3, 4))
    compiled = llga.optimize(traced)
    for T, N in [(5, 3), (9, 1), (2, 7)]:
        x = torch.randn(T, N, 4)
        with torch.no_grad():
            want = m(x)
        got = compiled(x.numpy())
        for g, w in zip(flat(got), flat(want)):
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-5)


def test_bad_state_is_a_clear_error():
    m = torch.nn.GRU(4, 6).eval()
    traced = torch.jit.trace(m, (torch.randn(5, 3, 4), torch.randn(1, 3, 6)))
    compiled = llga.optimize(traced)
    with pytest.raises(Exception, match="initial state"):
        compiled(np.zeros((5, 3, 4), np.float32), np.zeros((2, 3, 6), np.float32))


class Packed(torch.nn.Module):
    def __init__(self, cell, batch_first, bidirectional, layers):
        super().__init__()
        self.batch_first = batch_first
        self.rnn = CELLS[cell](4, 5, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first)

    def forward(self, x, lengths):
        packed = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=self.batch_first, enforce_sorted=False)
        out, h = self.rnn(packed)
        y, out_lengths = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=self.batch_first,
                                                                total_length=x.size(1 if self.batch_first else 0))
        return y, h, out_lengths


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn_tanh"])
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("bidirectional,layers", [(True, 2), (False, 1)])
def test_packed_sequences(cell, batch_first, bidirectional, layers):
    torch.manual_seed(1)
    m = Packed(cell, batch_first, bidirectional, layers).eval()
    x = torch.randn(3, 6, 4) if batch_first else torch.randn(6, 3, 4)
    with torch.no_grad():
        compiled = llga.optimize(torch.jit.trace(m, (x, torch.tensor([4, 6, 2])), check_trace=False))
    for lengths in ([4, 6, 2], [6, 1, 3], [2, 2, 2]):  # other lengths on the same compiled model
        L = torch.tensor(lengths)
        with torch.no_grad():
            want = m(x, L)
        got = compiled(x.numpy(), L.numpy())
        for g, w in zip(flat(got), flat(want)):
            assert g.shape == tuple(w.shape)
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-5)


_PROJECTION_AVX2 = """
import numpy as np, torch, llga
torch.manual_seed(0)
m = torch.nn.LSTM(3, 4, proj_size=2).eval().requires_grad_(False)
x, h, c = torch.randn(1, 2, 3), torch.randn(1, 2, 2), torch.randn(1, 2, 4)
def f(x, h, c):
    return m(x, (h, c))
with torch.no_grad():
    want = f(x, h, c)
    compiled = llga.optimize(torch.jit.trace(f, (x, h, c)))
got = compiled(x.numpy(), h.numpy(), c.numpy())
for g, w in zip((got[0], got[1][0], got[1][1]), (want[0], want[1][0], want[1][1])):
    np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-5)
print("parity ok")
"""


def test_lstm_projection_on_an_avx2_cpu():
    # On AVX2, oneDNN 2.6 picks its packed format for a small LSTM's
    # projection weights (T = 1, N = 2), and its reorder into that format
    # crashed the process; llga keeps projection weights plain.
    import os
    import subprocess
    import sys

    env = dict(os.environ, ONEDNN_MAX_CPU_ISA="AVX2", PYTHONPATH=os.path.dirname(os.path.dirname(llga.__file__)))
    r = subprocess.run([sys.executable, "-c", _PROJECTION_AVX2], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and "parity ok" in r.stdout, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
