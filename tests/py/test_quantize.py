"""llga.quantize: post-training static int8 (min-max calibration).

What is checked here:
- the decision on the IR: precision="int8" with act_scale and act_dtype on
  each convolution and linear with constant weights, the scale the range of
  the calibration activations gives (u8 after a relu, s8 otherwise);
- the arithmetic: an int8 convolution or linear gives exactly what int8
  arithmetic on the quantized operands gives (activation rounded to the
  calibrated scale, weights to s8 per output channel), and differs from fp32;
- the corpus CNNs with random weights keep a logit cosine >= 0.99 against
  fp32 llga, and run their convolutions in int8;
- errors: no or malformed calibration, unknown method, unknown kinds to skip;
  skip keeps the named kind fp32."""
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import llga
from llga import zoo
from llga.quantization import VNNI_ISAS
from residual_stream import ResStream

ISA = llga.cpu_capabilities()["isa"]
# int8 runs where oneDNN has VNNI (llga.quantize raises elsewhere: test_int8_needs_vnni)
pytestmark = pytest.mark.skipif(ISA not in VNNI_ISAS, reason=f"int8 needs VNNI; oneDNN's ISA here is {ISA}")


def act_quant(compiled):
    """[(kind, act_scale, grid)] of every int8 op, in IR order, for the
    symmetric scheme. The grid is "u8" (0..255 steps) or "s8" (-128..127
    steps): a convolution's signed activation, where the backend writes it u8
    with act_zero_point=128 (the s8 grid shifted), is reported as "s8" here
    (check_signed_conv_activation)."""
    out = []
    for kind, scale, zp, lo, hi in act_grids(compiled):
        assert zp in (0, 128) and (zp == 0 or lo == 0), (kind, zp, lo)
        out.append((kind, scale, "s8" if zp == 128 or lo == -128 else "u8"))
    return out


def act_grids(compiled):
    """[(kind, scale, zero_point, qmin, qmax)] of every int8 op, in IR order:
    its activation quantized as q in [qmin, qmax], real value scale * (q -
    zero_point). Any encoding: s8, u8, the s8 grid as u8 with zero point 128,
    an asymmetric u8 grid."""
    out = []
    for m in re.finditer(r"(aten::\w+)\[precision=\"int8\", act_scale=([0-9.e+-]+), act_dtype=\"(u8|s8)\""
                         r"(?:, act_zero_point=(-?\d+))?[,\]]", str(compiled.graph)):
        lo, hi = (0, 255) if m.group(3) == "u8" else (-128, 127)
        out.append((m.group(1), float(m.group(2)), int(m.group(4) or 0), lo, hi))
    return out


def fake_quant_grid(x, grid):
    """x quantized on `grid` (an act_grids row, or its (scale, zero_point,
    qmin, qmax)) and back: round half to even, the zero point, saturate."""
    scale, zp, lo, hi = grid[-4:]
    return (torch.clamp(torch.round(x / scale) + zp, lo, hi) - zp) * scale


def fake_quant(x, scale, unsigned):
    """x quantized and back, as oneDNN's reorder does it (round half to even, saturate)."""
    lo, hi = (0, 255) if unsigned else (-128, 127)
    return torch.clamp(torch.round(x / scale), lo, hi) * scale


def fake_quant_weight(w):
    """Symmetric s8 per output channel (dim 0), as llga quantizes weights."""
    rows = w.reshape(w.shape[0], -1)
    scale = rows.abs().amax(1).clamp_min(1e-30) / 127
    scale = torch.where(rows.abs().amax(1) > 0, scale, torch.ones_like(scale))
    q = torch.clamp(torch.round(rows / scale[:, None]), -127, 127) * scale[:, None]
    return q.reshape(w.shape)


class ConvRelu(nn.Module):
    def __init__(self, groups=1):
        super().__init__()
        torch.manual_seed(0)
        self.c = nn.Conv2d(8, 16, 3, padding=1, groups=groups)

    def forward(self, x):
        return torch.relu(self.c(x))


class Lin(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.fc = nn.Linear(48, 24)

    def forward(self, x):
        return self.fc(x)


def calibration_batches(shape, n=4, seed=0, shift=0.0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=g) + shift for _ in range(n)]


@pytest.mark.parametrize("groups", [1, 2, 8])
@pytest.mark.parametrize("shift", [0.0, 3.0])  # s8 (negatives seen), u8 (none: randn + 3 over 4 small batches)
def test_int8_conv_is_int8_arithmetic_on_the_quantized_operands(groups, shift):
    model = ConvRelu(groups).eval()
    calib = calibration_batches((1, 8, 12, 12), shift=shift)
    if shift:
        calib = [c.clamp_min(0) for c in calib]
    traced = torch.jit.trace(model, calib[0])
    q = llga.quantize(traced, calibration=calib)
    (kind, scale, dtype), = act_quant(q)
    unsigned = dtype == "u8"
    lo = min(float(c.min()) for c in calib)
    hi = max(float(c.abs().max()) for c in calib)
    assert unsigned == (lo >= 0)
    np.testing.assert_allclose(scale, hi / (255 if unsigned else 127), rtol=1e-6)
    assert [p.precision for p in q.partitions] == ["int8"] and not q.partitions[0].detail
    x = (torch.randn(1, 8, 12, 12, generator=torch.Generator().manual_seed(9)) + shift)
    if shift:
        x = x.clamp_min(0)
    with torch.no_grad():
        want = torch.relu(nn.functional.conv2d(fake_quant(x, scale, unsigned).double(),
                                               fake_quant_weight(model.c.weight).double(),
                                               model.c.bias.double(), padding=1, groups=groups))
        fp32 = model(x)
    got = q(x.numpy())
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-5)
    assert np.abs(got - fp32.numpy()).max() > 1e-4  # not the fp32 result


def signed_grid():
    """How this process writes a convolution's signed activation, as the
    backend reports it (llga.cpu_capabilities()["int8_signed"]): the
    (act_dtype, zero point, kernel log dtype) of the s8 grid: u8 shifted by
    128 where oneDNN picks the same kernel for it as for s8 (its VNNI
    kernels), else s8 (with AMX, whose brgemm kernels take no zero point)."""
    enc = llga.cpu_capabilities()["int8_signed"]
    assert enc in ("u8+128", "s8"), enc
    return ("u8", 128, "Byte") if enc == "u8+128" else ("s8", 0, "Char")


def run_fresh(code, **env):
    """`code` (after `import test_quantize, llga`) in a fresh process with
    `env` added to the environment: its last line of output."""
    prog = "import sys; sys.path.insert(0, %r); import test_quantize, llga; " % str(Path(__file__).parent) + code
    out = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, env=dict(os.environ, **env),
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip().splitlines()[-1]


def run_with_signed(encoding, code):
    """run_fresh with signed activations written as `encoding` ("u8" or "s8", LLGA_INT8_SIGNED)."""
    return run_fresh(code, LLGA_INT8_SIGNED=encoding)


class ConvLin(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(4)
        self.c, self.fc = nn.Conv2d(8, 6, 3), nn.Linear(6, 5)

    def forward(self, x):
        return self.fc(self.c(x).mean((2, 3)))


def check_signed_conv_activation():
    """The IR writes the signed grid as the backend says, and the result is
    int8 arithmetic on that grid (the same values either way). The grid is
    s8's (-128..127 steps of the scale); a linear keeps s8."""
    dtype, zp, _ = signed_grid()
    model = ConvLin().eval()
    calib = calibration_batches((2, 8, 9, 9))
    q = llga.quantize(torch.jit.trace(model, calib[0]), calibration=calib)
    text = str(q.graph)
    want_attrs = f'act_dtype="{dtype}"' + (f", act_zero_point={zp}" if zp else "")
    conv = re.search(r"aten::_convolution\[precision=\"int8\", act_scale=([0-9.e+-]+), " + want_attrs + r"\]", text)
    assert conv, text
    assert re.search(r"aten::linear\[precision=\"int8\", act_scale=[0-9.e+-]+, act_dtype=\"s8\"\]", text), text
    np.testing.assert_allclose(float(conv.group(1)), max(float(c.abs().max()) for c in calib) / 127, rtol=1e-6)
    x = torch.randn(2, 8, 9, 9, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        h = nn.functional.conv2d(fake_quant(x, float(conv.group(1)), False).double(),
                                 fake_quant_weight(model.c.weight).double(), model.c.bias.double()).mean((2, 3))
    (_, s_fc, _), = [a for a in act_quant(q) if a[0] == "aten::linear"]
    with torch.no_grad():
        want = nn.functional.linear(fake_quant(h, s_fc, False), fake_quant_weight(model.fc.weight).double(),
                                    model.fc.bias.double())
    np.testing.assert_allclose(q(x.numpy()), want.numpy(), rtol=1e-4, atol=2e-5)


def test_signed_conv_activation_is_written_as_the_backend_takes_it():
    check_signed_conv_activation()


@pytest.mark.parametrize("encoding", ["u8", "s8"])
def test_signed_conv_activation_either_way(encoding):
    # LLGA_INT8_SIGNED chooses the grid's encoding; the IR, the kernels and
    # the arithmetic follow it on any VNNI CPU
    enc = run_with_signed(encoding, "test_quantize.check_signed_conv_activation(); "
                                    "print(llga.cpu_capabilities()['int8_signed'])")
    assert enc == {"u8": "u8+128", "s8": "s8"}[encoding]


def test_signed_encoding_follows_the_kernels_oneDNN_picks():
    """The backend shifts the signed grid into u8 exactly where oneDNN runs a
    u8 source with a zero point on the kernel it runs an s8 source on: seen
    here in the kernel log of mobilenet's expansion (32 -> 192, 1x1, 28x28)."""
    code = ("import torch, numpy as np; from torch import nn; torch.manual_seed(0); "
            "m = nn.Sequential(nn.Conv2d(32, 192, 1), nn.ReLU6(), nn.Conv2d(192, 8, 1)).eval(); "
            "cal = [torch.randn(1, 32, 28, 28) for _ in range(2)]; "
            "q = llga.quantize(torch.jit.trace(m, cal[0]), calibration=cal); "
            "e = [e for e in test_quantize.kernel_log(q, cal[0].numpy()) if '192x32x1x1' in str(e['inputs'])]; "
            "print(e[0]['impl'].split('+')[0])")
    shifted, s8 = run_with_signed("u8", code), run_with_signed("s8", code)
    want = "u8+128" if shifted == s8 else "s8"
    assert llga.cpu_capabilities()["int8_signed"] == want, (shifted, s8)
    # a source with a zero point runs on a brgemm kernel: oneDNN 2.6 has one
    # for it on every AVX-512 VNNI CPU (brgconv_1x1:avx512_core_vnni), and
    # with AMX lists its older, slower AMX kernels first
    if ISA.startswith("avx512"):
        assert shifted.startswith("brg"), shifted


class DwBlock(nn.Module):
    """A depthwise 3x3 with relu6 whose output a 1x1 reads in int8 (mobilenet's shape of block)."""

    def __init__(self, c, stride=1):
        super().__init__()
        torch.manual_seed(c)
        self.dw = nn.Conv2d(c, c, 3, stride=stride, padding=1, groups=c)
        self.pw = nn.Conv2d(c, 8, 1)

    def forward(self, x):
        return self.pw(torch.clamp(self.dw(x), 0, 6))


# 144: two blocks of 64 and a 16-channel unit; 96: a block and one overlapping
# it; 64: one block; 32: half a block. Stride 2 (measured even or slower) and
# 16 channels (not measured) stay oneDNN's
@pytest.mark.parametrize("c, stride", [(144, 1), (96, 1), (64, 1), (96, 2), (32, 1), (16, 1)])
def test_int8_depthwise_is_int8_arithmetic_and_its_kernel_as_decided(c, stride):
    model = DwBlock(c, stride).eval()
    calib = calibration_batches((1, c, 10, 11))
    q = llga.quantize(torch.jit.trace(model, calib[0]), calibration=calib)
    (_, s_dw, g_dw), (_, s_pw, g_pw) = act_quant(q)
    assert (g_dw, g_pw) == ("s8", "u8")  # relu6's output is unsigned
    x = torch.randn(1, c, 10, 11, generator=torch.Generator().manual_seed(3))
    log = kernel_log(q, x.numpy())
    own = llga.cpu_capabilities()["llga_dw_int8"] and stride == 1 and c >= 32
    dw_impl = [e["impl"] for e in log if e.get("inputs") and f"{c}x1x3x3" in str(e["inputs"])]
    assert len(dw_impl) == 1 and ("llga_dw_int8" in dw_impl[0]) == own, (dw_impl, own)
    with torch.no_grad():
        h = torch.clamp(nn.functional.conv2d(fake_quant(x, s_dw, False).double(), fake_quant_weight(model.dw.weight).double(),
                                             model.dw.bias.double(), stride=stride, padding=1, groups=c), 0, 6)
        w_pw = fake_quant_weight(model.pw.weight).double()
        want = nn.functional.conv2d(fake_quant(h, s_pw, True), w_pw, model.pw.bias.double())
    # one element of h a step off (a product sum landing on a half in float) moves an output by at most this
    step = s_pw * float(w_pw.abs().max())
    np.testing.assert_allclose(q(x.numpy()), want.numpy(), rtol=0, atol=1.01 * step)


class SiluBlock(nn.Module):
    """An expand 1x1 ending in silu whose output the next 1x1 reads in int8 (efficientnet's)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(6)
        self.expand, self.project = nn.Conv2d(16, 96, 1), nn.Conv2d(96, 8, 1)

    def forward(self, x):
        return self.project(nn.functional.silu(self.expand(x)))


def test_int8_conv_ending_in_silu_quantizes_after_llga_swish():
    # oneDNN's int8 kernels run a swish post-op at a fraction of their speed:
    # where llga's swish can run, the primitive writes fp32 and llga's swish
    # quantizes it for the next int8 reader (24576 outputs: enough for it)
    model = SiluBlock().eval()
    calib = calibration_batches((1, 16, 16, 16))
    q = llga.quantize(torch.jit.trace(model, calib[0]), calibration=calib)
    (_, s_in, g_in), (_, s_mid, g_mid) = act_quant(q)
    assert g_mid == "s8"  # silu's output has negatives: the s8 grid
    x = torch.randn(1, 16, 16, 16, generator=torch.Generator().manual_seed(7))
    caps = llga.cpu_capabilities()
    own = caps["fast_swish"] and caps["isa"].startswith("avx512")
    (expand,) = [e["impl"] for e in kernel_log(q, x.numpy()) if "96x16x1x1" in str(e.get("inputs"))]
    assert ("+llga_swish_quantize" in expand) == own, (expand, caps)
    with torch.no_grad():
        h = nn.functional.silu(nn.functional.conv2d(fake_quant(x, s_in, g_in == "u8").double(),
                                                    fake_quant_weight(model.expand.weight).double(),
                                                    model.expand.bias.double()))
        w = fake_quant_weight(model.project.weight).double()
        want = nn.functional.conv2d(fake_quant(h, s_mid, False), w, model.project.bias.double())
    # an element of h a step off (a product sum or silu landing on a half in float) moves an output by at most this
    step = s_mid * float(w.abs().max())
    np.testing.assert_allclose(q(x.numpy()), want.numpy(), rtol=0, atol=1.01 * step)


def test_int8_linear_is_int8_arithmetic_on_the_quantized_operands():
    model = Lin().eval()
    calib = calibration_batches((5, 48), n=3)
    traced = torch.jit.trace(model, calib[0])
    q = llga.quantize(traced, calibration=calib)
    (kind, scale, dtype), = act_quant(q)
    assert kind == "aten::linear" and dtype == "s8"
    np.testing.assert_allclose(scale, max(float(c.abs().max()) for c in calib) / 127, rtol=1e-6)
    x = torch.randn(5, 48, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        want = nn.functional.linear(fake_quant(x, scale, False).double(), fake_quant_weight(model.fc.weight).double(),
                                    model.fc.bias.double())
    got = q(x.numpy())
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-5)
    assert "int8" in q.partitions[0].precision and not q.partitions[0].detail


def test_values_beyond_the_calibrated_range_saturate():
    """An input larger than anything calibration saw saturates at the top step (as oneDNN's reorder)."""
    model = Lin().eval()
    calib = [torch.full((1, 48), 0.5), torch.full((1, 48), -0.5)]
    q = llga.quantize(torch.jit.trace(model, calib[0]), calibration=calib)
    (_, scale, dtype), = act_quant(q)
    x = torch.full((1, 48), 10.0)
    with torch.no_grad():
        want = nn.functional.linear(fake_quant(x, scale, False).double(), fake_quant_weight(model.fc.weight).double(),
                                    model.fc.bias.double())
    np.testing.assert_allclose(q(x.numpy()), want.numpy(), rtol=1e-4, atol=1e-5)


class Net(nn.Module):
    """conv -> relu -> conv (+ residual) -> relu -> pool -> linear: the second conv's activation is u8."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(2)
        self.c1, self.c2 = nn.Conv2d(3, 16, 3, padding=1), nn.Conv2d(16, 16, 3, padding=1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        y = torch.relu(self.c1(x))
        y = torch.relu(self.c2(y) + y)
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))


def test_decisions_on_the_ir_and_in_partitions():
    model = Net().eval()
    calib = calibration_batches((2, 3, 16, 16))
    q = llga.quantize(torch.jit.trace(model, calib[0]), calibration=calib)
    assert q.precision == "int8" and "minmax calibration over 4 batch(es)" in q.precision_note
    quant = act_quant(q)
    assert [(k, d) for k, _, d in quant] == [("aten::_convolution", "s8"), ("aten::_convolution", "u8"),
                                             ("aten::linear", "u8")], quant
    by_op = {p.ops[0]: p for p in q.partitions}
    assert by_op["aten::_convolution"].precision == "int8"
    assert [p.precision for p in q.partitions if p.pattern == "pool_post_ops"] in ([], ["fp32"])
    x = torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        ref = model(x).numpy()
    got = q(x.numpy())
    # the int8 kernels ran (oneDNN's int8 implementations, never its reference one)
    for p in q.partitions:
        if p.precision == "int8":
            assert p.impl and "ref" not in p.impl and not p.detail, (p.impl, p.detail)
    cos = float((got * ref).sum() / np.linalg.norm(got) / np.linalg.norm(ref))
    assert cos > 0.999, cos


def test_skip_keeps_a_kind_fp32():
    model = Net().eval()
    calib = calibration_batches((2, 3, 16, 16))
    q = llga.quantize(torch.jit.trace(model, calib[0]), calibration=calib, skip=["aten::linear"])
    assert [k for k, _, _ in act_quant(q)] == ["aten::_convolution", "aten::_convolution"]
    assert "aten::linear kept fp32" in q.precision_note


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "efficientnet_b0", "regnet_y_800mf"])
def test_corpus_cnns_in_int8(name):
    torch.set_num_threads(2)
    model = zoo.torchvision_model(name)
    calib = calibration_batches((1, 3, 224, 224), n=8, seed=1)
    traced = torch.jit.trace(model, calib[0], check_trace=False)
    f = llga.optimize(traced)
    q = llga.quantize(traced, calibration=calib)
    one_pixel = lambda p: tuple(p.inputs[0][1][2:]) == (1, 1)  # noqa: E731 - squeeze-excite's 1x1s: fp32
    convs = [p for p in q.partitions if p.pattern == "conv_post_ops" and not one_pixel(p)]
    assert convs and all(p.precision == "int8" for p in convs), [(p.ops, p.precision) for p in convs]
    assert all(p.precision == "fp32" for p in q.partitions if p.pattern == "conv_post_ops" and one_pixel(p))
    ran_int8 = [p for p in convs if not p.detail]
    assert len(ran_int8) >= 0.9 * len(convs), [(p.impl, p.detail) for p in convs if p.detail]
    g = torch.Generator().manual_seed(5)
    for _ in range(2):
        x = torch.randn(1, 3, 224, 224, generator=g).numpy()
        a, b = f(x), q(x)
        cos = float((a * b).sum() / np.linalg.norm(a) / np.linalg.norm(b))
        assert cos >= 0.99, (name, cos)
        assert not np.array_equal(a, b)


def test_bad_calibration_and_arguments_are_clear_errors():
    traced = torch.jit.trace(Lin().eval(), torch.randn(2, 48))
    with pytest.raises(llga.PrecisionError, match="needs calibration"):
        llga.quantize(traced, calibration=None)
    with pytest.raises(llga.PrecisionError, match="calibration is empty"):
        llga.quantize(traced, calibration=[])
    with pytest.raises(llga.PrecisionError, match="calibration batch 1, input 0: expected an array"):
        llga.quantize(traced, calibration=[np.zeros((2, 48), np.float32), "not an array"])
    with pytest.raises(llga.PrecisionError, match="calibration method 'kl'"):
        llga.quantize(traced, calibration=[np.zeros((2, 48), np.float32)], method="kl")
    with pytest.raises(llga.PrecisionError, match="percentile 0: expected a number in"):
        llga.quantize(traced, calibration=[np.zeros((2, 48), np.float32)], method="percentile", percentile=0)
    with pytest.raises(llga.PrecisionError, match="skip 'aten::softmax': not an op kind llga runs in int8"):
        llga.quantize(traced, calibration=[np.zeros((2, 48), np.float32)], skip=["aten::softmax"])
    # a batch the model cannot run on names the batch
    with pytest.raises(llga.LlgaError, match="calibration input set 1"):
        llga.quantize(traced, calibration=[np.zeros((2, 48), np.float32), np.zeros((2, 7), np.float32)])


def test_all_zero_calibration_keeps_the_op_fp32_and_says_so():
    """A step taken from nothing would be a guess (at 1, a later 0.01 read
    as 0: fuzzer seed 140705): the op stays fp32, with a note."""
    model = Lin().eval()
    traced = torch.jit.trace(model, torch.randn(2, 48))
    q = llga.quantize(traced, calibration=[np.zeros((2, 48), np.float32)])
    assert act_quant(q) == [] and all(p.precision != "int8" for p in q.partitions)
    notes = [n for r in q.passes if r.name == "assign-precision" for n in r.notes]
    assert any("calibration saw only zeros as its activation" in n for n in notes), notes
    x = torch.randn(2, 48) * 0.01
    np.testing.assert_allclose(q(x.numpy()), model(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(q(np.zeros((2, 48), np.float32)),
                               np.broadcast_to(model.fc.bias.detach().numpy(), (2, 24)), rtol=1e-5, atol=1e-6)


def test_int8_needs_vnni():
    """Under ONEDNN_MAX_CPU_ISA=AVX2 (and AVX512_CORE: no VNNI) llga.quantize
    raises: oneDNN's int8 kernels there saturate 16-bit sums and halve the
    weights (measured up to 0.3 off the int8 arithmetic); with AVX512-VNNI
    (no AMX: the Zen 5 EPYC's path) the model runs int8 and matches it."""
    code = textwrap.dedent("""
        import numpy as np, torch, llga
        from torch import nn
        torch.manual_seed(0)
        m = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.ReLU()).eval()
        g = torch.Generator().manual_seed(0)
        calib = [torch.randn(1, 8, 10, 10, generator=g) for _ in range(3)]
        try:
            q = llga.quantize(torch.jit.trace(m, calib[0]), calibration=calib)
        except llga.PrecisionError as e:
            print("refused|" + llga.cpu_capabilities()["isa"] + "|" + str(e))
            raise SystemExit(0)
        x = torch.randn(1, 8, 10, 10, generator=g)
        with torch.no_grad():
            ref = m(x).numpy()
        out = q(x.numpy())
        p, = q.partitions
        cos = float((out * ref).sum() / np.linalg.norm(out) / np.linalg.norm(ref))
        print("|".join(["ran", llga.cpu_capabilities()["isa"], p.precision, p.impl, repr(p.detail), str(cos)]))
    """)
    seen = set()
    for limit in ("AVX2", "AVX512_CORE", "AVX512_CORE_VNNI"):
        env = dict(__import__("os").environ, ONEDNN_MAX_CPU_ISA=limit)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
        assert out.returncode == 0, out.stderr
        fields = out.stdout.strip().split("|")
        isa = fields[1]  # what oneDNN reports under the limit decides: refused without VNNI, int8 with it
        assert fields[0] == ("ran" if isa in VNNI_ISAS else "refused"), (limit, out.stdout)
        seen.add(fields[0])
        if fields[0] == "refused":
            assert "needs a CPU with VNNI" in fields[2], out.stdout
        else:
            assert fields[2] == "int8" and fields[4] == "''" and float(fields[5]) > 0.999, out.stdout
    assert "refused" in seen  # AVX2 has no VNNI on any CPU



class Chain(nn.Module):
    """conv -> relu -> conv -> relu -> conv: the first two hand their outputs on quantized."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(4)
        self.c1, self.c2, self.c3 = nn.Conv2d(3, 16, 3, padding=1), nn.Conv2d(16, 16, 3, padding=1), nn.Conv2d(16, 8, 1)

    def forward(self, x):
        return self.c3(torch.relu(self.c2(torch.relu(self.c1(x)))))


def test_int8_edges_and_the_accuracy_report():
    """Between int8 convolutions the value stays u8 (out_dtype), quantized as
    the reader reads it: the result is what quantizing at the reader gives
    (the same value, rounded the same way), and the accuracy report sees real
    values on the edges (dequantized), not the 8-bit codes."""
    model = Chain().eval()
    traced, q = quantized(model, (1, 3, 20, 20), seed=3)
    x = torch.randn(1, 3, 20, 20, generator=torch.Generator().manual_seed(11)).numpy()
    out = q(x)
    parts = list(q.partitions)
    assert [p.out_dtype for p in parts] == ["u8", "u8", "fp32"], [(p.ops, p.out_dtype) for p in parts]
    assert all(p.precision == "int8" and not p.detail for p in parts)
    # emulated: each conv's input quantized at its reader's scale
    scales = [s for _, s, _ in act_quant(q)]
    dtypes = [d for _, _, d in act_quant(q)]
    y = torch.from_numpy(x).double()
    with torch.no_grad():
        for i, (conv, s, d) in enumerate(zip((model.c1, model.c2, model.c3), scales, dtypes)):
            y = nn.functional.conv2d(fake_quant(y, s, d == "u8"), fake_quant_weight(conv.weight).double(),
                                     conv.bias.double(), padding=conv.padding)
            if i < 2:
                y = torch.relu(y)
    np.testing.assert_allclose(out, y.numpy(), rtol=1e-3, atol=2 * scales[2] * float(model.c3.weight.abs().sum(1).max()))
    report = llga.accuracy_report(q, llga.optimize(traced), [x])
    assert len(report.partitions) == 3
    for row in report.partitions:
        assert row.cosine > 0.999 and row.max_rel < 0.1, row


def res_stream():
    """Block 1 adds a u8 residual into a u8 output (relu after the add),
    block 2 a u8 one into a signed output (no relu: the s8 grid, as u8 with
    zero point 128), block 3 that signed one into a u8 output, block 4 a u8
    one into the graph's fp32 output."""
    return ResStream(blocks=4, width=24, relu_after=(0, 2), seed=8).eval()


def quantized(model, shape, seed, shift=0.0, **options):
    """model traced on the first of 4 calibration batches of `shape` (from
    `seed`, `shift` added) and quantized on all of them with llga.quantize's
    `options`: (traced, llga's int8 model)."""
    calib = calibration_batches(shape, n=4, seed=seed, shift=shift)
    traced = torch.jit.trace(model, calib[0])
    return traced, llga.quantize(traced, calibration=calib, **options)


def test_int8_residual_stream_stays_int8_and_sums_as_it_arrives():
    """The residual blocks' outputs stay int8 (out_dtype) for both readers:
    the next block's convolution reads it as its activation, and the block's
    sum post-op adds it as it arrives, at its producer's scale, into the
    block's int8 output (of either signedness) or, for the last block, into
    its fp32 output (dequantized first). The result is what quantizing each
    value at its reader's scale gives, in float64."""
    check_residual_stream()


def test_int8_residual_stream_on_vnni_without_amx():
    """The same on oneDNN's AVX512-VNNI kernels (as on a Zen 5 EPYC: jit
    int8 convolutions, not AMX's brgconv), capped by ONEDNN_MAX_CPU_ISA;
    judged by the ISA oneDNN reports there."""
    isa = run_fresh("test_quantize.check_residual_stream(); print(llga.cpu_capabilities()['isa'])",
                    ONEDNN_MAX_CPU_ISA="AVX512_CORE_VNNI")
    assert isa in VNNI_ISAS, isa


class ClampedEdge(nn.Module):
    """conv -> clamp(0.5, 3) -> 1x1 conv: the first hands its output on as
    u8 with zero point 0 through a clip whose lower bound stays after the
    quantizing scale is folded into the output scales (int8::foldQuantizingScale)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(11)
        self.c1, self.c2 = nn.Conv2d(3, 32, 3, padding=1), nn.Conv2d(32, 16, 1)

    def forward(self, x):
        return self.c2(torch.clamp(self.c1(x), 0.5, 3.0))


def test_int8_edge_through_a_clip_with_its_scale_folded():
    model = ClampedEdge().eval()
    _, q = quantized(model, (1, 3, 16, 16), seed=3)
    assert [p.out_dtype for p in q.partitions] == ["u8", "fp32"], list(q.partitions)
    (_, s0, d0), (_, s1, d1) = act_quant(q)
    assert d1 == "u8"
    x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        y1 = torch.clamp(nn.functional.conv2d(fake_quant(x.double(), s0, d0 == "u8"),
                                              fake_quant_weight(model.c1.weight).double(),
                                              model.c1.bias.double(), padding=1), 0.5, 3.0)
        want = nn.functional.conv2d(fake_quant(y1, s1, True), fake_quant_weight(model.c2.weight).double(),
                                    model.c2.bias.double()).numpy()
    got = q(x.numpy())
    # a value of y1 on a rounding tie may land one step of s1 over, moving an
    # output by s1 * |w| (under an eighth of s1 * sum |w| here): that much
    # anywhere, and hardly anywhere
    bound = s1 * float(model.c2.weight.abs().sum((1, 2, 3)).max())
    assert np.abs(got - want).max() <= bound / 8, (np.abs(got - want).max(), bound)
    assert np.mean(np.abs(got - want) > 1e-4 * np.abs(want).max()) < 0.01
    # the clip's lower bound does its work: 0.5 is at least 42 steps of s1 (3 / 255 or finer)
    assert float(y1.min()) == 0.5


class _StemPool(nn.Module):
    """resnet's stem: conv -> relu -> 3x3/2 max pooling, then conv -> relu ->
    conv, and with `residual` an add of the pooling's output (a residual
    reader); with `pool_out` the pooling's output is returned too."""

    def __init__(self, residual=False, pool_out=False, stem_relu=True):
        super().__init__()
        torch.manual_seed(2)
        self.stem, self.c1 = nn.Conv2d(3, 16, 3, padding=1), nn.Conv2d(16, 16, 1)
        self.c2 = nn.Conv2d(16, 16, 3, padding=1)
        self.residual, self.pool_out, self.stem_relu = residual, pool_out, stem_relu

    def forward(self, x):
        s = self.stem(x)
        p = nn.functional.max_pool2d(torch.relu(s) if self.stem_relu else s, 3, 2, 1)
        y = self.c2(torch.relu(self.c1(p)))
        y = y + p if self.residual else y
        return (y, p) if self.pool_out else y


def test_int8_passes_through_max_pooling():
    """The stem writes u8 at the scale the pooling's readers take, the
    pooling pools u8 (precision int8, out_dtype u8) and its readers take it
    as it arrives. The maximum commutes with quantizing, so the result has
    the bits of the same model whose pooling runs fp32 (there the pooling's
    output is also returned, so nothing may change its dtype)."""
    x = torch.randn(1, 3, 17, 17, generator=torch.Generator().manual_seed(9)).numpy()
    _, q = quantized(_StemPool(), (1, 3, 17, 17), seed=8)
    _, ref = quantized(_StemPool(pool_out=True), (1, 3, 17, 17), seed=8)
    stem, pool = list(q.partitions)[:2]
    assert pool.pattern == "pool_post_ops" and (pool.precision, pool.out_dtype) == ("int8", "u8"), pool
    assert stem.out_dtype == "u8", stem
    stem_ref, pool_ref = list(ref.partitions)[:2]
    assert (pool_ref.precision, pool_ref.out_dtype, stem_ref.out_dtype) == ("fp32", "fp32", "fp32")
    np.testing.assert_array_equal(q(x), ref(x)[0])
    # and with the pooling's output also a residual: read u8 there too, the model close to fp32
    model = _StemPool(residual=True)
    traced, q = quantized(model, (1, 3, 17, 17), seed=8)
    stem, pool = list(q.partitions)[:2]
    assert (pool.precision, pool.out_dtype, stem.out_dtype) == ("int8", "u8", "u8"), (stem, pool)
    log = kernel_log(q, x)
    assert [e["inputs"][3].split(":")[1].split()[0] for e in log if len(e["inputs"]) == 4] == ["Byte"]  # the residual
    with torch.no_grad():
        want = model(torch.from_numpy(x)).numpy().ravel().astype(np.float64)
    got = q(x).ravel().astype(np.float64)
    assert got @ want / np.linalg.norm(got) / np.linalg.norm(want) > 0.999


class _DenseLayers(nn.Module):
    """Two of densenet's concat -> batch_norm -> relu -> 1x1 convolution: the
    first concatenates the NCHW input with a convolution's channels-last
    output (layouts the one-pass kernel does not mix: op by op), the second
    two channels-last outputs (one pass). `cats_out` returns both
    normalised concats too."""

    def __init__(self, cats_out=False):
        super().__init__()
        torch.manual_seed(4)
        self.stem, self.a, self.b, self.c = (nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(11, 8, 1),
                                             nn.Conv2d(8, 4, 3, padding=1), nn.Conv2d(12, 8, 1))
        self.bn0, self.bn1 = nn.BatchNorm2d(11), nn.BatchNorm2d(12)
        for bn in (self.bn0, self.bn1):
            nn.init.uniform_(bn.weight, 0.5, 1.5)
            nn.init.uniform_(bn.bias, -0.5, 0.5)
            bn.running_mean.uniform_(-0.3, 0.3)
            bn.running_var.uniform_(0.5, 2.0)
        self.cats_out = cats_out
        self.eval()

    def forward(self, x):
        s = self.stem(x)
        r0 = torch.relu(self.bn0(torch.cat([x, s], 1)))
        a = self.a(r0)
        r1 = torch.relu(self.bn1(torch.cat([a, self.b(a)], 1)))
        c = self.c(r1)
        return (c, r0, r1) if self.cats_out else c


def test_concat_batchnorm_writes_u8_for_its_int8_readers():
    """A concat -> batch_norm -> relu partition read only by an int8
    convolution writes its result as u8 at the convolution's scale
    (out_dtype), in one pass or after its op-by-op path, and the convolution
    reads those bytes as they arrive. Quantizing commutes with who does it:
    the result has the bits of the same model whose normalised concats are
    also returned (so stay fp32, and the convolutions quantize them)."""
    x = torch.randn(1, 3, 10, 10, generator=torch.Generator().manual_seed(9)).numpy()
    traced, q = quantized(_DenseLayers(), (1, 3, 10, 10), seed=8)
    _, ref = quantized(_DenseLayers(cats_out=True), (1, 3, 10, 10), seed=8)
    cats = [p for p in q.partitions if p.pattern == "concat_batchnorm"]
    cats_ref = [p for p in ref.partitions if p.pattern == "concat_batchnorm"]
    assert [(p.precision, p.out_dtype) for p in cats] == [("fp32", "u8")] * 2, cats
    assert [p.out_dtype for p in cats_ref] == ["fp32"] * 2, cats_ref
    log = kernel_log(q, x)
    readers = [e for e in log if e["pattern"] == "conv_post_ops" and "Byte" in e["inputs"][0]]
    assert len(readers) == 2, [(e["pattern"], e["inputs"][:1]) for e in log]
    details = [p.detail for p in q.partitions if p.pattern == "concat_batchnorm"]
    assert all(d.endswith(("written as u8", "then quantized to u8")) for d in details), details
    if all(p.dst == "nhwc" for p in q.partitions if p.pattern == "conv_post_ops"):  # oneDNN's brgconv (AVX-512)
        assert ["then quantized" in details[0], "written as" in details[1]] == [True, True], details
    got = q(x)
    np.testing.assert_array_equal(got, ref(x)[0])
    with torch.no_grad():
        want = traced(torch.from_numpy(x)).numpy().ravel().astype(np.float64)
    got = got.ravel().astype(np.float64)
    assert got @ want / np.linalg.norm(got) / np.linalg.norm(want) > 0.999


class _SqueezeExcite(nn.Module):
    """A squeeze-excite block before a 1x1 convolution: the map (a
    convolution's channels-last output, or with `on_input` the NCHW input
    itself), times sigmoid(fc2(relu(fc1(mean)))) per channel, read by the
    1x1. `relu` makes the map non-negative (u8), else it is signed.
    `scaled_out` returns the scaled map too."""

    def __init__(self, relu=True, on_input=False, scaled_out=False):
        super().__init__()
        torch.manual_seed(5)
        self.stem, self.fc1, self.fc2 = nn.Conv2d(8, 16, 3, padding=1), nn.Conv2d(16, 4, 1), nn.Conv2d(4, 16, 1)
        self.proj = nn.Conv2d(16, 8, 1)
        self.relu, self.on_input, self.scaled_out = relu, on_input, scaled_out
        if on_input:
            self.fc1, self.fc2, self.proj = nn.Conv2d(8, 4, 1), nn.Conv2d(4, 8, 1), nn.Conv2d(8, 8, 1)
        self.eval()

    def forward(self, x):
        m = x if self.on_input else self.stem(x)
        m = torch.relu(m) if self.relu else m
        s = torch.sigmoid(self.fc2(torch.relu(self.fc1(nn.functional.adaptive_avg_pool2d(m, 1)))))
        y = m * s
        out = self.proj(y)
        return (out, y) if self.scaled_out else out


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("relu,on_input", [(True, False), (False, False), (True, True)])
def test_squeeze_excite_mul_writes_int8_for_its_reader(batch, relu, on_input):
    """The squeeze-excite mul read only by an int8 convolution writes its
    product quantized at the convolution's scale (out_dtype u8, or the
    signed grid as the backend writes it), in one pass for a channels-last
    map (on_input: an NCHW map, multiplied then quantized), and the
    convolution reads those bytes. The result has the bits of the same model
    whose scaled map is also returned (so stays fp32). Under llga.quantize
    the scaled_conv pattern (the scale folded into the 1x1's weights per
    call, fp32 only) is not formed: the 1x1 runs int8."""
    shape = (batch, 8, 12, 12)
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(9)).numpy()
    traced, q = quantized(_SqueezeExcite(relu, on_input), shape, seed=8)
    _, ref = quantized(_SqueezeExcite(relu, on_input, scaled_out=True), shape, seed=8)
    if batch == 1 and relu and not on_input:  # fp32 folds the scale into the 1x1 here
        assert "scaled_conv" in [p.pattern for p in llga.optimize(traced).partitions]
    assert "scaled_conv" not in [p.pattern for p in q.partitions]
    proj = [p for p in q.partitions if p.pattern == "conv_post_ops"][-1]
    assert proj.precision == "int8", proj
    log = kernel_log(q, x)
    muls = [e for e in log if e["op"] == "aten::mul"]
    assert len(muls) == 1 and muls[0]["outputs"][0].split(":")[1].split()[0] in ("Byte", "Char"), muls
    if not on_input:  # one pass: the result channels-last, as the map
        assert muls[0]["outputs"][0].endswith("strided"), muls
    np.testing.assert_array_equal(q(x), ref(x)[0])
    with torch.no_grad():
        want = traced(torch.from_numpy(x)).numpy().ravel().astype(np.float64)
    got = q(x).ravel().astype(np.float64)
    assert got @ want / np.linalg.norm(got) / np.linalg.norm(want) > 0.999


class _Inception(nn.Module):
    """Two inception blocks: the first's concat (a 1x1 + relu, a 3x3 + relu,
    and a max pooling's 1x1 branch; with `float_part`, the block's input
    itself as a fourth part, a float) is read by the second's four branches,
    one through a max pooling; the second's concat by a 1x1. `cats_out`
    returns both concats too."""

    def __init__(self, float_part=False, cats_out=False):
        super().__init__()
        torch.manual_seed(6)
        c_in = 8
        self.stem = nn.Conv2d(3, c_in, 3, padding=1)
        def block(c):
            return nn.ModuleList([nn.Conv2d(c, 4, 1), nn.Conv2d(c, 6, 3, padding=1), nn.Conv2d(c, 2, 1)])
        self.b1 = block(c_in)
        c1 = 12 + (c_in if float_part else 0)
        self.b2 = nn.ModuleList([nn.Conv2d(c1, 4, 1), nn.Conv2d(c1, 4, 1), nn.Conv2d(c1, 4, 1), nn.Conv2d(c1, 4, 1)])
        self.head = nn.Conv2d(16, 8, 1)
        self.float_part, self.cats_out = float_part, cats_out
        self.eval()

    def forward(self, x):
        x = torch.relu(self.stem(x))
        parts = [torch.relu(self.b1[0](x)), torch.relu(self.b1[1](x)),
                 torch.relu(self.b1[2](nn.functional.max_pool2d(x, 3, 1, 1)))]
        c1 = torch.cat(parts + ([x] if self.float_part else []), 1)
        c2 = torch.cat([self.b2[0](c1), torch.relu(self.b2[1](c1)), self.b2[2](c1),
                        torch.relu(self.b2[3](nn.functional.max_pool2d(c1, 3, 1, 1)))], 1)
        out = self.head(c2)
        return (out, c1, c2) if self.cats_out else out


@pytest.mark.parametrize("float_part", [False, True])
def test_concat_writes_int8_for_its_readers_and_its_parts_arrive_so(float_part):
    """A concat read only by int8 convolutions (one through a max pooling)
    writes int8 at their quantization (out_dtype), the pooling pools it so,
    and the convolutions whose outputs only go into its list write them at
    that quantization: the concat copies bytes. A float part (the block's
    input, also read elsewhere) is quantized by the concat. Against the same
    model whose concats are also returned (so stay fp32, and each reader
    quantizes them itself): every element within one step of the second
    concat's quantization of the output's scale, and close to PyTorch."""
    shape = (1, 3, 10, 10)
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(9)).numpy()
    traced, q = quantized(_Inception(float_part), shape, seed=8)
    _, ref = quantized(_Inception(float_part, cats_out=True), shape, seed=8)
    cats = [p for p in q.partitions if p.pattern == "concat"]
    assert len(cats) == 2 and all(p.out_dtype in ("u8", "s8") for p in cats), cats
    assert all(p.out_dtype == "fp32" for p in ref.partitions if p.pattern == "concat")
    pools = [p for p in q.partitions if p.pattern == "pool_post_ops"]
    assert [(p.precision, p.out_dtype) for p in pools][-1] == ("int8", cats[0].out_dtype), pools
    log = kernel_log(q, x)
    cat_log = [e for e in log if e["pattern"] == "concat"]
    assert all(e["outputs"][0].split(":")[1].split()[0] in ("Byte", "Char") for e in cat_log), cat_log
    # the first concat's parts: three int8 convolutions' outputs, and the float input with float_part
    cats = [p for p in q.partitions if p.pattern == "concat"]  # their reports after a call
    n_float = [int(d.split(", ")[1].split()[0]) for d in (p.detail for p in cats)]
    assert n_float[0] == (1 if float_part else 0), [p.detail for p in cats]
    got, want_ref = q(x), ref(x)[0]
    step = np.abs(want_ref).max() / 127  # the output's scale is finer than this; a step in a concat moves it less
    np.testing.assert_allclose(got, want_ref, rtol=0, atol=step)
    with torch.no_grad():
        want = traced(torch.from_numpy(x)).numpy().ravel().astype(np.float64)
    got = got.ravel().astype(np.float64)
    assert got @ want / np.linalg.norm(got) / np.linalg.norm(want) > 0.999


def kernel_log(q, x):
    llga.profiler.kernel_log.enable()
    try:
        llga.profiler.kernel_log.clear()
        q(x)
        return [e for e in llga.profiler.kernel_log.entries() if e["depth"] == 0]
    finally:
        llga.profiler.kernel_log.disable()


def check_residual_stream(activations="symmetric"):
    model = res_stream()
    _, q = quantized(model, (1, 3, 12, 12), seed=6, activations=activations)
    parts = list(q.partitions)
    # stem, then per block: c1 (u8 after relu), c2 + residual
    # (block 2's output is signed: the s8 grid, as the backend writes it, or
    # an asymmetric u8 grid)
    signed, _, signed_log = signed_grid() if activations == "symmetric" else ("u8", None, "Byte")
    assert [p.out_dtype for p in parts] == ["u8", "u8", "u8", "u8", signed, "u8", "u8", "u8", "fp32"], \
        [(p.ops, p.out_dtype) for p in parts]
    assert all(p.precision == "int8" and not p.detail for p in parts), parts
    assert [len(p.inputs) for p in parts][2::2] == [4, 4, 4, 4]  # activation, weight, bias, residual
    grids = act_grids(q)  # the convolutions in graph order: stem, c1, c2 of each block
    assert len(grids) == 9
    # block 3's first convolution reads the signed one: on the s8 grid, or an asymmetric one
    if activations == "symmetric":
        assert grids[5][2:4] in ((128, 0), (0, -128)), grids[5]  # s8 as u8 + 128, or s8
    else:
        assert grids[5][3] == 0 and 0 < grids[5][2] < 255, grids[5]
    x = torch.randn(1, 3, 12, 12, generator=torch.Generator().manual_seed(13)).numpy()
    log = kernel_log(q, x)
    out = q(x)
    residual_dtypes = [e["inputs"][3].split(":")[1].split()[0] for e in log if len(e["inputs"]) == 4]
    assert residual_dtypes == ["Byte", "Byte", signed_log, "Byte"], residual_dtypes

    def conv(c, v, k):
        return nn.functional.conv2d(fake_quant_grid(v, grids[k]), fake_quant_weight(c.weight).double(),
                                    c.bias.double(), padding=c.padding)

    with torch.no_grad():
        r = torch.relu(conv(model.stem, torch.from_numpy(x).double(), 0))
        for i, (c1, c2) in enumerate(model.blocks):
            # r as the block's first convolution reads it: so the sum reads it too
            y = conv(c2, torch.relu(conv(c1, r, 1 + 2 * i)), 2 + 2 * i) + fake_quant_grid(r, grids[1 + 2 * i])
            r = torch.relu(y) if i in (0, 2) else y
    want = r.numpy()
    # measured: equal to 1e-7; values at a rounding boundary may land one step
    # over. A residual read in fp32 instead is off in 96% of the elements.
    step = max(g[1] for g in grids)
    assert np.abs(out - want).max() <= step, (np.abs(out - want).max(), step)
    assert np.mean(np.abs(out - want) > 1e-4 * np.abs(want).max()) < 0.02


class ScaledChain(nn.Module):
    """conv -> hardsigmoid (a linear and a clip post-op) -> conv: the first
    hands its output on quantized through a chain that has a linear post-op
    already (oneDNN 2.6 would give an appended one that one's parameters)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(6)
        self.c1, self.c2 = nn.Conv2d(3, 16, 3, padding=1), nn.Conv2d(16, 8, 1)

    def forward(self, x):
        return self.c2(nn.functional.hardsigmoid(self.c1(x)) * 1.0)


def test_int8_edge_through_a_chain_with_a_linear_post_op():
    model = ScaledChain().eval()
    _, q = quantized(model, (1, 3, 20, 20), seed=5)
    parts = list(q.partitions)
    assert parts[0].ops[:2] == ["aten::_convolution", "aten::hardsigmoid"] and parts[0].out_dtype == "u8", parts
    x = torch.randn(1, 3, 20, 20, generator=torch.Generator().manual_seed(12)).numpy()
    with torch.no_grad():
        want = model(torch.from_numpy(x)).numpy()
    got = q(x)
    # 8-bit activations and weights: within a few percent of fp32 (a wrong scale is far off)
    assert np.abs(got - want).max() <= 0.05 * np.abs(want).max(), np.abs(got - want).max() / np.abs(want).max()


def test_percentile_calibration_clips_an_outlier():
    """One huge outlier among 19,200 values: min-max spends the 8 bits on it;
    the 99.9th percentile follows the bulk (to a histogram bin's width), so
    the typical output is much closer to fp32."""
    model = Lin().eval()
    g = torch.Generator().manual_seed(8)
    calib = [torch.randn(100, 48, generator=g) for _ in range(4)]
    calib[0][0, 0] = 200.0
    traced = torch.jit.trace(model, calib[0])
    mm = llga.quantize(traced, calibration=calib)
    pc = llga.quantize(traced, calibration=calib, method="percentile", percentile=99.9)
    (_, s_mm, _), = act_quant(mm)
    (_, s_pc, _), = act_quant(pc)
    np.testing.assert_allclose(s_mm, 200.0 / 127, rtol=1e-6)
    mags = torch.cat([c.flatten().abs() for c in calib])
    np.testing.assert_allclose(s_pc * 127, float(torch.quantile(mags, 0.999)), atol=200.0 / 2048 + 1e-6)
    assert "percentile (99.9th)" in pc.precision_note
    x = torch.randn(100, 48, generator=g)
    with torch.no_grad():
        ref = model(x).numpy()
    assert np.abs(pc(x.numpy()) - ref).mean() < np.abs(mm(x.numpy()) - ref).mean() / 4


def test_histogram_calibration_minimises_the_squared_error():
    """On heavy-tailed activations (cubes of normals) the histogram method
    clips where clipping plus rounding costs least: its threshold's real
    squared error on the calibration values is within 5% of the best of 200
    thresholds tried here directly, and under min-max's."""
    model = Lin().eval()
    g = torch.Generator().manual_seed(12)
    calib = [torch.randn(200, 48, generator=g) ** 3 for _ in range(4)]
    traced = torch.jit.trace(model, calib[0])
    (_, s_mm, _), = act_quant(llga.quantize(traced, calibration=calib))
    q = llga.quantize(traced, calibration=calib, method="histogram")
    (_, s_h, d), = act_quant(q)
    assert d == "s8" and s_h < s_mm
    values = torch.cat([c.flatten() for c in calib]).double()

    def mse(scale):
        return float(((fake_quant(values, scale, False) - values) ** 2).mean())

    best = min(mse(t / 127) for t in np.linspace(0.05, 1.0, 200) * s_mm * 127)
    assert mse(s_h) <= best * 1.05, (mse(s_h), best)
    assert mse(s_h) < mse(s_mm)
    assert "histogram calibration" in q.precision_note


def test_sensitivity_report_and_skip_by_partition():
    """quantization_sensitivity quantizes one partition at a time; its rows
    name partitions by output, most sensitive first, and quantize(skip=...)
    takes those names to keep them fp32 (an unknown name is an error)."""
    model = Net().eval()
    calib = calibration_batches((2, 3, 16, 16))
    traced = torch.jit.trace(model, calib[0])
    x = torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(21)).numpy()
    report = llga.quantization_sensitivity(traced, calib, x)
    assert len(report.rows) == 3 and "int8 sensitivity" in repr(report)
    assert [r.max_rel for r in report.rows] == sorted((r.max_rel for r in report.rows), reverse=True)
    assert all(0 < r.max_rel < 0.1 and r.cosine > 0.999 for r in report.rows), report
    assert report.all_int8.max_rel >= max(r.max_rel for r in report.rows) * 0.5
    worst = report.rows[0]
    q = llga.quantize(traced, calib, skip=[worst.output_name])
    by_name = {p.output_name: p for p in q.partitions}
    assert by_name[worst.output_name].precision == "fp32"
    assert sum(p.precision == "int8" for p in q.partitions) == 2
    assert f"%{worst.output_name} kept fp32" in q.precision_note
    with pytest.raises(llga.PrecisionError, match="skip 'no_such_value': no convolution or linear partition"):
        llga.quantize(traced, calib, skip=["no_such_value"])


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(17)
        self.a, self.b = nn.Linear(32, 64), nn.Linear(64, 16)
        self.c = nn.Conv1d(4, 4, 1)

    def forward(self, x):  # [4, 8, 32]
        return self.b(torch.nn.functional.gelu(self.a(x))), self.c(x[:, :, :4].transpose(1, 2))


def test_dynamic_int8_quantizes_each_call_with_its_own_scale():
    """mode="dynamic": linears only (the conv stays fp32), no calibration;
    each call's activation is quantized with the scale its own largest
    magnitude gives, so an input 100x larger is quantized as finely."""
    model = Mlp().eval()
    x = torch.randn(4, 8, 32, generator=torch.Generator().manual_seed(2))
    traced = torch.jit.trace(model, x)
    q = llga.quantize(traced, mode="dynamic")
    assert "dynamic" in q.precision_note
    text = str(q.graph)
    assert text.count('act_scale="dynamic", act_dtype="s8"') == 2 and "aten::conv1d[precision" not in text
    # one scale over the whole call mixes the batch's items: never run in chunks
    assert not q.batch_split.proved and "dynamic int8" in q.batch_split.why_not, q.batch_split
    for k in (1.0, 100.0):
        xi = x * k
        with torch.no_grad():
            h = nn.functional.linear(fake_quant(xi.double(), float(xi.abs().max()) / 127, False),
                                     fake_quant_weight(model.a.weight).double(), model.a.bias.double())
            h = nn.functional.gelu(h)
            want = nn.functional.linear(fake_quant(h, float(h.abs().max()) / 127, False),
                                        fake_quant_weight(model.b.weight).double(), model.b.bias.double())
            conv_want = model(xi)[1]
        got, conv_got = q(xi.numpy())
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-3, atol=1e-4 * k)
        np.testing.assert_allclose(conv_got, conv_want.numpy(), rtol=1e-5, atol=1e-5 * k)  # fp32
    with pytest.raises(llga.PrecisionError, match="takes no calibration"):
        llga.quantize(traced, [x], mode="dynamic")
    with pytest.raises(llga.PrecisionError, match="mode 'weights'"):
        llga.quantize(traced, [x], mode="weights")


class DwSiluChain(nn.Module):
    """llga's own int8 kernels where the CPU has them: a depthwise convolution
    (96 channels: a block and one overlapping it) and a silu quantized after
    llga's swish (96 x 16 x 16 outputs)."""

    def __init__(self):
        super().__init__()
        self.dw = DwBlock(96).dw
        torch.manual_seed(8)
        self.mid, self.out = nn.Conv2d(96, 96, 1), nn.Conv2d(96, 8, 1)

    def forward(self, x):
        return self.out(nn.functional.silu(self.mid(torch.clamp(self.dw(x), 0, 6))))


@pytest.mark.parametrize("mode", ["static", "dynamic", "own_kernels"])
def test_int8_model_called_concurrently_from_threads(mode):
    """One int8 model (static: int8 edges and quantized weights made once;
    dynamic: a scale per call; own_kernels: llga's int8 depthwise and swish
    quantization) called from four threads with two batch sizes at once:
    every result as when called alone."""
    from concurrency import run_concurrently

    xs = [np.random.default_rng(i).standard_normal((1 + i % 2, 3, 14, 14)).astype(np.float32) for i in range(4)]
    if mode == "static":
        model = Chain().eval()
        q = llga.quantize(torch.jit.trace(model, torch.from_numpy(xs[0])), calibration=xs[:2])
    elif mode == "own_kernels":
        model = DwSiluChain().eval()
        xs = [np.random.default_rng(i).standard_normal((1 + i % 2, 96, 16, 16)).astype(np.float32) for i in range(4)]
        q = llga.quantize(torch.jit.trace(model, torch.from_numpy(xs[0])), calibration=xs[:2])
        impls = " ".join(e["impl"] for e in kernel_log(q, xs[1]) if e.get("impl"))
        caps = llga.cpu_capabilities()
        assert ("llga_dw_int8" in impls) == caps["llga_dw_int8"], impls
        assert ("llga_swish_quantize" in impls) == (caps["fast_swish"] and caps["isa"].startswith("avx512")), impls
    else:
        model = Mlp().eval()
        xs = [np.random.default_rng(i).standard_normal((1 + i % 2, 8, 32)).astype(np.float32) * (i + 1) for i in range(4)]
        q = llga.quantize(torch.jit.trace(model, torch.from_numpy(xs[0])), mode="dynamic")
    first = lambda out: out[0] if isinstance(out, tuple) else out  # noqa: E731
    want = [first(q(x)).copy() for x in xs]

    def work(k):
        for j in range(20):
            i = (k + j) % len(xs)
            np.testing.assert_array_equal(first(q(xs[i])), want[i])

    run_concurrently(work, 4)


# Asymmetric activations (llga.quantize(activations="asymmetric")): a signed
# activation on the u8 grid over its calibrated [min, max] with a zero point.
# Inputs here are randn + 1 or + 2: signed and lopsided, where the asymmetric grid's
# steps are finer than the symmetric one's.

def test_asymmetric_activation_grid_and_int8_arithmetic_on_it():
    """The scale and zero point are PyTorch's affine observer's for the
    calibrated range ((max - min) / 255, round(-min / scale)); the result is
    int8 arithmetic on that grid, and nearer fp32 than the symmetric grid's."""
    model = ConvRelu().eval()
    calib = calibration_batches((1, 8, 12, 12), shift=2.0)
    traced = torch.jit.trace(model, calib[0])
    q = llga.quantize(traced, calibration=calib, activations="asymmetric")
    assert "asymmetric activations" in q.precision_note
    (kind, scale, zp, lo, hi), = act_grids(q)
    mn, mx = min(float(c.min()) for c in calib), max(float(c.max()) for c in calib)
    assert mn < 0 < mx and (lo, hi) == (0, 255)
    np.testing.assert_allclose(scale, (mx - mn) / 255, rtol=1e-6)
    assert zp == round(-mn / scale) and 0 < zp < 128
    x = torch.randn(1, 8, 12, 12, generator=torch.Generator().manual_seed(9)) + 2.0
    with torch.no_grad():
        want = torch.relu(nn.functional.conv2d(fake_quant_grid(x, act_grids(q)[0]).double(),
                                               fake_quant_weight(model.c.weight).double(),
                                               model.c.bias.double(), padding=1))
        fp32 = model(x).numpy()
    got = q(x.numpy())
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-5)
    symmetric = llga.quantize(traced, calibration=calib)(x.numpy())
    assert np.abs(got - fp32).mean() < 0.8 * np.abs(symmetric - fp32).mean()


# 64: llga's own int8 depthwise kernel (where the CPU has it), 96 at stride 2 and 16: oneDNN's
@pytest.mark.parametrize("c, stride", [(64, 1), (96, 2), (16, 1)])
def test_asymmetric_depthwise_is_int8_arithmetic_on_its_grid(c, stride):
    model = DwBlock(c, stride).eval()
    _, q = quantized(model, (1, c, 10, 11), seed=0, shift=1.0, activations="asymmetric")
    dw, pw = act_grids(q)
    assert dw[3] == 0 and 0 < dw[2] < 128 and pw[2] == 0  # relu6's output: u8, zero point 0
    x = torch.randn(1, c, 10, 11, generator=torch.Generator().manual_seed(3)) + 1.0
    log = kernel_log(q, x.numpy())
    own = llga.cpu_capabilities()["llga_dw_int8"] and stride == 1 and c >= 32
    dw_impl = [e["impl"] for e in log if e.get("inputs") and f"{c}x1x3x3" in str(e["inputs"])]
    assert len(dw_impl) == 1 and ("llga_dw_int8" in dw_impl[0]) == own, (dw_impl, own)
    with torch.no_grad():
        h = torch.clamp(nn.functional.conv2d(fake_quant_grid(x, dw).double(), fake_quant_weight(model.dw.weight).double(),
                                             model.dw.bias.double(), stride=stride, padding=1, groups=c), 0, 6)
        w_pw = fake_quant_weight(model.pw.weight).double()
        want = nn.functional.conv2d(fake_quant_grid(h, pw), w_pw, model.pw.bias.double())
    step = pw[1] * float(w_pw.abs().max())  # one element of h a step off moves an output by at most this
    np.testing.assert_allclose(q(x.numpy()), want.numpy(), rtol=0, atol=1.01 * step)


def test_asymmetric_silu_output_quantized_with_its_zero_point():
    """silu's output (min -0.28) gets an asymmetric grid; the expand writes it
    quantized so (llga's swish quantizing with the zero point where it runs)."""
    model = SiluBlock().eval()
    _, q = quantized(model, (1, 16, 16, 16), seed=0, activations="asymmetric")
    g_in, g_mid = act_grids(q)
    assert g_mid[3] == 0 and g_mid[2] > 0 and g_mid[2] * g_mid[1] < 0.3  # the zero point covers silu's minimum only
    assert q.partitions[0].out_dtype == "u8"
    x = torch.randn(1, 16, 16, 16, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        h = nn.functional.silu(nn.functional.conv2d(fake_quant_grid(x, g_in).double(),
                                                    fake_quant_weight(model.expand.weight).double(),
                                                    model.expand.bias.double()))
        w = fake_quant_weight(model.project.weight).double()
        want = nn.functional.conv2d(fake_quant_grid(h, g_mid), w, model.project.bias.double())
    step = g_mid[1] * float(w.abs().max())
    np.testing.assert_allclose(q(x.numpy()), want.numpy(), rtol=0, atol=1.01 * step)


def test_asymmetric_linear_activation_with_its_zero_point():
    model = Lin().eval()
    calib = calibration_batches((5, 48), n=3, shift=1.0)
    q = llga.quantize(torch.jit.trace(model, calib[0]), calibration=calib, activations="asymmetric")
    (kind, scale, zp, lo, hi), = act_grids(q)
    assert kind == "aten::linear" and lo == 0 and 0 < zp < 128
    x = torch.randn(5, 48, generator=torch.Generator().manual_seed(3)) + 1.0
    with torch.no_grad():
        want = nn.functional.linear(fake_quant_grid(x, act_grids(q)[0]).double(),
                                    fake_quant_weight(model.fc.weight).double(), model.fc.bias.double())
    np.testing.assert_allclose(q(x.numpy()), want.numpy(), rtol=1e-4, atol=1e-5)
    assert not q.partitions[0].detail


def test_asymmetric_residual_stream():
    """The residual stream (above) with the signed block output on an
    asymmetric grid: the producer writes it with its zero point, the next
    block's sum post-op subtracts it."""
    check_residual_stream("asymmetric")


def test_asymmetric_int8_passes_through_max_pooling():
    """A signed stem output (no relu) pooled on its asymmetric u8 grid: the
    maximum commutes with any increasing affine quantization, so the bits
    are those of the pooling run in fp32."""
    x = torch.randn(1, 3, 17, 17, generator=torch.Generator().manual_seed(9)).numpy()
    _, q = quantized(_StemPool(stem_relu=False), (1, 3, 17, 17), seed=8, activations="asymmetric")
    _, ref = quantized(_StemPool(stem_relu=False, pool_out=True), (1, 3, 17, 17), seed=8, activations="asymmetric")
    stem, pool = list(q.partitions)[:2]
    assert (pool.precision, pool.out_dtype, stem.out_dtype) == ("int8", "u8", "u8"), (stem, pool)
    assert 0 < act_grids(q)[1][2] < 255  # the pooled value's reader: a zero point
    assert (list(ref.partitions)[1].precision, list(ref.partitions)[0].out_dtype) == ("fp32", "fp32")
    np.testing.assert_array_equal(q(x), ref(x)[0])


def test_asymmetric_activations_bad_arguments():
    traced = torch.jit.trace(Lin().eval(), torch.randn(2, 48))
    cal = [np.zeros((2, 48), np.float32)]
    with pytest.raises(llga.PrecisionError, match="activations 'affine': expected one of symmetric, asymmetric"):
        llga.quantize(traced, calibration=cal, activations="affine")
    with pytest.raises(llga.PrecisionError, match="mode='dynamic' quantizes each call's activations symmetrically"):
        llga.quantize(traced, mode="dynamic", activations="asymmetric")
    # non-negative activations: u8 with zero point 0, as with the symmetric scheme
    pos = np.abs(np.random.default_rng(0).standard_normal((2, 48))).astype(np.float32)
    (kind, scale, zp, lo, hi), = act_grids(llga.quantize(traced, calibration=[pos], activations="asymmetric"))
    assert (kind, zp, lo, hi) == ("aten::linear", 0, 0, 255) and scale == pytest.approx(pos.max() / 255, rel=1e-6)
    # all zeros give no step: fp32, in both schemes
    assert act_grids(llga.quantize(traced, calibration=cal, activations="asymmetric")) == []


class InPlaceBeforeConv(nn.Module):
    """The convolution reads `y` after an in-place sigmoid_ wrote into it
    (scripted, the write stays in the graph: `z` aliases `y`)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        self.c = nn.Conv2d(8, 10, 1)

    def forward(self, x):
        y = x - 1.0
        z = y
        y.sigmoid_()
        return self.c(z)


@pytest.mark.parametrize("make", ["script", "trace"])
def test_calibration_sees_an_activation_as_its_reader_reads_it(make):
    """Calibration takes the activation's range as the convolution reads it,
    after the in-place write: sigmoid's (0, 1), the u8 grid, not x - 1's
    signed range (10x coarser steps; found by the graph fuzzer's int8 runs,
    seed 101, where the value before the write was all zeros: scale 1 and
    every 0.5 read rounded to 0)."""
    model = InPlaceBeforeConv().eval()
    calib = calibration_batches((1, 8, 6, 6), n=3)
    obj = torch.jit.script(model) if make == "script" else torch.jit.trace(model, calib[0])
    q = llga.quantize(obj, calibration=calib)
    if make == "script":
        assert "aten::sigmoid_" in str(q.graph)  # the write stayed in place
    (_, scale, zp, lo, hi), = act_grids(q)
    assert (zp, lo, hi) == (0, 0, 255)
    np.testing.assert_allclose(scale, max(float(torch.sigmoid(c - 1).max()) for c in calib) / 255, rtol=1e-6)
    x = torch.randn(1, 8, 6, 6, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        want = nn.functional.conv2d(fake_quant_grid(torch.sigmoid(x - 1), act_grids(q)[0]).double(),
                                    fake_quant_weight(model.c.weight).double(), model.c.bias.double())
    np.testing.assert_allclose(q(x.numpy()), want.numpy(), rtol=1e-4, atol=1e-5)
