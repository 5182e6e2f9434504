"""Differential cases for torchvision's detection ops (nms, batched_nms,
roi_align, roi_pool, ps_roi_align, ps_roi_pool, deform_conv2d) against
torchvision's CPU kernels: random boxes (overlapping, degenerate, partly
outside the image, duplicate scores), any number of them including none,
several images per batch, both roi_align conventions and sampling ratios."""

import torch
from hypothesis import strategies as st
from torchvision import ops

from differential_common import Case


@st.composite
def boxes(draw, n=None, size=32.0):
    n = draw(st.integers(0, 40)) if n is None else n
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    xy = torch.rand(n, 2, generator=g) * size * 1.2 - size * 0.1
    wh = torch.rand(n, 2, generator=g) * size * draw(st.sampled_from([0.05, 0.5, 1.0]))
    b = torch.cat([xy, xy + wh], 1)
    if n and draw(st.booleans()):
        b[n // 2] = b[0]  # an exact duplicate
    return b


@st.composite
def scored(draw):
    b = draw(boxes())
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    s = torch.rand(b.shape[0], generator=g)
    if draw(st.booleans()):
        s = (s * 4).round() / 4  # ties
    return b, s, torch.randint(0, 3, (b.shape[0],), generator=g)


@st.composite
def image_rois(draw, channels=(2, 8)):
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    n, c = draw(st.integers(1, 2)), draw(st.sampled_from(channels))
    h, w = draw(st.integers(3, 12)), draw(st.integers(3, 12))
    x = torch.randn(n, c, h, w, generator=g)
    b = draw(boxes(size=float(max(h, w)) * 2))
    idx = torch.randint(0, n, (b.shape[0], 1), generator=g).float()
    return x, torch.cat([idx, b], 1)


@st.composite
def deform_inputs(draw):
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    n, h, w = draw(st.integers(1, 2)), draw(st.integers(4, 9)), draw(st.integers(4, 9))
    x = torch.randn(n, 4, h, w, generator=g)
    weight = torch.randn(6, 2, 3, 3, generator=g)  # two weight groups
    oh, ow = (h + 2 - 3) // 2 + 1, (w + 4 - 5) // 1 + 1  # stride (2, 1), padding (1, 2), dilation (1, 2)
    offset = torch.randn(n, 2 * 2 * 9, oh, ow, generator=g) * draw(st.sampled_from([0.5, 3.0]))
    mask = torch.rand(n, 2 * 9, oh, ow, generator=g)
    return x, weight, offset, mask, torch.randn(6, generator=g)


def _deform(x, weight, offset, mask, bias):
    return (ops.deform_conv2d(x, offset, weight, bias, (2, 1), (1, 2), (1, 2), mask),
            ops.deform_conv2d(x, offset, weight, None, (2, 1), (1, 2), (1, 2)))


CASES = {
    "torchvision::nms": Case(lambda b, s, i: (ops.nms(b, s, 0.5), ops.batched_nms(b, s, i, 0.3)),
                             lambda dt: scored()),
    "torchvision::roi_align": Case(lambda x, r: (ops.roi_align(x, r, (3, 2), 0.5, 0, False),
                                                 ops.roi_align(x, r, 2, 0.25, 2, True)),
                                   lambda dt: image_rois()),
    "torchvision::roi_pool": Case(lambda x, r: torch.ops.torchvision.roi_pool(x, r, 0.5, 3, 2), lambda dt: image_rois()),
    "torchvision::ps_roi_align": Case(lambda x, r: (torch.ops.torchvision.ps_roi_align(x, r, 0.5, 2, 2, 0),
                                                    torch.ops.torchvision.ps_roi_align(x, r, 0.7, 2, 2, 3)),
                                      lambda dt: image_rois(channels=(4, 8))),
    "torchvision::ps_roi_pool": Case(lambda x, r: torch.ops.torchvision.ps_roi_pool(x, r, 0.5, 2, 2),
                                     lambda dt: image_rois(channels=(4, 8))),
    "torchvision::deform_conv2d": Case(_deform, lambda dt: deform_inputs()),
}
