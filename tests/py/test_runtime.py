"""Runtime behaviour: zero-copy in and out, aliasing, input checks, threads, leaks."""

import gc
import os
from typing import Dict, List

import numpy as np
import pytest
import torch

import corpus
import llga
from concurrency import run_concurrently


def script(fn):
    return llga.optimize(torch.jit.script(fn))


def test_input_used_in_place_and_views_share_memory():
    def f(x: torch.Tensor):
        return x.transpose(0, 1), x[1:], x.view(-1)

    c = script(f)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    t, s, v = c(x)
    for out in (t, s, v):
        assert np.shares_memory(out, x)
    np.testing.assert_array_equal(t, x.T)
    x[1, 1] = 100.0  # the outputs see the change: they are views of the input
    assert t[1, 1] == 100.0 and s[0, 1] == 100.0 and v[5] == 100.0


def test_outputs_that_alias_each_other_stay_aliased():
    def f(x: torch.Tensor):
        y = torch.relu(x)
        return y, y.t(), y[0]

    a, b, c = script(f)(np.random.rand(3, 3).astype(np.float32) - 0.5)
    assert np.shares_memory(a, b) and np.shares_memory(a, c)
    assert not a.flags.owndata  # a view over llga's buffer, not a copy


def test_non_contiguous_input_without_copy():
    def f(x: torch.Tensor):
        return x.select(1, 0)

    base = np.random.rand(4, 6).astype(np.float32)
    x = base[:, ::2]  # strided
    out = script(f)(x)
    assert np.shares_memory(out, base)
    np.testing.assert_array_equal(out, x[:, 0])


def test_inputs_are_not_modified_unless_the_graph_does():
    m = corpus.traced("resnet18")[1]
    c = llga.optimize(m)
    x = np.random.rand(1, 3, 224, 224).astype(np.float32)
    before = x.copy()
    c(x)
    np.testing.assert_array_equal(x, before)

    def inplace(x: torch.Tensor):
        x.relu_()
        return x.sum()

    y = np.array([-1.0, 2.0], dtype=np.float32)
    assert script(inplace)(y) == 2.0
    np.testing.assert_array_equal(y, [0.0, 2.0])  # as in PyTorch: relu_ wrote into the input


def test_torch_tensors_are_accepted():
    def f(x: torch.Tensor):
        return x * 2

    t = torch.arange(4, dtype=torch.float32)
    np.testing.assert_array_equal(script(f)(t), [0, 2, 4, 6])


def test_wrong_inputs_are_named():
    c = llga.optimize(corpus.traced("resnet18")[1])
    with pytest.raises(llga.InputError, match=r"takes 1 input\(s\) \(x\.1\), got 2"):
        c(np.zeros((1, 3, 224, 224), np.float32), 1)
    with pytest.raises(llga.InputError, match=r"input 0 \('x\.1' : Float\(1, 3, 224, 224.*expected dtype Float, got Double"):
        c(np.zeros((1, 3, 224, 224), np.float64))
    with pytest.raises(llga.InputError, match=r"input 0 \('x\.1'.*expected rank 4, got Float\(3, 224, 224\)"):
        c(np.zeros((3, 224, 224), np.float32))
    with pytest.raises(llga.InputError, match=r"input 0 \('x\.1'\): numpy dtype complex64 is not one llga takes .*"
                                              r"expected dtype Float \(numpy float32\)"):
        c(np.zeros((1, 3, 224, 224), np.complex64))


def test_unsupported_ops_are_listed_at_optimize_time():
    def f(x: torch.Tensor):
        return torch.fft.fft(x).real.sum() + torch.linalg.det(x) + torch.linalg.det(x * 2)

    with pytest.raises(llga.UnsupportedOpError) as info:
        script(f)
    e = info.value
    assert {"aten::fft_fft", "aten::linalg_det"} <= set(e.ops)
    assert len(e.ops["aten::linalg_det"]) == 2
    assert "test_runtime.py" in e.ops["aten::linalg_det"][0]
    assert "aten::linalg_det (2x)" in str(e)


def test_unsupported_ops_without_a_source_line_are_located_by_their_neighbours():
    """An op PyTorch recorded without a line is placed by an op near it with
    one; with no line anywhere, by the node as printed: never a bare value name."""
    after = """graph(%x : Tensor):
  %y : Tensor = aten::relu(%x) # model.py:3:4
   = aten::unknown_effect(%y)
  return (%y)"""
    with pytest.raises(llga.UnsupportedOpError) as info:
        llga.optimize(after)
    assert info.value.ops["aten::unknown_effect"] == ["the op after model.py:3:4"]
    nowhere = """graph(%x : Tensor):
  %y : Tensor = aten::linalg_det(%x)
  return (%y)"""
    with pytest.raises(llga.UnsupportedOpError) as info:
        llga.optimize(nowhere)
    assert info.value.ops["aten::linalg_det"] == ["`%y : Tensor = aten::linalg_det(%x)` (no source line in the graph)"]


def test_errors_while_running_name_the_op():
    def f(x: torch.Tensor, y: torch.Tensor):
        return x + y

    with pytest.raises(llga.ExecutionError, match=r"aten::add at .*test_runtime\.py.*cannot be broadcast"):
        script(f)(np.zeros(3, np.float32), np.zeros(4, np.float32))


def test_concurrent_calls_are_correct():
    m = corpus.traced("resnet18")[1]
    c = llga.optimize(m)
    xs = [np.random.RandomState(i).rand(1, 3, 224, 224).astype(np.float32) for i in range(4)]
    with torch.no_grad():
        want = [m(torch.from_numpy(x)).numpy() for x in xs]
    results = {i: [] for i in range(4)}

    def worker(i):
        for _ in range(50):
            results[i].append(c(xs[i]))

    run_concurrently(worker, 4)
    for i in range(4):
        assert len(results[i]) == 50
        for r in results[i]:
            np.testing.assert_array_equal(r, results[i][0])  # identical call to call
        assert np.abs(results[i][0] - want[i]).max() / np.abs(want[i]).max() < 1e-4


def rss_bytes():
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(os.environ.get("LLGA_SANITIZER") == "address",
                    reason="ASan's quarantine keeps freed blocks (256 MiB by default), so RSS measures the quarantine, "
                           "not leaks; with quarantine_size_mb=0 this passes under ASan too")
def test_no_leak_over_many_calls():
    m = torch.jit.trace(torch.nn.Sequential(torch.nn.Linear(28, 64), torch.nn.ReLU()).eval(), torch.randn(32, 28))
    c = llga.optimize(m)
    x = np.random.rand(32, 28).astype(np.float32)
    for _ in range(200):  # warm up caches and allocator
        c(x)
    gc.collect()
    before = rss_bytes()
    for _ in range(2000):
        c(x)
    gc.collect()
    grown = rss_bytes() - before
    # 2000 outputs of 8 KiB each would be 16 MiB if none were freed.
    assert grown < 4 * 2**20, f"RSS grew by {grown / 2**20:.1f} MiB over 2000 calls"


def test_threads_setting():
    old = llga.get_num_threads()
    try:
        llga.set_num_threads(1)
        assert llga.get_num_threads() == 1
        with pytest.raises(ValueError):
            llga.set_num_threads(0)
    finally:
        llga.set_num_threads(old)


def test_thread_count_change_rebuilds_primitives():
    # oneDNN's jit kernels fix their work split when they are made: entries
    # made at one thread count ran with it after llga.set_num_threads changed
    # it (a model called once at 1 thread stayed on one thread at 2, and the
    # other way round). The count is part of each entry's key.
    m = torch.nn.Sequential(torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(16, 8, 1)).eval()
    x = torch.randn(1, 8, 20, 20)
    c = llga.optimize(torch.jit.trace(m, x))
    want = m(x).detach().numpy()
    old = llga.get_num_threads()
    try:
        built = []
        for n in (1, 1, 2, 2, 1):
            llga.set_num_threads(n)
            np.testing.assert_allclose(c(x.numpy()), want, rtol=1e-4, atol=1e-5)
            built.append(llga._llga.specialization_stats()["built"])
        assert built[1] == built[0], built  # the same count again: the same entries
        assert built[2] > built[1], built   # another count: its own primitives
        assert built[3] == built[2] and built[4] == built[3], built  # each count's entries kept
    finally:
        llga.set_num_threads(old)


_THREADS_AFTER_TORCH = """
import os, torch
torch.set_num_threads(1)  # what torch does by itself where cpuinfo counts one core
import llga
want = int(os.environ["OMP_NUM_THREADS"]) if os.environ.get("OMP_NUM_THREADS") else len(os.sched_getaffinity(0))
assert llga.get_num_threads() == want, (llga.get_num_threads(), want)
m = torch.jit.trace(torch.nn.Conv2d(3, 4, 3).eval(), torch.randn(1, 3, 8, 8))
c = llga.optimize(m)
c(torch.randn(1, 3, 8, 8).numpy())
assert torch.get_num_threads() == 1, torch.get_num_threads()  # a call leaves the caller's OpenMP setting alone
llga.set_num_threads(1)
assert llga.get_num_threads() == 1
print("threads ok")
"""


@pytest.mark.parametrize("omp", [None, "1", "3"])
def test_default_threads_do_not_follow_torchs_setting(omp):
    # torch lowers OpenMP's default to its count of physical cores (1 on a
    # 2-vCPU VM): llga took that as its own default and ran every model on
    # one thread of two. Its default is OMP_NUM_THREADS, or the CPUs the
    # process may run on; a call does not change torch's setting.
    import os
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(llga.__file__)))
    env.pop("OMP_NUM_THREADS", None)
    if omp:
        env["OMP_NUM_THREADS"] = omp
    r = subprocess.run([sys.executable, "-c", _THREADS_AFTER_TORCH], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and "threads ok" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]


@torch.jit.script
def _number_ops(x: torch.Tensor, a: int, b: int, f: float):
    out: List[float] = []
    for i in range(-3, 4):
        j = a + i
        out.append(float(j // b) + float(j % b) * 10.0 + j / b)
        out.append(float(f // 1.5) + f % -1.5 + float(j < b) + float(j >= a) + float(j != i))
        out.append(float(max(j, b)) + min(f, float(i)) + float(max(f, -f)) - float(int(f * i)))
        out.append(float(bool(j) and not bool(i)))
    return x + torch.tensor(out)


@pytest.mark.parametrize("a, b, f", [(7, 3, 2.25), (-7, 3, -2.75), (7, -3, 0.5), (-8, -4, -0.0)])
def test_number_ops_run_directly_as_pytorch_does_and_as_their_kernels_do(a, b, f):
    # The plan calls int/float/bool-typed ops directly (OpDef::scalar), except
    # while the profiler watches, when their kernels run: both as PyTorch.
    x = torch.zeros(28)
    c = llga.optimize(_number_ops, example_inputs=(x, a, b, f))
    want = _number_ops(x, a, b, f).numpy()
    np.testing.assert_array_equal(c(x.numpy(), a, b, f), want)
    with llga.profiler.profile():
        np.testing.assert_array_equal(c(x.numpy(), a, b, f), want)
    kinds = {e["name"] for e in llga.profiler.events()}
    assert {"aten::floordiv", "aten::remainder", "aten::div", "prim::max"} <= kinds


@torch.jit.script
def _big_int_keys(x: torch.Tensor, n: int):
    d: Dict[int, int] = {}
    base = 9007199254740992  # 2**53: base + 1 has no double of its own
    for i in range(n):
        k = base + i % 3
        if k in d:
            d[k] = d[k] + 1
        else:
            d[k] = 1
    t = 0
    for k in d.keys():
        t = t * 10 + d[k]
    return x + float(len(d) * 1000 + t)


def test_dict_int_keys_compare_exactly():
    # Keys were compared as doubles: 2**53 and 2**53 + 1 were one key (a
    # dict of 2 where PyTorch has 3).
    x = torch.zeros(2)
    c = llga.optimize(_big_int_keys, example_inputs=(x, 7))
    want = _big_int_keys(x, 7).numpy()
    assert want[0] == 3322.0
    np.testing.assert_array_equal(c(x.numpy(), 7), want)


def test_number_op_errors_name_the_op_and_line():
    with pytest.raises(llga.ExecutionError, match=r"aten::floordiv at .*test_runtime.py.*division by zero"):
        script_number = llga.optimize(_number_ops, example_inputs=(torch.zeros(28), 7, 3, 1.0))
        script_number(np.zeros(28, np.float32), 7, 0, 1.0)


def _scaled(x: torch.Tensor, scale: float = 2.0, bias: float = 0.0):
    return x * scale + bias


def test_inputs_by_keyword_as_the_model_names_them():
    c = llga.optimize(torch.jit.script(_scaled))  # its inputs are x.1, scale.1, bias.1: x, scale, bias
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(c(x, bias=1.0), x * 2 + 1)  # scale from its default
    np.testing.assert_array_equal(c(x=x), x * 2)
    np.testing.assert_array_equal(c(x, scale=3, bias=1.0), x * 3 + 1)  # an int where a float is declared
    with pytest.raises(TypeError, match="unexpected keyword argument.*'bogus'.*inputs are x, scale, bias"):
        c(x, bogus=1)
    with pytest.raises(TypeError, match="'x' given both by position and by keyword"):
        c(x, x=x)
    with pytest.raises(TypeError, match="missing input 'x'"):
        c(scale=1.0)
