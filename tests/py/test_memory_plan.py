"""The memory planner (runtime/arena.h): after a recorded call, a call's
intermediate buffers come from one arena at static offsets. It must never
change a result, hand out bytes that are still in use, or put an output in
memory the next call overwrites."""


import numpy as np
import pytest
import torch
from torch import nn

import corpus
import llga
from bench.script_programs import tiny_tensor_steps
from concurrency import run_concurrently


@pytest.fixture(scope="module")
def resnet18():
    model, traced = corpus.traced("resnet18")
    return model, llga.optimize(traced)


@pytest.fixture
def planning():
    was = llga.memory_planning()
    llga.set_memory_planning(True)
    yield
    llga.set_memory_planning(was)


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
    llga.set_memory_planning(False)
    try:
        heap = compiled(x)
    finally:
        llga.set_memory_planning(True)
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
    compiled(xs[0].numpy())  # warm-up; in the threads one call records, later ones use arenas

    def worker(k):
        for _ in range(6):
            np.testing.assert_allclose(compiled(xs[k].numpy()), refs[k], rtol=1e-4, atol=1e-4)

    run_concurrently(worker, 2)
    assert arena_of(compiled, (1, 3, 112, 112))["planned_calls"] >= 6


# ---------------------------------------------------------------- weight release

def bound_constants(graph) -> int:
    n = 0
    for node in graph.nodes(recursive=True):
        value = node.attributes.get("value") if node.kind == "prim::Constant" else None
        n += isinstance(value, llga.TensorConstant) and value.bound
    return n


@pytest.mark.parametrize("name", ["mobilenet_v2", "efficientnet_b0", corpus.BERT])
def test_weights_used_only_reordered_are_released_after_the_first_call(name):
    """After the first call the plan holds a weight only in its primitive's
    layout; later calls (same shape and others, so new primitives reorder from
    that copy, including grouped convolutions) still match PyTorch."""
    model, traced = corpus.traced(name)
    compiled = llga.optimize(traced)
    before = compiled.memory
    assert before["released"] == 0
    bound_before = bound_constants(compiled.graph)
    for batch in (1, 1, 2):
        xs = corpus.example_inputs(name, batch)
        out = compiled(*[x.numpy() for x in xs])
        with torch.no_grad():
            ref = model(*xs)
        if isinstance(ref, tuple):
            ref, out = ref[0], out[0]
        np.testing.assert_allclose(out, ref.numpy(), rtol=1e-4, atol=1e-4)
    after = compiled.memory
    assert after["released"] > 0.8 * before["weights"] if name != corpus.BERT else after["released"] > 0
    assert after["weights"] == before["weights"] - after["released"]
    # The graph's tensor constants (folded convolution weights) keep shape and dtype only.
    assert bound_constants(compiled.graph) < bound_before or name == corpus.BERT


class SharedWeight(nn.Module):
    """One weight read by a convolution (in a partition) and by an op outside
    any partition: it must stay."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(6)
        self.w = nn.Parameter(torch.randn(8, 4, 3, 3))
        self.v = nn.Parameter(torch.randn(16, 4, 1, 1))

    def forward(self, x):
        y = torch.relu(torch.nn.functional.conv2d(x, self.w, padding=1))
        # w * x.mean(): an outside read that depends on the input (w.sum() alone folds at compile time)
        return torch.nn.functional.conv2d(x, self.v) * 0.5, y + (self.w * x.mean()).sum()


def test_a_weight_still_read_elsewhere_is_kept_and_the_callers_arrays_are_let_go():
    import sys

    model = SharedWeight().eval()
    x = torch.randn(1, 4, 6, 6)
    with torch.no_grad():
        traced = torch.jit.trace(model, x)
        ref = model(x)
    ir = traced.inlined_graph.str()
    _, params = llga.import_torch(traced)  # the deployment path: IR text plus arrays by name
    params = {k: a.copy() for k, a in params.items()}
    (w,), (v,) = [a for a in params.values() if a.shape == (8, 4, 3, 3)], [a for a in params.values() if a.shape == (16, 4, 1, 1)]
    base_w, base_v = sys.getrefcount(w), sys.getrefcount(v)
    compiled = llga.optimize(ir, params=params)
    del params
    assert sys.getrefcount(v) > base_v - 1  # bound to the plan before the first call
    for _ in range(2):
        out = compiled(x.numpy())
        for o, r in zip(out, ref):
            np.testing.assert_allclose(o, r.numpy(), rtol=1e-4, atol=1e-4)
    # v is read only by its convolution: the plan dropped it (only our `v` and
    # getrefcount's argument are left); w is also summed outside: kept.
    assert sys.getrefcount(v) == 2
    assert sys.getrefcount(w) > 2
    assert compiled.memory["released"] == v.nbytes


@pytest.mark.parametrize("trips, planned", [(300, True), (3000, False)])
def test_a_loops_buffers_are_planned_up_to_a_bound_and_stay_correct(planning, trips, planned):
    # Two buffers per trip: 600 are planned (each checked against the blocks
    # alive in O(log n)); 6000 stay on the heap (placing them is quadratic).
    x = torch.randn(3, 5)
    compiled = llga.optimize(tiny_tensor_steps, example_inputs=(x, trips))
    for _ in range(4):
        np.testing.assert_allclose(compiled(x.numpy(), trips), tiny_tensor_steps(x, trips).numpy(), rtol=1e-5, atol=1e-6)
    (a,) = compiled.memory["arena"].values()
    assert a["recorded_calls"] == 1
    if planned:
        assert a["planned_calls"] >= 2 and a["deviations"] == 0 and a["blocks"] >= 2 * trips
    else:
        assert a["disabled"] and a["planned_calls"] == 0 and a["heap_blocks"] >= 2 * trips
