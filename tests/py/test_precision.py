"""bf16 precision (llga.optimize(precision=...)): the policy, its errors, the
decision on the IR, and parity with fp32 where oneDNN has bf16 kernels.

Where oneDNN has none (AVX2 CPUs, or ONEDNN_MAX_CPU_ISA=AVX2), the bf16 runs
skip with the reason; the error paths are checked on every CPU (the AVX2
ones in a subprocess under ONEDNN_MAX_CPU_ISA=AVX2)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import nn

import corpus
from residual_stream import ResStream
import llga
import llga.precision

CAPS = llga.cpu_capabilities()
BF16 = CAPS["bf16"]  # oneDNN runs bf16 convolutions here (natively, or emulated on AVX-512)
needs_bf16 = pytest.mark.skipif(not BF16, reason=f"oneDNN has no bf16 kernels on this CPU (ISA {CAPS['isa']})")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cosine(a, b):
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.c1, self.c2 = nn.Conv2d(3, 32, 3, padding=1), nn.Conv2d(32, 32, 3, padding=1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        y = torch.relu(self.c1(x))
        y = torch.relu(self.c2(y) + y)
        y = torch.softmax(y, 1) * y
        return self.fc(y.mean((2, 3)))


class ConvSum(nn.Module):
    def __init__(self, conv):
        super().__init__()
        self.conv = conv

    def forward(self, x, r):
        return torch.relu(self.conv(x) + r)


def test_policy_is_a_table_and_overrides_are_checked():
    rules = {r["kind"]: r for r in llga.precision.policy()}
    assert rules["aten::conv2d"]["precision"] == "bf16" and rules["aten::linear"]["precision"] == "bf16"
    assert rules["aten::softmax"]["precision"] == "fp32" and not rules["aten::softmax"]["bf16_kernel"]
    assert all(r["why"] for r in rules.values())
    traced = torch.jit.trace(ConvNet().eval(), torch.randn(1, 3, 8, 8))
    with pytest.raises(llga.PrecisionError, match="aten::nonexistent"):
        llga.optimize(traced, precision={"aten::nonexistent": "fp32"})
    with pytest.raises(llga.PrecisionError, match="'fp16'"):
        llga.optimize(traced, precision={"aten::linear": "fp16"})
    with pytest.raises(llga.PrecisionError, match="no bf16 kernel"):
        llga.optimize(traced, precision={"aten::softmax": "bf16"})
    with pytest.raises(llga.PrecisionError, match="precision must be"):
        llga.optimize(traced, precision="int4")
    assert issubclass(llga.PrecisionError, llga.CompileError)


def test_fp32_is_the_default_and_marks_nothing():
    traced = torch.jit.trace(ConvNet().eval(), torch.randn(1, 3, 8, 8))
    c = llga.optimize(traced)
    assert c.precision == "fp32" and all(p.precision == "fp32" for p in c.partitions)
    assert "precision=" not in str(c.graph)


def _in_subprocess(isa, code):
    env = dict(os.environ, ONEDNN_MAX_CPU_ISA=isa, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_without_bf16_kernels_bf16_is_an_error_and_auto_stays_fp32():
    # An AVX2 CPU, as oneDNN sees it: it has no bf16 kernels at all.
    code = """
import json, numpy as np, llga
text = '''graph(%x : Float(2, 8), %w : Float(4, 8)):
  %none : NoneType = prim::Constant()
  %y : Float(2, 4) = aten::linear(%x, %w, %none)
  return (%y)'''
out = {"isa": llga.cpu_capabilities()["isa"]}
try:
    llga.optimize(text, precision="bf16")
    out["error"] = None
except llga.PrecisionError as e:
    out["error"] = str(e)
c = llga.optimize(text, precision="auto")
x, w = np.random.rand(2, 8).astype(np.float32), np.random.rand(4, 8).astype(np.float32)
out.update(used=c.precision, note=c.precision_note, exact=bool(np.array_equal(c(x, w), x @ w.T)) or
           float(np.abs(c(x, w) - x @ w.T).max()) < 1e-5, marked="precision=" in str(c.graph))
print(json.dumps(out))
"""
    r = _in_subprocess("AVX2", code)
    assert r["isa"] == "avx2"
    assert r["error"] and "no bf16 kernels" in r["error"] and "avx2" in r["error"], r
    assert r["used"] == "fp32" and "no native bf16" in r["note"] and r["exact"] and not r["marked"], r


LINEAR_TEXT = '''graph(%x : Float(2, 8), %w : Float(4, 8)):
  %none : NoneType = prim::Constant()
  %y : Float(2, 4) = aten::linear(%x, %w, %none)
  return (%y)'''


@pytest.mark.parametrize("isa,bf16_gflops,expect", [
    ("avx512_core_amx", 1500.0, "bf16"),    # AMX: several times fp32
    ("avx512_core_bf16", 700.0, "bf16"),    # AMD Zen with AVX512-BF16: about twice
    ("avx512_core_bf16", 180.0, "fp32"),    # an Intel core with AVX512-BF16 and no AMX: half
    ("avx512_core_bf16", 400.0, "fp32"),    # a little faster does not pay for the rounding
])
def test_auto_takes_bf16_only_where_it_measured_faster(monkeypatch, isa, bf16_gflops, expect):
    # The rule, on the figures a CPU of each kind reports (the measurement
    # itself is checked on this CPU below).
    speed = llga.precision.Bf16Speed(350.0, bf16_gflops, "brgconv:avx512_core", f"brgconv:{isa}")
    monkeypatch.setattr(llga.precision, "_capabilities", lambda: {"isa": isa, "bf16": True})
    monkeypatch.setattr(llga.precision, "bf16_speed", lambda: speed)
    r = llga.precision.resolve("auto")
    assert r.used == expect and r.bf16 == (expect == "bf16"), r
    assert f"{bf16_gflops:.0f} against 350 GFLOP/s" in r.note and isa in r.note, r.note
    explicit = llga.precision.resolve("bf16")  # asked for: bf16 whatever it costs, and the note says what
    assert explicit.used == "bf16" and ("expect it slower" in explicit.note) == (bf16_gflops < 350.0), explicit.note


def test_auto_on_this_cpu_follows_its_own_measurement():
    c = llga.optimize(LINEAR_TEXT, precision="auto")
    speed = llga.precision.bf16_speed()
    if not llga.precision.native_bf16():
        assert c.precision == "fp32" and "no native bf16" in c.precision_note, c.precision_note
        return
    assert speed.fp32_impl and speed.bf16_impl and speed.fp32_gflops > 0 and speed.bf16_gflops > 0, speed
    assert c.precision == ("bf16" if speed.speedup >= llga.precision.AUTO_MIN_SPEEDUP else "fp32"), c.precision_note
    assert f"{speed.speedup:.2f}x fp32's speed" in c.precision_note, c.precision_note
    assert llga.precision.bf16_speed() is speed  # measured once per process


@needs_bf16
def test_bf16_decisions_are_on_the_ir_and_in_the_partitions():
    x = torch.randn(2, 3, 16, 16)
    model = ConvNet().eval()
    traced = torch.jit.trace(model, x)
    c = llga.optimize(traced, precision="bf16")
    assert c.precision == "bf16" and c.precision_note
    c(x.numpy())
    parts = {p.ops[0]: p for p in c.partitions}
    conv = [p for p in c.partitions if p.pattern == "conv_post_ops"]
    assert conv and all(p.precision == "bf16" for p in conv)
    for p in conv:  # oneDNN ran a bf16 kernel (its src and weights bf16), or says why it did not
        assert p.src.endswith(":bf16") and p.weights.endswith(":bf16") and not p.dst.endswith(":bf16"), p
    assert parts["aten::linear"].precision == "bf16" and parts["aten::linear"].src.endswith(":bf16")
    assert all(p.precision == "fp32" for p in c.partitions if p.pattern not in ("conv_post_ops", "matmul_post_ops"))
    assert 'precision="bf16"' in str(c.graph)
    # overrides: linears fp32, convolutions still bf16
    c2 = llga.optimize(traced, precision={"aten::linear": "fp32"})
    c2(x.numpy())
    assert all(p.precision == ("fp32" if p.ops[0] == "aten::linear" else "bf16")
               for p in c2.partitions if p.pattern in ("conv_post_ops", "matmul_post_ops"))
    # an op outside any partition carries the decision itself
    c3 = llga.optimize(traced, precision="bf16", route={"matmul_post_ops": False})
    lin = [n for n in c3.graph.nodes(recursive=True) if n.kind == "aten::linear"]
    assert lin and all(n.attributes.get("precision") == "bf16" for n in lin)
    with torch.no_grad():
        want = model(x).numpy()
    for cc in (c, c2, c3):
        np.testing.assert_allclose(cc(x.numpy()), want, rtol=0.05, atol=0.02 * np.abs(want).max())


@needs_bf16
@pytest.mark.parametrize("form", ["conv", "conv_transpose", "linear", "matmul", "bmm", "conv_sum"])
def test_bf16_rounds_operands_and_accumulates_in_fp32(form):
    # The result is what fp32 arithmetic on bf16-rounded operands gives (so
    # bf16 really ran: it differs from fp32 on the unrounded ones), within
    # what the order of fp32 accumulation changes.
    torch.manual_seed(1)
    rnd = lambda t: t.to(torch.bfloat16).to(torch.float32)  # noqa: E731
    if form in ("conv", "conv_sum", "conv_transpose"):
        tr = form == "conv_transpose"
        mod = (nn.ConvTranspose2d(24, 16, 3, stride=2) if tr else nn.Conv2d(24, 16, 3, padding=1)).eval()
        x = torch.randn(1, 24, 12, 12)
        if form == "conv_sum":
            r = torch.randn(1, 16, 12, 12)
            fn = ConvSum(mod).eval()
            args = (x, r)
            with torch.no_grad():
                want = torch.relu(torch.nn.functional.conv2d(rnd(x), rnd(mod.weight), mod.bias, padding=1) + r)
        else:
            fn, args = mod, (x,)
            with torch.no_grad():
                f = torch.nn.functional.conv_transpose2d if tr else torch.nn.functional.conv2d
                want = f(rnd(x), rnd(mod.weight), mod.bias, **({"stride": 2} if tr else {"padding": 1}))
    elif form == "linear":
        mod = nn.Linear(64, 48).eval()
        x = torch.randn(5, 64)
        fn, args = mod, (x,)
        with torch.no_grad():
            want = torch.nn.functional.linear(rnd(x), rnd(mod.weight), mod.bias)
    else:
        a, b = torch.randn(3, 7, 64), torch.randn(3, 64, 9)
        fn = (lambda a, b: torch.matmul(a, b)) if form == "matmul" else (lambda a, b: torch.bmm(a, b))
        args = (a, b)
        want = torch.matmul(rnd(a), rnd(b))
    with torch.no_grad():
        fp32 = fn(*args)
        traced = torch.jit.trace(fn, args, check_trace=False)
    c = llga.optimize(traced, precision="bf16")
    got = c(*[t.numpy() for t in args])
    scale = float(np.abs(want.numpy()).max())
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-5 * scale)
    assert np.abs(got - fp32.numpy()).max() > 1e-4 * scale  # not the fp32 result


@needs_bf16
@pytest.mark.parametrize("model", corpus.MODELS)
def test_corpus_model_in_bf16_matches_fp32(model):
    # Every corpus model runs in bf16: logits' cosine similarity with fp32
    # llga >= 0.9999 and the largest difference within 1.5% of the largest
    # logit (seen here, Sapphire Rapids, random weights: 0.99997-1.0 and
    # 0.04-0.7%; vit_b_16 and swin_t, the deepest, the furthest).
    _, traced = corpus.traced(model)
    xs = [x.numpy() for x in corpus.example_inputs(model)]
    c32 = llga.optimize(traced)
    c16 = llga.optimize(traced, precision="bf16")
    a, b = c32(*xs), c16(*xs)
    a, b = (a[0], b[0]) if isinstance(a, tuple) else (a, b)
    assert cosine(a, b) >= 0.9999, cosine(a, b)
    assert np.abs(a - b).max() <= 0.015 * np.abs(a).max()
    assert sum(p.precision == "bf16" for p in c16.partitions) > 0
    assert not [p for p in c16.partitions if "no bf16 kernel" in p.detail]


def test_accuracy_report_measures_what_differs():
    # CPU-independent: the fp32 model against itself, a torch module, and a
    # reference that is off by a known amount in one place.
    x = np.random.default_rng(0).standard_normal((2, 3, 16, 16)).astype(np.float32)
    model = ConvNet().eval()
    traced = torch.jit.trace(model, torch.from_numpy(x))
    c = llga.optimize(traced)
    same = llga.accuracy_report(c, c, [x, x * 0.5])
    assert same.calls == 2 and len(same.outputs) == 1
    o = same.outputs[0]
    assert o.max_abs == 0 and o.cosine == pytest.approx(1.0) and o.top1 == 1.0 and o.top5 == 1.0
    # one partition row per partition, in program order, each agreeing with itself
    assert [p.partition for p in same.partitions] == [p.id for p in c.partitions]
    assert all(p.max_abs == 0 and p.top1 is None for p in same.partitions)
    vs_torch = llga.accuracy_report(c, model, [x])
    assert vs_torch.outputs[0].max_rel < 1e-4 and not vs_torch.partitions and "partition" in vs_torch.note

    def off(a):
        y = c(a).copy()
        y[0, 3] += 10.0  # one logit of one row: top-1 of that row may change, top-5 agreement drops
        return y

    r = llga.accuracy_report(c, off, [x])
    assert r.outputs[0].max_abs == pytest.approx(10.0, rel=1e-5)
    assert r.outputs[0].max_rel == pytest.approx(10.0 / np.abs(off(x)).max(), rel=1e-4)  # of the reference's scale
    assert r.outputs[0].top1 == 0.5  # row 0's argmax is now class 3; row 1's agrees
    assert "output 0" in repr(r) and "<table" in r._repr_html_()
    with pytest.raises(ValueError, match="no inputs"):
        llga.accuracy_report(c, c, [])


@needs_bf16
def test_accuracy_report_of_bf16_finds_its_partitions():
    _, traced = corpus.traced("resnet18")
    xs = [x.numpy() for x in corpus.example_inputs("resnet18")]
    c32, c16 = llga.optimize(traced), llga.optimize(traced, precision="bf16")
    r = llga.accuracy_report(c16, c32, [xs[0], xs[0] * 0.5])
    assert r.outputs[0].cosine >= 0.9999 and r.outputs[0].top1 == 1.0 and r.outputs[0].top5 >= 0.8
    rows = {p.partition: p for p in r.partitions}
    assert len(rows) == len(c16.partitions)
    # the first bf16 partition is the first to differ; fp32 ones before it agree exactly
    first = next(p for p in r.partitions if p.max_abs > 0)
    assert first.precision == "bf16"
    assert 0 < max(p.max_rel for p in r.partitions) < 0.05


class Chain(nn.Module):
    """conv -> relu -> depthwise conv -> relu -> conv: the first two outputs
    are read only as the next conv's activation, so they may stay bf16."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(2)
        self.a, self.b, self.c = nn.Conv2d(8, 32, 1), nn.Conv2d(32, 32, 3, padding=1, groups=32), nn.Conv2d(32, 16, 1)

    def forward(self, x):
        return self.c(torch.relu(self.b(torch.relu(self.a(x)))))


@needs_bf16
def test_bf16_between_convolutions_stays_bf16():
    x = torch.randn(2, 8, 14, 14)
    model = Chain().eval()
    c = llga.optimize(torch.jit.trace(model, x), precision="bf16")
    got = c(x.numpy())
    parts = c.partitions
    assert [p.out_dtype for p in parts] == ["bf16", "bf16", "fp32"], parts
    for p, q in zip(parts, parts[1:]):  # the producer wrote bf16 and its reader took it so (or fp32 where
        if "no bf16 kernel" in p.detail:  # oneDNN had no bf16 kernel for the producer: it says so)
            continue
        assert p.dst.endswith(":bf16") and p.output == "kept" and q.src.endswith(":bf16"), (p, q)
    assert parts[-1].dst and not parts[-1].dst.endswith(":bf16")  # the graph's output: fp32
    with torch.no_grad():
        want = model(x).numpy()
    assert got.dtype == np.float32
    assert cosine(got, want) > 0.9999
    np.testing.assert_allclose(got, want, rtol=0.05, atol=0.02 * np.abs(want).max())
    # the graph drawing labels the bf16 edges so (dtype on every edge)
    dot = llga.viz.to_dot(c)
    assert dot.count(" bf16\\n") == 2, dot  # the two bf16 edges, drawn as bf16 (the IR types them Float)
    r = llga.accuracy_report(c, llga.optimize(torch.jit.trace(model, x)), [x.numpy()])
    assert [p.precision for p in r.partitions] == ["bf16"] * 3 and r.partitions[0].max_abs > 0


def bf16_round(t):
    """t rounded to bf16 (to nearest even) and back, as oneDNN converts."""
    return t.float().to(torch.bfloat16).double()


@needs_bf16
def test_bf16_residual_stream_stays_bf16():
    """Block outputs stay bf16 for both readers: the next block's convolution
    reads them as its activation and its sum post-op adds them as they arrive
    (into a bf16 output, or converted into the last block's fp32 one). The
    result is what rounding each edge to bf16 gives, in float64."""
    x = torch.randn(1, 3, 12, 12, generator=torch.Generator().manual_seed(3))
    model = ResStream(blocks=3, width=32, relu_after=(0, 2), seed=9).eval()
    c = llga.optimize(torch.jit.trace(model, x), precision="bf16")
    parts = c.partitions
    assert [p.out_dtype for p in parts] == ["bf16"] * 6 + ["fp32"], [(p.ops, p.out_dtype) for p in parts]
    llga.profiler.kernel_log.enable()
    try:
        llga.profiler.kernel_log.clear()
        got = c(x.numpy())
        log = [e for e in llga.profiler.kernel_log.entries() if e["depth"] == 0]
    finally:
        llga.profiler.kernel_log.disable()
    if any(p.detail for p in parts):  # oneDNN had no bf16 kernel for some shape: it says so, and the rest is fp32
        pytest.skip("oneDNN has no bf16 kernel here for: " + "; ".join(p.detail for p in parts if p.detail))
    residuals = [e["inputs"][3].split(":")[1].split()[0] for e in log if len(e["inputs"]) == 4]
    assert residuals == ["BFloat16"] * 3, residuals

    def conv(cv, v):  # bf16 operands, accumulated in float64
        return nn.functional.conv2d(bf16_round(v), bf16_round(cv.weight), cv.bias.double(), padding=cv.padding)

    with torch.no_grad():
        r = bf16_round(torch.relu(conv(model.stem, x)))
        for i, (c1, c2) in enumerate(model.blocks):
            y = conv(c2, bf16_round(torch.relu(conv(c1, r)))) + r
            r = torch.relu(y) if i != 1 else y
            if i < 2:
                r = bf16_round(r)
        want = r.numpy()
        fp32 = model(x).numpy()
    # the outputs of the first two blocks rounded to bf16 each: measured 4e-8 of
    # the largest magnitude off the emulation (fp32 accumulation); a residual
    # read in fp32 as before is 6e-3 off in places
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max(), np.abs(got - want).max() / np.abs(want).max()
    assert cosine(got, fp32) > 0.9999


class SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(32, 4, batch_first=True)

    def forward(self, x):
        return self.mha(x, x, x, need_weights=False)[0]


@needs_bf16
@pytest.mark.parametrize("form", ["mha", "encoder_layer"])
def test_bf16_in_pytorchs_fused_transformer_ops(form):
    # nn.MultiheadAttention and nn.TransformerEncoderLayer trace (in eval, batch
    # first) to PyTorch's fused ops; their products follow the precision.
    torch.manual_seed(3)
    if form == "mha":
        fn = SelfAttention().eval()
        kind = "aten::_native_multi_head_attention"
    else:
        fn = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True).eval()
        kind = "aten::_transformer_encoder_layer_fwd"
    fn.requires_grad_(False)
    x = torch.randn(2, 10, 32)
    with torch.no_grad():
        traced = torch.jit.trace(fn, (x,), check_trace=False)
        want = fn(x).numpy()
    if kind not in str(traced.inlined_graph):
        pytest.skip(f"this PyTorch traced it without {kind}")
    c32, c16 = llga.optimize(traced), llga.optimize(traced, precision="bf16")
    nodes = list(c16.graph.nodes(recursive=True))
    # the fused op itself (its kernel's products), or what decompose made of it (linear and matmul partitions)
    fused = [n for n in nodes if n.kind == kind]
    assert all(n.attributes.get("precision") == "bf16" for n in fused)
    assert fused or [p for p in c16.partitions if p.precision == "bf16" and p.ops[0] in ("aten::linear", "aten::matmul")]
    a, b = c32(x.numpy()), c16(x.numpy())
    np.testing.assert_allclose(a, want, rtol=1e-4, atol=1e-4)
    assert cosine(b, want) > 0.9999 and np.abs(b - want).max() < 0.03 * np.abs(want).max()
    assert not np.array_equal(a, b)


@needs_bf16
def test_bf16_model_called_concurrently_from_threads():
    # One bf16 compiled model (bf16 edges, weights converted once) called from
    # several threads with two batch sizes at once: every result as alone.
    import threading

    model = Chain().eval()
    xs = [np.random.default_rng(i).standard_normal((1 + i % 2, 8, 14, 14)).astype(np.float32) for i in range(4)]
    c = llga.optimize(torch.jit.trace(model, torch.from_numpy(xs[0])), precision="bf16")
    want = [c(x).copy() for x in xs]
    errors = []

    def work(k):
        try:
            for _ in range(20):
                i = (k + _) % len(xs)
                np.testing.assert_array_equal(c(xs[i]), want[i])
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


@needs_bf16
def test_concat_batchnorm_writes_bf16_for_its_bf16_readers():
    """densenet's concat -> batch_norm -> relu read only by a bf16 1x1
    convolution writes its result in bf16 (out_dtype), in one pass or after
    its op-by-op path (the first concat mixes the NCHW input with a
    convolution's channels-last output), and the convolution reads it as it
    arrives. Rounding commutes with who rounds: the result has the bits of
    the same model whose normalised concats are also returned (so stay fp32,
    and the convolutions convert them)."""
    sys.path.insert(0, os.path.dirname(__file__))
    from test_quantize import _DenseLayers

    x = torch.randn(1, 3, 10, 10, generator=torch.Generator().manual_seed(9))
    c = llga.optimize(torch.jit.trace(_DenseLayers(), x), precision="bf16")
    ref = llga.optimize(torch.jit.trace(_DenseLayers(cats_out=True), x), precision="bf16")
    cats = [p for p in c.partitions if p.pattern == "concat_batchnorm"]
    assert [p.out_dtype for p in cats] == ["bf16", "bf16"], cats
    assert [p.out_dtype for p in ref.partitions if p.pattern == "concat_batchnorm"] == ["fp32", "fp32"]
    got = c(x.numpy())
    details = [p.detail for p in c.partitions if p.pattern == "concat_batchnorm"]
    assert all(d.endswith(("written as bf16", "then converted to bf16")) for d in details), details
    np.testing.assert_array_equal(got, ref(x.numpy())[0])
    with torch.no_grad():
        want = _DenseLayers()(x).numpy()
    assert cosine(got, want) > 0.999


class _MBConv(nn.Module):
    """efficientnet's block: a 1x1 expansion ending in silu, read by a
    depthwise 3x3 ending in silu, whose map is squeezed and excited, and the
    scaled map read by the 1x1 projection. `values_out` also returns the
    expansion's output and the scaled map, which keeps both fp32."""

    def __init__(self, values_out=False):
        super().__init__()
        torch.manual_seed(7)
        self.expand, self.dw = nn.Conv2d(8, 32, 1), nn.Conv2d(32, 32, 3, padding=1, groups=32)
        self.fc1, self.fc2, self.proj = nn.Conv2d(32, 8, 1), nn.Conv2d(8, 32, 1), nn.Conv2d(32, 8, 1)
        self.values_out = values_out
        self.eval()

    def forward(self, x):
        e = nn.functional.silu(self.expand(x))
        d = nn.functional.silu(self.dw(e))
        s = torch.sigmoid(self.fc2(nn.functional.silu(self.fc1(nn.functional.adaptive_avg_pool2d(d, 1)))))
        y = d * s
        out = self.proj(y)
        return (out, e, y) if self.values_out else out


@needs_bf16
@pytest.mark.parametrize("batch", [1, 2])
def test_swish_and_squeeze_excite_write_bf16_for_their_bf16_readers(batch):
    """In efficientnet's block under bf16, the expansion's silu is llga's
    swish writing bf16 from the primitive's fp32 output (oneDNN's bf16
    kernels apply the swish post-op with a divide), and the squeeze-excite
    mul writes its product in bf16 for the projection (the scaled_conv
    pattern, which folds the scale into fp32 weights per call, is not formed
    under bf16). Both readers take the bf16 as it arrives: the result has
    the bits of the same model whose two values are also returned (so stay
    fp32, and their readers convert them)."""
    x = torch.randn(batch, 8, 24, 24, generator=torch.Generator().manual_seed(3))  # 32 x 24 x 24: llga's swish
    traced = torch.jit.trace(_MBConv(), x)
    c = llga.optimize(traced, precision="bf16")
    ref = llga.optimize(torch.jit.trace(_MBConv(values_out=True), x), precision="bf16")
    if batch == 1:
        assert "scaled_conv" in [p.pattern for p in llga.optimize(traced).partitions]
    assert "scaled_conv" not in [p.pattern for p in c.partitions]
    got = c(x.numpy())
    expand = [p for p in c.partitions if p.pattern == "conv_post_ops"][0]
    assert expand.out_dtype == "bf16" and expand.impl.endswith("+llga_swish_bf16"), expand
    llga.profiler.kernel_log.enable()
    try:
        llga.profiler.kernel_log.clear()
        c(x.numpy())
        muls = [e for e in llga.profiler.kernel_log.entries() if e["op"] == "aten::mul" and e["depth"] == 0]
    finally:
        llga.profiler.kernel_log.disable()
    assert len(muls) == 1 and muls[0]["outputs"][0].split(":")[1].startswith("BFloat16"), muls
    np.testing.assert_array_equal(got, ref(x.numpy())[0])
    ref_expand = [p for p in ref.partitions if p.pattern == "conv_post_ops"][0]
    assert ref_expand.out_dtype == "fp32" and ref_expand.impl.endswith("+llga_swish"), ref_expand
    with torch.no_grad():
        want = traced(x).numpy()
    assert cosine(got, want) > 0.999


@needs_bf16
def test_one_pixel_convolutions_stay_fp32_unless_their_kind_is_overridden():
    """Squeeze-excite's 1x1s on the pooled map (one pixel in, one out) stay
    fp32 under bf16, on llga's one-row product, where a bf16 primitive's
    call costs more than their weights; an explicit override of their kind
    runs them bf16 as asked. Either way the block matches PyTorch."""
    x = torch.randn(1, 8, 24, 24, generator=torch.Generator().manual_seed(4))
    traced = torch.jit.trace(_MBConv(), x)
    with torch.no_grad():
        want = traced(x).numpy()
    kind = next(n.kind() for n in traced.inlined_graph.nodes() if "conv" in n.kind())
    for precision, se_precision in (("bf16", "fp32"), ({kind: "bf16"}, "bf16")):
        c = llga.optimize(traced, precision=precision)
        got = c(x.numpy())
        se = [p for p in c.partitions if p.pattern == "conv_post_ops" and tuple(p.inputs[0][1][2:]) == (1, 1)]
        assert len(se) == 2, c.partitions
        assert all(p.precision == se_precision for p in se), se
        if se_precision == "fp32":
            assert all(p.impl.startswith("llga_gemv") for p in se), se
        others = [p for p in c.partitions if p.pattern == "conv_post_ops" and p not in se]
        assert others and all(p.precision == "bf16" for p in others), others
        assert cosine(got, want) > 0.999


class _ExpandDepthwise(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.expand, self.dw = nn.Conv2d(8, 32, 1), nn.Conv2d(32, 32, 3, padding=1, groups=32)
        self.eval()

    def forward(self, x):
        return self.dw(nn.functional.silu(self.expand(x)))


@needs_bf16
def test_swish_into_bf16_for_an_unbatched_call():
    """A scripted model has no ranks to specialize on, so one compiled
    model takes a batch and an unbatched image. The expansion's swish into
    bf16 writes its output at the primitive's strides for a batch, and
    through a plain bf16 copy for the unbatched image (that copy was once
    typed fp32 and read as such: wrong values). Both match PyTorch."""
    model = _ExpandDepthwise()
    c = llga.optimize(torch.jit.script(model), precision="bf16")
    for shape in ((2, 8, 24, 24), (8, 24, 24)):
        x = torch.randn(*shape, generator=torch.Generator().manual_seed(len(shape)))
        got = c(x.numpy())
        with torch.no_grad():
            want = model(x).numpy()
        assert got.shape == want.shape
        assert cosine(got, want) > 0.9999 and np.abs(got - want).max() < 0.02 * np.abs(want).max(), shape
        expand = [p for p in c.partitions if p.pattern == "conv_post_ops"][0]
        assert expand.impl.endswith("+llga_swish_bf16"), expand


class _FeedForward(nn.Module):
    """A transformer's feed-forward: layer_norm -> linear -> act -> linear,
    plus the residual. `values_out` also returns the first linear's output,
    which keeps it fp32."""

    def __init__(self, act="gelu", values_out=False, width=64):
        super().__init__()
        torch.manual_seed(5)
        self.norm, self.fc1, self.fc2 = nn.LayerNorm(width), nn.Linear(width, 4 * width), nn.Linear(4 * width, width)
        self.act, self.values_out = act, values_out
        self.eval()

    def forward(self, x):
        h = self.fc1(self.norm(x))
        h = {"gelu": nn.functional.gelu, "silu": nn.functional.silu, "relu": torch.relu}[self.act](h)
        y = self.fc2(h) + x
        return (y, h) if self.values_out else y


@needs_bf16
@pytest.mark.parametrize("act", ["gelu", "silu", "relu"])
@pytest.mark.parametrize("shape", [(1, 197, 64), (2, 50, 64), (1, 3, 64), (1, 64)])
def test_feed_forward_hands_bf16_from_one_linear_to_the_next(act, shape):
    """Under bf16 the first linear's output, read only by the second as its
    activation, is written in bf16 (out_dtype="bf16") and read so: by the
    primitive's bf16 dst, by llga's gelu or swish into bf16 after the fp32
    primitive (16k+ outputs), or by a conversion after the one-row product
    (one row). The result has the bits of the same model that also returns
    that value (so it stays fp32 and the second linear converts it)."""
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape)))
    c = llga.optimize(torch.jit.trace(_FeedForward(act), x), precision="bf16")
    ref = llga.optimize(torch.jit.trace(_FeedForward(act, values_out=True), x), precision="bf16")
    got = c(x.numpy())
    np.testing.assert_array_equal(got, ref(x.numpy())[0])
    fc1, fc2 = [p for p in c.partitions if p.pattern == "matmul_post_ops"]
    assert fc1.out_dtype == "bf16" and fc2.out_dtype == "fp32", (fc1, fc2)
    assert fc1.src.endswith(":bf16") and fc2.src.endswith(":bf16"), (fc1, fc2)
    norm = [p for p in c.partitions if p.pattern == "layernorm_post_ops"][0]  # in both models
    assert norm.out_dtype == "bf16" and norm.impl == "llga_layer_norm_bf16" and norm.dst.endswith(":bf16"), norm
    rows = int(np.prod(shape[:-1]))
    own = {"gelu": "+llga_gelu_bf16", "silu": "+llga_swish_bf16"}.get(act) if rows * 256 >= 16384 else None
    if rows == 1 and act == "relu" and CAPS["llga_gemv_bf16"]:  # relu is one of the one-row product's own steps
        assert fc1.impl.startswith("llga_gemv"), fc1
    if fc1.impl.startswith("llga_gemv"):
        assert fc1.impl.endswith("+llga_to_bf16"), fc1
    elif own:
        assert fc1.impl.endswith(own) and not fc1.dst.endswith(":bf16"), fc1  # the primitive's fp32 dst
    else:
        assert fc1.dst.endswith(":bf16") and "+llga" not in fc1.impl, fc1
    ref_fc1 = [p for p in ref.partitions if p.pattern == "matmul_post_ops"][0]
    assert ref_fc1.out_dtype == "fp32", ref_fc1
    with torch.no_grad():
        want = _FeedForward(act)(x).numpy()
    assert cosine(got, want) > 0.9999


class _PreNorm(nn.Module):
    """layer_norm -> linear; `values_out` also returns the norm's output, which
    keeps it fp32 (oneDNN's layer normalization, converted by the linear)."""

    def __init__(self, width, values_out=False):
        super().__init__()
        torch.manual_seed(6)
        self.norm, self.proj = nn.LayerNorm(width), nn.Linear(width, 3 * width)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)
        self.values_out = values_out
        self.eval()

    def forward(self, x):
        n = self.norm(x)
        return (self.proj(n), n) if self.values_out else self.proj(n)


@needs_bf16
@pytest.mark.parametrize("width", [64, 100, 768])
def test_layer_norm_writes_bf16_for_its_linear(width):
    """Under bf16 a layer_norm read only by a linear writes its result in
    bf16 (llga's rows: oneDNN's layer normalization writes its source's
    type), and the linear reads it so. Against the same block whose norm
    output is also returned (fp32, converted by the linear), the result
    differs at most where one of the norm's values rounds to the other bf16
    neighbour; both match PyTorch."""
    x = torch.randn(2, 37, width, generator=torch.Generator().manual_seed(width)) * 3 + 1
    c = llga.optimize(torch.jit.trace(_PreNorm(width), x), precision="bf16")
    ref = llga.optimize(torch.jit.trace(_PreNorm(width, values_out=True), x), precision="bf16")
    got, alt = c(x.numpy()), ref(x.numpy())[0]
    norm = [p for p in c.partitions if p.pattern == "layernorm_post_ops"][0]
    assert norm.out_dtype == "bf16" and norm.impl == "llga_layer_norm_bf16", norm
    assert [p for p in ref.partitions if p.pattern == "layernorm_post_ops"][0].out_dtype == "fp32"
    proj = [p for p in c.partitions if p.pattern == "matmul_post_ops"][0]
    assert proj.src.endswith(":bf16"), proj
    with torch.no_grad():
        want = _PreNorm(width)(x).numpy()
    scale = np.abs(want).max()
    assert np.abs(got - alt).max() < 0.02 * scale, np.abs(got - alt).max() / scale
    for out in (got, alt):
        assert cosine(out, want) > 0.9999 and np.abs(out - want).max() < 0.03 * scale
