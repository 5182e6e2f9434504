"""The attention pattern: q @ k^T -> [scale, mask] -> softmax(-1) -> @ v as
one partition, run by llga's fused kernel where the CPU has AVX-512
(backend/dnnl/fused_attention.h), op by op otherwise and for calls whose
tensors do not fit it. Parity with PyTorch everywhere, and the decision as
the IR and the partition report show it."""

import math
import os

import numpy as np
import pytest
import torch
import torch.nn as nn

import llga
from llga import zoo

FUSED = llga.cpu_capabilities()["llga_attention"]


def compile_(module, *inputs, **kw):
    module = module.eval()
    with torch.no_grad():
        traced = torch.jit.trace(module, inputs, check_trace=False)
    return llga.optimize(traced, **kw)


def check(c, module, *inputs, rtol=1e-4, atol=1e-5):
    with torch.no_grad():
        want = module(*inputs)
    got = c(*[x.numpy() for x in inputs])
    np.testing.assert_allclose(got, want.numpy(), rtol=rtol, atol=atol)
    return got


def attention_parts(c):
    return [p for p in c.partitions if p.pattern == "attention"]


def the_attention(c, ops):
    """c's one attention partition, of these ops, on llga's kernel where the CPU runs it."""
    (part,) = attention_parts(c)
    assert part.ops == ops, part.ops
    assert ("llga_attention" in part.impl) == FUSED, part.impl
    return part


class _Sdpa(nn.Module):
    """softmax(q @ k^T * scale [+ mask]) @ v, in the forms models write it."""

    def __init__(self, form="mul", masked=True):
        super().__init__()
        self.form, self.masked = form, masked

    def forward(self, q, k, v, mask):
        s = torch.matmul(q, k.transpose(-2, -1))
        if self.form == "mul":
            s = s * (1.0 / math.sqrt(q.shape[-1]))
        elif self.form == "div":
            s = s / math.sqrt(q.shape[-1])
        if self.masked:
            s = s + mask
        return torch.matmul(torch.softmax(s, dim=-1), v)


@pytest.mark.parametrize("batch,L,S,D,Dv,mask_shape", [
    ((2, 3), 5, 7, 8, 3, (7,)),              # mask over keys only
    ((2, 3), 33, 50, 20, 70, (33, 50)),      # tails everywhere: 33 rows, 50 keys, Dv past 64
    ((1, 12), 128, 128, 64, 64, (1, 1, 1, 128)),  # BERT's shapes and mask
    ((4,), 1, 1, 1, 1, (1, 1)),              # one query, one key
    ((), 17, 16, 16, 16, (17, 16)),          # no batch dims
    ((2, 2), 9, 31, 5, 17, (2, 2, 9, 31)),   # a full mask
])
def test_attention_forms_match_pytorch(batch, L, S, D, Dv, mask_shape):
    g = torch.Generator().manual_seed(L * 100 + S)
    q, k = torch.randn(*batch, L, D, generator=g), torch.randn(*batch, S, D, generator=g)
    v, mask = torch.randn(*batch, S, Dv, generator=g), torch.randn(*mask_shape, generator=g) * 3
    for form in ("mul", "div", "none"):
        m = _Sdpa(form)
        c = compile_(m, q, k, v, mask)
        parts = attention_parts(c)
        assert len(parts) == 1, [p.pattern for p in c.partitions]
        assert parts[0].ops[0] == "aten::matmul" and parts[0].ops[-2:] == ["aten::softmax", "aten::matmul"]
        check(c, m, q, k, v, mask)
        assert ("llga_attention" in parts[0].impl) == FUSED, parts[0].impl
        if FUSED:  # the AVX-512 tiles, or on a CPU without them the AVX2 ones
            avx512 = all(_cpu_flag(f) for f in ("avx512f", "avx512bw", "avx512vl"))
            assert parts[0].impl == ("llga_attention:avx512" if avx512 else "llga_attention:avx2"), parts[0].impl


class _ShiftedSoftmax(nn.Module):
    """torchaudio wav2vec2's attention: the row maximum subtracted by hand."""

    def __init__(self, amax=False):
        super().__init__()
        self.amax = amax

    def forward(self, q, k, v, mask):
        w = 0.125 * (q @ k.transpose(-1, -2)) + mask
        m = w.amax(-1, keepdim=True) if self.amax else w.max(dim=-1, keepdim=True)[0]
        return torch.softmax(w - m, dim=-1) @ v


@pytest.mark.parametrize("amax", [False, True])
def test_hand_shifted_softmax_is_the_attention_pattern(amax):
    """softmax(x - max(x)) is softmax(x) bit for bit (canonicalize drops the
    shift): the block is one attention partition, and rows masked to -inf,
    and a NaN, come out as PyTorch's."""
    g = torch.Generator().manual_seed(3)
    q, k, v = torch.randn(2, 3, 9, 16, generator=g), torch.randn(2, 3, 11, 16, generator=g), torch.randn(2, 3, 11, 8, generator=g)
    mask = torch.randn(9, 11, generator=g)
    m = _ShiftedSoftmax(amax)
    c = compile_(m, q, k, v, mask)
    (part,) = attention_parts(c)
    assert part.ops == ["aten::matmul", "aten::mul", "aten::add", "aten::softmax", "aten::matmul"], part.ops
    check(c, m, q, k, v, mask)
    mask[2, :] = float("-inf")  # a row of -inf: NaN in PyTorch, either way
    mask[4, 3] = float("nan")
    with torch.no_grad():
        want = m(q, k, v, mask).numpy()
    got = c(*[x.numpy() for x in (q, k, v, mask)])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, equal_nan=True)
    assert np.isnan(got[:, :, 2]).all() and np.isnan(got[:, :, 4]).all()


def test_scores_read_twice_are_no_attention():
    class M(nn.Module):
        def forward(self, q, k, v):
            s = q @ k.transpose(1, 2)
            return torch.softmax(s, -1) @ v, s

    q, k, v = torch.randn(2, 4, 8), torch.randn(2, 6, 8), torch.randn(2, 6, 5)
    c = compile_(M(), q, k, v)
    assert not attention_parts(c)
    with torch.no_grad():
        want = M()(q, k, v)
    for got, w in zip(c(q.numpy(), k.numpy(), v.numpy()), want):
        np.testing.assert_allclose(got, w.numpy(), rtol=1e-5, atol=1e-6)


def test_masked_rows_and_nan_match_pytorch():
    # BERT's -10000 padding mask (exp underflows: no denormals, no slowdown),
    # a row masked entirely with -inf (NaN in PyTorch), a NaN score.
    q, k, v = torch.randn(1, 2, 6, 16), torch.randn(1, 2, 40, 16), torch.randn(1, 2, 40, 16)
    mask = torch.zeros(6, 40)
    mask[:, 30:] = -10000.0
    mask[2, :] = -math.inf
    q[0, 1, 4, 3] = math.nan
    m = _Sdpa("mul")
    c = compile_(m, q, k, v, mask)
    assert len(attention_parts(c)) == 1
    got = check(c, m, q, k, v, mask)
    assert np.isnan(got[0, :, 2]).all() and np.isnan(got[0, 1, 4]).all() and not np.isnan(got[0, 0, 4]).any()


class _Selected(nn.Module):
    """Scores masked by masked_fill with a bool mask (GPT's causal mask),
    then softmax and @ v."""

    def __init__(self, fill):
        super().__init__()
        self.fill = fill

    def forward(self, q, k, v, mask):
        s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        return torch.softmax(s.masked_fill(mask, self.fill), dim=-1) @ v


@pytest.mark.parametrize("fill", [-math.inf, -1e4, 2.5])
@pytest.mark.parametrize("L,S,mask_shape", [
    (33, 33, "causal"),        # above the diagonal hidden; tails of 16 lanes
    (5, 40, (2, 1, 1, 40)),    # key padding per batch entry
    (7, 19, (2, 3, 7, 19)),    # a full mask
    (6, 17, (17,)),            # one mask row for every query, through a copy of its tail
])
def test_masked_fill_joins_the_attention_partition(fill, L, S, mask_shape):
    g = torch.Generator().manual_seed(L * 10 + S)
    q, k = torch.randn(2, 3, L, 16, generator=g), torch.randn(2, 3, S, 16, generator=g)
    v = torch.randn(2, 3, S, 8, generator=g)
    if mask_shape == "causal":
        mask = ~torch.tril(torch.ones(L, S, dtype=torch.bool))
    else:
        mask = torch.rand(*mask_shape, generator=g) < 0.4
    m = _Selected(fill)
    c = compile_(m, q, k, v, mask)
    the_attention(c, ["aten::matmul", "aten::div", "aten::masked_fill", "aten::softmax", "aten::matmul"])
    check(c, m, q, k, v, mask)
    if mask.dim() == 4 and mask.shape[-2] == L:  # a whole row hidden: NaN with -inf (as PyTorch), else v's mean
        hidden = mask.clone()
        hidden[:, :, 0, :] = True
        got = check(c, m, q, k, v, hidden) if math.isfinite(fill) else c(*[x.numpy() for x in (q, k, v, hidden)])
        assert np.isnan(got[:, :, 0]).all() != math.isfinite(fill)


class _Where(nn.Module):
    """GPT-2's form (Hugging Face): the scores kept where the causal mask is
    true, else a 0-dim tensor holding float32's lowest value; the other
    operand order too."""

    def __init__(self, keep_where_true=True):
        super().__init__()
        self.keep = keep_where_true

    def forward(self, q, k, v, mask):
        s = q @ k.transpose(-1, -2) * 0.25
        low = torch.full([], torch.finfo(s.dtype).min, dtype=s.dtype)
        s = torch.where(mask, s, low) if self.keep else torch.where(mask, low, s)
        return torch.softmax(s, dim=-1) @ v


@pytest.mark.parametrize("keep", [True, False])
def test_where_joins_the_attention_partition(keep):
    g = torch.Generator().manual_seed(5)
    q, k = torch.randn(2, 4, 19, 16, generator=g), torch.randn(2, 4, 19, 16, generator=g)
    v = torch.randn(2, 4, 19, 8, generator=g)
    mask = torch.tril(torch.ones(19, 19, dtype=torch.bool))
    if not keep:
        mask = ~mask
    m = _Where(keep)
    c = compile_(m, q, k, v, mask)
    the_attention(c, ["aten::matmul", "aten::mul", "aten::where", "aten::softmax", "aten::matmul"])
    check(c, m, q, k, v, mask)
    check(c, m, q, k, v, torch.rand(19, 19, generator=g) < 0.5)  # a random mask, rows all hidden among them


def test_einsum_attention_with_causal_mask_is_one_partition():
    """GPT-style attention written with einsum (lower-einsum makes matmuls of
    it) and masked_fill: the scores, the mask, the softmax, @ v and the
    output's permutation back to bqhd are one attention partition reading q,
    k and v through their strides."""
    class M(nn.Module):
        def forward(self, q, k, v):
            T = q.shape[1]
            causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
            att = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1])
            att = att.masked_fill(~causal, float("-inf")).softmax(-1)
            return torch.einsum("bhqk,bkhd->bqhd", att, v)

    g = torch.Generator().manual_seed(11)
    q, k, v = (torch.randn(2, 21, 4, 16, generator=g) for _ in range(3))
    c = compile_(M(), q, k, v)
    the_attention(c, ["aten::matmul", "aten::div", "aten::masked_fill", "aten::softmax", "aten::matmul",
                      "aten::permute"])
    assert c.graph.node_counts().get("aten::einsum", 0) == 0
    assert not any(n.kind == "aten::contiguous" for n in c.graph.nodes())
    check(c, M(), q, k, v)


def test_torchvision_style_multihead_attention():
    # nn.MultiheadAttention as ViT traces it: q scaled before the product, bmm.
    mha = nn.MultiheadAttention(64, 4).eval()
    x = torch.randn(23, 2, 64)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.mha = mha

        def forward(self, x):
            return self.mha(x, x, x, need_weights=False)[0]

    c = compile_(M(), x)
    # q's scale moved after the product (canonicalize), into the partition; the transpose(0, 1) before the
    # heads are merged too (the kernel writes the rows where the merge reads them)
    parts = attention_parts(c)
    assert len(parts) == 1 and parts[0].ops == ["aten::bmm", "aten::div", "aten::softmax", "aten::bmm",
                                                "aten::transpose"], parts
    assert not any(n.kind == "aten::contiguous" for n in c.graph.nodes())  # q, k, v read through their strides
    check(c, M(), x, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("size,batch,later", [(56, 1, 2), (28, 2, 1), (30, 2, 3), (14, 1, 1)])
def test_swin_shifted_window_mask_joins_the_attention_partition(size, batch, later):
    # torchvision's shifted windows add their mask through a view of the
    # scores ([B * nW, heads, N, N] as [B, nW, heads, N, N]) and view back:
    # canonicalize's add-through-view moves the add onto the scores, so the
    # product, bias, mask, softmax and product are one partition; at 30 the
    # map is padded, and a later call changes the batch (the mask broadcast
    # anew for the new signature)
    from torchvision.models.swin_transformer import ShiftedWindowAttention

    torch.manual_seed(size + batch)
    m = ShiftedWindowAttention(96, [7, 7], [3, 3], 3).eval()
    with torch.no_grad():  # the bias table starts at zero-ish (trunc_normal 0.02): make it matter
        m.relative_position_bias_table.normal_(0, 1)
    x = torch.randn(batch, size, size, 96)
    c = compile_(m, x)
    (part,) = attention_parts(c)
    assert part.ops == ["aten::matmul", "aten::add", "aten::add", "aten::softmax", "aten::matmul",
                        "aten::transpose"], part.ops  # and the output's transpose(1, 2) before the heads merge
    assert ("llga_attention" in part.impl) == FUSED, part.impl
    check(c, m, x)
    check(c, m, torch.randn(later, size, size, 96))


def test_bert_layer_with_padding():
    model = zoo.bert_like(vocab=100, hidden=64, layers=2, heads=4, max_positions=64)
    ids, mask = zoo.bert_inputs(batch=2, seq=24, vocab=100)
    c = compile_(model, ids, mask)
    assert len(attention_parts(c)) == 2
    with torch.no_grad():
        want = model(ids, mask)
    want = want[0] if isinstance(want, tuple) else want
    got = c(ids.numpy(), mask.numpy())
    got = got[0] if isinstance(got, tuple) else got
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=2e-5)


def test_frozen_bert_with_example_inputs_fuses_its_attention():
    """torch.jit.freeze shares the scale of q @ k^T / sqrt(d) as one constant
    typed only `Tensor`; propagate-shapes types such a constant from its bound
    value, so the score chain joins the attention partition (it had stayed a
    div + add partition, the softmax alone, and the products apart)."""
    model = zoo.bert_like(vocab=100, hidden=64, layers=2, heads=4, max_positions=64)
    ids, mask = zoo.bert_inputs(batch=2, seq=24, vocab=100)
    frozen = torch.jit.freeze(torch.jit.trace(model, (ids, mask)))
    c = llga.optimize(frozen, (ids.numpy(), mask.numpy()))
    parts = attention_parts(c)
    assert len(parts) == 2, [(p.pattern, p.ops) for p in c.partitions]
    assert parts[0].ops[:3] == ["aten::matmul", "aten::div", "aten::add"], parts[0].ops
    with torch.no_grad():
        want = model(ids, mask)
    np.testing.assert_allclose(c(ids.numpy(), mask.numpy())[0], want[0].numpy(), rtol=1e-4, atol=2e-5)


class _HeadsMerged(nn.Module):
    """Attention, then its output permuted back and the heads merged: BERT's
    permute(0, 2, 1, 3), the same as transpose(1, 2), and nn.MultiheadAttention's
    transpose(0, 1) of [batch * heads, L, d]. `then`: what follows the merge."""

    def __init__(self, form, then="none"):
        super().__init__()
        self.form, self.then = form, then

    def forward(self, q, k, v, mask):
        ctx = torch.matmul(torch.softmax(q @ k.transpose(-1, -2) * 0.125 + mask, -1), v)
        c = {"permute": lambda t: t.permute(0, 2, 1, 3), "transpose": lambda t: t.transpose(1, 2),
             "rows_first": lambda t: t.transpose(0, 1)}[self.form](ctx)
        merged = c.contiguous().view(c.shape[0], c.shape[1], -1)
        if self.then == "write":  # into the merge, which aliases llga's dense permuted output
            merged.mul_(2.0)
        if self.then == "read_again":  # the permuted values read twice: the permute stays outside
            return merged, torch.relu(c)
        return merged


@pytest.mark.parametrize("form", ["permute", "transpose", "rows_first"])
@pytest.mark.parametrize("then", ["none", "write", "read_again"])
def test_the_permutation_before_the_heads_merge_joins_the_partition(form, then):
    """Where the output is permuted with its last dim kept and one op reads
    the permuted values, the permute joins the attention partition and the
    kernel writes each row where the permuted tensor, dense, has it: the merge
    after is a view, not a copy. At other sizes too (row tails)."""
    def inputs(b, L, S, seed):
        g = torch.Generator().manual_seed(seed)
        lead = (b * 4,) if form == "rows_first" else (b, 4)
        return (torch.randn(*lead, L, 16, generator=g), torch.randn(*lead, S, 16, generator=g),
                torch.randn(*lead, S, 24, generator=g), torch.randn(S, generator=g))
    m = _HeadsMerged(form, then)
    c = compile_(m, *inputs(2, 37, 37, 1))
    (part,) = attention_parts(c)
    joined = then != "read_again"
    kind = "aten::permute" if form == "permute" else "aten::transpose"
    assert (part.ops[-1] == kind) == joined, part.ops
    assert ("written permuted" in part.detail) == (joined and FUSED), part.detail
    for shape in [(2, 37, 37), (3, 50, 9), (1, 1, 5)]:
        xs = inputs(*shape, seed=sum(shape))
        with torch.no_grad():
            want = m(*xs)
        got = c(*[x.numpy() for x in xs])
        for g_, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            np.testing.assert_allclose(g_, w.numpy(), rtol=1e-4, atol=1e-5)
    if form != "rows_first":  # k and v broadcasting over q's batch: the group's ops one by one, the permute too
        q, k, v, mask = inputs(2, 9, 11, 7)
        xs = (q, k[:1], v[:1], mask)
        with torch.no_grad():
            want = m(*xs)
        got = c(*[x.numpy() for x in xs])
        for g_, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            np.testing.assert_allclose(g_, w.numpy(), rtol=1e-4, atol=1e-5)
        assert "one by one" in attention_parts(c)[0].detail


def test_calls_that_do_not_fit_run_op_by_op():
    # Traced with equal batch dims; called with k and v broadcasting over q's
    # batch (matmul allows it, the fused kernel does not): the ops one by one.
    m = _Sdpa("mul")
    q, k, v, mask = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 7, 8), torch.randn(2, 3, 7, 4), torch.randn(7)
    c = compile_(m, q, k, v, mask)
    q2, k2, v2 = torch.randn(2, 3, 5, 8), torch.randn(1, 3, 7, 8), torch.randn(1, 3, 7, 4)
    check(c, m, q2, k2, v2, mask)
    part = attention_parts(c)[0]
    assert "llga_attention" not in part.impl and "one by one" in part.detail, (part.impl, part.detail)
    check(c, m, q, k, v, mask)  # and back
    assert ("llga_attention" in attention_parts(c)[0].impl) == FUSED


def test_routed_off_agrees():
    m = _Sdpa("div")
    q, k, v, mask = torch.randn(2, 4, 20, 32), torch.randn(2, 4, 24, 32), torch.randn(2, 4, 24, 32), torch.randn(20, 24)
    off = compile_(m, q, k, v, mask, route={"attention": False})
    assert not attention_parts(off)
    check(off, m, q, k, v, mask)


# bf16: where assign-precision runs the products in bf16, the kernel rounds q,
# k, the unnormalised probabilities and v to bf16 and accumulates in fp32, on
# AMX tiles where oneDNN runs AMX, on AVX512-BF16's vdpbf16ps where it runs
# avx512_core_bf16, op by op below that.
ISA = llga.cpu_capabilities()["isa"]
_BF16 = llga.cpu_capabilities()["llga_attention_bf16"]  # "amx", "avx512_bf16" or None, as llga reports it
BF16_IMPL = {"amx": "llga_attention:avx512_amx_bf16", "avx512_bf16": "llga_attention:avx512_bf16"}
BF16_PATH = BF16_IMPL.get(_BF16)


def paths_allowed(isa):
    """The bf16 paths llga's attention may take where oneDNN reports `isa`:
    AMX only where oneDNN runs AMX, vdpbf16ps where it runs AVX512-BF16 or
    AMX, none (op by op) below."""
    return {"avx512_core_amx": ("amx", "avx512_bf16"), "avx512_core_bf16": ("avx512_bf16",)}.get(isa, (None,))


def test_bf16_path_follows_onednns_isa():
    assert _BF16 in paths_allowed(ISA), (ISA, _BF16)


def _bf16(t):
    return t.to(torch.bfloat16).to(torch.float64)


def bf16_reference(form, q, k, v, mask):
    """The kernel's arithmetic in float64: products of bf16-rounded q and k,
    the score ops, exp(s - max) rounded to bf16 times bf16-rounded v, divided
    by the unrounded sum."""
    s = _bf16(q) @ _bf16(k).transpose(-1, -2)
    if form == "mul":
        s = s * (1.0 / math.sqrt(q.shape[-1]))
    elif form == "div":
        s = s / math.sqrt(q.shape[-1])
    s = s + mask.double()
    e = torch.exp(s - s.amax(-1, keepdim=True))
    return ((_bf16(e.float()) @ _bf16(v)) / e.sum(-1, keepdim=True)).numpy()


BF16_CASES = [
    ((2, 3), 33, 50, 20, 70, (33, 50)),      # tails everywhere: 33 rows, 50 keys, Dv past 64
    ((1, 12), 128, 128, 64, 64, (1, 1, 1, 128)),  # BERT's shapes and mask
    ((12,), 197, 197, 64, 64, (197,)),       # vit_b_16's: 7 row blocks, 13 key tiles
    ((3,), 7, 9, 33, 5, (7, 9)),             # odd depth (a half-empty pair) and odd keys
    ((), 1, 1, 1, 1, (1,)),                  # one of everything
]


@pytest.mark.skipif(BF16_PATH is None, reason=f"oneDNN runs no bf16 instructions here ({ISA}) or no AVX-512")
@pytest.mark.parametrize("batch,L,S,D,Dv,mask_shape", BF16_CASES)
def test_bf16_attention_runs_the_kernel_in_bf16(batch, L, S, D, Dv, mask_shape):
    g = torch.Generator().manual_seed(L * 7 + S)
    q, k = torch.randn(*batch, L, D, generator=g), torch.randn(*batch, S, D, generator=g)
    v, mask = torch.randn(*batch, S, Dv, generator=g), torch.randn(*mask_shape, generator=g) * 3
    for form in ("mul", "div"):
        m = _Sdpa(form)
        c = compile_(m, q, k, v, mask, precision="bf16")
        (part,) = attention_parts(c)
        assert part.precision == "bf16"
        got = c(*[x.numpy() for x in (q, k, v, mask)])
        assert part.impl == BF16_PATH and "q@kt (bf16)" in part.detail and "@v (bf16)" in part.detail, part
        # its own rounding, to float64 summation order: a wrong pair or tile is off by O(1)
        np.testing.assert_allclose(got, bf16_reference(form, q, k, v, mask), rtol=2e-3, atol=2e-3)
        with torch.no_grad():  # and fp32 PyTorch to bf16's precision
            np.testing.assert_allclose(got, m(q, k, v, mask).numpy(), rtol=3e-2, atol=3e-2)


@pytest.mark.skipif(BF16_PATH is None, reason=f"oneDNN runs no bf16 instructions here ({ISA}) or no AVX-512")
@pytest.mark.parametrize("form", ["permute", "rows_first"])
def test_the_permuted_output_in_bf16(form):
    g = torch.Generator().manual_seed(5)
    lead = (8,) if form == "rows_first" else (2, 4)
    q, k, v = torch.randn(*lead, 45, 32, generator=g), torch.randn(*lead, 45, 32, generator=g), \
        torch.randn(*lead, 45, 64, generator=g)
    mask = torch.randn(45, generator=g)
    m = _HeadsMerged(form)
    c = compile_(m, q, k, v, mask, precision="bf16")
    (part,) = attention_parts(c)
    assert part.impl == BF16_PATH and "written permuted" in part.detail, (part.impl, part.detail)
    with torch.no_grad():
        np.testing.assert_allclose(c(*[x.numpy() for x in (q, k, v, mask)]), m(q, k, v, mask).numpy(),
                                   rtol=3e-2, atol=3e-2)


def _attention_in_subprocess(isa):
    code = """
import json, math, numpy as np, torch, llga
torch.manual_seed(0)
q, k, v, mask = torch.randn(2, 3, 33, 20), torch.randn(2, 3, 50, 20), torch.randn(2, 3, 50, 70), torch.randn(33, 50)
def f(q, k, v, mask):
    return torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(20) + mask, -1) @ v
c = llga.optimize(torch.jit.trace(f, (q, k, v, mask)), precision="bf16")
p = [p for p in c.partitions if p.pattern == "attention"][0]
got = c(q.numpy(), k.numpy(), v.numpy(), mask.numpy())
print(json.dumps({"isa": llga.cpu_capabilities()["isa"], "path": llga.cpu_capabilities()["llga_attention_bf16"],
                  "impl": p.impl, "detail": p.detail,
                  "err": float(np.abs(got - f(q, k, v, mask).numpy()).max())}))
"""
    env = dict(os.environ, ONEDNN_MAX_CPU_ISA=isa, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    import json
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _check_decision(r):
    """llga's choice in a subprocess, judged from the ISA oneDNN reported there."""
    assert r["path"] in paths_allowed(r["isa"]), r
    if r["path"]:
        assert r["impl"] == BF16_IMPL[r["path"]], r
    else:
        assert "llga_attention" not in r["impl"] and "one by one" in r["detail"], r
    assert r["err"] < 3e-2, r


def _cpu_flag(flag):
    with open("/proc/cpuinfo") as f:
        return any(flag in line.split() for line in f if line.startswith("flags"))


@pytest.mark.skipif(not (FUSED and _cpu_flag("avx512_bf16")), reason="the CPU has no AVX512-BF16")
def test_bf16_attention_on_avx512_bf16_without_amx():
    """As oneDNN runs on a CPU with AVX512-BF16 and no AMX (AMD's Zen 4 and 5):
    the products on vdpbf16ps."""
    r = _attention_in_subprocess("AVX512_CORE_BF16")
    _check_decision(r)  # judged by the ISA oneDNN reports there: no AMX tiles unless it runs AMX


@pytest.mark.skipif(not _cpu_flag("avx512f"), reason="no AVX-512: oneDNN has no AVX-512 to cap")
def test_bf16_attention_where_onednn_emulates_bf16_runs_op_by_op():
    """AVX-512 without AVX512-BF16 (oneDNN emulates bf16): no bf16 products of
    llga's, the group's ops one by one, and the report says why."""
    r = _attention_in_subprocess("AVX512_CORE")
    assert r["path"] is None, r  # capped below AVX512-BF16: no bf16 products of llga's
    _check_decision(r)


def test_concurrent_calls():
    from concurrency import run_concurrently

    m = _Sdpa("mul")
    q, k, v, mask = torch.randn(2, 4, 40, 16), torch.randn(2, 4, 50, 16), torch.randn(2, 4, 50, 16), torch.randn(50)
    c = compile_(m, q, k, v, mask)
    with torch.no_grad():
        want = m(q, k, v, mask).numpy()
    args = [x.numpy() for x in (q, k, v, mask)]
    first = c(*args)
    np.testing.assert_allclose(first, want, rtol=1e-4, atol=1e-5)

    def worker(i):
        for _ in range(5):
            np.testing.assert_array_equal(c(*args), first)

    run_concurrently(worker, 4)


def test_saved_and_loaded_bit_for_bit(tmp_path):
    # The pattern is on the IR: a loaded model runs the same kernel, exactly.
    m = _Sdpa("div")
    q, k, v, mask = torch.randn(2, 4, 20, 32), torch.randn(2, 4, 24, 32), torch.randn(2, 4, 24, 32), torch.randn(20, 24)
    c = compile_(m, q, k, v, mask)
    args = [x.numpy() for x in (q, k, v, mask)]
    first = c(*args)
    c.save(str(tmp_path / "att.llga"))
    loaded = llga.load(str(tmp_path / "att.llga"))
    assert [p.pattern for p in loaded.partitions] == [p.pattern for p in c.partitions]
    np.testing.assert_array_equal(loaded(*args), first)
    assert ("llga_attention" in attention_parts(loaded)[0].impl) == FUSED


# Random shapes, masks and memory: q, k and v given transposed or as strided
# slices (the kernel reads them through their strides), every fitting mask
# shape, with and without a scale. Derandomized, so a failure reproduces.
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def _in_memory(t: torch.Tensor, how: str) -> torch.Tensor:
    if how == "transposed":  # the same values, the last two dims swapped in memory
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    if how == "sliced":  # every other column of a wider tensor
        wide = torch.zeros(*t.shape[:-1], t.shape[-1] * 2)
        wide[..., ::2] = t
        return wide[..., ::2]
    return t


ATTENTION_EXAMPLES = int(os.environ.get("LLGA_ATTENTION_EXAMPLES", "150"))  # more for a longer search


@settings(max_examples=ATTENTION_EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.sampled_from([(), (1,), (3,), (2, 2)]), L=st.integers(1, 40), S=st.integers(1, 40),
       D=st.integers(1, 24), Dv=st.integers(1, 70), mask=st.sampled_from(["none", "keys", "rows", "full"]),
       form=st.sampled_from(["mul", "div", "none"]), memory=st.sampled_from(["plain", "transposed", "sliced"]),
       bf16=st.booleans())
def test_attention_property(batch, L, S, D, Dv, mask, form, memory, bf16):
    g = torch.Generator().manual_seed(L * 1000 + S * 10 + D)
    q, k = torch.randn(*batch, L, D, generator=g), torch.randn(*batch, S, D, generator=g)
    v = torch.randn(*batch, S, Dv, generator=g)
    shape = {"none": (S,), "keys": (S,), "rows": (L, S), "full": (*batch, L, S)}[mask]
    m = torch.randn(*shape, generator=g) * 2
    module = _Sdpa(form, masked=mask != "none")
    bf16 = bf16 and BF16_PATH is not None  # bf16 products where this CPU runs them in llga's kernel
    c = compile_(module, q, k, v, m, **({"precision": "bf16"} if bf16 else {}))
    assert len(attention_parts(c)) == 1, [p.pattern for p in c.partitions]
    q2, k2, v2 = (_in_memory(t, memory) for t in (q, k, v))
    got = c(*[t.numpy() for t in (q2, k2, v2, m)])
    if bf16:
        assert attention_parts(c)[0].impl == BF16_PATH
        want = bf16_reference(form, q, k, v, m if mask != "none" else torch.zeros(S))
        np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)
        return
    with torch.no_grad():
        want = module(q, k, v, m).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
