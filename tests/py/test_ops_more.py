"""The op families of the coverage issue beyond test_ops.py, against PyTorch:
activations oneDNN lacks, statistics, einsum, indexing and scatter, padding
modes, interpolation modes, pooling with indices, fold/unfold, grid sampling,
rearrangements and creation ops. Scripted functions (check) and traced
modules (check_traced) both; each case includes the awkward arguments."""

import itertools
import math
from typing import List, Optional

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import llga
from test_ops import check, compare, rnd


def check_traced(fn, *args, rtol=1e-4, atol=1e-5):
    with torch.no_grad():
        traced = torch.jit.trace(fn, args, check_trace=False)
        want = fn(*args)
    got = llga.optimize(traced)(*[a.numpy() for a in args])
    compare(got, want, rtol, atol)


# ---------------------------------------------------------------- activations

def activations(x: torch.Tensor, w1: torch.Tensor, wc: torch.Tensor):
    return (F.celu(x, 0.7), F.selu(x), F.softplus(x, 2.0, 3.0), F.softplus(x), F.hardshrink(x, 0.3),
            F.softshrink(x, 0.3), F.threshold(x, 0.1, 20.0), F.rrelu(x, 0.1, 0.3, False), F.logsigmoid(x),
            F.prelu(x, w1), F.prelu(x, wc), F.glu(x, 1), F.glu(x, -1), torch.erfinv(torch.tanh(x * 0.3)), F.softsign(x),
            F.tanhshrink(x), F.softmin(x, 1), F.mish(x))


def test_activations():
    x = rnd(2, 4, 6) * 3
    x[0, 0, :3] = torch.tensor([0.3, -0.3, 0.1])  # on the shrink and threshold edges
    check(activations, x, rnd(1), rnd(4))


def test_activation_modules_in_place_and_bad_arguments():
    x = rnd(3, 4)
    for m in [torch.nn.CELU(0.5, inplace=True), torch.nn.SELU(inplace=True), torch.nn.Threshold(0.2, -1.0, inplace=True),
              torch.nn.RReLU(inplace=True), torch.nn.PReLU(4), torch.nn.GLU(1), torch.nn.Softmax2d()]:
        xin = rnd(2, 4, 3, 3) if isinstance(m, torch.nn.Softmax2d) else x.clone()
        check_traced(m.eval(), xin)
    with pytest.raises(llga.ExecutionError, match="odd"):
        llga.optimize(torch.jit.script(lambda_glu))(np.zeros((2, 5), np.float32))
    with pytest.raises(llga.ExecutionError, match="prelu: weight"):
        llga.optimize(torch.jit.script(prelu_fn))(np.zeros((2, 4, 3), np.float32), np.zeros(3, np.float32))


def lambda_glu(x: torch.Tensor):
    return F.glu(x, -1)


def prelu_fn(x: torch.Tensor, w: torch.Tensor):
    return F.prelu(x, w)


# ---------------------------------------------------------------- statistics

def statistics(x: torch.Tensor):
    return (torch.var(x), torch.var(x, 1), torch.var(x, [0, 2], False, True), torch.std(x, -1, keepdim=True),
            torch.var(x, 1, correction=0), torch.std(x, unbiased=False), torch.var_mean(x, [0, 1]),
            torch.std_mean(x, 2, False), torch.logsumexp(x, 1), torch.logsumexp(x, [0, 2], True))


@pytest.mark.parametrize("shape", [(3, 4, 5), (1, 1, 7), (2, 1, 1)], ids=str)
def test_statistics(shape):
    check(statistics, rnd(*shape) * 4 + 1)


def logsumexp_inf(x: torch.Tensor):
    return torch.logsumexp(x, 1)


def test_logsumexp_infinities():
    x = rnd(4, 5)
    x[0] = -float("inf")
    x[1, 2] = float("inf")
    check(logsumexp_inf, x)


def order_statistics(x: torch.Tensor, q: torch.Tensor):
    return (torch.median(x, 1), torch.nanmedian(x), torch.quantile(x, q, 2, True), torch.nanquantile(x, 0.9),
            torch.mode(x, 0), torch.histc(x, 10, -3, 3))


def quantile_at(x: torch.Tensor, q: float, how: str):
    return torch.quantile(x, q, 1, interpolation=how)


def mode_along(x: torch.Tensor, d: int):
    return torch.mode(x, d)


def histc_of(x: torch.Tensor, lo: float, hi: float):
    return torch.histc(x, 5, lo, hi)


def test_order_statistics_large_rows_and_bad_arguments():
    # rows long enough for the selection and the sorts to take their
    # non-trivial paths (and the threads), values with many repeats
    x = torch.randint(-20, 20, (3, 600, 5)).float()
    x[0, ::7] = float("nan")
    check(order_statistics, x, torch.tensor([0.0, 0.5, 0.99]))
    run = llga.optimize(torch.jit.script(quantile_at))
    with pytest.raises(llga.ExecutionError, match=r"quantile\(\) q must be in the range \[0, 1\]"):
        run(np.ones((2, 3), np.float32), 1.5, "linear")
    with pytest.raises(llga.ExecutionError, match="interpolation must be one of"):
        run(np.ones((2, 3), np.float32), 0.5, "cubic")
    with pytest.raises(llga.ExecutionError, match="must be either float or double"):
        run(np.ones((2, 3), np.int64), 0.5, "linear")
    with pytest.raises(llga.ExecutionError, match=r"mode\(\): Expected reduction dim 1 to have non-zero size"):
        llga.optimize(torch.jit.script(mode_along))(np.ones((2, 0), np.float32), 1)
    hist = llga.optimize(torch.jit.script(histc_of))
    with pytest.raises(llga.ExecutionError, match="max must be larger than min"):
        hist(np.ones(4, np.float32), 2.0, 1.0)
    with pytest.raises(llga.ExecutionError, match="is not finite"):
        hist(np.array([1, np.nan], np.float32), 0.0, 0.0)


# ---------------------------------------------------------------- einsum

EINSUM = [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("ij,jk", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]), ("ii->i", [(4, 4)]), ("ii", [(4, 4)]), ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]), ("i,i->", [(5,), (5,)]), ("i,j->ij", [(3,), (4,)]), ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]), ("abc,cd,de->abe", [(2, 3, 4), (4, 5), (5, 6)]),
    ("i...->...", [(3, 4, 5)]), ("iij->j", [(3, 3, 4)]), ("b i d, b j d -> b i j", [(2, 3, 4), (2, 5, 4)]),
    ("ab,ab,ab->ab", [(2, 3)] * 3), ("Ab,bC->AC", [(2, 3), (3, 4)]), ("...i,...i", [(2, 1, 3), (4, 3)]),
    ("bcij,bckl->bcijkl", [(1, 2, 2, 2), (1, 2, 2, 3)]), ("ij,kj->ik", [(0, 3), (4, 3)]),
    ("ij,jk->ik", [(3, 1), (4, 5)]),  # j broadcasts (1 against 4): left as einsum, not a matmul
]


@pytest.mark.parametrize("eq,shapes", EINSUM, ids=[e for e, _ in EINSUM])
def test_einsum(eq, shapes):
    args = [rnd(*s) for s in shapes]
    check_traced(lambda *a: torch.einsum(eq, *a), *args)


def test_einsum_errors_name_the_equation():
    # Run by llga's einsum (an implicit output is not lowered to a matmul).
    traced = torch.jit.trace(lambda a, b: torch.einsum("ij,jk", a, b), (rnd(3, 4), rnd(4, 5)))
    with pytest.raises(llga.ExecutionError, match=r"einsum\(\"ij,jk\"\).*sizes 4 and 6|subscript 'j' has sizes"):
        llga.optimize(traced)(np.zeros((3, 4), np.float32), np.zeros((6, 5), np.float32))
    # Lowered to a matmul (lower-einsum): its error names the equation too.
    traced = torch.jit.trace(lambda a, b: torch.einsum("ij,jk->ik", a, b), (rnd(3, 4), rnd(4, 5)))
    with pytest.raises(llga.ExecutionError,
                       match=r'einsum "ij,jk->ik".*Float\(3, 4\) and Float\(6, 5\) cannot be multiplied'):
        llga.optimize(traced)(np.zeros((3, 4), np.float32), np.zeros((6, 5), np.float32))


# Equations lower-einsum turns into one matmul, with the operands' ranks and
# roles varied (batch labels in any order, several free labels on a side,
# none contracted, none free), against PyTorch; each must leave no einsum.
LOWERED = [
    ("bqhd,bkhd->bhqk", [(2, 5, 3, 8), (2, 7, 3, 8)]), ("bhqk,bkhd->bqhd", [(2, 3, 5, 7), (2, 7, 3, 8)]),
    ("bnd,de->bne", [(2, 3, 6), (6, 5)]), ("de,bnd->nbe", [(6, 5), (2, 3, 6)]), ("i,j->ij", [(3,), (4,)]),
    ("i,i->", [(5,), (5,)]), ("ab,cd->dbca", [(2, 3), (4, 5)]), ("hbk,bkh->bh", [(3, 2, 4), (2, 4, 3)]),
    ("bij,bjk->bki", [(2, 3, 4), (2, 4, 5)]), ("xay,yb->bxa", [(2, 3, 4), (4, 5)]), ("ab,b->a", [(3, 4), (4,)]),
    ("b,ab->a", [(4,), (3, 4)]), ("bij,jk->bik", [(1, 3, 4), (4, 5)]), ("bij,bjk->bik", [(1, 3, 4), (2, 4, 5)]),
]


@pytest.mark.parametrize("eq,shapes", LOWERED, ids=[e for e, _ in LOWERED])
def test_einsum_lowered_to_matmul_matches_pytorch(eq, shapes):
    args = [rnd(*s) for s in shapes]
    traced = torch.jit.trace(lambda *a: torch.einsum(eq, *a), args)
    c = llga.optimize(traced)
    counts = c.graph.node_counts()
    assert "aten::einsum" not in counts, counts
    assert counts.get("aten::matmul") or any("aten::matmul" in p.ops for p in c.partitions), counts
    np.testing.assert_allclose(c(*[a.numpy() for a in args]), torch.einsum(eq, *args).numpy(), rtol=1e-5, atol=1e-5)


def test_bilinear_layer_runs_on_einsum():
    m = torch.nn.Bilinear(4, 5, 3).eval()
    check_traced(m, rnd(2, 7, 4), rnd(2, 7, 5))


# ---------------------------------------------------------------- indexing

def scatters(x: torch.Tensor, i: torch.Tensor, src: torch.Tensor):
    return (x.scatter(1, i, src), x.scatter(1, i, 2.5), x.scatter_add(1, i, src), x.scatter(0, i[:2] % 4, src, reduce="add"),
            torch.take_along_dim(x, i, 1), torch.take_along_dim(x, i[:1] % 4, 0), torch.take_along_dim(x, i),
            torch.kthvalue(x, 2, 1), torch.kthvalue(x, 1, 0, True))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
def test_scatter_gather_kthvalue(dtype):
    x = torch.randperm(24, generator=torch.Generator().manual_seed(1)).view(4, 6).to(dtype)
    i = torch.stack([torch.randperm(6, generator=torch.Generator().manual_seed(k)) for k in range(4)])  # no duplicates
    check(scatters, x, i, rnd(4, 6).to(dtype) if dtype != torch.int64 else x.flip(0))


def selections(x: torch.Tensor, m: torch.Tensor, i: torch.Tensor, j: torch.Tensor):
    return (torch.masked_select(x, m), torch.masked_select(x, m[0]), torch.nonzero(m), torch.nonzero(x > 10),
            x.index_put([i], torch.tensor(1.5)), x.index_put([i, j], x[0, :2] * 2), x.index_put([i], x[:2], True))


def test_masked_select_nonzero_index_put():
    x = rnd(4, 5)
    check(selections, x, x > 0, torch.tensor([0, 2]), torch.tensor([1, 4]))


class WeightedBag(torch.nn.Module):
    def __init__(self, bag):
        super().__init__()
        self.bag = bag

    def forward(self, i, o, w):
        return self.bag(i, o, per_sample_weights=w)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag(mode):
    torch.manual_seed(0)
    m = torch.nn.EmbeddingBag(10, 3, mode=mode).eval()
    idx, off = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]), torch.tensor([0, 3, 3, 6])  # an empty bag
    check_traced(m, idx, off)
    check_traced(m, torch.tensor([[1, 2, 4], [5, 4, 9]]))  # 2-D: bags of rows
    if mode == "sum":
        check_traced(WeightedBag(m), idx, off, rnd(8))
    m2 = torch.nn.EmbeddingBag(10, 3, mode=mode, padding_idx=2).eval()
    check_traced(m2, idx, off)


def test_embedding_bag_bad_index_is_clear():
    m = torch.nn.EmbeddingBag(10, 3).eval()
    traced = torch.jit.trace(m, (torch.tensor([1, 2]), torch.tensor([0])))
    with pytest.raises(llga.ExecutionError, match="out of range"):
        llga.optimize(traced)(np.array([1, 12]), np.array([0]))


# ---------------------------------------------------------------- shapes, padding, creation

def rearrangements(x: torch.Tensor, y: torch.Tensor):
    return (F.pixel_shuffle(y, 2), F.pixel_unshuffle(F.pixel_shuffle(y, 2), 2), F.channel_shuffle(y, 2),
            torch.tile(x, [2]), torch.tile(x, [2, 1, 3]), torch.movedim(x, 0, 2), torch.movedim(x, [0, 1], [2, 0]),
            torch.diagonal(x), torch.diagonal(x, 1, 1, 2), torch.diagonal(x, -1, 0, 2), torch.swapaxes(x, 0, 2))


def test_rearrangements():
    check(rearrangements, rnd(3, 4, 5), rnd(2, 8, 3, 3))


def creation(x: torch.Tensor):
    return (x + torch.linspace(-1, 2, 5), torch.linspace(0, 1, 1), torch.linspace(3, 5, 0), torch.eye(3),
            torch.eye(2, 4, dtype=torch.int64), torch._shape_as_tensor(x), torch.empty(2, 3).fill_(1.0),
            ~(x > 0), ~x.to(torch.int64))


def test_creation_and_bitwise_not():
    check_traced(creation, rnd(3, 5))


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_padding_modes(mode, nd):
    x = rnd(2, 3, *([4] * nd))
    pad = [1, 2, 2, 0, 3, 1][: 2 * nd]
    check_traced(lambda t: F.pad(t, pad, mode=mode), x)
    if mode != "reflect":  # negative padding crops (circular: crops first, then wraps what is left)
        check_traced(lambda t: F.pad(t, [-1, 2] * nd, mode=mode), x)
        check_traced(lambda t: F.pad(t, [2, -1] * nd, mode=mode), x)


def test_padding_layers_and_conv_padding_modes():
    for m, x in [(torch.nn.ReflectionPad2d((1, 0, 2, 1)), rnd(1, 2, 4, 4)), (torch.nn.ReplicationPad3d(1), rnd(1, 2, 3, 3, 3)),
                 (torch.nn.ZeroPad2d(2), rnd(1, 2, 3, 3)), (torch.nn.ConstantPad1d((2, 1), 3.5), rnd(2, 3)),
                 (torch.nn.Conv2d(2, 3, 3, padding=1, padding_mode="circular"), rnd(1, 2, 5, 5)),
                 (torch.nn.Conv1d(2, 3, 3, padding=2, padding_mode="reflect"), rnd(1, 2, 6))]:
        check_traced(m.eval(), x)


def test_reflect_padding_too_large_is_clear():
    traced = torch.jit.trace(lambda t: F.pad(t, [3, 3], mode="reflect"), rnd(1, 2, 4))
    with pytest.raises(llga.ExecutionError, match="must be smaller than the dimension"):
        llga.optimize(traced)(np.zeros((1, 2, 2), np.float32))


def test_padding_by_nothing():
    # pads of 0 (Swin's at 224): the input's own buffer where it dies at the pad
    # and llga holds it alone, else a copy; never the caller's array, never a
    # buffer something else still reads
    x = rnd(2, 6, 6, 4)

    def dies(t):
        return F.pad(torch.relu(t), [0, 0, 0, 0, 0, 0])

    def still_read(t):
        r = torch.relu(t)
        p = F.pad(r, [0, 0, 0, 0])
        p.add_(1.0)
        return p, r

    def crops(t):
        return F.pad(torch.relu(t), [0, 0, -1, 0, 0, -2])

    for fn in (dies, still_read, crops):
        check_traced(fn, x)
    compiled = llga.optimize(torch.jit.trace(lambda t: F.pad(t, [0, 0, 0, 0]), x))
    xn = x.numpy()
    out = compiled(xn)
    assert not np.shares_memory(out, xn)
    np.testing.assert_array_equal(out, xn)
    out[...] = 7  # the caller's array is untouched
    np.testing.assert_array_equal(xn, x.numpy())
    both = llga.optimize(torch.jit.trace(lambda t: (F.pad(torch.relu(t), [0, 0]), torch.relu(t) * 1), x))
    p, r = both(xn)
    assert not np.shares_memory(p, r)
    compiled = llga.optimize(torch.jit.trace(lambda t: (lambda r: (F.pad(r, [0, 0]), r))(torch.relu(t)), x))
    p, r = compiled(xn)
    assert not np.shares_memory(p, r)  # r is an output too: it does not die at the pad
    np.testing.assert_array_equal(p, r)


# ---------------------------------------------------------------- interpolation, pooling with indices, fold

INTERP = [(m, nd) for m in ["nearest", "nearest-exact"] for nd in (1, 2, 3)] + [
    ("linear", 1), ("bilinear", 2), ("trilinear", 3), ("bicubic", 2)]


@pytest.mark.parametrize("mode,nd", INTERP, ids=[f"{m}{n}d" for m, n in INTERP])
@pytest.mark.parametrize("how", [dict(scale_factor=2), dict(scale_factor=1.7), dict(scale_factor=0.5), "size"], ids=str)
def test_interpolate(mode, nd, how):
    kw = dict(size=tuple([5, 3, 4][:nd])) if how == "size" else how
    for align in ([None] if "nearest" in mode else [False, True]):
        k = dict(kw, mode=mode) if align is None else dict(kw, mode=mode, align_corners=align)
        check_traced(lambda x: F.interpolate(x, **k), rnd(2, 3, *([6] * nd)))


def test_upsample_modules():
    for m in [torch.nn.Upsample(scale_factor=2, mode="bicubic", align_corners=True), torch.nn.UpsamplingNearest2d(scale_factor=3),
              torch.nn.UpsamplingBilinear2d(size=(7, 5))]:
        check_traced(m, rnd(1, 2, 4, 4))


class PoolUnpool(torch.nn.Module):
    def __init__(self, nd):
        super().__init__()
        self.pool = getattr(torch.nn, f"MaxPool{nd}d")(2, return_indices=True)
        self.unpool = getattr(torch.nn, f"MaxUnpool{nd}d")(2)

    def forward(self, x):
        y, i = self.pool(x)
        return self.unpool(y, i), i


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_pooling_with_indices(nd):
    x = rnd(2, 3, *([7] * nd))
    for m in [getattr(torch.nn, f"MaxPool{nd}d")(3, 2, 1, return_indices=True),
              getattr(torch.nn, f"MaxPool{nd}d")(2, return_indices=True, ceil_mode=True),
              getattr(torch.nn, f"MaxPool{nd}d")(2, 1, 0, dilation=2, return_indices=True),
              getattr(torch.nn, f"AdaptiveMaxPool{nd}d")(3, return_indices=True), getattr(torch.nn, f"AdaptiveMaxPool{nd}d")(4)]:
        check_traced(m, x)
    check_traced(PoolUnpool(nd), rnd(2, 3, *([8] * nd)))


def test_fold_unfold():
    for m, x in [(torch.nn.Unfold(2), rnd(2, 3, 5, 6)), (torch.nn.Unfold((2, 3), dilation=2, padding=1, stride=2), rnd(2, 3, 7, 6)),
                 (torch.nn.Fold((4, 5), 2), rnd(2, 12, 12)), (torch.nn.Fold((7, 6), (2, 3), padding=1, stride=2), rnd(2, 18, 12)),
                 (torch.nn.Unfold(3), rnd(3, 6, 6))]:
        check_traced(m, x)


@pytest.mark.parametrize("nd,mode", [(2, "bilinear"), (2, "nearest"), (2, "bicubic"), (3, "bilinear"), (3, "nearest")])
@pytest.mark.parametrize("pad", ["zeros", "border", "reflection"])
def test_grid_sample(nd, mode, pad):
    x, g = rnd(2, 3, *([5] * nd)), torch.rand(2, *([4] * nd), nd, generator=torch.Generator().manual_seed(nd)) * 2.6 - 1.3
    for align in (False, True):
        check_traced(lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=pad, align_corners=align), x, g)


def clamp_tensors(x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor):
    return torch.clamp(x, lo, hi), torch.clamp(x, min=lo), torch.clamp(x, max=hi), x.clamp_min(lo), x.clamp_max(hi)


def test_clamp_with_tensor_bounds_and_distances():
    check(clamp_tensors, rnd(3, 6), rnd(6) - 0.5, rnd(3, 1) + 0.5)
    a, b = rnd(4, 6), rnd(4, 6)
    check_traced(lambda a, b: (F.cosine_similarity(a, b), F.cosine_similarity(a, b, 0), F.pairwise_distance(a, b),
                               F.pairwise_distance(a, b, 1.0, 1e-6, True)), a, b)
    tiny = torch.full((1, 2), 1e-9)
    check_traced(lambda a, b: F.cosine_similarity(a, b), tiny, tiny)  # PyTorch 1.13 clamps each norm on its own


# ---------------------------------------------------------------- transformer encoder, nested fast path

class PaddedEncoder(torch.nn.Module):
    def __init__(self, nested, norm_first=False, final_norm=False):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, norm_first=norm_first)
        self.enc = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=nested,
                                               norm=torch.nn.LayerNorm(32) if final_norm else None)

    def forward(self, x, pad):
        return self.enc(x, src_key_padding_mask=pad)


@pytest.mark.parametrize("nested,norm_first,final_norm", [(True, False, False), (True, False, True), (False, False, False),
                                                          (True, True, False)])
def test_transformer_encoder_padding_mask_nested_and_not(nested, norm_first, final_norm):
    torch.manual_seed(0)
    enc = PaddedEncoder(nested, norm_first, final_norm).eval()
    x = rnd(3, 7, 32)
    pad = torch.zeros(3, 7, dtype=torch.bool)
    pad[1, 5:] = True
    pad[2, 3:] = True
    with torch.no_grad():
        compiled = llga.optimize(torch.jit.trace(enc, (x, pad), check_trace=False))
    # Another mask on the same compiled model: every row padded, so the nested
    # path's output is shorter (cut to the longest row), as PyTorch's is.
    shorter = torch.tensor([[0, 0, 0, 0, 0, 1, 1], [0, 0, 0, 1, 1, 1, 1], [0, 0, 0, 0, 1, 1, 1]], dtype=torch.bool)
    for p in (pad, shorter):
        with torch.no_grad():
            want = enc(x, p)
        compare(compiled(x.numpy(), p.numpy()), want, 1e-4, 1e-5)


def test_repeat_interleave_with_tensor_repeats():
    x = rnd(3, 4)
    check_traced(lambda x, r: torch.repeat_interleave(x, r, 0), x, torch.tensor([1, 0, 3]))
    check_traced(lambda x, r: torch.repeat_interleave(x, r, 1), x, torch.tensor([2, 1, 0, 1]))
    check_traced(lambda x, r: torch.repeat_interleave(x, r), x, torch.tensor(2))
    check_traced(lambda r: torch.repeat_interleave(r), torch.tensor([2, 0, 3]))
    traced = torch.jit.trace(lambda x, r: torch.repeat_interleave(x, r, 0), (x, torch.tensor([1, 0, 3])))
    with pytest.raises(llga.ExecutionError, match="one count for each"):
        llga.optimize(traced)(x.numpy(), np.array([1, 2]))


# ---------------------------------------------------------------- attention, logical ops

def attention_module(batch_first, kdim, need_weights, average, attn_mask, key_padding):
    class Attention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.mha = torch.nn.MultiheadAttention(16, 4, batch_first=batch_first, kdim=kdim, vdim=kdim)

        def forward(self, q, k, v, am, kpm):
            out = self.mha(q, k, v, attn_mask=am if attn_mask else None, key_padding_mask=kpm if key_padding else None,
                           need_weights=need_weights, average_attn_weights=average)
            return out if need_weights else out[0]

    return Attention().eval()


MHA = [c for c in itertools.product([False, True], [None, 12], [False, True], [True, False], [None, "bool", "float"],
                                    [False, True]) if c[2] or c[3]]


@pytest.mark.parametrize("batch_first,kdim,need_weights,average,attn_mask,key_padding", MHA, ids=str)
def test_multihead_attention(batch_first, kdim, need_weights, average, attn_mask, key_padding):
    torch.manual_seed(0)
    m = attention_module(batch_first, kdim, need_weights, average, attn_mask, key_padding)
    L, S, B = 5, 6, 2
    shape = (lambda n, e: (B, n, e)) if batch_first else (lambda n, e: (n, B, e))
    q, k, v = rnd(*shape(L, 16)), rnd(*shape(S, kdim or 16)), rnd(*shape(S, kdim or 16))
    am = torch.rand(L, S, generator=torch.Generator().manual_seed(3)) > 0.7 if attn_mask == "bool" else rnd(L, S)
    kpm = torch.tensor([[0, 0, 0, 0, 1, 1], [0, 0, 0, 0, 0, 0]], dtype=torch.bool)
    check_traced(m, q, k, v, am, kpm)


def logical(a: torch.Tensor, b: torch.Tensor, f: torch.Tensor):
    return (torch.logical_and(a, b), torch.logical_or(a, b), torch.logical_xor(a, b), torch.logical_and(f, f.flip(0)),
            torch.logical_or(a > 0, f > 0), torch.logical_not(f), a.masked_fill(b.unsqueeze(-1) > 0, 7))


def test_logical_ops_are_truth_values_not_bits():
    check(logical, torch.tensor([2, 0, 3, -1]), torch.tensor([1, 1, 0, 4]), torch.tensor([0.5, 0.0, 2.0, -1.0]))


# ---------------------------------------------------------------- more layers

@pytest.mark.parametrize("nd", [2, 3])
def test_fractional_max_pool_with_fixed_samples(nd):
    torch.manual_seed(nd)
    cls = torch.nn.FractionalMaxPool2d if nd == 2 else torch.nn.FractionalMaxPool3d
    for out, kernel in [((3,) * nd, 2), ((4,) * nd, 3)]:
        samples = torch.rand(2, 3, nd, generator=torch.Generator().manual_seed(7))
        m = cls(kernel, output_size=out, return_indices=True, _random_samples=samples).eval()
        check_traced(m, rnd(2, 3, *([8] * nd)))


def test_weight_norm_unflatten_lppool():
    torch.manual_seed(0)
    for m, x in [(torch.nn.utils.weight_norm(torch.nn.Conv2d(3, 4, 3)), rnd(1, 3, 6, 6)),
                 (torch.nn.utils.weight_norm(torch.nn.Linear(5, 4), dim=None), rnd(2, 5)),
                 (torch.nn.utils.weight_norm(torch.nn.Conv1d(3, 4, 3), dim=1), rnd(1, 3, 8)),
                 (torch.nn.Unflatten(1, (2, 3)), rnd(4, 6)), (torch.nn.LPPool1d(2, 3), rnd(2, 3, 9)),
                 (torch.nn.LPPool2d(3, 2), rnd(2, 3, 6, 6))]:
        check_traced(m.eval(), x)


def scaled_products(b: torch.Tensor, x: torch.Tensor, y: torch.Tensor, m: torch.Tensor, v: torch.Tensor,
                    c: torch.Tensor, alpha: float, beta: float):
    return (torch.baddbmm(b, x, y, beta=beta, alpha=alpha), torch.addbmm(b[0], x, y, beta=beta, alpha=alpha),
            torch.addmv(v[:3], m, v, beta=beta, alpha=alpha), torch.addmm(c, m, m.t(), beta=beta, alpha=alpha))


@pytest.mark.parametrize("alpha,beta", [(0.5, 2.0), (1.0, 0.0), (-1.5, 1.0)])
def test_scaled_products_with_runtime_alpha_beta(alpha, beta):
    b = rnd(2, 3, 5)
    args = (rnd(2, 3, 4), rnd(2, 4, 5), rnd(3, 4), rnd(4), rnd(3, 3), alpha, beta)
    if beta != 0.0:
        return check(scaled_products, b, *args)
    # beta 0: the input is ignored, NaN included (PyTorch's documented rule).
    # The reference is the products alone: PyTorch 1.13's own baddbmm with
    # beta=0 returns NaN from uninitialised memory now and then (29-40 of 200
    # calls measured, with or without a NaN in the input), which made this
    # test fail in a CI run where llga's result was right.
    b[0, 0, 0] = float("nan")
    x, y, m, v, c = args[:5]
    with torch.no_grad():
        want = (alpha * torch.bmm(x, y), alpha * torch.bmm(x, y).sum(0), alpha * torch.mv(m, v), alpha * (m @ m.t()))
    got = llga.optimize(torch.jit.script(scaled_products))(*[a.numpy() if isinstance(a, torch.Tensor) else a
                                                              for a in (b,) + args])
    compare(got, want, 1e-4, 1e-5)


def test_cells_same_padding_and_python_functions():
    torch.manual_seed(0)
    for m, args in [(torch.nn.LSTMCell(4, 5), (rnd(3, 4),)), (torch.nn.GRUCell(4, 5), (rnd(3, 4), rnd(3, 5))),
                    (torch.nn.RNNCell(4, 5, nonlinearity="relu"), (rnd(3, 4), rnd(3, 5))),
                    (torch.nn.Conv2d(3, 4, 3, padding="same", dilation=2), (rnd(1, 3, 7, 7),)),
                    (torch.nn.Conv1d(3, 4, 4, padding="valid"), (rnd(2, 3, 9),)),
                    (torch.nn.EmbeddingBag(10, 3, include_last_offset=True), (torch.tensor([1, 2, 4, 5, 4, 3]),
                                                                              torch.tensor([0, 2, 6])))]:
        check_traced(m.eval(), *args)
    traced = torch.jit.trace(torch.nn.CrossMapLRN2d(3).eval(), rnd(2, 5, 4, 4), check_trace=False)
    with pytest.raises(llga.UnsupportedOpError, match="CrossMapLRN2d.*first at .*test_ops_more|CrossMapLRN2d"):
        llga.optimize(traced)


class _Pow(torch.nn.Module):
    def forward(self, a, b):
        return torch.pow(a, b)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8])
def test_integer_pow_wraps_and_takes_negative_powers_as_pytorch(dtype):
    # By squaring: a power of 2**40 returns at once (it looped 2**40 times), wrapping
    # on overflow as PyTorch's; a negative power is 1 for 1, +-1 for -1, else 0.
    signed = dtype != torch.uint8
    a = torch.tensor([0, 0, 5, -1 if signed else 1, -1 if signed else 9, -2 if signed else 2, 2, 3, 7, 3, 1], dtype=dtype)
    b = torch.tensor([-1 if signed else 1, 0, 0, -2 if signed else 2, -3 if signed else 3, -1 if signed else 1, 62, 40,
                      2 ** 40 if dtype == torch.int64 else 100, 33, -5 if signed else 5], dtype=dtype)
    c = llga.optimize(torch.jit.trace(_Pow(), (a, b)))
    np.testing.assert_array_equal(c(a.numpy(), b.numpy()), _Pow()(a, b).numpy())


def _tiny_elementwise(x, y, c: float):
    a = torch.tanh(x * 0.5 + c)
    b = torch.sigmoid(y) * torch.exp(x / 4)
    m = torch.maximum(x, y) - torch.minimum(x, y[0])
    return a, b, m, x / y, torch.relu(x - y)


# Float elementwise ops on at most kTinyElements (256) values run llga's own
# loops rather than oneDNN primitives (src/runtime/threads.h): the same
# results as PyTorch on both sides of the threshold, NaN and infinities
# included where both paths agree with PyTorch (max/min propagate NaN; on the
# small side relu keeps it, as PyTorch does).
@pytest.mark.parametrize("shape", [(4, 4), (1,), (3, 5, 7), (300,), (40, 33)])
def test_tiny_elementwise_matches_pytorch(shape):
    torch.manual_seed(sum(shape))
    x, y = torch.randn(*shape) * 3, torch.rand(*shape) + 0.5
    small = x.numel() <= 256
    if small and x.numel() > 3:
        x.view(-1)[1], x.view(-1)[2], y.view(-1)[3] = float("nan"), float("inf"), float("nan")
    fn = torch.jit.script(_tiny_elementwise)
    c = llga.optimize(fn)
    got = c(x.numpy(), y.numpy(), 0.25)
    want = fn(x, y, 0.25)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("n", [7, 16, 33, 100_003])
def test_fake_quantize_matches_pytorch_bit_for_bit(n):
    """llga's vectorised fake quantization against PyTorch's kernel: ties
    (rounded half to even), NaN and infinities (to quant_min, as PyTorch's
    int64 cast), values far past the range, 16-lane tails and the threads'
    chunks; per tensor and per channel."""
    g = torch.Generator().manual_seed(n)
    x = torch.randn(n, generator=g) * 4
    special = torch.tensor([float("nan"), float("inf"), -float("inf"), 1e30, -1e30, 0.5 * 0.037, 2.5 * 0.037])
    x[: min(n, 7)] = special[: min(n, 7)]
    ties = torch.arange(0, n, dtype=torch.float32)[: n // 3] * 0.5 * 0.25  # k/2 steps of scale 0.25
    x[n - ties.numel():] = ties
    check_traced(lambda t: torch.fake_quantize_per_tensor_affine(t, 0.25, 3, 0, 255), x, rtol=0, atol=0)
    check_traced(lambda t: torch.fake_quantize_per_tensor_affine(t, 0.037, 0, -128, 127), x, rtol=0, atol=0)
    xc = x[: n - n % 3].reshape(3, -1) if n >= 3 else x.reshape(1, -1)
    s, z = torch.tensor([0.25, 0.037, 0.1])[: xc.shape[0]], torch.tensor([3, 0, 10], dtype=torch.int32)[: xc.shape[0]]
    check_traced(lambda t: torch.fake_quantize_per_channel_affine(t, s, z, 0, 0, 255), xc, rtol=0, atol=0)


def scalar_math(x: float, y: float, i: int, j: int) -> List[float]:
    return [float(math.isnan(x)), float(math.isinf(x)), float(math.isfinite(x)), math.fmod(x, y), math.copysign(y, x),
            float(math.gcd(i, j)), float(math.isnan(x - x))]


@pytest.mark.parametrize("x", [1.5, -2.0, 0.0, float("inf"), float("-inf"), float("nan")])
def test_scripted_math_on_numbers(x):
    # the value tests and binary ops llga decomposes or runs for tensors take numbers too
    run = llga.optimize(torch.jit.script(scalar_math))
    got, want = run(x, 4.0, -12, 18), torch.jit.script(scalar_math)(x, 4.0, -12, 18)
    np.testing.assert_array_equal(np.array(got), np.array(want))
