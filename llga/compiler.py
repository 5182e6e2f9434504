"""llga.optimize: from a TorchScript object (or IR text plus weights) to a
callable that runs on numpy arrays."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence

import numpy as np

from . import _llga
from ._llga import Graph
from .errors import InputError


class CompiledGraph:
    """A compiled graph: call it with numpy arrays (or CPU torch tensors).

    Inputs are used in place (no copy); outputs are numpy arrays over llga's
    buffers (no copy). The graph's return structure (tensor, tuple, list) is
    kept. Safe to call from several threads at once.
    """

    def __init__(self, graph: Graph, weights: Mapping[str, np.ndarray], passes=None):
        self.graph = graph
        self.passes = list(passes or [])  # PassRecord per pass of the pipeline
        self._weights = dict(weights)
        self._impl = _llga.CompiledGraphImpl(graph, self._weights)
        self._single = len(graph.outputs) == 1

    @property
    def input_names(self):
        return list(self._impl.input_names)

    @property
    def weight_bytes(self) -> int:
        return self._impl.weight_bytes

    def __call__(self, *inputs):
        args = [_to_numpy_if_torch(x, i) for i, x in enumerate(inputs)]
        out = self._impl.run(args)
        return out[0] if self._single else tuple(out)

    def __repr__(self):
        names = ", ".join(self.input_names)
        return f"<llga.CompiledGraph ({names}) -> {len(self.graph.outputs)} output(s)>"


def _has_module_input(graph: Graph) -> bool:
    return any(v.type.kind == "Class" for v in graph.inputs)


def _to_numpy_if_torch(x: Any, i: int):
    mod = type(x).__module__
    if mod.startswith("torch") and hasattr(x, "numpy") and hasattr(x, "detach"):
        if x.device.type != "cpu":
            raise InputError(f"input {i}: llga runs on the CPU, got a tensor on {x.device}")
        return x.detach().numpy()
    return x


def _load(obj, params: Optional[Mapping[str, Any]], module=None):
    weights: Dict[str, np.ndarray] = {}
    methods: Dict[str, Graph] = {}
    if module is not None:
        from ._torch import import_with_methods

        graph, weights, methods = import_with_methods(obj, module)
    elif isinstance(obj, Graph):
        graph = obj
    elif isinstance(obj, (str, bytes)):
        from . import parse

        graph = parse(obj)
    else:
        from ._torch import import_torch

        graph, weights = import_torch(obj)
    for name, value in (params or {}).items():
        arr = _to_numpy_if_torch(value, 0)
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"params[{name!r}] must be a numpy array or a torch tensor, got {type(value).__name__}")
        weights[name] = arr
    return graph, weights, methods


def optimize(obj, example_inputs: Optional[Sequence[Any]] = None, *,
             params: Optional[Mapping[str, Any]] = None, passes=None, module=None) -> CompiledGraph:
    """Compiles a TorchScript module/function/graph, IR text or an llga.Graph.

    ``passes`` chooses the pipeline (a comma-separated string or a list of
    pass names; None: the default, "" or []: none); ``compiled.passes`` holds
    a PassRecord per pass. The caller's graph is not modified.
    ``params`` supplies (or overrides) weights by name: qualified attribute
    paths (``layer1.0.conv1.weight``) or frozen constants' value names. With
    ``example_inputs``, the graph runs once so that shape-dependent work is
    done before the first real call, and propagate-shapes annotates every
    value with the shapes these inputs give.
    ``module``: with a ``torch._C.Graph`` that still calls submodules
    (``traced.graph``), the ScriptModule it belongs to; the inline pass then
    expands its ``prim::CallMethod`` calls.

    Raises :class:`llga.UnsupportedOpError` listing every op kind llga cannot
    run, and :class:`llga.CompileError` for missing or malformed weights.
    """
    from . import passes as _passes

    graph, weights, methods = _load(obj, params, module)
    graph = graph.copy()
    examples = None
    if example_inputs is not None:
        examples = [_to_numpy_if_torch(x, i) for i, x in enumerate(example_inputs)]
        if _has_module_input(graph):
            examples = None  # the module input has no example; shapes come from the graph's types
    records = _passes.run(graph, passes, weights, methods=methods, example_inputs=examples)
    compiled = CompiledGraph(graph, weights, records)
    if example_inputs is not None:
        compiled(*example_inputs)
    return compiled
