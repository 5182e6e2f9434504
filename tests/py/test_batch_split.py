"""Batch split: a graph the batch-rows pass proved separable runs a large
batch as chunks, and the result is PyTorch's whatever the chunk; graphs
that mix batch items are never split (the pass's rules are golden-tested in
tests/ir/batch_rows.ir, and the graph fuzzer runs every proved program in
chunks)."""

import numpy as np
import pytest
import torch

import llga
from concurrency import run_concurrently


class SmallCnn(torch.nn.Module):
    """conv -> bn -> relu, a squeeze-excite scale, a concat, pooling, flatten, linear."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.se = torch.nn.Conv2d(8, 8, 1)
        self.side = torch.nn.Conv2d(3, 4, 1)
        self.fc = torch.nn.Linear(12, 5)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        y = y * torch.sigmoid(self.se(torch.nn.functional.adaptive_avg_pool2d(y, 1)))
        y = torch.cat([y, self.side(x)], 1)
        return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(y, 1), 1))


def _randomised(m):
    torch.manual_seed(0)
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.5, 0.5)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
    return m.eval()


def _compiled(m, example):
    traced = torch.jit.trace(m, example)
    return llga.optimize(traced, [e.numpy() for e in example])


def _ref(m, *xs):
    with torch.no_grad():
        return m(*[torch.from_numpy(x) for x in xs])


@pytest.fixture(scope="module")
def cnn():
    m = _randomised(SmallCnn())
    return m, _compiled(m, (torch.randn(1, 3, 12, 12),))


def test_a_cnn_is_proved_and_written_on_the_return(cnn):
    _, c = cnn
    assert c.batch_split.proved, c.batch_split.why_not
    assert "return[batch_dim=0]" in str(c.graph)
    assert c.batch_split.mode == "auto"


def test_auto_measures_then_settles_and_every_call_matches_pytorch(cnn):
    m, c = cnn
    c.set_batch_split("auto")
    rng = np.random.default_rng(1)
    settled_at = None
    for call in range(80):
        x = rng.standard_normal((8, 3, 12, 12)).astype(np.float32)
        np.testing.assert_allclose(c(x), _ref(m, x).numpy(), rtol=1e-4, atol=1e-5)
        size = c.batch_split.sizes[8]
        if size.chunk and settled_at is None:
            settled_at = call
    # one after another: 1 and 2 are timed from their first call (chunks after the second), 4 from its
    # second, the whole batch from its third; side by side (two threads or more): 1, 2 and 4 from their
    # second. Each is timed over up to 8 calls (BatchSplit::kMaxSamples: these calls take well under
    # its 2 ms of kSampleNs)
    lanes = llga.get_num_threads()
    n = 8
    assert settled_at is not None and settled_at < (4 * n + 3 if lanes < 2 else 7 * n + 6), c.batch_split
    size = c.batch_split.sizes[8]
    tried = list(size.ns_per_item)
    assert tried == [1, 2, 4, 8][:len(tried)], tried  # from one item up, doubling
    side = size.ns_per_item_side_by_side
    assert list(side) == [1, 2, 4][:len(side)] and (lanes >= 2 or not side), side
    assert all(t > 0 for t in list(size.ns_per_item.values()) + list(side.values()))
    best_one = min(size.ns_per_item, key=size.ns_per_item.get)
    if size.lanes > 1:  # side by side unless one after another measured 3% faster
        assert size.lanes == lanes and size.chunk == min(side, key=side.get), size
        assert side[size.chunk] < size.ns_per_item[best_one] * 1.03, size
    else:
        assert size.chunk == best_one, size
        assert not side or min(side.values()) >= size.ns_per_item[best_one] * 1.03, size


def test_side_by_side_chunks_match_one_by_one_calls(cnn):
    """Every chunk after the first runs on a thread of its own: the same
    result as the items one by one, and the output made by the first chunk
    filled by all (9 items: a last chunk of one where the chunk is 2)."""
    m, c = cnn
    if llga.get_num_threads() < 2:
        pytest.skip("side by side needs two threads")
    c.set_batch_split("auto")
    try:
        rng = np.random.default_rng(7)
        for call in range(100):  # up to 8 timed calls a candidate (BatchSplit::kMaxSamples)
            x = rng.standard_normal((9, 3, 12, 12)).astype(np.float32)
            got = c(x)
            np.testing.assert_allclose(got, np.concatenate([c(x[i:i + 1]) for i in range(9)]), rtol=1e-5, atol=1e-6)
            size = c.batch_split.sizes[9]
            if size.chunk:
                break
        assert size.ns_per_item_side_by_side, size  # the side-by-side series ran (and matched)
        # one thread set afterwards: never more lanes than threads (the chunks one after another)
        threads = llga.get_num_threads()
        llga.set_num_threads(1)
        try:
            x = rng.standard_normal((9, 3, 12, 12)).astype(np.float32)
            np.testing.assert_allclose(c(x), _ref(m, x).numpy(), rtol=1e-4, atol=1e-5)
        finally:
            llga.set_num_threads(threads)
    finally:
        c.set_batch_split("auto")


@pytest.mark.parametrize("chunk", [1, 3, 5, 8, 100])
def test_fixed_chunks_match_pytorch_and_really_split(cnn, chunk):
    m, c = cnn
    c.set_batch_split(chunk)
    try:
        x = np.random.default_rng(chunk).standard_normal((8, 3, 12, 12)).astype(np.float32)
        np.testing.assert_allclose(c(x), _ref(m, x).numpy(), rtol=1e-4, atol=1e-5)
        sigs = c.memory["peak_activations"]
        if chunk < 8:  # the chunks ran as calls of their own shape (8 = 3 + 3 + 2)
            assert f"{chunk}x3x12x12:Float" in sigs, sigs
            if 8 % chunk:
                assert f"{8 % chunk}x3x12x12:Float" in sigs, sigs
    finally:
        c.set_batch_split("auto")


def test_off_runs_whole(cnn):
    m = cnn[0]
    c = _compiled(m, (torch.randn(1, 3, 12, 12),))  # its own: no chunk shapes from other tests
    c.set_batch_split("off")
    try:
        x = np.random.default_rng(2).standard_normal((6, 3, 12, 12)).astype(np.float32)
        for _ in range(4):
            np.testing.assert_allclose(c(x), _ref(m, x).numpy(), rtol=1e-4, atol=1e-5)
        assert 6 not in c.batch_split.sizes
        assert not any(k.startswith(("2x", "3x")) for k in c.memory["peak_activations"])  # chunks of 6 would be
    finally:
        c.set_batch_split("auto")


@pytest.mark.parametrize("bad", [0, -2, "fast", 2.5, True, None])
def test_bad_modes_are_refused(cnn, bad):
    with pytest.raises(ValueError, match="batch"):
        cnn[1].set_batch_split(bad)


def test_split_outputs_are_the_callers_and_inputs_untouched(cnn):
    m, c = cnn
    c.set_batch_split(2)
    try:
        x = np.random.default_rng(3).standard_normal((5, 3, 12, 12)).astype(np.float32)
        keep = x.copy()
        a = c(x)
        b = c(x)
        assert not np.shares_memory(a, b) and not np.shares_memory(a, x)
        np.testing.assert_array_equal(x, keep)
        assert a.shape == (5, 5) and a.flags.c_contiguous
    finally:
        c.set_batch_split("auto")


def test_calls_from_threads_while_measuring(cnn):
    m, c = cnn
    c.set_batch_split("auto")  # resets the measurements: the threads measure together
    xs = [np.random.default_rng(10 + t).standard_normal((8 + t, 3, 12, 12)).astype(np.float32) for t in range(4)]
    refs = [_ref(m, x).numpy() for x in xs]

    def worker(t):
        for _ in range(6):
            np.testing.assert_allclose(c(xs[t]), refs[t], rtol=1e-4, atol=1e-5)

    run_concurrently(worker, 4)


class TwoOutputs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 3, 3)

    def forward(self, x, y):
        a = self.conv(x)
        return a.relu(), (torch.softmax(y, -1), a.flatten(1))


def test_tuple_outputs_and_two_inputs_split():
    m = TwoOutputs().eval()
    c = _compiled(m, (torch.randn(2, 2, 6, 6), torch.randn(2, 7)))
    assert c.batch_split.proved, c.batch_split.why_not
    c.set_batch_split(2)
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal((5, 2, 6, 6)).astype(np.float32), rng.standard_normal((5, 7)).astype(np.float32)
    got = c(x, y)
    want = _ref(m, x, y)
    np.testing.assert_allclose(got[0], want[0].numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1][0], want[1][0].numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1][1], want[1][1].numpy(), rtol=1e-5, atol=1e-6)
    # inputs of different batch sizes (here y broadcasts its one row) run whole
    y1 = y[:1].copy()
    got = c(x, y1)
    np.testing.assert_allclose(got[1][0], _ref(m, x, y1)[1][0].numpy(), rtol=1e-5, atol=1e-6)


class BatchMixer(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, 0) + x.mean(0, keepdim=True)


class TracedBatch(torch.nn.Module):
    def forward(self, x):
        return x.reshape(2, -1).relu()


@pytest.mark.parametrize("model, why", [(BatchMixer(), "over the batch dim"),
                                        (TracedBatch(), "batch size written in")])
def test_graphs_mixing_items_are_not_split_and_say_why(model, why):
    example = torch.randn(2, 3, 4)
    c = _compiled(model, (example,))
    assert not c.batch_split.proved
    assert why in c.batch_split.why_not and "aten::" in c.batch_split.why_not
    assert "batch_dim" not in str(c.graph)
    c.set_batch_split(1)  # nothing to split: still right
    x = np.random.default_rng(5).standard_normal((2, 3, 4)).astype(np.float32)
    for _ in range(3):
        np.testing.assert_allclose(c(x), _ref(model, x).numpy(), rtol=1e-5, atol=1e-6)


class ViewOut(torch.nn.Module):
    def forward(self, x):
        return x[:, 1:], (x * 2).relu()


def test_an_output_viewing_an_input_stops_splitting_and_stays_a_view():
    m = ViewOut()
    c = _compiled(m, (torch.randn(2, 3),))
    assert c.batch_split.proved
    c.set_batch_split(1)
    x = np.random.default_rng(6).standard_normal((4, 3)).astype(np.float32)
    for _ in range(2):
        a, b = c(x)
        np.testing.assert_allclose(a, x[:, 1:])
        np.testing.assert_allclose(b, np.maximum(x * 2, 0))
        assert np.shares_memory(a, x)  # as PyTorch's output would
    assert "view of an input" in c.batch_split.why_not


def test_the_proof_survives_a_model_file(cnn, tmp_path):
    m, c = cnn
    path = tmp_path / "cnn.llga"
    c.save(path)
    loaded = llga.load(path)
    assert loaded.batch_split.proved
    loaded.set_batch_split(3)
    x = np.random.default_rng(7).standard_normal((7, 3, 12, 12)).astype(np.float32)
    np.testing.assert_allclose(loaded(x), _ref(m, x).numpy(), rtol=1e-4, atol=1e-5)
    assert "3x3x12x12:Float" in loaded.memory["peak_activations"]


def test_settling_lets_go_of_the_chunks_not_chosen(cnn):
    """The primitives, weight copies and memory plans of chunk sizes measured
    and not chosen go (resnet18 at batch 32 had held 520 MiB of weight copies)."""
    m = cnn[0]
    c = _compiled(m, (torch.randn(1, 3, 12, 12),))
    before = llga._llga.specialization_stats()["evicted"]
    x = np.random.default_rng(8).standard_normal((8, 3, 12, 12)).astype(np.float32)
    for _ in range(80):  # both series (two threads: one after another, then side by side), 8 calls a candidate
        c(x)
    size = c.batch_split.sizes[8]
    assert size.chunk and len(size.ns_per_item) >= 2
    assert llga._llga.specialization_stats()["evicted"] > before
    arenas = [sig for sig in c.memory["arena"] if not sig.startswith("1x")]  # (1: the compile's example)
    chosen = {f"{size.chunk}x3x12x12:Float"} | ({f"{8 % size.chunk}x3x12x12:Float"} if 8 % size.chunk else set())
    assert set(arenas) <= chosen, (arenas, size)


class WritesInput(torch.nn.Module):
    def forward(self, x):
        x.mul_(2)
        return x.relu() + 1


class SharedOutputs(torch.nn.Module):
    def forward(self, x):
        y = x * 3
        return y, y[:, :2]


def test_a_graph_writing_its_input_is_not_split():
    c = _compiled(WritesInput(), (torch.randn(2, 3),))
    # batch-rows stops at the in-place op (side effects on rows); were it to
    # prove it, the runtime would still refuse (a call that stops splitting
    # after its first chunk reruns whole: those rows would be written twice)
    assert "mul_" in c.batch_split.why_not or "writes into input" in c.batch_split.why_not, c.batch_split
    c.set_batch_split(1)
    x = np.random.default_rng(9).standard_normal((4, 3)).astype(np.float32)
    keep = x.copy()
    got = c(x)
    np.testing.assert_allclose(x, keep * 2)  # written once, as PyTorch would
    np.testing.assert_allclose(got, np.maximum(keep * 2, 0) + 1)


def test_outputs_sharing_memory_stop_splitting_and_stay_shared():
    c = _compiled(SharedOutputs(), (torch.randn(2, 3),))
    assert c.batch_split.proved
    c.set_batch_split(1)
    x = np.random.default_rng(10).standard_normal((4, 3)).astype(np.float32)
    for _ in range(2):
        y, v = c(x)
        np.testing.assert_allclose(y, x * 3, rtol=1e-6)
        np.testing.assert_allclose(v, (x * 3)[:, :2], rtol=1e-6)
        assert np.shares_memory(y, v)
    assert "shares memory with another output" in c.batch_split.why_not


def test_the_runtime_refuses_a_graph_marked_separable_that_writes_its_input():
    # The attribute as text, past every pass: the runtime's own guard.
    text = """graph(%x : Float(2, 3)):
  %two : float = prim::Constant[value=2.]()
  %y : Float(2, 3) = aten::mul_(%x, %two)
  %r : Float(2, 3) = aten::relu(%y)
  return[batch_dim=0] (%r)
"""
    c = llga.optimize(text, passes="")
    assert c.batch_split.proved and "writes into input 'x' in place (aten::mul_" in c.batch_split.why_not
    c.set_batch_split(1)
    x = np.random.default_rng(11).standard_normal((4, 3)).astype(np.float32)
    keep = x.copy()
    np.testing.assert_allclose(c(x), np.maximum(keep * 2, 0))
    np.testing.assert_allclose(x, keep * 2)


def test_the_profiler_counts_a_split_call_once_and_its_chunks(cnn):
    m, c = cnn
    c.set_batch_split(4)
    x = np.random.default_rng(12).standard_normal((8, 3, 12, 12)).astype(np.float32)
    try:
        with llga.profiler.profile():
            c(x)
        evs = llga.profiler.events()
    finally:
        c.set_batch_split("auto")
    split = [e for e in evs if e["depth"] == -2]
    calls = [e for e in evs if e["depth"] == -1]
    assert [e["source"] for e in split] == ["8 items in chunks of 4"]
    assert [e["source"] for e in calls] == ["4x3x12x12:Float"] * 2
    assert split[0]["dur_ns"] >= sum(e["dur_ns"] for e in calls)
