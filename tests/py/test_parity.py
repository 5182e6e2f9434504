"""Every corpus model runs in llga with PyTorch's answers (fp32, batch 1 and 3)."""

import numpy as np
import pytest
import torch
import torch.nn as nn

import corpus
import llga

TOL = 1e-4


def rel_err(got, want):
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    errs = []
    for g, w in zip(got, want):
        w = w.detach().numpy()
        assert g.shape == w.shape and g.dtype == w.dtype
        scale = np.abs(w).max()
        assert scale > 0, "a reference output is all zeros: the comparison would prove nothing"
        errs.append(float(np.abs(g - w).max() / scale))
    return max(errs)


@pytest.fixture(scope="module")
def compiled():
    cache = {}

    def get(model, form="traced"):
        if (model, form) not in cache:
            obj = corpus.traced(model)[1] if form == "traced" else corpus.frozen(model)
            cache[(model, form)] = llga.optimize(obj)
        return cache[(model, form)]

    return get


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("model", corpus.MODELS)
def test_model_parity(model, batch, compiled):
    _, traced = corpus.traced(model)
    inputs = corpus.example_inputs(model, batch)
    with torch.no_grad():
        want = traced(*inputs)
    got = compiled(model)(*[x.numpy() for x in inputs])
    assert rel_err(got, want) <= TOL


@pytest.mark.parametrize("model", ["resnet18", "mobilenet_v3_large", "vit_b_16", corpus.BERT])
def test_frozen_parity(model, compiled):
    inputs = corpus.example_inputs(model, 1)
    with torch.no_grad():
        want = corpus.frozen(model)(*inputs)
    got = compiled(model, "frozen")(*[x.numpy() for x in inputs])
    assert rel_err(got, want) <= TOL


def test_text_dump_with_weight_dict():
    """The torch-free path: graph.str() text plus {name: array}."""
    _, traced = corpus.traced("resnet18")
    graph, weights = llga.import_torch(traced)
    c = llga.optimize(str(graph), params={k: v.copy() for k, v in weights.items()})
    x = corpus.example_inputs("resnet18")[0]
    with torch.no_grad():
        want = traced(x)
    assert rel_err(c(x.numpy()), want) <= TOL


def test_missing_and_misshaped_weights_are_named():
    _, traced = corpus.traced("resnet18")
    graph, weights = llga.import_torch(traced)
    del weights["layer2.0.conv1.weight"]
    with pytest.raises(llga.CompileError, match=r"missing weight 'layer2\.0\.conv1\.weight'"):
        llga.optimize(graph, params=weights)
    graph, weights = llga.import_torch(traced)
    weights["fc.weight"] = np.zeros((10, 3), np.float32)
    c = llga.optimize(graph, params=weights)
    with pytest.raises(llga.ExecutionError, match=r"aten::linear.*input Float\(1, 512\) does not match weight Float\(10, 3\)"):
        c(corpus.example_inputs("resnet18")[0].numpy())


def test_scripted_control_flow_parity():
    m = torch.jit.script(corpus.Looping().eval())
    c = llga.optimize(m)
    x = torch.randn(2, 4)
    for n, extra in ((0, None), (3, torch.ones(2, 4)), (5, None)):
        want = m(x, n, "k", extra)
        got = c(x.numpy(), n, "k", None if extra is None else extra.numpy())
        assert np.isfinite(got[0]).all()
        assert np.allclose(got[0], want[0].detach().numpy(), rtol=1e-5, atol=1e-6)
        assert got[1] == want[1]
        assert set(got[2]) == set(want[2])
        for k in want[2]:
            assert np.allclose(got[2][k], want[2][k].numpy(), rtol=1e-5, atol=1e-6)


def test_scripted_functions_parity():
    f = torch.jit.script(corpus.tuples)
    x = torch.randn(4, 3)
    got = llga.optimize(f)(x.numpy(), (2, 1.5), None)
    want = f(x, (2, 1.5), None)
    assert np.allclose(got[0], want[0].numpy()) and got[1] == want[1]
    s = torch.jit.script(corpus.strings)
    assert llga.optimize(s)("-", ["a", "b"]) == s("-", ["a", "b"])


FUSED_ONLY = {"aten::_convolution", "aten::conv2d", "aten::batch_norm", "aten::relu", "aten::linear",
              "aten::avg_pool2d", "aten::max_pool2d"}
CNNS = [m for m in corpus.MODELS if m not in ("vit_b_16", "swin_t", corpus.BERT)]


@pytest.mark.parametrize("model", CNNS)
def test_cnn_heavy_ops_run_inside_partitions(model, compiled):
    c = compiled(model)
    top = c.graph.node_counts()  # the graph outside partitions (subgraphs are not counted)
    outside = {k: n for k, n in top.items() if k in FUSED_ONLY}
    assert outside == {}, f"left outside partitions: {outside}; why: {c.unfused}"
    assert len(c.partitions) > 0


@pytest.mark.parametrize("ic,oc,k,groups", [(256, 16, 3, 1), (512, 16, 1, 1), (64, 64, 3, 64), (96, 96, 3, 2)])
def test_residual_add_after_a_conv_is_as_exact_as_pytorch(ic, oc, k, groups):
    # conv(x) + r with r near 100 (RAFT's coords1 + delta_flow): oneDNN's direct jit
    # kernels start a sum post-op's accumulators from the residual, rounding every product
    # at its magnitude (20-60x PyTorch's error vs float64 on AVX2); llga must add after
    # the reduction, as PyTorch does, whichever kernel oneDNN picks on this CPU.
    torch.manual_seed(0)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(ic, oc, k, padding=k // 2, groups=groups)

        def forward(self, x, r):
            return self.conv(x) + r

    m = M().eval()
    x, r = torch.randn(1, ic, 16, 20), torch.randn(1, oc, 16, 20) * 0.01 + 100
    c = llga.optimize(torch.jit.trace(m, (x, r)), (x, r))
    assert [p.ops for p in c.partitions] == [["aten::_convolution", "aten::add"]]
    got = c(x.numpy(), r.numpy())
    with torch.no_grad():
        want = m(x, r).numpy()
        exact = m.double()(x.double(), r.double()).numpy()
    ulp = float(np.spacing(np.float32(100)))
    ours, theirs = np.abs(got - exact).max(), np.abs(want - exact).max()
    assert ours <= 2 * theirs + ulp, (ours, theirs, c.partitions[0].impl)
