"""The coverage models (llga.zoo.COVERAGE_MODELS: torchaudio's wav2vec2,
Conformer, ConvTasNet, DeepSpeech, Emformer, WaveRNN; an LSTM tagger, a GRU
encoder, nn.Transformer with a causal mask, a GPT-2-style einsum decoder)
match PyTorch, traced with and without torch.no_grad(), and WaveRNN scripted
and frozen. Speed is the benchmark's job (make bench-coverage)."""

import numpy as np
import pytest
import torch

import llga
from llga import zoo
from test_rnn import flat

TRACED = [m for m in zoo.COVERAGE_MODELS if m not in zoo.SCRIPTED_ONLY]


def assert_matches(got, want):
    pairs = list(zip(flat(got), flat(want)))
    assert pairs and len(pairs) == len(list(flat(want)))
    for g, w in pairs:
        w = w.detach().numpy()
        assert np.asarray(g).shape == w.shape and np.asarray(g).dtype == w.dtype
        assert np.abs(w).max() > 0  # a real reference
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * np.abs(w).max())


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("name", TRACED)
def test_traced_model_matches_pytorch(name, grad):
    model, inputs = zoo.coverage_model(name, batch=2)
    with torch.set_grad_enabled(grad):
        traced = torch.jit.trace(model, inputs, check_trace=False)
    with torch.no_grad():
        want = model(*inputs)
    compiled = llga.optimize(traced)
    assert_matches(compiled(*[x.numpy() for x in inputs]), want)
    # What oneDNN reports it ran: never its reference kernels (a fused chain
    # oneDNN can only run so is split, e.g. a mask shared across a batch).
    assert not [p for p in compiled.partitions if p.impl.startswith("ref")], [
        (p.ops, p.impl) for p in compiled.partitions if p.impl.startswith("ref")]


@pytest.mark.parametrize("form", ["scripted", "frozen"])
def test_wavernn_scripted_and_frozen(form):
    model, inputs = zoo.coverage_model("wavernn", batch=1)
    scripted = torch.jit.script(model)
    obj = torch.jit.freeze(scripted) if form == "frozen" else scripted
    with torch.no_grad():
        want = model(*inputs)
    assert_matches(llga.optimize(obj)(*[x.numpy() for x in inputs]), want)


@pytest.mark.parametrize("own", [True, False])
def test_recurrent_models_run_on_a_recurrent_kernel(own, monkeypatch):
    # llga's recurrence at this small batch where the CPU has AVX-512 (backend/dnnl/recurrent.h), else
    # (or with LLGA_OWN_RNN=0) oneDNN's LSTM primitive
    if not own:
        monkeypatch.setenv("LLGA_OWN_RNN", "0")
    model, inputs = zoo.coverage_model("lstm_tagger", batch=2)
    with torch.no_grad():
        compiled = llga.optimize(torch.jit.trace(model, inputs))
        want = model(*inputs)
    llga.profiler.kernel_log.clear()
    llga.profiler.kernel_log.enable()
    try:
        got = compiled(*[x.numpy() for x in inputs])
    finally:
        llga.profiler.kernel_log.disable()
    lstm = [e for e in llga.profiler.kernel_log.entries() if e["op"] == "aten::lstm"]
    llga.profiler.kernel_log.clear()
    expected = "llga recurrence" if own and llga.cpu_capabilities()["llga_recurrence"] else "lstm"
    assert len(lstm) == 1 and lstm[0]["primitive"] == expected and lstm[0]["impl"], lstm
    assert_matches(got, want)
