"""compiled.memory and compiled.flops, checked against PyTorch's own modules."""

import numpy as np
import pytest
import torch

import corpus
import llga
import llga.flops


@pytest.fixture(scope="module")
def resnet18():
    model, traced = corpus.traced("resnet18")
    return model, llga.optimize(traced)


def torch_flops(model, x):
    """2 x multiply-adds of every Conv2d and Linear, from forward hooks."""
    total = []

    def hook(mod, inp, out):
        if isinstance(mod, torch.nn.Conv2d):
            k = mod.in_channels // mod.groups * mod.kernel_size[0] * mod.kernel_size[1]
            total.append(2 * out.numel() * k)
        elif isinstance(mod, torch.nn.Linear):
            total.append(2 * out.numel() * mod.in_features)

    handles = [m.register_forward_hook(hook) for m in model.modules()]
    with torch.no_grad():
        model(x)
    for h in handles:
        h.remove()
    return sum(total)


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2"])
def test_flops_match_pytorch_modules(name):
    model, traced = corpus.traced(name)
    compiled = llga.optimize(traced)
    flops, uncounted = llga.flops.count(compiled.graph)
    assert not uncounted
    assert flops == torch_flops(model, torch.randn(1, 3, 224, 224))
    assert compiled.flops == flops


def test_flops_of_bert_matmuls():
    model, traced = corpus.traced(corpus.BERT)
    flops, uncounted = llga.flops.count(llga.optimize(traced).graph)
    assert not uncounted
    # 2 layers, hidden 128, seq 16: 4 projections + 2 FFN linears + QK^T and PV, plus the pooler.
    ids, _ = corpus.example_inputs(corpus.BERT)
    s, h, f = ids.shape[1], 128, 512
    per_layer = 2 * s * (4 * h * h + 2 * h * f) + 2 * 2 * s * s * h
    assert flops == 2 * per_layer + 2 * h * h


def test_memory_report(resnet18, monkeypatch):
    # Direct convolutions only: oneDNN's Winograd kernels keep their own weight
    # format per batch size (jit_fp32_wino_2x3 at 1, jit_wino_4x3 above), which
    # test_winograd_weights_per_kernel_family checks.
    monkeypatch.setenv("LLGA_WINOGRAD", "0")
    _, compiled = resnet18
    mem = compiled.memory
    assert mem["peak_activations"] == {} and mem["weight_cache"] == 0
    params = sum(p.numel() * 4 for p in resnet18[0].parameters())
    # Batch norm folded into the convolutions: weights are about the parameters, never double.
    assert 0.9 * params < mem["weights"] < 1.1 * params
    x = np.random.default_rng(0).standard_normal((2, 3, 224, 224), dtype=np.float32)
    compiled(x[:1])
    after_one = compiled.memory
    cache = after_one["weight_cache"]
    assert cache >= 0.9 * params  # every weight reordered into its primitive's layout
    (sig1, peak1), = after_one["peak_activations"].items()
    assert sig1 == "1x3x224x224:Float"
    assert peak1 >= 64 * 112 * 112 * 4  # conv1's output alone
    compiled(x)
    after_two = compiled.memory
    # A second shape specializes again, but shares the reordered weights.
    assert after_two["weight_cache"] < 1.2 * cache
    assert after_two["peak_activations"]["2x3x224x224:Float"] > 1.5 * peak1
