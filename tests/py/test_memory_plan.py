"""The memory planner (runtime/arena.h): after a recorded call, a call's
intermediate buffers come from one arena at static offsets. It must never
change a result, hand out bytes that are still in use, or put an output in
memory the next call overwrites."""

import threading

import numpy as np
import pytest
import torch
from torch import nn

import corpus
import llga
from llga import _llga


@pytest.fixture(scope="module")
def resnet18():
    model, traced = corpus.traced("resnet18")
    return model, llga.optimize(traced)


@pytest.fixture
def planning():
    was = _llga.memory_planning()
    _llga.set_memory_planning(True)
    yield
    _llga.set_memory_planning(was)


def arena_of(compiled, shape):
    (sig, a), = [(s, a) for s, a in compiled.memory["arena"].items() if s.startswith("x".join(map(str, shape)))]
    return a


def test_planned_calls_match_pytorch_and_outputs_survive_later_calls(resnet18, planning):
    model, compiled = resnet18
    xs = [torch.randn(1, 3, 224, 224) for _ in range(4)]
    outs = [compiled(x.numpy()) for x in xs]  # warm-up, recorded, then from the arena
    with torch.no_grad():
        for x, o in zip(xs, outs):  # every earlier output is intact after the later calls
            np.testing.assert_allclose(o, model(x).numpy(), rtol=1e-4, atol=1e-4)
    a = arena_of(compiled, (1, 3, 224, 224))
    assert a["planned_calls"] >= 2 and not a["disabled"]
    assert a["heap_blocks"] >= 1  # the output
    peak = compiled.memory["peak_activations"]["1x3x224x224:Float"]
    # Greedy packing: never below the live peak, and far below the sum of all buffers.
    assert peak * 0.5 <= a["bytes"] <= peak * 1.25


def test_planned_and_heap_runs_agree_bit_for_bit(resnet18):
    _, compiled = resnet18
    x = np.random.default_rng(0).standard_normal((2, 3, 96, 96), dtype=np.float32)
    _llga.set_memory_planning(False)
    try:
        heap = compiled(x)
    finally:
        _llga.set_memory_planning(True)
    for _ in range(3):
        np.testing.assert_array_equal(compiled(x), heap)
    assert arena_of(compiled, (2, 3, 96, 96))["planned_calls"] >= 1


def test_each_shape_has_its_own_plan(resnet18, planning):
    model, compiled = resnet18
    # per shape: the first call warms up, the second records, later ones are planned
    shapes = [(1, 3, 64, 64), (3, 3, 80, 64)] * 3 + [(1, 3, 64, 64)]
    for s in shapes:
        x = torch.randn(*s)
        with torch.no_grad():
            np.testing.assert_allclose(compiled(x.numpy()), model(x).numpy(), rtol=1e-4, atol=1e-4)
    small, big = arena_of(compiled, (1, 3, 64, 64)), arena_of(compiled, (3, 3, 80, 64))
    assert small["planned_calls"] == 2 and big["planned_calls"] == 1
    assert big["bytes"] > small["bytes"]


class Branchy(nn.Module):
    """Data-dependent control flow: the same shapes allocate different
    buffers depending on the input's values."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(5)
        self.a, self.b = nn.Conv2d(8, 8, 3, padding=1), nn.Conv2d(8, 32, 1)

    def forward(self, x):
        if bool(x.sum() > 0):
            y = torch.relu(self.a(x))
            return self.a(y) + y
        z = self.b(x)  # a bigger intermediate, another lifetime
        return self.a(z[:, :8] * z[:, 8:16])


def test_deviating_calls_fall_back_to_the_heap_and_stay_correct(planning):
    model = Branchy().eval()
    scripted = torch.jit.script(model)
    compiled = llga.optimize(scripted, example_inputs=[torch.randn(1, 8, 16, 16)])
    rng = np.random.default_rng(1)
    for i in range(12):
        x = rng.standard_normal((1, 8, 16, 16), dtype=np.float32)
        x = np.abs(x) if i % 3 else -np.abs(x)  # the branch changes every few calls
        with torch.no_grad():
            np.testing.assert_allclose(compiled(x), model(torch.from_numpy(x)).numpy(), rtol=1e-4, atol=1e-4)
    a = arena_of(compiled, (1, 8, 16, 16))
    assert a["deviations"] >= 1  # the planner noticed, rather than serving stale offsets


def test_concurrent_callers_each_get_their_own_arena(resnet18, planning):
    model, compiled = resnet18
    xs = [torch.randn(1, 3, 112, 112) for _ in range(2)]
    with torch.no_grad():
        refs = [model(x).numpy() for x in xs]
    compiled(xs[0].numpy())  # recorded
    errors = []

    def worker(k):
        try:
            for _ in range(6):
                np.testing.assert_allclose(compiled(xs[k].numpy()), refs[k], rtol=1e-4, atol=1e-4)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert arena_of(compiled, (1, 3, 112, 112))["planned_calls"] >= 6
