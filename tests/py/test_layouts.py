"""Layout propagation: tensors that flow only between partitions stay in the
layout their producer's primitive chose; everything else is handed out plain."""

import copy
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import corpus
import llga


def compile_and_check(model, *xs):
    with torch.no_grad():
        traced = torch.jit.trace(model.eval(), xs, check_trace=False)
        ref = model(*xs)
    compiled = llga.optimize(traced)
    out = compiled(*[x.numpy() for x in xs])
    refs = ref if isinstance(ref, tuple) else (ref,)
    outs = out if isinstance(out, tuple) else (out,)
    for o, r in zip(outs, refs):
        assert isinstance(o, np.ndarray) and o.flags.c_contiguous  # graph outputs are always plain
        np.testing.assert_allclose(o, r.numpy(), rtol=1e-4, atol=1e-4)
    return compiled


class ConvChain(nn.Module):
    def __init__(self, expose_middle=False, side_reader=False):
        super().__init__()
        torch.manual_seed(0)
        self.c1, self.c2 = nn.Conv2d(16, 32, 3, padding=1), nn.Conv2d(32, 32, 3, padding=1)
        self.expose_middle, self.side_reader = expose_middle, side_reader

    def forward(self, x):
        y = torch.relu(self.c1(x))
        z = torch.relu(self.c2(y))
        if self.expose_middle:
            return y, z
        if self.side_reader:
            return z + y.sum()  # y also read by an op outside any partition
        return z


def logged_call(compiled, *arrays):
    """Calls once with the kernel log on; its entries."""
    llga.profiler.kernel_log.clear()
    llga.profiler.kernel_log.enable()
    try:
        compiled(*arrays)
    finally:
        llga.profiler.kernel_log.disable()
    return llga.profiler.kernel_log.entries()


def assert_matches(out, ref):
    for o, r in zip(out if isinstance(out, tuple) else (out,), ref if isinstance(ref, tuple) else (ref,)):
        np.testing.assert_allclose(o, r.numpy(), rtol=1e-4, atol=1e-4)


def dense(tag):
    """A dense permutation (nchw, nhwc) rather than a blocked layout (nChw8c)."""
    return not any(ch.isdigit() for ch in tag)


WINOGRAD = llga.cpu_capabilities()["winograd"]  # oneDNN has Winograd on this CPU (not on AVX2-only ones)
# llga's own AVX2 Winograd runs where oneDNN has none (backend/dnnl/winograd.h)
OWN_WINOGRAD = llga.cpu_capabilities()["llga_winograd"] and not WINOGRAD
# oneDNN at AVX2 or above (not ONEDNN_MAX_CPU_ISA=SSE41/AVX): its binary primitive has a jit
# kernel for a blocked tensor times a blocked per-channel scale, and llga's AVX2 kernels run
AVX2_UP = llga.cpu_capabilities()["isa"] not in ("sse41", "avx")


def test_value_between_partitions_stays_blocked(monkeypatch):
    # Direct convolutions (brgconv's nhwc); Winograd's edges: test_winograd_where_it_pays_and_layouts_flow.
    monkeypatch.setenv("LLGA_WINOGRAD", "0")
    x = torch.randn(1, 16, 20, 20)
    c = compile_and_check(ConvChain(), x)
    first, last = [p for p in c.partitions if p.pattern == "conv_post_ops"]
    assert first.output == "kept", first.layouts  # c1 -> c2: no reorder to plain in between
    assert last.output == "plain", last.layouts  # the graph output
    assert first.dst == last.src  # the consumer read it in the producer's layout


def test_graph_output_is_plain_even_when_also_read_by_a_partition():
    c = compile_and_check(ConvChain(expose_middle=True), torch.randn(1, 16, 20, 20))
    convs = [p for p in c.partitions if p.pattern == "conv_post_ops"]
    assert all(p.out_layouts == ["plain"] and p.output == "plain" for p in convs), convs


def test_reader_outside_partitions_gets_plain():
    c = compile_and_check(ConvChain(side_reader=True), torch.randn(2, 16, 12, 12))
    first = [p for p in c.partitions if p.pattern == "conv_post_ops"][0]
    assert first.out_layouts == ["plain"] and first.output == "plain", first


def test_shape_change_between_calls_with_blocked_values():
    model = ConvChain()
    c = compile_and_check(model, torch.randn(1, 16, 20, 20))
    for shape in [(3, 16, 9, 13), (1, 16, 20, 20)]:
        x = torch.randn(*shape)
        with torch.no_grad():
            np.testing.assert_allclose(c(x.numpy()), model(x).numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2"])
def test_cnn_keeps_layouts_between_convolutions(name):
    model, traced = corpus.traced(name)
    c = llga.optimize(traced)
    x = corpus.example_inputs(name)[0]
    with torch.no_grad():
        ref = model(x).numpy()
    np.testing.assert_allclose(c(x.numpy()), ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
    convs = [p for p in c.partitions if p.pattern == "conv_post_ops"]
    assert all(p.impl for p in convs)  # the oneDNN implementation is reported
    # llga's decision (out_layouts, on the IR) and what the kernel then did agree:
    # an output decided plain is handed out plain; one handed on in the
    # primitive's layout ("kept") had been allowed to be: blocked under
    # any/blocked, or a dense channels-last dst (oneDNN's choice on some CPUs
    # for few input channels) under strided.
    for p in convs:
        assert p.output in ("kept", "plain"), p
        assert p.out_layouts[0] != "plain" or p.output == "plain", p
        strided_dst = not any(ch.isdigit() for ch in p.dst)
        assert p.output != "kept" or p.out_layouts[0] in ("any", "blocked") or (
            p.out_layouts[0] == "strided" and strided_dst), p
    # Only convolutions feeding pooling/flatten/the classifier are not allowed to stay blocked.
    blocked_ok = [p for p in convs if p.out_layouts[0] in ("any", "blocked")]
    assert len(blocked_ok) >= len(convs) - 3, [p.out_layouts for p in convs]
    assert len([p for p in convs if p.output == "kept"]) >= len(convs) - 3, [p.layouts for p in convs]


def test_many_shapes_stay_correct_and_the_specialization_cache_is_bounded():
    from llga import _llga

    model = ConvChain()
    c = compile_and_check(model, torch.randn(1, 16, 8, 8))
    before = _llga.specialization_stats()
    n = _llga.specialization_stats()["max_per_kernel"] + 4
    for i in range(n):
        x = torch.randn(1, 16, 6 + i, 7)
        with torch.no_grad():
            np.testing.assert_allclose(c(x.numpy()), model(x).numpy(), rtol=1e-4, atol=1e-4)
    after = _llga.specialization_stats()
    assert after["built"] - before["built"] >= 2 * n  # each conv specialized for each new shape
    assert after["evicted"] - before["evicted"] >= 2 * (n - after["max_per_kernel"])
    x = torch.randn(1, 16, 8, 8)  # the first shape was evicted: specialized again, still right
    with torch.no_grad():
        np.testing.assert_allclose(c(x.numpy()), model(x).numpy(), rtol=1e-4, atol=1e-4)


class Residual(nn.Module):
    """conv -> conv + identity: the residual add is a sum post-op, done in the
    identity's buffer when that is its last reader."""

    def __init__(self, variant):
        super().__init__()
        torch.manual_seed(1)
        self.c0, self.c1, self.c2 = (nn.Conv2d(16, 16, 3, padding=1) for _ in range(3))
        self.variant = variant

    def forward(self, x):
        h = torch.relu(self.c0(x))  # the identity, owned by llga (kept blocked)
        y = torch.relu(self.c2(torch.relu(self.c1(h))) + h)
        # y goes on to another convolution, so it stays blocked and its sum may be in place
        if self.variant == "identity_out":
            return self.c2(y), h  # h is also a graph output: its buffer must not be reused
        if self.variant == "read_after":
            return self.c2(y) + torch.relu(self.c0(h))  # a partition reads h after the sum
        if self.variant == "input":
            return torch.relu(self.c1(x)) + x  # the operand is the caller's array
        return self.c2(y)


@pytest.mark.parametrize("variant", ["plain", "identity_out", "read_after", "input"])
def test_residual_sum_in_place_never_clobbers_a_live_value(variant):
    model = Residual(variant)
    x = torch.randn(1, 16, 12, 12)
    xn = x.numpy().copy()
    c = compile_and_check(model, x)  # twice: the second call runs cached primitives
    before = xn.copy()
    out = c(xn)
    np.testing.assert_array_equal(xn, before)  # the input is never written
    with torch.no_grad():
        assert_matches(out, model(torch.from_numpy(before)))


class StridedPath(nn.Module):
    """conv -> maxpool -> conv, and a squeeze-excite style mul: channels-last
    strides flow through pooling and elementwise ops without reorders; a view
    after pooling still works (it gets a contiguous tensor)."""

    def __init__(self, tail):
        super().__init__()
        torch.manual_seed(2)
        self.c1, self.c2, self.c3 = nn.Conv2d(16, 16, 3, padding=1), nn.Conv2d(16, 16, 1), nn.Conv2d(16, 16, 1)
        self.tail = tail

    def forward(self, x):
        y = torch.relu(self.c1(x))
        p = torch.max_pool2d(y, 2)
        s = torch.sigmoid(self.c3(torch.nn.functional.adaptive_avg_pool2d(p, 1)))
        z = self.c2(p * s)
        if self.tail == "view":
            return torch.max_pool2d(z, 2).view(z.shape[0], -1)
        return torch.relu(self.c2(z))


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("tail", ["conv", "view"])
def test_channels_last_strides_flow_through_pooling_and_mul(tail, batch):
    x = torch.randn(batch, 16, 16, 16)
    c = compile_and_check(StridedPath(tail), x)
    log = logged_call(c, x.numpy())
    # Where oneDNN's conv writes a dense channels-last dst (brgconv's nhwc),
    # llga hands it on as strides; a blocked dst (jit's nChw8c on AVX2) is
    # handed on blocked: the pool reads either.
    first = next(e for e in log if e["pattern"] == "conv_post_ops")
    flows = dense(first["dst"]) and first["dst"] != "nchw"
    blocked = not dense(first["dst"])
    mul = [e for e in log if e["op"] == "aten::mul"]
    # the mul kept the order or blocked layout it got (the scale is per
    # channel), unless oneDNN has only its reference kernel for that layout
    # (nChw16c on AVX-512), as the mul's report says
    declined = "reference kernel" in (mul[0].get("detail") or "") if mul else False
    assert mul and mul[0]["outputs"][0].endswith(
        "strided" if flows else first["dst"] if blocked and AVX2_UP and not declined else "plain"), mul
    pools = [e for e in log if e["op"] == "aten::max_pool2d"]
    # from the first conv, as it was handed on
    assert pools[0]["inputs"][0].endswith("strided" if flows else first["dst"] if blocked else "plain"), pools[0]
    if flows or blocked:  # oneDNN sees the layout it has a jit kernel for (at batch 1 too, where N's stride is free)
        assert pools[0]["src"] == first["dst"] and not pools[0]["impl"].startswith(("ref", "simple")), pools[0]
    if flows:
        glob = next(e for e in log if e["op"] == "aten::adaptive_avg_pool2d") if tail == "conv" else None
        assert glob is None or (glob["src"] == glob["dst"] and not glob["impl"].startswith("ref")), glob
    if tail == "view":
        assert pools[-1]["outputs"][0].endswith("plain")  # read by a view: contiguous


class PoolAfterConcat(nn.Module):
    """googlenet's inception tail: a concat (plain) read by 3x3 max and average pools."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(4)
        self.a, self.b, self.c = nn.Conv2d(8, 16, 3, padding=1), nn.Conv2d(8, 24, 1), nn.Conv2d(40, 8, 1)

    def forward(self, x):
        y = torch.cat([torch.relu(self.a(x)), torch.relu(self.b(x))], 1)
        p = torch.max_pool2d(y, 3, 1, 1) + torch.nn.functional.avg_pool2d(y, 3, 2, 1).mean()
        return self.c(p)


@pytest.mark.parametrize("batch", [1, 3])
def test_pooling_a_plain_input_avoids_the_scalar_kernels(batch):
    # Where oneDNN pools plain NCHW only with its scalar simple_nchw or ref
    # kernel (AVX2 CPUs: 4-9 ms for each of googlenet's pools), llga reorders
    # the input into a blocked copy and pools that; oneDNN says which ran.
    x = torch.randn(batch, 8, 15, 15)
    c = compile_and_check(PoolAfterConcat(), x)
    pools = [e for e in logged_call(c, x.numpy()) if "pool" in e["op"]]
    # plain, or channels-last where the convolutions hand on a dense nhwc
    # (brgconv on AVX-512) and the concat keeps it
    assert len(pools) == 2 and all(p["inputs"][0].endswith(("plain", "strided")) for p in pools), pools
    assert not [p for p in pools if p["impl"].startswith(("ref", "simple"))], pools


class MaxPoolAfterConv(nn.Module):
    """conv -> max_pool2d -> conv: the pool reads the conv's layout."""

    def __init__(self, ch, pool):
        super().__init__()
        torch.manual_seed(ch)
        self.c1, self.c2 = nn.Conv2d(8, ch, 3, padding=1), nn.Conv2d(ch, 8, 1)
        self.pool = pool

    def forward(self, x):
        return self.c2(F.max_pool2d(self.c1(x) - 0.2, **self.pool))  # no relu: it would turn NaN to 0 in oneDNN


# Where oneDNN pools nChw8c (its AVX2 kernels), a 2-D max pooling without
# dilation is llga's own (backend/dnnl/max_pool.h: oneDNN's took 2.3x ONNX
# Runtime's time on resnet's stem pool). Windows that hang over the padding
# or the edge (ceil_mode), strides larger than the kernel, NaN and -inf in
# the input (PyTorch: a NaN anywhere in the window gives NaN).
@pytest.mark.parametrize("ch,hw,pool", [
    (64, (112, 112), dict(kernel_size=3, stride=2, padding=1)),
    (16, (15, 13), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    (8, (9, 10), dict(kernel_size=2, stride=3)),
    (24, (7, 7), dict(kernel_size=(3, 2), stride=(1, 2), padding=(1, 0), ceil_mode=True)),
    (32, (5, 5), dict(kernel_size=5)),
])
def test_max_pool_after_a_blocked_conv(ch, hw, pool):
    model = MaxPoolAfterConv(ch, pool).eval()
    x = torch.randn(2, 8, *hw)
    c = compile_and_check(model, x)
    log = [e for e in logged_call(c, x.numpy()) if e["depth"] == 0]
    conv = next(e for e in log if e["pattern"] == "conv_post_ops")
    mp = next(e for e in log if e["pattern"] == "pool_post_ops")
    own = mp["src"] == mp["dst"] == "nChw8c" and AVX2_UP
    assert mp["impl"].startswith("llga_max_pool") == own, (mp, conv)
    if not own:  # NaN and -inf below are llga's rule; oneDNN's kernels differ (a window of -inf gives -FLT_MAX)
        return
    # NaN and -inf through the conv: an input row of NaN, a bias of -inf in one channel
    with torch.no_grad():
        model.c1.bias[1] = -float("inf")
    x2 = torch.randn(1, 8, *hw)
    x2[0, :, hw[0] // 2, :] = float("nan")
    c2 = llga.optimize(torch.jit.trace(model, x2, check_trace=False))
    with torch.no_grad():
        want = model(x2).numpy()
    got = c2(x2.numpy())
    assert np.isnan(want).any()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, equal_nan=True)


# A stem: a convolution of 3 channels, then a pooling. On AVX-512 CPUs
# oneDNN's brgconv gives such a convolution an nhwc dst (no inner blocks),
# handed on as a blocked tensor; the pooling's dst, left to oneDNN, came out
# nhwc too and was written into a tensor labelled NCHW (resnet18 and every
# torchvision stem: 5-90% off on a Sapphire Rapids). On CPUs whose conv
# gives nChw8c/16c the same models check the blocked path.
@pytest.mark.parametrize("pool", ["max", "avg"])
@pytest.mark.parametrize("k,stride,oc,hw", [(7, 2, 64, 64), (3, 1, 16, 32), (3, 1, 24, 17)])
def test_pooling_after_a_stem_conv_keeps_its_layout_right(pool, k, stride, oc, hw):
    torch.manual_seed(5)
    tail = nn.MaxPool2d(3, 2, 1) if pool == "max" else nn.AvgPool2d(2, 2)
    model = nn.Sequential(nn.Conv2d(3, oc, k, stride, k // 2), nn.ReLU(), tail, nn.Conv2d(oc, 8, 1)).eval()
    x = torch.randn(1, 3, hw, hw)
    c = compile_and_check(model, x)
    conv = c.partitions[0]
    assert conv.pattern == "conv_post_ops" and conv.output == "kept", conv


class GlobalPool(nn.Module):
    """conv -> global pooling -> 1x1 conv: the pool reads channels-last strides."""

    def __init__(self, kind, hw):
        super().__init__()
        torch.manual_seed(3)
        self.c1, self.c2 = nn.Conv2d(8, 32, 3, padding=1), nn.Conv2d(32, 16, 1)
        self.kind, self.hw = kind, hw

    def forward(self, x):
        y = torch.relu(self.c1(x))
        if self.kind == "adaptive_avg":
            p = torch.nn.functional.adaptive_avg_pool2d(y, 1)
        elif self.kind == "avg":
            p = torch.nn.functional.avg_pool2d(y, self.hw)
        else:
            p = torch.nn.functional.max_pool2d(y, self.hw)
        return self.c2(p)


def own_global_pool(src_tag):
    """llga pools the whole plane itself where the input is channels-last or nChw8c/16c."""
    return src_tag in ("nhwc", "acdb", "nChw8c", "nChw16c")


def expected_chunks(batch, channels, hw, src_tag, threads=2):
    """global_pool::chunks(): runs (image x channel block) fewer than the
    threads are split into chunks of at least 16 positions, when the input
    is worth waking the threads for (32768 floats)."""
    block = {"nChw8c": 8, "nChw16c": 16}.get(src_tag, channels)
    runs, positions = batch * (channels // block), hw[0] * hw[1]
    if batch * channels * positions < 32768 or runs >= threads:
        return 0
    k = min(-(-threads // runs), positions // 16)
    return k if k > 1 else 0


@pytest.mark.parametrize("kind", ["adaptive_avg", "avg", "max"])
@pytest.mark.parametrize("batch,hw", [(1, (14, 14)), (1, (13, 9)), (1, (7, 7)), (1, (56, 40)), (1, (61, 37)),
                                      (3, (14, 14)), (3, (56, 40))])
def test_global_pool_is_one_pass_split_over_the_threads(kind, batch, hw):
    """A pooling over the whole plane of a conv's channels-last or blocked
    output is llga's own: one pass over it, the positions split into chunks
    when there are fewer images (or channel blocks) than threads. Same result
    as PyTorch for primes, small planes (not split) and batches that already
    fill the threads (not split); and no reorder of the input before it."""
    threads = llga.get_num_threads()
    llga.set_num_threads(2)
    try:
        x = torch.randn(batch, 8, *hw)
        c = compile_and_check(GlobalPool(kind, hw), x)
        log = logged_call(c, x.numpy())
    finally:
        llga.set_num_threads(threads)
    pool = [e for e in log if "pool" in e["op"]]
    conv = next(e for e in log if e["pattern"] == "conv_post_ops")
    assert len(pool) == 1
    own = own_global_pool(pool[0]["src"])
    assert pool[0]["impl"].startswith("llga_global_pool") == own, (pool, conv)
    # what oneDNN handed on reaches the pool as it is: strided channels-last or blocked, never copied
    if dense(conv["dst"]) and conv["dst"] != "nchw":
        assert own and pool[0]["inputs"][0].endswith("strided"), (pool, conv)
    elif not dense(conv["dst"]):
        assert pool[0]["src"] == conv["dst"], (pool, conv)
    said = re.search(r"global pool in (\d+) row chunks", pool[0]["layouts"] or "")
    want = expected_chunks(batch, 32, hw, pool[0]["src"]) if own else 0
    assert (int(said.group(1)) if said else 0) == want, (pool, want)
    (part,) = [p for p in c.partitions if p.pattern == "pool_post_ops"]
    assert part.impl == pool[0]["impl"] and ("row chunks" in part.layouts) == bool(want), (part.impl, part.layouts)


class NanGlobalMax(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(5)
        self.c1 = nn.Conv2d(8, 32, 3, padding=1)

    def forward(self, x):
        return torch.nn.functional.adaptive_max_pool2d(self.c1(x), 1), torch.nn.functional.adaptive_avg_pool2d(self.c1(x), 1)


@pytest.mark.parametrize("batch,hw", [(1, (56, 40)), (2, (9, 7)), (1, (5, 5))])
def test_global_pool_propagates_nan_and_inf(batch, hw):
    """A NaN anywhere in a plane gives NaN for max and mean (as PyTorch), in
    split chunks too; +inf and -inf rows give the right infinities."""
    x = torch.randn(batch, 8, *hw)
    x[0, :, hw[0] // 2, hw[1] // 2] = float("nan")  # the conv spreads it over a 3x3 patch of every channel
    if batch > 1:
        x[1, :, 0, :] = float("inf")
    model = NanGlobalMax().eval()
    with torch.no_grad():
        traced = torch.jit.trace(model, x, check_trace=False)
        want = model(x)
    got = llga.optimize(traced)(x.numpy())
    for g, w in zip(got, want):
        assert np.isnan(w.numpy()).any()
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-4, equal_nan=True)


class MeanAfterConv(nn.Module):
    """conv -> adaptive_avg_pool2d(1) -> 1x1 conv, the conv's bias -inf/+inf in chosen channels."""

    def __init__(self, inf_channels=()):
        super().__init__()
        torch.manual_seed(6)
        self.c1, self.c2 = nn.Conv2d(8, 24, 3, padding=1), nn.Conv2d(24, 8, 1)
        with torch.no_grad():
            for ch, v in inf_channels:
                self.c1.bias[ch] = v

    def forward(self, x):
        return self.c2(F.adaptive_avg_pool2d(self.c1(x), 1)), F.adaptive_avg_pool2d(self.c1(x) * 2, 1)


# llga's global average after a conv against PyTorch: planes whose size is
# odd (its two-position steps), a 1x1 plane, batches, a NaN row, and
# channels of -inf, +inf and both (NaN).
@pytest.mark.parametrize("batch,hw", [(1, (7, 7)), (3, (13, 9)), (2, (1, 1)), (1, (56, 40)), (4, (3, 2))])
def test_global_average_after_a_blocked_conv(batch, hw):
    model = MeanAfterConv([(1, -float("inf")), (2, float("inf"))]).eval()
    x = torch.randn(batch, 8, *hw)
    if hw[0] > 2:
        x[0, :, hw[0] // 2, :] = float("nan")
    with torch.no_grad():
        traced = torch.jit.trace(model, x, check_trace=False)
        want = model(x)
    c = llga.optimize(traced)
    got = c(x.numpy())
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-4, equal_nan=True)
    pools = [e for e in logged_call(c, x.numpy()) if e["depth"] == 0 and e["pattern"] == "pool_post_ops"]
    assert len(pools) == 2
    for p in pools:
        # a 1x1 plane is channels-last whatever its tag
        assert p["impl"].startswith("llga_global_pool") == (own_global_pool(p["src"]) or hw == (1, 1)), p


class ScaleByGate(nn.Module):
    """y * s with y dying at the mul (its buffer may be reused), or still alive."""

    def __init__(self, variant):
        super().__init__()
        torch.manual_seed(4)
        self.c1, self.g, self.c2 = nn.Conv2d(8, 16, 3, padding=1), nn.Conv2d(16, 16, 1), nn.Conv2d(16, 16, 1)
        self.variant = variant

    def forward(self, x):
        if self.variant == "input":
            s = torch.sigmoid(self.g(torch.nn.functional.adaptive_avg_pool2d(torch.relu(self.c1(x)), 1)))
            return self.c1(s[:, :8].reshape(x.shape[0], 8, 1, 1) * x)  # the caller's array is never written
        y = torch.relu(self.c1(x))
        v = y.view(y.shape[0], -1) if self.variant == "view" else None  # aliases y's buffer
        s = torch.sigmoid(self.g(torch.nn.functional.adaptive_avg_pool2d(y, 1)))
        z = self.c2(s * y)
        if self.variant == "returned":
            return z, y
        if self.variant == "view":
            return z, v.sum(1)  # read after the mul, which is y's last reader
        return z


@pytest.mark.parametrize("variant", ["dies", "returned", "view", "input"])
def test_binary_op_reuses_a_dying_operand_only(variant):
    model = ScaleByGate(variant)
    x = torch.randn(1, 8, 10, 10)
    xn = x.numpy().copy()
    c = compile_and_check(model, x)
    before = xn.copy()
    out = c(xn)
    np.testing.assert_array_equal(xn, before)
    with torch.no_grad():
        assert_matches(out, model(torch.from_numpy(before)))


class DenseBlockish(nn.Module):
    """densenet's pattern: conv outputs concatenated, then batch_norm -> relu
    -> conv. Channels-last flows through the list into cat, through the
    batch_norm (relu fused into its primitive) into the next convolution."""

    def __init__(self, variant):
        super().__init__()
        torch.manual_seed(7)
        self.c0, self.c1 = nn.Conv2d(8, 16, 3, padding=1), nn.Conv2d(8, 16, 3, padding=1)
        self.bn, self.c2 = nn.BatchNorm2d(32), nn.Conv2d(32, 16, 1)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.5, 2)
        self.variant = variant

    def forward(self, x):
        a, b = torch.relu(self.c0(x)), torch.relu(self.c1(x))
        z = self.c2(torch.relu(self.bn(torch.cat([a, b], 1))))
        if self.variant == "stack":
            return z, torch.stack([a, b]).sum()  # another list, read by an op that wants plain items
        return z


@pytest.mark.parametrize("variant", ["cat", "stack"])
def test_channels_last_through_concat_and_batchnorm_relu(variant):
    x = torch.randn(1, 8, 12, 12)
    c = compile_and_check(DenseBlockish(variant).eval(), x)
    log = [e for e in logged_call(c, x.numpy()) if e["depth"] == 0]
    convs = [e for e in log if e["pattern"] == "conv_post_ops"]
    # concat -> batch_norm -> relu is one partition: each part normalised into its slice of the result
    part = [e for e in log if e["pattern"] == "concat_batchnorm"]
    assert len(part) == 1 and part[0]["primitive"] == "batch_normalization" and "relu fused" in part[0]["layouts"]
    part = part[0]
    if variant == "cat":
        # into the list as channels-last where the convs write nhwc, blocked where they write a
        # blocked dst (nChw8c on AVX2), then through the partition into the last conv in that layout
        if all(dense(e["dst"]) and e["dst"] != "nchw" for e in convs[:2]):
            kept = "strided"
        elif all(not dense(e["dst"]) and e["dst"] == convs[0]["dst"] for e in convs[:2]):
            kept = convs[0]["dst"]
        else:
            kept = "plain"
        assert all(e["outputs"][0].endswith(kept) for e in convs[:2])
        assert part["outputs"][0].endswith(kept), part
        if AVX2_UP and kept != "plain":  # llga's kernel, in the parts' layout
            assert part["impl"] == "llga_cat_bnorm:avx2" and part["output"] == "kept", part
            assert part["src"] == part["dst"] == (kept if kept != "strided" else convs[0]["dst"]), part
    else:
        assert all(e["outputs"][0].endswith("plain") for e in convs[:2])  # stack's list wants plain items
        assert part["outputs"][0].endswith("plain")
        if AVX2_UP:
            assert part["impl"] == "llga_cat_bnorm:avx2" and part["src"] == "nchw", part


class CatBn(nn.Module):
    """Parts -> cat(dim) -> batch_norm (affine or not) [-> relu | sigmoid]; the parts are
    convolutions' outputs (blocked or channels-last where the primitive writes so), the
    graph's inputs (plain) or 3-D/5-D tensors."""

    def __init__(self, kind, rank=4, cout=(16, 8, 24), dim=1, affine=True, act="relu", width=None):
        super().__init__()
        torch.manual_seed(11)
        conv = {3: nn.Conv1d, 4: nn.Conv2d, 5: nn.Conv3d}[rank]
        bn = {3: nn.BatchNorm1d, 4: nn.BatchNorm2d, 5: nn.BatchNorm3d}[rank]
        self.kind, self.dim, self.act = kind, dim, act
        self.convs = nn.ModuleList([conv(8, co, 3, padding=1) for co in cout]) if kind == "convs" else None
        channels = sum(cout) if kind == "convs" and dim == 1 else (cout[0] if kind == "convs" else 8 * (3 if dim == 1 else 1))
        self.bn = bn(width or channels, affine=affine)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.2, 3)
            if affine:
                self.bn.weight.uniform_(-2, 2)
                self.bn.bias.uniform_(-1, 1)
        self.tail = conv(channels, 8, 1) if kind == "convs" and dim == 1 else None

    def forward(self, x):
        parts = [c(x) for c in self.convs] if self.convs is not None else [x, x * 2, x - 1]
        y = self.bn(torch.cat(parts, self.dim))
        y = torch.relu(y) if self.act == "relu" else torch.sigmoid(y) if self.act == "sigmoid" else y
        return self.tail(y) if self.tail is not None else y


def _input(rank, n=2, s=9):
    return torch.randn(n, 8, *([s + 2, s][: rank - 2] if rank == 4 else [s] * (rank - 2)))


# The concat_batchnorm partition against PyTorch at every layout its parts can come in,
# with and without relu or affine parameters, a sigmoid after it, concats it cannot
# take directly (another dim, channels that are not whole blocks), NaN and infinities.
# (Without an activation, a batch_norm before the 1x1 conv is folded into it.)
@pytest.mark.parametrize("case", [
    dict(kind="convs"), dict(kind="convs", affine=False),
    dict(kind="convs", act="sigmoid"), dict(kind="convs", cout=(12, 8, 8)), dict(kind="convs", rank=5),
    dict(kind="convs", rank=3), dict(kind="inputs"), dict(kind="inputs", rank=3), dict(kind="inputs", act=None),
    dict(kind="convs", dim=2, cout=(16, 16, 16)), dict(kind="inputs", dim=0),
], ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_concat_batchnorm_matches_pytorch(case):
    rank = case.get("rank", 4)
    model = CatBn(**case).eval()
    x = _input(rank)
    c = compile_and_check(model, x)
    log = [e for e in logged_call(c, x.numpy()) if e["depth"] == 0]
    part = [e for e in log if e["pattern"] == "concat_batchnorm"]
    assert len(part) == 1, [e["pattern"] for e in log]
    convs = [e for e in log if e["pattern"] == "conv_post_ops"][:3]
    direct = AVX2_UP and case.get("dim", 1) == 1 and case.get("act", "relu") != "sigmoid"
    if case["kind"] == "convs":
        one_layout = len({e["dst"] for e in convs}) == 1 and all(e["output"] == "kept" for e in convs)
        whole = all(co % 16 == 0 or (co % 8 == 0 and "8c" in convs[0]["dst"]) for co in case.get("cout", (16, 8, 24)))
        direct = direct and one_layout and (dense(convs[0]["dst"]) or whole) and convs[0]["dst"] != "nchw"
    if direct:
        assert part[0]["impl"] == "llga_cat_bnorm:avx2", part[0]
    else:
        assert part[0]["impl"] != "llga_cat_bnorm:avx2", part[0]
    x2 = _input(rank, n=3, s=5)
    if direct:  # llga's kernel keeps PyTorch's NaN rule (oneDNN's relu, on the other path, makes NaN 0)
        x2.view(-1)[::37] = float("nan")
        x2.view(-1)[5::41] = float("inf")
        x2.view(-1)[7::43] = -float("inf")
    with torch.no_grad():
        ref = model(x2)
    out = c(x2.numpy())
    np.testing.assert_allclose(out, ref.numpy(), rtol=1e-4, atol=1e-4, equal_nan=True)
    assert np.array_equal(np.isnan(out), np.isnan(ref.numpy()))


class MixedCat(nn.Module):
    """cat([x, conv3x3(x)]) -> batch_norm -> relu -> 1x1 conv: with x given
    channels-last, the parts come in two layouts (x's strides and the conv's
    blocked dst: Winograd's nChw16c on AVX-512, nChw8c on AVX2), as densenet's
    init features and new maps do on AVX-512."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(12)
        self.conv, self.bn, self.tail = nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(48), nn.Conv2d(48, 8, 1)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.2, 3)
            self.bn.weight.uniform_(-2, 2)
            self.bn.bias.uniform_(-1, 1)

    def forward(self, x):
        return self.tail(torch.relu(self.bn(torch.cat([x, self.conv(x)], 1))))


@pytest.mark.parametrize("batch", [1, 2])
def test_concat_batchnorm_of_parts_in_two_layouts(batch):
    model = MixedCat().eval()
    x = torch.randn(batch, 16, 16, 16)
    c = llga.optimize(torch.jit.trace(model, x, check_trace=False))
    x.view(-1)[::53] = float("nan")  # llga's kernel keeps PyTorch's NaN rule through the relu
    xcl = x.contiguous(memory_format=torch.channels_last)
    with torch.no_grad():
        want = model(xcl).numpy()
    for _ in range(2):
        log = logged_call(c, xcl.numpy())
        np.testing.assert_allclose(c(xcl.numpy()), want, rtol=1e-4, atol=1e-4, equal_nan=True)
    parts = next(e for e in log if e["op"] == "prim::ListConstruct")["inputs"]
    cat = next(e for e in log if e["pattern"] == "concat_batchnorm" and e["depth"] == 0)
    blocked = [p.split()[-1] for p in parts if p.split()[-1] not in ("strided", "plain")]
    if AVX2_UP and parts[0].endswith("strided") and len(blocked) == 1:  # the two layouts met: llga's kernel took them
        assert cat["impl"] == "llga_cat_bnorm:avx2" and "mixed layouts" in cat["detail"], (parts, cat)
    # and a plain x (a plain part among blocked ones): the concat's and batch_norm's own kernels
    x = torch.randn(batch, 16, 16, 16)
    with torch.no_grad():
        np.testing.assert_allclose(c(x.numpy()), model(x).numpy(), rtol=1e-4, atol=1e-4)


def test_concat_batchnorm_errors_name_the_op():
    model = CatBn("inputs").eval()  # 3 x 8 channels concatenated
    c = llga.optimize(torch.jit.trace(model, _input(4), check_trace=False))
    x = torch.randn(2, 7, 5, 5)  # 21 channels for statistics of 24
    with pytest.raises(Exception, match="batch_norm: statistics have 24 entries for 21 channels"):
        c(x.numpy())


class BnAfter(nn.Module):
    """batch_norm (-> relu) on a graph input, 1-D to 3-D, then maybe a conv."""

    def __init__(self, dims, affine, then_conv):
        super().__init__()
        torch.manual_seed(8)
        bn = {2: nn.BatchNorm1d, 3: nn.BatchNorm1d, 4: nn.BatchNorm2d, 5: nn.BatchNorm3d}[dims]
        self.bn = bn(24, affine=affine)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.5, 2)
        self.conv = nn.Conv2d(24, 8, 1) if then_conv else None

    def forward(self, x):
        y = torch.relu(self.bn(x))
        return self.conv(y) if self.conv is not None else y


# A plain NCHW batch_norm, for which oneDNN has only its non-jit ncsp kernel,
# runs on a blocked copy (jit) and its result stays blocked for a conv that
# reads it; graph outputs come out plain; other ranks and affine=False alike.
@pytest.mark.parametrize("dims,affine,then_conv", [
    (4, True, True), (4, False, False), (4, True, False), (2, True, False), (3, True, False), (5, False, False)])
def test_batch_norm_on_plain_nchw_runs_a_jit_kernel(dims, affine, then_conv):
    model = BnAfter(dims, affine, then_conv).eval()
    shape = {2: (6, 24), 3: (2, 24, 7), 4: (2, 24, 9, 11), 5: (1, 24, 3, 5, 6)}[dims]
    x = torch.randn(*shape)
    c = compile_and_check(model, x)
    bn = next(e for e in logged_call(c, x.numpy()) if e["pattern"] == "batchnorm_post_ops")
    if dims >= 4:  # a jit kernel, on the plain input or a blocked copy of it
        assert "jit" in bn["impl"], bn
    if then_conv and not dense(bn["src"]):  # the conv reads the blocked result as is
        assert bn["output"] == "kept" and bn["outputs"][0].endswith(bn["src"]), bn
    x2 = torch.randn(shape[0] + 1, *shape[1:-1], shape[-1] + (2 if dims >= 3 else 0))  # 2-D: [N, C]
    with torch.no_grad():
        assert_matches(c(x2.numpy()), model(x2))


class CatMixed(nn.Module):
    """Concats that cannot stay blocked: a plain part, channels that are not
    whole blocks, another dim; each then read by a conv."""

    def __init__(self, variant):
        super().__init__()
        torch.manual_seed(9)
        cout = 12 if variant == "partial_block" else 16
        self.c0, self.c1 = nn.Conv2d(8, cout, 3, padding=1), nn.Conv2d(8, cout, 3, padding=1)
        cin = {"plain_part": 24, "partial_block": 24, "height": 16}[variant]
        self.c2 = nn.Conv2d(cin, 8, 1)
        self.variant = variant

    def forward(self, x):
        a, b = torch.relu(self.c0(x)), torch.relu(self.c1(x))
        if self.variant == "plain_part":
            z = torch.cat([a, x], 1)
        elif self.variant == "partial_block":
            z = torch.cat([a, b], 1)
        else:
            z = torch.cat([a, b], 2)
        return self.c2(z)


@pytest.mark.parametrize("variant", ["plain_part", "partial_block", "height"])
def test_concat_of_parts_that_cannot_stay_blocked(variant):
    model = CatMixed(variant).eval()
    x = torch.randn(2, 8, 10, 12)
    c = compile_and_check(model, x)
    cat = next(e for e in logged_call(c, x.numpy()) if e["pattern"] == "concat")
    assert "blocked parts" not in (cat["layouts"] or ""), cat
    with torch.no_grad():
        x2 = torch.randn(1, 8, 7, 5)
        assert_matches(c(x2.numpy()), model(x2))


class WinoChain(nn.Module):
    """conv(cin->64, stride) -> relu -> conv 3x3 -> relu [+ residual] -> conv 1x1: the middle
    3x3 convs are Winograd's when the shape pays and their output may stay blocked."""

    def __init__(self, cin=64, stride=1, k=3, residual=False):
        super().__init__()
        torch.manual_seed(3)
        self.c1 = nn.Conv2d(cin, 64, k, stride=stride, padding=k // 2)
        self.c2 = nn.Conv2d(64, 64, 3, padding=1)
        self.c3 = nn.Conv2d(64, 32, 1)
        self.residual = residual

    def forward(self, x):
        y = torch.relu(self.c1(x))
        z = self.c2(y)
        z = torch.relu(z + y if self.residual else z)
        return self.c3(z)


def wino_flags(compiled):
    """Which convolutions run as oneDNN's Winograd."""
    return ["wino" in p.impl and not p.impl.startswith("llga_wino") for p in compiled.partitions
            if p.pattern == "conv_post_ops"]


def own_wino_flags(compiled):
    """Which convolutions run as llga's own Winograd."""
    return [p.impl.startswith("llga_wino") for p in compiled.partitions if p.pattern == "conv_post_ops"]


# Winograd F(2x2,3x3) for 3x3 stride-1 convolutions with 16+ channels and
# 196+ output pixels (ops/conv.cpp measures why), in its blocked layout kept
# between partitions; the last 1x1 conv reads that layout too. Other batches
# and sizes specialize again and still match PyTorch. Where oneDNN has no
# Winograd, llga's own takes 3x3 stride-1 convolutions with 64+ channels in
# and 32+ out at any size (`own`), in nChw8c.
@pytest.mark.parametrize("kw,hw,want,own", [
    (dict(), 28, [True, True, False], [True, True, False]),
    (dict(residual=True), 28, [True, True, False], [True, True, False]),  # the residual add is a sum post-op in Winograd too
    (dict(cin=3), 28, [False, True, False], [False, True, False]),  # a 3-channel stem is slower in Winograd
    (dict(stride=2), 56, [False, True, False], [False, True, False]),
    (dict(k=1), 28, [False, True, False], [False, True, False]),
    (dict(), 8, [False, False, False], [True, True, False]),  # 64 pixels: oneDNN's direct is faster, llga's not
])
def test_winograd_where_it_pays_and_layouts_flow(kw, hw, want, own):
    model = WinoChain(**kw)
    cin = kw.get("cin", 64)
    c = compile_and_check(model, torch.randn(1, cin, hw, hw))
    if not WINOGRAD:  # oneDNN has no Winograd on this CPU: direct or llga's own, results the same
        want = [False] * len(want)
    if not OWN_WINOGRAD:
        own = [False] * len(own)
    assert wino_flags(c) == want and own_wino_flags(c) == own, [p.impl for p in c.partitions]
    convs = [p for p in c.partitions if p.pattern == "conv_post_ops"]
    if want[:2] == [True, True]:  # Winograd to Winograd: read in the producer's nChw16c, no reorder between
        assert convs[0].dst == convs[1].src == "nChw16c", [p.layouts for p in convs]
    if want[1]:  # a direct conv reorders it to its own src layout (brgconv's nhwc; ops/conv.cpp: faster than jit on nChw16c)
        assert convs[1].output == "kept" and convs[2].src != "nChw16c", [p.layouts for p in convs]
    if own[:2] == [True, True]:  # llga's Winograd reads and writes nChw8c, kept between the convolutions
        assert convs[0].dst == convs[1].src == convs[1].dst == "nChw8c", [p.layouts for p in convs]
        assert convs[0].output == convs[1].output == "kept", [p.layouts for p in convs]
    for shape in [(3, cin, hw, hw), (1, cin, hw + 6, hw + 2)]:
        x = torch.randn(*shape)
        with torch.no_grad():
            np.testing.assert_allclose(c(x.numpy()), model(x).numpy(), rtol=1e-4, atol=1e-4)


def test_winograd_off_switch_and_agreement(monkeypatch):
    model, x = WinoChain(residual=True), torch.randn(2, 64, 28, 28)
    on = compile_and_check(model, x)
    monkeypatch.setenv("LLGA_WINOGRAD", "0")
    off = compile_and_check(model, x)
    assert any(wino_flags(on)) == WINOGRAD and not any(wino_flags(off))
    assert any(own_wino_flags(on)) == OWN_WINOGRAD and not any(own_wino_flags(off))
    a, b = on(x.numpy()), off(x.numpy())
    assert np.abs(a - b).max() <= 1e-5 * np.abs(b).max()


def wino_weight_formats(compiled):
    """The Winograd weight format oneDNN reports for each Winograd conv on the latest call."""
    return [p.weights for p in compiled.partitions
            if p.pattern == "conv_post_ops" and "wino" in p.impl and not p.impl.startswith("llga_wino")]


def test_winograd_weights_kept_and_shared_at_batch_one():
    model = WinoChain()
    c = compile_and_check(model, torch.randn(1, 64, 28, 28))
    cache = c.memory["weight_cache"]
    formats = wino_weight_formats(c)
    assert len(formats) == (2 if WINOGRAD else 0) and all(f.startswith("wino_") for f in formats), formats
    # A Winograd copy cannot stand in for the original (oneDNN reorders only
    # into that format), so the two 3x3 weights stay; the 1x1's is released
    # (and every one of them where all three convs are direct).
    assert c.memory["weights"] == (2 * 64 * 64 * 9 * 4 if WINOGRAD or OWN_WINOGRAD else 0) + 2 * 64 * 4 + 32 * 4
    # Other shapes share the transformed weights wherever oneDNN's kernel for
    # them takes the same Winograd format (its F(2x2,3x3) kernel's format does
    # not depend on the shape; its F(4x4,3x3) kernel's blocking may): the
    # cache grows only when oneDNN reports a format not made before.
    seen = set(formats)
    for shape in [(1, 64, 30, 34), (1, 64, 56, 56), (1, 64, 28, 28), (1, 64, 30, 34)]:
        x = torch.randn(*shape)
        with torch.no_grad():
            np.testing.assert_allclose(c(x.numpy()), model(x).numpy(), rtol=1e-4, atol=1e-4)
        now = wino_weight_formats(c)
        grew = c.memory["weight_cache"] > cache
        assert grew == (not set(now) <= seen), (shape, now, seen, cache, c.memory["weight_cache"])
        seen |= set(now)
        cache = c.memory["weight_cache"]


class OwnWinoBlock(nn.Module):
    """conv 3x3 -> act -> conv 3x3 [+ residual] -> act -> conv 1x1: the two 3x3
    convolutions are llga's Winograd where oneDNN has none."""

    def __init__(self, ch, pad, act, residual, bias):
        super().__init__()
        torch.manual_seed(ch + pad)
        self.c1 = nn.Conv2d(ch, ch, 3, padding=pad, bias=bias)
        self.c2 = nn.Conv2d(ch, ch, 3, padding=1, bias=bias)
        self.c3 = nn.Conv2d(ch, 16, 1)
        self.act = {"relu": torch.relu, "leaky": lambda t: F.leaky_relu(t, 0.1), "none": lambda t: t}[act]
        self.residual = residual

    def forward(self, x):
        y = self.act(self.c1(x))
        z = self.c2(y)
        return self.c3(self.act(z + y if self.residual else z))


# Shapes that reach every edge of llga's kernel: output channels that end in
# half a 16-channel slab (72), partial 2x2 tiles (odd sizes), a 1x1 input,
# padding 0 and 2, batches, no bias, leaky relu, the residual as a sum, and
# both ways of splitting a call between threads (few tiles: phases shared by
# the threads; many: chunks per thread, also with one thread).
@pytest.mark.parametrize("ch,hw,pad,batch,act,residual,bias,threads", [
    (64, (28, 28), 1, 1, "relu", True, True, 2),
    (72, (7, 9), 1, 1, "relu", True, True, 2),
    (64, (1, 1), 1, 2, "none", False, True, 2),
    (64, (10, 13), 0, 3, "leaky", False, False, 2),
    (80, (9, 6), 2, 1, "relu", False, True, 2),
    (64, (56, 56), 1, 1, "relu", True, True, 2),
    (72, (28, 30), 1, 2, "leaky", True, True, 1),
])
def test_own_winograd_matches_pytorch(ch, hw, pad, batch, act, residual, bias, threads):
    old = llga.get_num_threads()
    llga.set_num_threads(threads)
    try:
        model = OwnWinoBlock(ch, pad, act, residual, bias).eval()
        x = torch.randn(batch, ch, *hw)
        with torch.no_grad():
            traced = torch.jit.trace(model, x, check_trace=False)
            ref = model(x).numpy()
        c = llga.optimize(traced)
        out = c(x.numpy())
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * np.abs(ref).max())
        assert own_wino_flags(c)[:2] == [OWN_WINOGRAD] * 2, [p.impl for p in c.partitions]
        # Another shape specializes again, sharing the transformed weights.
        cache = c.memory["weight_cache"]
        x2 = torch.randn(1, ch, hw[0] + 3, hw[1] + 1)
        with torch.no_grad():
            ref2 = model(x2).numpy()
        np.testing.assert_allclose(c(x2.numpy()), ref2, rtol=1e-4, atol=1e-5 * np.abs(ref2).max())
        assert c.memory["weight_cache"] == cache or not OWN_WINOGRAD
    finally:
        llga.set_num_threads(old)


def test_own_winograd_takes_a_channels_last_models_weights():
    """OHWI-strided weights (a model converted to channels_last) are read at
    their strides when transformed."""
    torch.manual_seed(5)
    model = nn.Sequential(nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(),
                          nn.Conv2d(64, 8, 1)).eval().to(memory_format=torch.channels_last)
    assert not model[0].weight.is_contiguous()
    x = torch.randn(1, 64, 20, 20)
    c = compile_and_check(model, x)
    assert own_wino_flags(c)[:2] == [OWN_WINOGRAD] * 2, [p.impl for p in c.partitions]


class SqueezeExcite(nn.Module):
    """conv -> relu -> x * sigmoid(1x1(relu(1x1(pool(x))))) -> conv, as
    torchvision's SqueezeExcitation (scale * x) and other ways round."""

    def __init__(self, form, ch=32):
        super().__init__()
        torch.manual_seed(6)
        self.c1 = nn.Conv2d(16, ch, 3, padding=1)
        self.f1, self.f2 = nn.Conv2d(ch, 8, 1), nn.Conv2d(8, ch, 1)
        self.c2 = nn.Conv2d(ch, 16, 1)
        self.form = form

    def forward(self, x):
        y = torch.relu(self.c1(x))
        s = torch.sigmoid(self.f2(torch.relu(self.f1(F.adaptive_avg_pool2d(y, 1)))))
        if self.form == "scale_first":
            z = s * y
        elif self.form == "scale_last":
            z = y * s
        elif self.form == "sub_reversed":  # s - y: not commutative, y comes second
            z = s - y
        elif self.form == "flat_scale":  # a plain per-channel vector, broadcast from the right
            z = y * s[0, :, 0, 0][None, :, None, None]
        elif self.form == "spatial":  # not per channel
            z = y * y.mean(1, keepdim=True)
        else:  # "to_output": the product is also a graph output
            z = s * y
            return self.c2(z), z
        return self.c2(z)


# add, sub and mul between convolutions take an operand in a convolution's
# blocked layout and keep the result so, where the other operand is a
# per-channel scale (or in the same layout): the squeeze-excite scale of
# efficientnet and regnet. Elsewhere they take the blocked operand plain.
# Either way PyTorch's numbers; the decision is checked against the layout
# oneDNN gave the producing convolution on this CPU.
@pytest.mark.parametrize("form,blocked", [
    ("scale_first", True), ("scale_last", True), ("sub_reversed", False), ("flat_scale", False),
    ("spatial", False), ("to_output", False)])
def test_binary_ops_keep_a_convolutions_blocked_layout(form, blocked):
    model = SqueezeExcite(form).eval()
    x = torch.randn(2, 16, 20, 18)
    c = compile_and_check(model, x)
    log = [e for e in logged_call(c, x.numpy()) if e["depth"] == 0]
    conv = next(e for e in log if e["pattern"] == "conv_post_ops")
    op = next(e for e in log if e["op"] in ("aten::mul", "aten::sub"))
    producer_blocked = conv["output"] == "kept" and not dense(conv["dst"])
    # oneDNN 2.6 has only its reference kernel for some of these (nChw16c
    # times a per-(batch, channel) scale on AVX-512): then plain, as it says
    declined = "reference kernel" in (op.get("detail") or "")
    if declined:
        assert op["outputs"][0].endswith("plain") and op["src"] == conv["dst"], op
    elif blocked and producer_blocked and AVX2_UP:  # a binary primitive in that layout; the result stays in it
        assert op["impl"] and op["src"] == op["dst"] == conv["dst"] and op["output"] == "kept", op
        assert op["outputs"][0].endswith(conv["dst"]), op
    elif not blocked:
        assert not op["impl"], op
    for shape in [(1, 16, 9, 11), (2, 16, 20, 18)]:
        x2 = torch.randn(*shape)
        with torch.no_grad():
            assert_matches(c(x2.numpy()), model(x2))


@pytest.mark.parametrize("batch", [1, 3])
def test_channels_last_model_weights_on_every_path(batch):
    """A model converted with .to(memory_format=torch.channels_last) has
    OHWI-strided weights: the Winograd path (which oneDNN fills only from
    plain OIHW) and the direct one both take them. It used to fail at the
    first call with 'could not create a primitive descriptor for a reorder'."""
    torch.manual_seed(4)
    model = nn.Sequential(nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1))
    model = model.eval().to(memory_format=torch.channels_last)
    assert not model[0].weight.is_contiguous()
    x = torch.randn(batch, 32, 28, 28)
    c = compile_and_check(model, x)
    if llga.cpu_capabilities()["winograd"]:  # oneDNN has Winograd here: llga's rule picks it for the first conv
        assert wino_flags(c)[0], [p.impl for p in c.partitions]
    for xx in (x.to(memory_format=torch.channels_last), torch.randn(batch, 32, 20, 24)):
        with torch.no_grad():
            np.testing.assert_allclose(c(xx.numpy()), model(xx).numpy(), rtol=1e-4, atol=1e-4)


def test_kernel_reports_are_fields_in_partitions_and_the_kernel_log():
    """What a kernel did reaches Python as fields (a KernelReport), the same
    in compiled.partitions and in the kernel log; the layouts column is their
    one-line rendering, never something to parse."""
    x = torch.randn(1, 16, 20, 20)
    c = compile_and_check(ConvChain(), x)
    log = [e for e in logged_call(c, x.numpy()) if e["pattern"] == "conv_post_ops"]
    parts = [p for p in c.partitions if p.pattern == "conv_post_ops"]
    assert len(log) == len(parts) == 2
    for p, e in zip(parts, log):
        assert ":" in p.impl and p.src and p.weights and p.dst and p.output in ("kept", "plain"), p
        assert p.layouts == f"src {p.src} wei {p.weights} dst {p.dst} ({'kept' if p.output == 'kept' else 'to plain'})"
        assert (e["impl"], e["src"], e["weights"], e["dst"], e["output"]) == (p.impl, p.src, p.weights, p.dst, p.output)


class _GruGate(torch.nn.Module):
    """A ConvGRU's gates (RAFT's update block): the conv of the candidate
    fuses tanh, a multiply by the gate and the residual add."""

    def __init__(self):
        super().__init__()
        self.convz = torch.nn.Conv2d(36, 16, 3, padding=1)
        self.convq = torch.nn.Conv2d(36, 16, 3, padding=1)

    def forward(self, h, x):
        hx = torch.cat([h, x], 1)
        z = torch.sigmoid(self.convz(hx))
        q = torch.tanh(self.convq(hx))
        return (1 - z) * h + z * q


def test_conv_with_gate_operands_avoids_the_reference_kernel():
    # In the layout oneDNN picks freely, this chain (tanh, mul by z in
    # another layout, add) has only oneDNN's reference kernel (100x slower
    # in RAFT); llga then gives the operands in a layout a jit kernel takes.
    m = _GruGate().eval()
    h, x = torch.randn(1, 16, 12, 14), torch.randn(1, 20, 12, 14)
    with torch.no_grad():
        c = llga.optimize(torch.jit.trace(m, (h, x)), (h, x))
        want = m(h, x).numpy()
    np.testing.assert_allclose(c(h.numpy(), x.numpy()), want, rtol=1e-5, atol=1e-5)
    impls = [str(k.impl) for k in c._impl.kernel_reports().values()]
    assert len(impls) == 2 and not any(i.startswith("ref") for i in impls), impls


def _onednn_log(script):
    """Runs `script` (which prints "parity ok") under DNNL_VERBOSE in a fresh
    process; the implementations oneDNN ran, by primitive kind."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, DNNL_VERBOSE="1", PYTHONPATH=os.path.dirname(os.path.dirname(llga.__file__)))
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and "parity ok" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    impls = {}
    for line in r.stdout.splitlines():
        f = line.split(",")
        if line.startswith(("onednn_verbose,exec,cpu,", "dnnl_verbose,exec,cpu,")) and len(f) > 4:
            impls.setdefault(f[3], []).append(f[4])
    return impls


_PERMUTED_BINARY = """
import numpy as np, torch, llga

def f(q, k, x, g, y, s, m, w, bias):
    qt = q.view(100, 4, 16).transpose(0, 1)  # dense, dims in memory order 1, 0, 2 (emformer's scaled query)
    kt = k.view(100, 4, 16).transpose(0, 1)
    # convnext's layer scale: a 16x1x1 gain on an NHWC result seen as NCHW
    # (the gain's size-1 dims, permuted, looked like a blocked layout), and
    # its NCHW shortcut added to that NHWC branch
    xt = torch.tanh(x).permute(0, 3, 1, 2)
    # swin's shifted-window mask, shared by the heads (oneDNN's jit kernel
    # takes it once the dims are merged: 8x3x49 + 8x1x49)
    masked = torch.tanh(s).view(1, 32, 3, 7, 7) + m.unsqueeze(1).unsqueeze(0)
    # and its position bias added to the attention scores (a post-op of the matmul)
    scores = torch.matmul(s, w) + bias
    # mvit's relative positions added in place into a slice (a strided dst:
    # oneDNN has only ref for it; llga's own loop runs it), and a broadcast
    # first operand of a non-commuting op
    attn = torch.tanh(w)
    attn[:, :, 1:, 1:] += bias[:, :, 1:, 1:]
    return (qt * 0.25, qt + kt, qt - torch.arange(16.0), torch.maximum(qt, kt), g * xt, xt + y, masked, scores,
            attn, torch.arange(16.0) - qt)

# sizes above kSmallBinaryElements (4096), below which llga's own loop runs instead of oneDNN
q, k = torch.randn(100, 1, 64), torch.randn(100, 1, 64)
x, g, y = torch.randn(1, 24, 14, 16), torch.randn(16, 1, 1), torch.randn(1, 16, 24, 14)
s, m, w, bias = torch.randn(32, 3, 7, 7), torch.randn(32, 7, 7), torch.randn(32, 3, 7, 7), torch.randn(1, 3, 7, 7)
args = (q, k, x, g, y, s, m, w, bias)
c = llga.optimize(torch.jit.trace(f, args))
for got, want in zip(c(*[t.numpy() for t in args]), f(*args)):
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-6, atol=1e-6)
print("parity ok")
"""


def test_binary_of_permuted_operands_avoids_the_reference_kernel():
    # oneDNN's binary has a jit kernel for a row-major dst only: a transposed
    # operand went to its reference kernel (120 us for 1600 floats, a third of
    # emformer's time). An elementwise result does not depend on the dims'
    # order, so llga runs it in the dst's memory order; oneDNN's own log says
    # which kernel ran.
    log = _onednn_log(_PERMUTED_BINARY)
    binaries = log.get("binary", [])
    assert len(binaries) >= 7 and not [i for i in binaries if i.startswith("ref")], binaries
    matmuls = log.get("matmul", [])
    assert len(matmuls) == 1 and not matmuls[0].startswith("ref"), matmuls


def test_gemm_kernel_gets_the_linear_weight_transposed():
    # Where oneDNN runs a linear on its gemm kernel (no brgemm: AVX2 CPUs), it
    # packs the weights on every call, faster from PyTorch's own N x K layout
    # than from the K x N it picks (vit's 768 -> 3072 linear: 82 -> 130
    # GFLOP/s): llga gives it that. Where it runs brgemm, oneDNN's blocked
    # choice stands. What oneDNN reports decides which applies.
    torch.manual_seed(5)
    model = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 32))
    x = torch.randn(1, 20, 64)
    c = compile_and_check(model, x)
    mms = [e for e in logged_call(c, x.numpy()) if e["pattern"] == "matmul_post_ops"]
    assert len(mms) == 2, mms
    for e in mms:
        if e["impl"].startswith("gemm:jit"):
            assert e["weights"] == "ba", e


_ROW_REDUCTIONS = """
import numpy as np, torch, llga

def f(x):
    q = x.permute(2, 0, 3, 1, 4)[0]  # swin v2's q of a permuted qkv, a strided view
    return (torch.nn.functional.normalize(q, dim=-1), q.norm(dim=-1), q.sum(-1), q.amax(-1, keepdim=True),
            q.mean([-2, -1]), torch.linalg.vector_norm(q, 3.0, -1))

x = torch.randn(4, 49, 3, 3, 32)
c = llga.optimize(torch.jit.trace(f, x))
for got, want in zip(c(x.numpy()), f(x)):
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)
print("parity ok")
"""


def test_row_reductions_avoid_onednns_slow_kernels():
    # oneDNN's lp-norm reduction has only its reference kernel (15 ms for swin
    # v2's 64x3x49x32 q.norm(dim=-1)) and its jit sum over a short inner dim
    # is slow too: reductions over the innermost dims run in llga's own row
    # loop. oneDNN's log shows no reduction at all for these.
    reductions = _onednn_log(_ROW_REDUCTIONS).get("reduction", [])
    assert not reductions, reductions[:3]


_MIDDLE_AXIS = """
import numpy as np, torch, llga

def f(mask, flow):
    # RAFT's convex upsampling: a softmax and a sum over dim 2 of [1, C, 9, 8, 8, h, w]
    up = torch.softmax(mask.view(1, 1, 9, 8, 8, 6, 7), dim=2)
    return torch.sum(up * flow.view(1, 2, 9, 1, 1, 6, 7), dim=2), torch.log_softmax(mask, 1), flow.amax(1)

mask, flow = torch.randn(1, 576, 6, 7) * 3, torch.randn(1, 18, 6, 7)
c = llga.optimize(torch.jit.trace(f, (mask, flow)))
for got, want in zip(c(mask.numpy(), flow.numpy()), f(mask, flow)):
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)
print("parity ok")
"""


def test_softmax_and_reductions_over_a_middle_axis_avoid_onednns_slow_kernels():
    # oneDNN 2.6's softmax has a jit kernel only with the axis innermost (RAFT's
    # softmax over 9 of [1, 1, 9, 8, 8, h, w] ran in its reference kernel, 24 ms
    # a call) and its reduction over a middle dim is slow (7 ms): the softmax
    # runs on a copy with the axis innermost, the reductions in llga's own loop.
    impls = _onednn_log(_MIDDLE_AXIS)
    softmax = [i for kind, run in impls.items() if kind.startswith("softmax") for i in run]  # softmax_v2 in 2.6
    assert len(softmax) == 2 and not [i for i in softmax if i.startswith("ref")], impls
    assert not impls.get("reduction"), impls["reduction"][:3]


def test_conv_with_a_full_size_binary_operand_keeps_a_jit_kernel():
    # RAFT's GRU gate: conv -> sigmoid -> mul(h). Where oneDNN's jit convolution
    # takes no full-size binary operand (AVX2), it offered only its gemm or
    # reference kernel for the chain (a third of the jit speed); llga then runs
    # the conv with the sigmoid on the jit kernel and the mul as a binary
    # primitive in place. What oneDNN picks for the conv alone decides.
    torch.manual_seed(6)

    class Gate(nn.Module):
        def __init__(self, tail):
            super().__init__()
            self.conv, self.tail = nn.Conv2d(48, 16, (1, 5), padding=(0, 2)), tail

        def forward(self, x, h, r):
            z = torch.sigmoid(self.conv(x))
            return (z * h + r).relu() if self.tail else z

    x, h, r = torch.randn(1, 48, 12, 14), torch.randn(1, 16, 12, 14), torch.randn(1, 16, 1, 1)
    alone = compile_and_check(Gate(False), x, h, r)
    (conv_alone,) = [e["impl"] for e in logged_call(alone, x.numpy(), h.numpy(), r.numpy()) if e["pattern"] == "conv_post_ops"]
    chain = compile_and_check(Gate(True), x, h, r)
    (conv_chain,) = [e["impl"] for e in logged_call(chain, x.numpy(), h.numpy(), r.numpy()) if e["pattern"] == "conv_post_ops"]
    assert [p.ops for p in chain.partitions] == [["aten::_convolution", "aten::sigmoid", "aten::mul", "aten::add", "aten::relu"]]
    slow = ("gemm", "ref")
    if not any(s in conv_alone for s in slow):
        assert not any(s in conv_chain for s in slow), (conv_alone, conv_chain)


@pytest.mark.parametrize("chain", ["mul", "mul_tanh", "mul_tanh_abs_add"])
def test_split_chain_on_a_four_channel_block(chain):
    # A grouped 1x1 convolution with 4 channels a group runs in nChw4c on
    # AVX-512; its full-size mul(x) ran as a binary primitive in place, and
    # oneDNN 2.6's jit binary with eltwise post-ops on that layout wrote past
    # its dst (heap corruption; fuzz seed 1795823769). llga splits such a
    # chain only where the tail needs no post-ops there. Several calls: the
    # corruption showed on a later allocation.
    torch.manual_seed(9)
    w = torch.randn(8, 4, 1, 1)

    class Grouped(nn.Module):
        def forward(self, x):
            y = F.conv2d(x, w, None, groups=2) * x
            if chain != "mul":
                y = torch.tanh(y)
            if chain == "mul_tanh_abs_add":
                y = y.abs() + 0.5
            return y

    x = torch.randn(1, 8, 8, 11)
    c = compile_and_check(Grouped(), x)
    with torch.no_grad():
        want = Grouped()(x).numpy()
    for _ in range(4):
        np.testing.assert_allclose(c(x.numpy()), want, rtol=1e-5, atol=1e-5)


class _BinaryChain(nn.Module):
    def __init__(self, oc, mode):
        super().__init__()
        self.conv, self.mode = nn.Conv2d(24, oc, 3, padding=1), mode

    def forward(self, x, r, r0, g):
        y = self.conv(x)
        if self.mode == 0:
            return torch.sigmoid(y) * r
        if self.mode == 1:
            return (y * r) - r0
        if self.mode == 2:
            return (r + y) - r0  # RAFT's last coords1 + delta_flow - coords0
        if self.mode == 3:
            return torch.relu(torch.sigmoid(y) * r * g)
        if self.mode == 4:
            return torch.tanh(y * g + r)
        return torch.tanh(y * r)  # an eltwise op after the full-size operand (wrong at batch 2 once)


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("oc", [2, 3, 10, 16])
@pytest.mark.parametrize("mode", range(6))
def test_conv_chains_with_binary_operands_match_on_channel_padded_layouts(oc, mode, batch):
    # Channel counts that do not fill a blocked layout's block (2 of nChw8c) with
    # one or more full-size or per-channel operands, in whichever form the
    # chain runs on this CPU (one primitive, or split into binary primitives:
    # oneDNN 2.6's binary post-ops on such a layout gave wrong values).
    torch.manual_seed(oc * 10 + mode)
    x = torch.randn(batch, 24, 9, 11)
    r, r0, g = torch.randn(batch, oc, 9, 11), torch.randn(batch, oc, 9, 11), torch.randn(1, oc, 1, 1)
    c = compile_and_check(_BinaryChain(oc, mode), x, r, r0, g)
    assert [p.pattern for p in c.partitions] == ["conv_post_ops"]


def test_interleaved_strided_views_reach_onednn_as_dense_copies():
    # x[..., ::2] of a row of 11 has strides oneDNN cannot describe (2 x 6 > 11:
    # "could not construct a memory descriptor using strides"); ops that only
    # read such a view get a dense copy, ops that write through it still write
    # the caller's memory. Found by scripts/fuzz_graphs.py.
    torch.manual_seed(9)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.lin = nn.Conv2d(8, 4, 3), nn.Linear(6, 5)

        def forward(self, x, y):
            v = x[:, :, :, 0::2]
            w = y[:, 0::2]
            out = (self.conv(v), self.lin(v), v / 3.0, v + v, torch.matmul(v, v.transpose(-1, -2)),
                   torch.nn.functional.avg_pool2d(v, 2), w.abs())
            v.mul_(0.5)  # through the view, into x
            return out

    m = M().eval()
    x, y = torch.randn(2, 8, 8, 11), torch.randn(3, 9)
    with torch.no_grad():
        traced = torch.jit.trace(m, (x.clone(), y), check_trace=False)
        x_after = x.clone()
        want = m(x_after, y)
    c = llga.optimize(traced)
    xs = x.numpy().copy()
    got = c(xs, y.numpy())
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(xs, x_after.numpy(), rtol=1e-6)  # written through the view, as PyTorch did


# A post-op operand in every stride form, at the traced batch and others: oneDNN 2.6's
# gemm-based matmul read an operand with gaps between its rows (y[:, :1] of a batch of 2+)
# at dense offsets (graph fuzzer seed 120632: off by 2.0), and its brgemm convolutions and
# products read a broadcast operand strided along its one varying dim (per channel, per
# column) as if dense (seed 311762 of the signals family: off by 1.8).
OPERAND_FORMS = {
    "channel-step": lambda y: y.mean((2, 3), keepdim=True).repeat(1, 2, 1, 1)[:, ::2],
    "channel-split": lambda y: torch.split(nn.functional.adaptive_avg_pool2d(y, (1, 2)), [1, 1], 3)[1],
    "column-step": lambda y: y.repeat(1, 1, 1, 2)[:1, :1, :1, ::2],
    "channel-slice": lambda y: y[:, :1],
    "transposed": lambda y: y.transpose(-1, -2),
    "step-slice": lambda y: y.repeat(1, 1, 1, 2)[..., ::2],
    "expanded": lambda y: y[:, :1].expand(-1, 3, -1, -1),
    "channels-last": lambda y: y.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2),
    "transposed-channel": lambda y: y.transpose(-1, -2)[:, :1],
}


@pytest.mark.parametrize("binop", ["mul", "add"])
@pytest.mark.parametrize("anchor", ["matmul", "conv", "linear"])
@pytest.mark.parametrize("form", list(OPERAND_FORMS))
def test_post_op_operands_in_every_stride_form(form, anchor, binop):
    torch.manual_seed(0)
    w = torch.randn(3, 3, 3, 3) * 0.3
    lw = torch.randn(8, 8) * 0.3
    make = OPERAND_FORMS[form]

    class M(torch.nn.Module):
        def forward(self, x, y):
            o = (torch.matmul(x, x.transpose(-1, -2)) if anchor == "matmul" else nn.functional.conv2d(x, w, padding=1)
                 if anchor == "conv" else nn.functional.linear(x, lw))
            e = make(y)
            return torch.tanh(o * e if binop == "mul" else o + e)

    x1, y1 = torch.randn(1, 3, 8, 8), torch.randn(1, 3, 8, 8)
    c = llga.optimize(torch.jit.trace(M(), (x1, y1)), [x1, y1])
    assert any(p.pattern.endswith("post_ops") for p in c.partitions)
    for b in (1, 2, 3):
        rng = np.random.default_rng(b)
        x, y = (rng.standard_normal((b, 3, 8, 8), dtype=np.float32) for _ in range(2))
        with torch.no_grad():
            want = M()(torch.from_numpy(x), torch.from_numpy(y)).numpy()
        for _ in range(2):
            np.testing.assert_allclose(c(x, y), want, rtol=1e-4, atol=1e-5, err_msg=f"batch {b}")


class GroupedBetween1x1(nn.Module):
    """1x1 -> grouped 3x3 (4 groups of 16, regnet's shape of block) -> 1x1."""

    def __init__(self, stride):
        super().__init__()
        torch.manual_seed(13)
        self.c1, self.c2 = nn.Conv2d(16, 64, 1), nn.Conv2d(64, 32, 1)
        self.g = nn.Conv2d(64, 64, 3, stride=stride, padding=1, groups=4)

    def forward(self, x):
        return self.c2(torch.relu(self.g(torch.relu(self.c1(x)))))


@pytest.mark.parametrize("stride", [1, 2])
def test_grouped_conv_follows_a_channels_last_input(stride):
    """Where the 1x1 before it hands on channels-last (brgconv's nhwc, as
    strides), a grouped convolution runs nhwc in and out: no reorder into
    oneDNN's nChw16c and back. Elsewhere (AVX2's nChw8c) it takes what
    oneDNN picks."""
    x = torch.randn(1, 16, 28, 28)
    c = compile_and_check(GroupedBetween1x1(stride), x)
    log = [e for e in logged_call(c, x.numpy()) if e["pattern"] == "conv_post_ops" and e["depth"] == 0]
    first, grouped, last = log
    if dense(first["dst"]) and first["dst"] != "nchw":
        assert grouped["inputs"][0].endswith("strided"), grouped
        assert grouped["src"] == grouped["dst"] == "nhwc", grouped
        assert last["inputs"][0].endswith("strided") and last["src"] == "nhwc", last
    else:
        assert not dense(grouped["src"]) or grouped["src"] == "nchw", grouped


class ConvGroupNormConv(nn.Module):
    """wav2vec2's feature extractor block: conv -> GroupNorm -> gelu -> conv
    (1-D), or the same in 2-D; `shift` moves the conv's output far from zero
    (the statistics must not lose the variance to the mean)."""

    def __init__(self, dims, groups, affine, shift=0.0):
        super().__init__()
        torch.manual_seed(0)
        conv = nn.Conv1d if dims == 1 else nn.Conv2d
        self.c1 = conv(8, 32, 3, stride=2)
        self.norm = nn.GroupNorm(groups, 32, affine=affine)
        if affine:
            with torch.no_grad():
                self.norm.weight.uniform_(0.5, 1.5)
                self.norm.bias.normal_(0.0, 0.5)
        self.c2 = conv(32, 16, 3, stride=2)
        self.shift = shift

    def forward(self, x):
        return self.c2(F.gelu(self.norm(self.c1(x) + self.shift)))


@pytest.mark.parametrize("dims,groups,affine,batch", [
    (1, 32, True, 1), (1, 32, False, 2), (1, 4, True, 2), (2, 8, True, 1), (2, 1, True, 2)])
def test_group_norm_keeps_a_channels_last_convolution_output(dims, groups, affine, batch):
    """Where the convolution before it hands out channels-last (brgconv's
    nwc/nhwc, as strides), group_norm runs llga's own kernel on it and its
    result, and gelu's, stay channels-last for the next convolution: no
    transposition to plain and back. Elsewhere (a blocked dst) the plain path
    runs; both match PyTorch."""
    x = torch.randn(batch, 8, 401) if dims == 1 else torch.randn(batch, 8, 41, 37)
    c = compile_and_check(ConvGroupNormConv(dims, groups, affine), x)
    log = logged_call(c, x.numpy())
    first = [e for e in log if e["pattern"] == "conv_post_ops" and e["depth"] == 0][0]
    norm = [e for e in log if e["op"] == "aten::group_norm"][0]
    tag = "nwc" if dims == 1 else "nhwc"
    if first["dst"] == tag:  # oneDNN took channels-last for it
        assert first["output"] == "kept", first
        assert norm["impl"] == "llga_group_norm" and norm["src"] == tag and norm["output"] == "kept", norm
        gelu = [e for e in log if e["op"] == "aten::gelu"][0]
        assert gelu["outputs"][0].endswith("strided"), gelu
    else:
        assert norm["impl"] is None, norm


@pytest.mark.parametrize("groups", [32, 2])
def test_group_norm_of_values_far_from_zero(groups):
    """Values near 1000 with a spread near 1: the variance is not lost to the
    mean. Against float64, llga's error stays within PyTorch float32's own
    (the input's rounding at 1000 dominates both)."""
    model = ConvGroupNormConv(1, groups, True, shift=1000.0).eval()
    x = torch.randn(1, 8, 401)
    with torch.no_grad():
        c = llga.optimize(torch.jit.trace(model, (x,)))
        ref32 = model(x).numpy()
        ref64 = copy.deepcopy(model).double()(x.double()).numpy()
    err, torch_err = np.abs(c(x.numpy()) - ref64).max(), np.abs(ref32 - ref64).max()
    assert err <= 3 * torch_err + 1e-6, (err, torch_err)


@pytest.mark.parametrize("op", ["sigmoid", "tanh", "gelu", "relu6", "clamp", "leaky_relu"])
def test_unary_op_on_a_channels_last_output_keeps_it_or_hands_out_plain(op):
    """A unary op reading a channels-last convolution output computes in that
    order: it hands its result on so to a convolution, and plain (a oneDNN
    reorder) as a graph output."""
    fn = {"gelu": F.gelu, "relu6": F.relu6, "leaky_relu": lambda t: F.leaky_relu(t, 0.2),
          "clamp": lambda t: torch.clamp(t, -0.5, 0.7)}.get(op) or getattr(torch, op)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.c1, self.c2 = nn.Conv1d(8, 32, 3), nn.Conv1d(32, 16, 3)

        def forward(self, x):
            y = self.c1(x)  # read by two unary ops: stays its own partition
            return self.c2(fn(y)), torch.relu(y)

    x = torch.randn(2, 8, 300)
    c = compile_and_check(M(), x)
    log = [e for e in logged_call(c, x.numpy()) if e["depth"] == 0]
    first = log[0]
    if first["dst"] == "nwc":  # oneDNN took channels-last for it
        assert first["output"] == "kept", first
        into_conv, out = [e for e in log if e["pattern"] == "eltwise_post_ops"]
        assert into_conv["outputs"][0].endswith("strided"), into_conv
        assert out["outputs"][0].endswith("plain"), out


# A 1-D depthwise convolution (groups = input channels: conformer's and
# ConvTasNet's) runs as a 2-D one of height 1, where oneDNN 2.6 has its
# depthwise kernels (1-D: only its gemm one); the partition says so in its
# detail. Its chain's operands get the extra dim too, a kept channels-last
# output loses it again, and other 1-D convolutions are not lifted.
class Depthwise1d(nn.Module):
    def __init__(self, c=24, mult=1, k=31, stride=1, dilation=1, padding=15, bias=True, chain="none", layout="ncw"):
        super().__init__()
        torch.manual_seed(3)
        self.conv = nn.Conv1d(c, c * mult, k, stride=stride, dilation=dilation, padding=padding, groups=c, bias=bias)
        self.pw = nn.Conv1d(c * mult, 8, 1)
        self.chain, self.layout = chain, layout
        self.scale = nn.Parameter(torch.rand(c * mult, 1) + 0.5)

    def forward(self, x, r=None):
        if self.layout == "nwc":  # [N, W, C] transposed in, as conformer's convolution module does
            x = x.transpose(1, 2)
        y = self.conv(x)
        if self.chain == "silu":
            y = nn.functional.silu(y)
        elif self.chain == "residual":
            y = torch.relu(y + r)
        elif self.chain == "scale":
            y = y * self.scale
        return self.pw(y) if self.chain != "out" else y


@pytest.mark.parametrize("kw,shape,lifted", [
    (dict(), (1, 24, 50), True),
    (dict(layout="nwc"), (2, 50, 24), True),
    (dict(mult=2, k=3, padding=1, stride=2, bias=False), (3, 24, 33), True),
    (dict(k=3, padding=4, dilation=4), (1, 24, 40), True),
    (dict(chain="silu"), (1, 24, 50), True),
    (dict(chain="residual"), (2, 24, 50), True),
    (dict(chain="scale"), (1, 24, 50), True),
    (dict(chain="out"), (1, 24, 17), True),
    (dict(padding="same", k=4), (1, 24, 20), True),
    (dict(), (24, 50), True),  # unbatched
])
def test_depthwise_1d_runs_as_2d(kw, shape, lifted):
    model = Depthwise1d(**kw)
    x = torch.randn(*shape)
    args = (x, torch.randn(shape[0], model.conv.out_channels, 50)) if kw.get("chain") == "residual" else (x,)
    c = compile_and_check(model, *args)
    convs = [p for p in c.partitions if p.pattern == "conv_post_ops" and "1-D depthwise" in p.detail]
    assert len(convs) == (1 if lifted else 0), [(p.impl, p.detail) for p in c.partitions]


def test_grouped_1d_that_is_not_depthwise_stays_1d():
    model = nn.Sequential(nn.Conv1d(16, 16, 5, padding=2, groups=4), nn.ReLU(), nn.Conv1d(16, 8, 1))
    c = compile_and_check(model, torch.randn(1, 16, 40))
    assert not [p for p in c.partitions if "1-D depthwise" in p.detail], [(p.impl, p.detail) for p in c.partitions]


class ConvNeXtBlock(nn.Module):
    """convnext's block: depthwise 7x7 -> permute to channels-last ->
    layer_norm -> linear -> gelu -> linear -> layer scale -> permute back ->
    residual add. `permuted_out` also returns the first permute's view."""

    def __init__(self, c=32, permuted_out=False):
        super().__init__()
        torch.manual_seed(2)
        self.dw, self.norm = nn.Conv2d(c, c, 7, padding=3, groups=c), nn.LayerNorm(c, eps=1e-6)
        self.fc1, self.fc2 = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)
        self.gamma = nn.Parameter(torch.rand(c) + 0.5)
        self.permuted_out = permuted_out

    def forward(self, x):
        p = self.dw(x).permute(0, 2, 3, 1)
        y = self.fc2(F.gelu(self.fc1(self.norm(p))))
        out = x + (self.gamma * y).permute(0, 3, 1, 2)
        return (out, p) if self.permuted_out else out


@pytest.mark.parametrize("permuted_out", [False, True])
def test_layer_norm_reads_a_permuted_channels_last_map_where_it_is(permuted_out):
    """permute and layer_norm take strided inputs, so the depthwise
    convolution keeps its output in its primitive's order (out_layouts), and
    where that order is channels-last the norm reads the permuted view as
    the row-major [N, H, W, C] it is, without a copy; before, the
    convolution reordered its output to NCHW and the norm copied the
    permuted view back to row-major. When the view is also the graph's
    output, both hand it over plain. Either way the block matches PyTorch."""
    x = torch.randn(2, 32, 14, 14, generator=torch.Generator().manual_seed(3))
    model = ConvNeXtBlock(permuted_out=permuted_out).eval()
    with torch.no_grad():
        c = llga.optimize(torch.jit.trace(model, x))
        assert_matches(c(x.numpy()), model(x))  # (the permuted view as an output is a view, as PyTorch's)
    graph = str(c.graph)
    permute = next(line for line in graph.splitlines() if "aten::permute" in line)  # the first: after the convolution
    assert ('out_layouts=["strided"]' in permute) != permuted_out, permute
    conv = next(p for p in c.partitions if "aten::_convolution" in p.ops)
    log = logged_call(c, x.numpy())
    norm = next(e for e in log if e["pattern"] == "layernorm_post_ops" and e["depth"] == 0)
    if permuted_out:
        assert conv.output == "plain", conv
    elif conv.output == "kept" and dense(conv.dst):  # oneDNN's kernel wrote a dense order: channels-last
        assert norm["inputs"][0].endswith("plain"), norm
