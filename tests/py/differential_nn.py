"""Differential cases for the torch.nn families: convolutions (plain, grouped,
transposed, "same"/"valid" padding), pooling (max with and without indices,
average, adaptive, fractional with fixed samples, unpooling), normalisation,
embeddings and bags, interpolation, padding, channel and pixel shuffles,
fold/unfold, activations with weights, dropout in eval, linear layers and
distances, norms, grid sampling, recurrent layers (packed too), the fused
attention and encoder paths PyTorch takes in eval under no_grad, and the
tensor methods nn code uses (clone, to, copy_, unique ...).

Weights are inputs drawn with the data wherever the functional form takes
them, so channel counts vary per call and now and then (about one draw in
twelve) one is mismatched, so that PyTorch's errors are checked too; layers
that keep their weights (recurrent, attention, encoder) are built once with
seeded weights and traced as constants. Spatial sizes are drawn small,
including sizes too small for the kernel (an error) and 0-size batches.

Kinds that only scripting keeps (conv1d/2d/3d, conv_transpose*) run scripted;
tracing F.conv* gives _convolution and _convolution_mode instead.

llga also claims int64 (and bool) for max_pool2d_with_indices, max_unpool2d/3d
and upsample_nearest1d/2d/3d, which PyTorch 1.13 rejects ("not implemented for
'Long'"): those draws only check that PyTorch raises, as traced cases compile
nothing from inputs PyTorch rejects (llga runs them, beyond PyTorch)."""

import math
import warnings

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from differential_common import Case, broadcast_pair, rare, relayout, seeds, shapes, tensors, unary

# kind -> a known llga/PyTorch mismatch with its minimal repro (strict xfail in test_differential.py)
KNOWN_BUGS = {}

F32 = torch.float32


def _sizes(draw, n, lo=0, hi=6):
    return [draw(st.integers(lo, hi)) for _ in range(n)]


@st.composite
def feature(draw, dt, nd, channels=None, lo=0, hi=6, unbatched=True):
    """(N, C, *spatial) with N 0..2 and nd spatial sizes lo..hi, now and then
    unbatched (C, *spatial); C drawn 1..3 unless given."""
    c = draw(st.integers(1, 3)) if channels is None else channels
    batch = [draw(st.integers(0, 2))] if not unbatched or draw(st.integers(0, 3)) else []
    return draw(tensors(dt, tuple(batch + [c] + _sizes(draw, nd, lo, hi))))


def _gen(seed):
    return torch.Generator().manual_seed(seed)


# ---------------------------------------------------------------- convolution


@st.composite
def conv_args(draw, nd, groups=1, transposed=False, unbatched=True):
    """x, weight, bias of a (transposed) convolution with `groups`; the input's
    channels now and then off by one, spatial sizes 0..5 (too small for some kernels)."""
    n, ci, co = draw(st.integers(0, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    k = _sizes(draw, nd, 1, 3)
    sp = _sizes(draw, nd, 0 if draw(st.integers(0, 3)) == 0 else 1, 5)
    cin = groups * ci + rare(draw)
    batch = [n] if not unbatched or draw(st.integers(0, 3)) else []
    if transposed and batch == [0]:
        # PyTorch 1.13 skips its output-size check for an empty batch of transposed convolutions
        # (conv_transpose2d(empty(0, 1, 2, 2), ones(1, 1, 1, 1), padding=1) has size (0, 1, 0, 0),
        # where a batch of one raises): sizes these cases' outputs are never empty at
        sp = _sizes(draw, nd, 4, 5)
    x = draw(tensors(F32, tuple(batch + [cin] + sp)))
    w = draw(tensors(F32, (groups * ci, co, *k) if transposed else (groups * co, ci, *k)))
    if batch == [0]:  # PyTorch 1.13 fails to .view a non-contiguous weight for an empty batch
        w = w.contiguous()  # ("view size is not compatible with input tensor's size and stride")
    return x, w, draw(tensors(F32, (groups * co,)))


def _conv1d(x, w, b):
    return F.conv1d(x, w, b, 2, 1), F.conv1d(x, w, None, 1, "same", 2)


def _conv2d(x, w, b):
    return F.conv2d(x, w, b, (2, 1), (1, 0), (1, 2), 2), F.conv2d(x, w, None, 1, "valid", 1, 2)


def _conv3d(x, w, b):
    return F.conv3d(x, w, b, 1, 1), F.conv3d(x, w, None, (1, 2, 1), (0, 1, 0), 1)


def _conv_transpose1d(x, w, b):
    return F.conv_transpose1d(x, w, b, 2, 1, 1), F.conv_transpose1d(x, w, None, 1, 0, 0, 1, 2)


def _conv_transpose2d(x, w, b):
    return F.conv_transpose2d(x, w, b, (2, 1), (1, 0), (1, 0), 2), F.conv_transpose2d(x, w, None, 1, 1, 0, 2, (2, 1))


def _conv_transpose3d(x, w, b):
    return F.conv_transpose3d(x, w, b, 2, 0, (1, 0, 1)), F.conv_transpose3d(x, w, None, 1, (1, 0, 0))


def conv(fn, nd, groups=1, transposed=False, script=True):
    # oneDNN accumulates in another order than PyTorch's kernels
    return Case(fn, lambda dt: conv_args(nd, groups, transposed), rtol=1e-4, atol=1e-4, script=script)


# ---------------------------------------------------------------- pooling


def pool(fn, nd, **kw):
    return Case(fn, lambda dt: st.tuples(feature(dt, nd)), **kw)


@st.composite
def fractional_args(draw, nd):
    """x (N, C, *spatial 1..7) and its fixed samples in [0, 1) (now and then for one image too many)."""
    x = draw(feature(F32, nd, lo=1, hi=7, unbatched=False))
    g = _gen(draw(seeds))
    return x, torch.rand(x.shape[0] + rare(draw), x.shape[1], nd, generator=g)


def _fractional2d(x, s):
    return (F.fractional_max_pool2d(x, 2, output_size=(3, 2), _random_samples=s),
            F.fractional_max_pool2d(x, (2, 3), output_size=(2, 1), return_indices=True, _random_samples=s))
# (output_size, not output_ratio: a ratio becomes sizes of the traced shape, a constant the eager reference recomputes)


def _fractional3d(x, s):
    return (F.fractional_max_pool3d(x, 2, output_size=(2, 3, 2), _random_samples=s),
            F.fractional_max_pool3d(x, (1, 2, 2), output_size=(1, 2, 1), return_indices=True, _random_samples=s))


@st.composite
def unpool_args(draw, dt, nd):
    """x (N, C, *spatial 0..3, or unbatched) and indices into the plane 2x as
    large in each dim, distinct within each plane (now and then one out of range)."""
    x = draw(feature(dt, nd, hi=3))
    plane = math.prod(x.shape[-nd:])
    g = _gen(draw(seeds))
    rows = [torch.randperm(plane * 2 ** nd, generator=g)[:plane] for _ in range(math.prod(x.shape[:-nd]))]
    i = torch.stack(rows).reshape(x.shape) if rows else torch.zeros(x.shape, dtype=torch.int64)
    if rare(draw) and i.numel():
        i.view(-1)[0] = plane * 2 ** nd
    return x, i


def _unpool2d(x, i):
    return F.max_unpool2d(x, i, 2), F.max_unpool2d(x, i, 2, output_size=[x.shape[-2] * 2 + 1, x.shape[-1] * 2])


def _unpool3d(x, i):
    return F.max_unpool3d(x, i, 2), F.max_unpool3d(x, i, (2, 2, 2), 2, 0,
                                                  [x.shape[-3] * 2 + 1, x.shape[-2] * 2, x.shape[-1] * 2])


# ---------------------------------------------------------------- normalisation


@st.composite
def norm_args(draw, min_dims=2, even=False, batch_lo=0):
    """x (N, C, *) and per-channel running mean, running variance (> 0), weight, bias;
    C even with `even` (now and then odd); now and then the weight one too long."""
    s = draw(shapes(min_dims, 5))
    s = list(s) + [draw(st.integers(0, 3)) for _ in range(min_dims - len(s))]
    # C >= 1: PyTorch raises IndexError (not an op error) on 0 channels (torch.batch_norm(empty(0, 0), ...)),
    # and N >= batch_lo (torch.instance_norm raises IndexError on an empty batch too)
    s[0], s[1] = max(s[0], batch_lo), max(s[1], 1)
    c = s[1]
    if even:
        c = 2 * draw(st.integers(1, 2)) + rare(draw)
        s[1] = c
    x = draw(tensors(F32, tuple(s)))
    return (x, draw(tensors(F32, (c,))), draw(tensors(F32, (c,), positive=True)),
            # (a too long weight only for a non-empty x: PyTorch checks none for an empty one)
            draw(tensors(F32, (c + (rare(draw) if x.numel() else 0),))), draw(tensors(F32, (c,))))


def _batch_norm(x, rm, rv, w, b):
    # torch.batch_norm: F.batch_norm raises ValueError (not an op error) on one value per channel; not
    # training=True: llga rejects training-mode batch_norm by design ("call model.eval() before tracing")
    return (torch.batch_norm(x, w, b, rm, rv, False, 0.1, 1e-5, False), torch.batch_norm(x, None, None, rm, rv, False, 0.1, 1e-3, False),
            torch.batch_norm(x, w, b, rm, rv, False, 0.0, 0.1, False))


def _instance_norm(x, rm, rv, w, b):
    # torch.instance_norm: F.instance_norm raises ValueError on one spatial element
    return (torch.instance_norm(x, w, b, None, None, True, 0.1, 1e-5, False),
            torch.instance_norm(x, None, None, None, None, True, 0.1, 1e-3, False),
            torch.instance_norm(x, w, b, rm, rv, False, 0.1, 1e-5, False))


def _group_norm(x, rm, rv, w, b):
    # torch.group_norm: F.group_norm raises ValueError on one value per group
    return torch.group_norm(x, 2, w, b, 1e-5, False), torch.group_norm(x, 1, None, None, 1e-3, False)


@st.composite
def layer_norm_args(draw):
    """x (rank 1..4), weight and bias of its last dim (now and then one too long)."""
    x = draw(tensors(F32, draw(shapes(1, 4))))
    n = x.shape[-1]
    return x, draw(tensors(F32, (n + rare(draw),))), draw(tensors(F32, (n,)))


def _layer_norm(x, w, b):
    out = (F.layer_norm(x, x.shape[-1:], w, b), F.layer_norm(x, x.shape[-1:], None, b, 1e-3))
    return out + (F.layer_norm(x, x.shape[-2:]),) if x.dim() > 1 else out


# ---------------------------------------------------------------- embeddings


@st.composite
def embedding_args(draw, dt):
    """weight (V 1..6, D 0..4) of dtype dt and indices of rank 0..3 in range
    (out-of-range indices raise IndexError in PyTorch, not an op error)."""
    v, d = draw(st.integers(1, 6)), draw(st.integers(0, 4))
    g = _gen(draw(seeds))
    return draw(tensors(dt, (v, d))), torch.randint(0, v, draw(shapes(0, 3)), generator=g)


@st.composite
def bag_args(draw):
    """weight (V, D), 1-d indices, offsets into them (sorted, the first 0 but now
    and then 1: an error), per-sample weights, 2-d indices (equal bags), and the
    offsets with the number of indices appended, for include_last_offset (PyTorch
    1.13 requires that last offset and corrupts its heap without it)."""
    v, d, n = draw(st.integers(1, 6)), draw(st.integers(0, 4)), draw(st.integers(0, 8))
    g = _gen(draw(seeds))
    bags = draw(st.integers(1, 4))  # include_last_offset: one offset is no bag
    offsets = torch.sort(torch.randint(0, n + 1, (bags,), generator=g))[0]
    offsets[0] = 1 if rare(draw) and n else 0
    return (draw(tensors(F32, (v, d))), torch.randint(0, v, (n,), generator=g), offsets,
            draw(tensors(F32, (n,))), torch.randint(0, v, tuple(_sizes(draw, 2, 0, 3)), generator=g),
            torch.cat([offsets, torch.tensor([n])]))


def _embedding_bag(w, i, o, psw, i2, ol):
    return (F.embedding_bag(i, w, o), F.embedding_bag(i, w, o, mode="sum", per_sample_weights=psw),
            F.embedding_bag(i, w, o, mode="max"), F.embedding_bag(i, w, ol, mode="sum", include_last_offset=True),
            F.embedding_bag(i2, w, mode="max"), F.embedding_bag(i2, w, mode="sum", padding_idx=0))


def _embedding_bag_raw(w, i, o, psw, i2, ol):
    return (torch._embedding_bag(w, i, o, False, 0)[0], torch._embedding_bag(w, i, o, False, 1)[0],
            torch._embedding_bag(w, i, o, False, 2)[0], torch._embedding_bag(w, i, ol, False, 0, False, psw, True)[0])


# ---------------------------------------------------------------- interpolation


def upsample(nd, *calls, **kw):
    """F.interpolate(x, **call) for each call, on batched (N, C, *spatial 0..5) inputs."""
    def fn(x):
        return tuple(F.interpolate(x, **c) for c in calls)
    return Case(fn, lambda dt: st.tuples(feature(dt, nd, hi=5, unbatched=False)), **kw)


# ---------------------------------------------------------------- padding


def _pad(x):
    v = 1.5 if x.is_floating_point() else 1
    out = [F.pad(x, (1, 2)), F.pad(x, (2, -1, 0, 1)[:2 * min(x.dim(), 2)], value=v)]
    if x.is_floating_point():  # reflect, replicate, circular: float only (PyTorch's kernels), 1d/2d/3d by rank
        m = {2: 1, 3: 1, 4: 2, 5: 3}.get(x.dim())
        if m:
            out += [F.pad(x, (1, 0, 1, 1, 0, 2)[:2 * m], mode="reflect"), F.pad(x, (0, 2, 1, 0, 1, 1)[:2 * m], mode="replicate"),
                    F.pad(x, (1, 2, 0, 1, 1, 0)[:2 * m], mode="circular")]
        if m == 1:  # a side cropped while the other grows (the kept range is copied, the borders selected)
            out += [F.pad(x, (-1, 2), mode="circular"), F.pad(x, (2, -1), mode="replicate"),
                    F.pad(x, (-1, 1), mode="reflect")]
    return tuple(out)


def _constant_pad(x):
    return (torch.constant_pad_nd(x, (1, 2)[:2 * min(x.dim(), 1)], 2),
            torch.constant_pad_nd(x, (0, -1, 1, 1)[:2 * min(x.dim(), 2)]))


def pad_nd(op, nd, pads):
    """op(x, pads) on (N, C, *spatial 0..4) or unbatched inputs (pads too large for small sizes: errors)."""
    return Case(lambda x: op(x, pads), lambda dt: st.tuples(feature(dt, nd, hi=4)))


# ---------------------------------------------------------------- shuffles, fold


@st.composite
def shuffled(draw, dt, c_mult=1, hw_mult=1, cdim=-3, lo=0, odd=True):
    """x (..., C, H, W) of rank 3..5, C (dim cdim) c_mult times lo..3 and the last two
    sizes multiples of hw_mult (now and then not, and C not without odd); with lo=1 no dim is 0."""
    rank = draw(st.integers(3, 5))
    s = _sizes(draw, rank, lo, 4)
    s[cdim] = c_mult * draw(st.integers(lo, 3)) + (rare(draw) if c_mult > 1 and odd else 0)
    s[-2], s[-1] = hw_mult * s[-2] + (rare(draw) if hw_mult > 1 else 0), hw_mult * s[-1]
    return (draw(tensors(dt, tuple(s))),)


@st.composite
def fold_args(draw):
    """Inputs of F.fold for output (4, 5), kernel 2 (12 blocks) and for output (3, 6),
    kernel (1, 2), padding (0, 1), stride (1, 2) (12 blocks); now and then a block too many."""
    n, c = draw(st.integers(0, 2)), draw(st.integers(1, 3))
    return (draw(tensors(F32, (n, c * 4, 12 + rare(draw)))), draw(tensors(F32, (n, c * 2, 12))))


def _fold(x, y):
    return F.fold(x, (4, 5), 2), F.fold(y, (3, 6), (1, 2), 1, (0, 1), (1, 2))


def _unfold(x):
    return F.unfold(x, 2), F.unfold(x, (2, 3), (1, 2), (1, 0), (2, 1))


# ---------------------------------------------------------------- activations, linear layers, distances


@st.composite
def prelu_args(draw):
    """x (rank 0..4) and a weight of one value or one per channel (dim 1; now and then one too many)."""
    x = draw(tensors(F32, draw(shapes(0, 4))))
    c = x.shape[1] if x.dim() > 1 and draw(st.booleans()) else 1
    return x, draw(tensors(F32, (c + rare(draw),)))


@st.composite
def glu_args(draw):
    """x (rank 1..4) with even first and last sizes (now and then odd)."""
    s = list(draw(shapes(1, 4)))
    s[0], s[-1] = 2 * (s[0] // 2) + rare(draw), 2 * (s[-1] // 2)
    return (draw(tensors(F32, tuple(s))),)


@st.composite
def linear_args(draw, bilinear=False):
    """x (*, in) of rank 1..3, (x2 (*, in2),) weight, bias; `in` now and then mismatched."""
    lead = draw(shapes(0, 2))
    i, j, o = draw(st.integers(0, 4)), draw(st.integers(0, 4)), draw(st.integers(0, 4))
    x = draw(tensors(F32, lead + (i + rare(draw),)))
    if bilinear:
        return (x, draw(tensors(F32, lead + (j,))), draw(tensors(F32, (o, i, j))), draw(tensors(F32, (o,))))
    return x, draw(tensors(F32, (o, i))), draw(tensors(F32, (o,)))


@st.composite
def distance_pair(draw):
    """a, b broadcasting (now and then b's last size off by one)."""
    a, b = draw(broadcast_pair(F32, F32))
    if rare(draw) and b.dim():
        b = draw(tensors(F32, b.shape[:-1] + (b.shape[-1] + 2,)))
    return a, b


@st.composite
def cdist_pair(draw):
    """x1 [..., P, M] and x2 [..., R, M] with batch dims that broadcast; P or R
    over 25 now and then (PyTorch's matrix-product path for p = 2), now and
    then M off by one (refused)."""
    rows = st.one_of(st.integers(0, 6), st.integers(26, 30))
    m = draw(st.integers(1, 5))
    batch = draw(st.sampled_from([(), (2,), (3, 1)]))
    other = tuple(d if draw(st.booleans()) else 1 for d in batch)
    m2 = m + 1 if rare(draw) else m
    return draw(tensors(F32, batch + (draw(rows), m))), draw(tensors(F32, other + (draw(rows), m2)))


def _cdist(a, b):
    # p = 2 through a matrix product keeps |a|^2 + |b|^2 - 2ab, whose rounding
    # (about 1e-7 of |a|^2) a square root near 0 magnifies: the case's atol
    return (torch.cdist(a, b), torch.cdist(a, b, 1.0), torch.cdist(a, b, 0.0), torch.cdist(a, b, float("inf")),
            torch.cdist(a, b, 3.0), torch.cdist(a, b, 2.0, "use_mm_for_euclid_dist"),
            torch.cdist(a, b, 2.0, "donot_use_mm_for_euclid_dist"))


@st.composite
def signals(draw, dt):
    """A batch of signals [B, L] or one [L], now and then shorter than the frame (refused)."""
    length = draw(st.integers(12, 40)) if not rare(draw) else draw(st.integers(0, 7))
    batch = (draw(st.integers(1, 3)),) if draw(st.booleans()) else ()
    return (draw(tensors(dt, batch + (length,))),)


def _stft(x):
    # magnitudes (what llga computes: it has no complex tensors), a power, a real/imaginary pair
    w = torch.hann_window(8)
    return (torch.stft(x, 8, 2, window=w, return_complex=True).abs(),
            torch.stft(x, 12, 3, 10, torch.hamming_window(10), normalized=True, onesided=False,
                       return_complex=True).abs() ** 2,
            torch.stft(x, 8, return_complex=True).abs(),  # no window: ones; hop n_fft / 4
            torch.stft(x, 8, 5, window=w, return_complex=False))


def _norm(x):
    return (torch.norm(x, 3), torch.norm(x, 1, -1), torch.norm(x, 0.5, 0, True), torch.norm(x, float("inf"), -1),
            torch.norm(x, 0, -1), torch.norm(x, -2, -1))


def _vector_norm(x):
    vn = torch.linalg.vector_norm
    return (vn(x), vn(x, 3.5, -1), vn(x, 1, 0, True), vn(x, float("inf"), -1), vn(x, float("-inf")), vn(x, 0, -1))


@st.composite
def grid_args(draw):
    """x (N, C, *spatial 1..4) of 2 or 3 spatial dims and a grid (N, *out 0..3, nd) in
    [-1.3, 1.3] (now and then for one image too many)."""
    nd = draw(st.integers(2, 3))
    x = draw(feature(F32, nd, lo=1, hi=4, unbatched=False))
    g = (torch.rand(x.shape[0] + rare(draw), *_sizes(draw, nd, 0, 3), nd, generator=_gen(draw(seeds))) - 0.5) * 2.6
    return x, draw(relayout(g))


def _grid_sample(x, g):
    out = []
    for mode in ("bilinear", "nearest") + (("bicubic",) if x.dim() == 4 else ()):
        for pad in ("zeros", "border", "reflection"):
            out.append(F.grid_sample(x, g, mode, pad, align_corners=mode == "nearest"))
    out.append(F.grid_sample(x, g, "bilinear", "zeros", align_corners=True))
    return tuple(out)


# ---------------------------------------------------------------- recurrent layers, attention, encoder


def _frozen(m):
    return m.eval().requires_grad_(False)


torch.manual_seed(0)
_LSTM = (_frozen(torch.nn.LSTM(3, 4, 2, batch_first=True, bidirectional=True)), _frozen(torch.nn.LSTM(3, 4, proj_size=2)))
_GRU = (_frozen(torch.nn.GRU(3, 4, 2, batch_first=True, bidirectional=True)), _frozen(torch.nn.GRU(3, 4, bias=False)))
_RNN_TANH = (_frozen(torch.nn.RNN(3, 4, 2, batch_first=True, bidirectional=True)), _frozen(torch.nn.RNN(3, 4)))
_RNN_RELU = (_frozen(torch.nn.RNN(3, 4, 2, nonlinearity="relu", batch_first=True, bidirectional=True)),
             _frozen(torch.nn.RNN(3, 4, nonlinearity="relu")))
_PACKED = _frozen(torch.nn.LSTM(3, 4, batch_first=True, bidirectional=True))
_MHA = _frozen(torch.nn.MultiheadAttention(8, 2, batch_first=True))
_LAYER = _frozen(torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True))
_LAYER_GELU = _frozen(torch.nn.TransformerEncoderLayer(8, 2, 16, activation="gelu", batch_first=True))
_ENCODER = _frozen(torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), 2,
                                               enable_nested_tensor=True))
# PyTorch warns once per process (TORCH_WARN_ONCE) that nested tensors are a prototype: spent here, so that
# the first example of the encoder cases does not expect a warning the later ones do not
with torch.no_grad(), warnings.catch_warnings():
    warnings.simplefilter("ignore")
    _ENCODER(torch.zeros(1, 2, 8), src_key_padding_mask=torch.tensor([[False, True]]))


@st.composite
def rnn_args(draw, hidden):
    """x (T 1..4, B 0..3, 3) or unbatched (T, 3) (T = 0 now and then, and now and then
    4 features: errors) and initial states (1, B, h) for each h in `hidden`."""
    t = 0 if rare(draw) else draw(st.integers(1, 4))
    b = [draw(st.integers(0, 3))] if draw(st.integers(0, 3)) else []
    x = draw(tensors(F32, (t, *b, 3 + rare(draw))))
    return (x,) + tuple(draw(tensors(F32, (1, *b, h))) for h in hidden)


def _recurrent(modules):
    def fn(x, *h):
        return modules[0](x), modules[1](x, h[0] if len(h) == 1 else h)
    return fn


def rnn(modules, hidden=(4,)):
    # oneDNN's RNN primitives accumulate in another order
    return Case(_recurrent(modules), lambda dt: rnn_args(hidden), rtol=1e-4, atol=1e-4)


@st.composite
def packed_args(draw):
    """x (B 1..3, T 1..4, 3), lengths 1..T (now and then 0 or T + 1: errors) and initial states (2, B, 4)
    (given, since the LSTM's default zeros take the batch size from the packed batch sizes, a constant in the trace)."""
    b, t = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    lengths = torch.randint(1, t + 1, (b,), generator=_gen(draw(seeds)))
    if rare(draw):
        lengths[0] = draw(st.sampled_from([0, t + 1]))
    return draw(tensors(F32, (b, t, 3))), lengths, draw(tensors(F32, (2, b, 4))), draw(tensors(F32, (2, b, 4)))


def _packed(x, lengths, h0, c0):
    p = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    out, (h, c) = _PACKED(p, (h0, c0))
    y, n = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True, padding_value=-1.0)
    return y, n, h, c


@st.composite
def attention_args(draw):
    """q (B 1..3, L 1..5, 8) and a key padding mask (B, L), now and then with a fully padded row."""
    b, n = draw(st.integers(1, 3)), draw(st.integers(1, 5))
    mask = torch.rand(b, n, generator=_gen(draw(seeds))) < 0.3
    if rare(draw):
        mask[0] = True
    return draw(tensors(F32, (b, n, 8))), mask


def _attention(q, m):
    return (_MHA(q, q, q, need_weights=False)[0], _MHA(q, q, q, key_padding_mask=m, need_weights=False)[0],
            _MHA(q, q, q, key_padding_mask=m), _MHA(q, q, q, need_weights=True, average_attn_weights=False))


def _encoder_layer(q, m):
    return _LAYER(q), _LAYER(q, src_key_padding_mask=m), _LAYER_GELU(q)


@st.composite
def left_aligned(draw):
    """q (B 1..3, L 1..5, 8) and a padding mask with each row's padding at its end
    (the nested path's condition, checked at trace time only; now and then a fully padded row)."""
    b, n = draw(st.integers(1, 3)), draw(st.integers(1, 5))
    lengths = [draw(st.integers(0 if rare(draw) else 1, n)) for _ in range(b)]
    mask = torch.arange(n)[None, :] >= torch.tensor(lengths)[:, None]
    return draw(tensors(F32, (b, n, 8))), mask


def _encoder(q, m):
    return _ENCODER(q, src_key_padding_mask=m)


# ---------------------------------------------------------------- tensor methods


@st.composite
def weight_norm_args(draw):
    """v (rank 1..4, first size >= 1), g (v.shape[0], 1, ...) and a 0-dim g."""
    s = list(draw(shapes(1, 4)))
    s[0] = max(s[0], 1)
    return (draw(tensors(F32, tuple(s))), draw(tensors(F32, (s[0],) + (1,) * (len(s) - 1))), draw(tensors(F32, ())))


def _weight_norm(v, g, g0):
    return torch._weight_norm(v, g, 0), torch._weight_norm(v, g0, -1)


@st.composite
def copy_args(draw):
    """a, b with b broadcasting to a (now and then the other way round: an error)."""
    a, b = draw(broadcast_pair(F32, F32))
    if a.dim() < b.dim() or (a.dim() == b.dim() and a.numel() < b.numel()):
        a, b = b, a
    if rare(draw):
        a, b = b, a
    return a, b


def _copy(a, b):
    return a.clone().copy_(b), torch.zeros_like(a).copy_(b > 0), a.clone().copy_(b.to(torch.int64)), torch.empty_like(a).copy_(a)


def _to(x):
    return (x.to(torch.int64), x.to(torch.float32), x.to(torch.bool), x.to(torch.float32).to(x.dtype),
            x.to(x.dtype, copy=True))


@st.composite
def rounded(draw):
    """x with repeated values (rounded, halved): unique's input."""
    return (draw(tensors(F32, None)).round() / 2,)


def _unique(x):
    return (torch.unique(x), torch.unique(x, return_inverse=True), torch.unique(x, return_counts=True),
            torch.unique(x, return_inverse=True, return_counts=True))


def _new_empty(x):
    return (x.new_empty(x.shape).fill_(2.5) + x, x.new_empty((x.numel(), 2), dtype=torch.int64).fill_(3),
            x.new_empty(0), x.new_empty((2, 0, 3)))


CASES = {
    # convolution
    "aten::_convolution": conv(lambda x, w, b: (F.conv2d(x, w, b, 2, 1, 1, 2), F.conv2d(x, w, None, (1, 2), 0, (2, 1), 2)),
                               2, groups=2, script=False),
    "aten::_convolution_mode": conv(lambda x, w, b: (F.conv2d(x, w, b, 1, "same", 2), F.conv2d(x, w, None, 1, "valid")),
                                    2, script=False),
    "aten::conv1d": conv(_conv1d, 1),
    "aten::conv2d": conv(_conv2d, 2, groups=2),
    "aten::conv3d": conv(_conv3d, 3),
    "aten::conv_transpose1d": conv(_conv_transpose1d, 1, transposed=True),
    "aten::conv_transpose2d": conv(_conv_transpose2d, 2, groups=2, transposed=True),
    "aten::conv_transpose3d": conv(_conv_transpose3d, 3, transposed=True),
    # pooling
    "aten::avg_pool1d": pool(lambda x: (F.avg_pool1d(x, 3, 2, 1, True, False), F.avg_pool1d(x, 2)), 1),
    "aten::avg_pool2d": pool(lambda x: (F.avg_pool2d(x, 3, 2, 1, True, True), F.avg_pool2d(x, (2, 3), (1, 2), (1, 0), False, False),
                                        F.avg_pool2d(x, 2, divisor_override=3)), 2),
    "aten::avg_pool3d": pool(lambda x: (F.avg_pool3d(x, 2, 1, 1, True, False), F.avg_pool3d(x, (1, 2, 2), divisor_override=2)), 3),
    "aten::max_pool1d": pool(lambda x: (F.max_pool1d(x, 3, 2, 1, 2, True), F.max_pool1d(x, 2)), 1),
    "aten::max_pool2d": pool(lambda x: (F.max_pool2d(x, 3, 2, 1, 1, True), F.max_pool2d(x, (2, 1), (1, 2), 0, (1, 2))), 2),
    "aten::max_pool3d": pool(lambda x: (F.max_pool3d(x, 2, 1, 1, 1, True), F.max_pool3d(x, (1, 2, 2), dilation=(2, 1, 1))), 3),
    "aten::max_pool1d_with_indices": pool(lambda x: F.max_pool1d(x, 3, 2, 1, 2, True, True) + F.max_pool1d(x, 2, return_indices=True), 1),
    # float32 draws for int64 too: PyTorch rejects every int64 input, so those draws would check nothing, and
    # the kind's KNOWN_BUGS entry (a strict xfail for each dtype) needs the bug to show under int64 as well
    "aten::max_pool2d_with_indices": Case(lambda x: F.max_pool2d(x, 3, 2, 1, 1, True, True) +
                                          F.max_pool2d(x, (2, 1), (1, 2), 0, (1, 2), return_indices=True),
                                          lambda dt: st.tuples(feature(F32, 2))),
    "aten::max_pool3d_with_indices": pool(lambda x: F.max_pool3d(x, 2, 1, 1, 1, True, True) +
                                          F.max_pool3d(x, (1, 2, 2), dilation=(2, 1, 1), return_indices=True), 3),
    "aten::adaptive_avg_pool1d": pool(lambda x: (F.adaptive_avg_pool1d(x, 3), F.adaptive_avg_pool1d(x, 1)), 1),
    "aten::adaptive_avg_pool2d": pool(lambda x: (F.adaptive_avg_pool2d(x, (2, 3)), F.adaptive_avg_pool2d(x, (None, 1))), 2),
    "aten::adaptive_avg_pool3d": pool(lambda x: (F.adaptive_avg_pool3d(x, (2, 1, 3)), F.adaptive_avg_pool3d(x, 1)), 3),
    "aten::adaptive_max_pool1d": pool(lambda x: F.adaptive_max_pool1d(x, 3, True) + (F.adaptive_max_pool1d(x, 1),), 1),
    "aten::adaptive_max_pool2d": pool(lambda x: F.adaptive_max_pool2d(x, (2, 3), True) + (F.adaptive_max_pool2d(x, (None, 1)),), 2),
    "aten::adaptive_max_pool3d": pool(lambda x: F.adaptive_max_pool3d(x, (2, 1, 3), True) + (F.adaptive_max_pool3d(x, 1),), 3),
    "aten::fractional_max_pool2d": Case(_fractional2d, lambda dt: fractional_args(2)),
    "aten::fractional_max_pool3d": Case(_fractional3d, lambda dt: fractional_args(3)),
    "aten::max_unpool2d": Case(_unpool2d, lambda dt: unpool_args(dt, 2)),
    "aten::max_unpool3d": Case(_unpool3d, lambda dt: unpool_args(dt, 3)),
    # normalisation
    "aten::batch_norm": Case(_batch_norm, lambda dt: norm_args()),
    # atol 1e-3: an instance, group (or row) of one value normalises x - mean(x) = 0, which PyTorch's float mean leaves
    # a few ulp off, times 1/sqrt(eps) = 316 (F.layer_norm(tensor([[4.623]]), (1, 1)): -4.05e-5 for llga's 0)
    "aten::instance_norm": Case(_instance_norm, lambda dt: norm_args(3, batch_lo=1), atol=1e-3),
    "aten::group_norm": Case(_group_norm, lambda dt: norm_args(even=True), atol=1e-3),
    "aten::layer_norm": Case(_layer_norm, lambda dt: layer_norm_args(), atol=1e-3),
    # embeddings
    "aten::embedding": Case(lambda w, i: (F.embedding(i, w), F.embedding(i, w, padding_idx=0)), embedding_args),
    "aten::embedding_bag": Case(_embedding_bag, lambda dt: bag_args()),
    "aten::_embedding_bag": Case(_embedding_bag_raw, lambda dt: bag_args()),
    # interpolation
    "aten::upsample_nearest1d": upsample(1, dict(scale_factor=2), dict(size=5), dict(scale_factor=0.6)),
    "aten::upsample_nearest2d": upsample(2, dict(scale_factor=(2, 1.5)), dict(size=(3, 4)), dict(scale_factor=0.7)),
    "aten::upsample_nearest3d": upsample(3, dict(scale_factor=(2, 1, 1.5)), dict(size=(2, 3, 1))),
    "aten::_upsample_nearest_exact1d": upsample(1, dict(scale_factor=2, mode="nearest-exact"), dict(size=5, mode="nearest-exact"),
                                                dict(scale_factor=0.6, mode="nearest-exact")),
    "aten::_upsample_nearest_exact2d": upsample(2, dict(scale_factor=(2, 1.5), mode="nearest-exact"),
                                                dict(size=(3, 4), mode="nearest-exact")),
    "aten::_upsample_nearest_exact3d": upsample(3, dict(scale_factor=(2, 1, 1.5), mode="nearest-exact"),
                                                dict(size=(2, 3, 1), mode="nearest-exact")),
    "aten::upsample_linear1d": upsample(1, dict(scale_factor=2, mode="linear"), dict(size=5, mode="linear", align_corners=True),
                                        dict(scale_factor=0.6, mode="linear", align_corners=False)),
    "aten::upsample_bilinear2d": upsample(2, dict(scale_factor=(2, 1.5), mode="bilinear"),
                                          dict(size=(3, 4), mode="bilinear", align_corners=True),
                                          dict(scale_factor=0.7, mode="bilinear", recompute_scale_factor=True)),
    "aten::upsample_bicubic2d": upsample(2, dict(scale_factor=(2, 1.5), mode="bicubic"),
                                         dict(size=(3, 4), mode="bicubic", align_corners=True)),
    # antialiased: shrinking by 0.3-0.7 (filters over several pixels), growing, sizes, align_corners
    "aten::_upsample_bilinear2d_aa": upsample(2, dict(scale_factor=(0.3, 0.7), mode="bilinear", antialias=True),
                                              dict(scale_factor=(2, 1.5), mode="bilinear", antialias=True),
                                              dict(size=(2, 3), mode="bilinear", antialias=True, align_corners=True)),
    "aten::_upsample_bicubic2d_aa": upsample(2, dict(scale_factor=(0.3, 0.7), mode="bicubic", antialias=True),
                                             dict(scale_factor=(2, 1.5), mode="bicubic", antialias=True),
                                             dict(size=(2, 3), mode="bicubic", antialias=True, align_corners=True)),
    "aten::upsample_trilinear3d": upsample(3, dict(scale_factor=(2, 1, 1.5), mode="trilinear"),
                                           dict(size=(2, 3, 1), mode="trilinear", align_corners=True)),
    # padding
    "aten::pad": Case(_pad, lambda dt: st.tuples(tensors(dt, None))),
    "aten::constant_pad_nd": Case(_constant_pad, lambda dt: st.tuples(tensors(dt, None))),
    "aten::reflection_pad1d": pad_nd(torch._C._nn.reflection_pad1d, 1, (1, 2)),
    "aten::reflection_pad2d": pad_nd(torch._C._nn.reflection_pad2d, 2, (1, 0, 2, 1)),
    "aten::reflection_pad3d": pad_nd(torch._C._nn.reflection_pad3d, 3, (1, 0, 0, 1, 1, 1)),
    "aten::replication_pad1d": pad_nd(torch._C._nn.replication_pad1d, 1, (1, 2)),
    "aten::replication_pad2d": pad_nd(torch._C._nn.replication_pad2d, 2, (1, 0, 2, 1)),
    "aten::replication_pad3d": pad_nd(torch._C._nn.replication_pad3d, 3, (1, 0, 0, 2, 1, 1)),
    # shuffles, fold
    "aten::pixel_shuffle": Case(lambda x: F.pixel_shuffle(x, 2), lambda dt: shuffled(dt, c_mult=4)),
    # non-empty inputs: PyTorch 1.13's pixel_unshuffle returns an empty input unchanged (F.pixel_unshuffle(
    # ones(1, 1, 0, 2), 2) has size (1, 1, 0, 2), not (1, 4, 0, 1), which llga gives; pixel_shuffle is right)
    "aten::pixel_unshuffle": Case(lambda x: F.pixel_unshuffle(x, 2), lambda dt: shuffled(dt, hw_mult=2).filter(
        lambda a: a[0].numel())),
    "aten::channel_shuffle": Case(lambda x: F.channel_shuffle(x, 2), lambda dt: shuffled(dt, c_mult=2, cdim=1)),
    # PyTorch 1.13 itself dies of SIGFPE in native_channel_shuffle (under no_grad) when N is 0 or C is less
    # than the groups: torch.native_channel_shuffle(torch.ones(1, 2, 2, 2), 3), ones(0, 3, 1, 3),
    # ones(1, 0, 1, 3); those are not drawn, nor is a C that is not a multiple of the groups: PyTorch checks
    # none and returns garbage (ones(1, 4, 1) -> channels [0, 1, 2, 0]) where llga raises
    "aten::native_channel_shuffle": Case(lambda x: torch.native_channel_shuffle(x, 3),
                                         lambda dt: shuffled(dt, c_mult=3, cdim=1, lo=1, odd=False)),
    "aten::im2col": pool(_unfold, 2),
    "aten::col2im": Case(_fold, lambda dt: fold_args()),
    # activations with weights, dropout in eval
    "aten::prelu": Case(F.prelu, lambda dt: prelu_args()),
    "aten::glu": Case(lambda x: (F.glu(x, -1), F.glu(x, 0)), lambda dt: glu_args()),
    "aten::rrelu": unary(lambda x: (F.rrelu(x, 0.1, 0.3, False), torch.rrelu(x), F.rrelu(x.clone(), inplace=True))),
    "aten::dropout": unary(lambda x: (F.dropout(x, 0.3, False), torch.dropout(x, 0.5, False) * 2)),
    # quantization-aware training's fake quantization (and what llga makes of FX's quantize -> dequantize)
    "aten::fake_quantize_per_tensor_affine": unary(lambda x: (
        torch.fake_quantize_per_tensor_affine(x, 0.037, 5, 0, 255),
        torch.fake_quantize_per_tensor_affine(x, 0.01, 0, -128, 127))),
    "aten::fake_quantize_per_channel_affine": Case(
        lambda x: torch.fake_quantize_per_channel_affine(
            x, torch.tensor([0.02, 0.05, 0.1]), torch.tensor([0, 3, -2], dtype=torch.int32), 1, -128, 127),
        lambda dt: st.tuples(st.lists(st.integers(0, 4), max_size=2).flatmap(lambda rest: tensors(dt, [2, 3] + rest)))),
    "aten::feature_dropout": unary(lambda x: torch.feature_dropout(x, 0.3, False) * 2),
    "aten::alpha_dropout": unary(lambda x: F.alpha_dropout(x, 0.3, False) * 2),
    "aten::feature_alpha_dropout": unary(lambda x: F.feature_alpha_dropout(x, 0.3, False) * 2),
    # linear layers, distances, norms
    "aten::linear": Case(lambda x, w, b: (F.linear(x, w, b), F.linear(x, w)), lambda dt: linear_args()),
    "aten::bilinear": Case(lambda x, y, w, b: (F.bilinear(x, y, w, b), F.bilinear(x, y, w)),
                           lambda dt: linear_args(bilinear=True)),
    "aten::cosine_similarity": Case(lambda a, b: (F.cosine_similarity(a, b, -1), F.cosine_similarity(a, b, 0, 1e-3)),
                                    lambda dt: distance_pair()),
    "aten::pairwise_distance": Case(lambda a, b: (F.pairwise_distance(a, b), F.pairwise_distance(a, b, 1.0, 1e-6, True),
                                                  F.pairwise_distance(a, b, 3.0, 0.1)), lambda dt: distance_pair()),
    "aten::cdist": Case(_cdist, lambda dt: cdist_pair(), atol=2e-3),
    "aten::stft": Case(_stft, lambda dt: signals(dt), atol=1e-4),
    "aten::norm": unary(_norm),
    "aten::linalg_vector_norm": unary(_vector_norm),
    # x.norm(dim=...) with the default p, on a transposed view too
    "aten::frobenius_norm": unary(lambda x: (x.norm(dim=-1), x.transpose(0, -1).norm(dim=[0], keepdim=True))),
    "aten::grid_sampler": Case(_grid_sample, lambda dt: grid_args()),
    # recurrent layers, attention, encoder
    "aten::lstm": rnn(_LSTM, (2, 4)),
    "aten::gru": rnn(_GRU),
    "aten::rnn_tanh": rnn(_RNN_TANH),
    "aten::rnn_relu": rnn(_RNN_RELU),
    "aten::_pack_padded_sequence": Case(_packed, lambda dt: packed_args(), rtol=1e-4, atol=1e-4, kinds=("aten::lstm",)),
    "aten::_pad_packed_sequence": Case(_packed, lambda dt: packed_args(), rtol=1e-4, atol=1e-4),
    "aten::_native_multi_head_attention": Case(_attention, lambda dt: attention_args(), rtol=1e-4, atol=1e-4),
    "aten::_transformer_encoder_layer_fwd": Case(_encoder_layer, lambda dt: attention_args(), rtol=1e-4, atol=1e-4),
    "aten::_nested_tensor_from_mask": Case(_encoder, lambda dt: left_aligned(), rtol=1e-4, atol=1e-4),
    "aten::to_padded_tensor": Case(_encoder, lambda dt: left_aligned(), rtol=1e-4, atol=1e-4),
    # tensor methods
    "aten::_weight_norm": Case(_weight_norm, lambda dt: weight_norm_args()),
    "aten::clone": unary(lambda x: (x.clone(), x.clone(memory_format=torch.contiguous_format))),
    "aten::contiguous": unary(lambda x: (x.contiguous(), x.transpose(0, -1).contiguous() if x.dim() else x.contiguous())),
    "aten::detach": unary(lambda x: (x.detach(), x.detach() * 2)),
    "aten::copy_": Case(_copy, lambda dt: copy_args()),
    "aten::to": unary(_to),
    "aten::type_as": Case(lambda x, y: (x.type_as(y), y.type_as(x), x.type_as(x)),
                          lambda dt: st.tuples(tensors(dt), tensors(torch.int64))),
    "aten::new_empty": unary(_new_empty),
    "aten::new_full": unary(lambda x: (x.new_full(x.shape, 2.5) + x, x.new_full((2, x.numel()), 3, dtype=torch.int64),
                                       x.new_full((), -1.0))),
    "aten::_unique2": Case(_unique, lambda dt: rounded()),
}
