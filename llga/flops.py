"""FLOPs of a graph's convolutions and matrix products, from its types.

    total, uncounted = llga.flops.count(compiled.graph)

A multiply-add counts as 2 FLOPs. Only the heavy ops are counted (every
convolution and matmul family op, inside fusion groups too); elementwise ops,
norms and pooling are left out, as the usual model FLOP tables do. Ops whose
shapes the graph does not record are listed in ``uncounted`` rather than
guessed.
"""

from __future__ import annotations

import math
from typing import List, Optional, Sequence, Tuple

_CONV = {"aten::_convolution", "aten::conv1d", "aten::conv2d", "aten::conv3d"}
_CONV_T = {"aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d"}
_MATMUL = {"aten::matmul", "aten::mm", "aten::bmm", "aten::linear", "aten::addmm", "aten::baddbmm"}


def _sizes(value) -> Optional[Sequence[int]]:
    t = value.type
    if not t.is_tensor or t.sizes is None or any(s is None for s in t.sizes):
        return None
    return t.sizes


def _node_flops(node) -> Optional[int]:
    kind = node.kind
    out = _sizes(node.outputs[0])
    if out is None:
        return None
    if kind in _CONV or kind in _CONV_T:
        w = _sizes(node.inputs[1])
        x = _sizes(node.inputs[0])
        if w is None or x is None:
            return None
        transposed = kind in _CONV_T
        if kind == "aten::_convolution":
            flag = node.inputs[6].node
            transposed = flag.kind == "prim::Constant" and bool(flag.attributes.get("value", 0))
        # Each output (input, when transposed) element does a dot product over
        # (in channels / groups) x kernel, which is prod(w.shape[1:]).
        return 2 * math.prod(x if transposed else out) * math.prod(w[1:])
    if kind == "aten::linear":
        w = _sizes(node.inputs[1])
        return None if w is None else 2 * math.prod(out) * w[-1]
    if kind in _MATMUL:
        a = _sizes(node.inputs[1] if kind in ("aten::addmm", "aten::baddbmm") else node.inputs[0])
        return None if a is None or not a else 2 * math.prod(out) * a[-1]
    return 0


def _walk(graph):
    for node in graph.nodes(recursive=True):
        sub = node.subgraph
        if sub is not None:
            yield from _walk(sub)
        else:
            yield node


def count(graph) -> Tuple[int, List[str]]:
    """(FLOPs of one call, descriptions of heavy ops whose shapes are unknown)."""
    total, uncounted = 0, []
    for node in _walk(graph):
        if node.kind not in _CONV and node.kind not in _CONV_T and node.kind not in _MATMUL:
            continue
        f = _node_flops(node)
        if f is None:
            uncounted.append(f"{node.kind} at {node.source or '%' + node.outputs[0].name}")
        else:
            total += f
    return total, uncounted
