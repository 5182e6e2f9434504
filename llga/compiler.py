"""llga.optimize: from a TorchScript object (or IR text plus weights) to a
callable that runs on numpy arrays."""

from __future__ import annotations

import copy
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from . import _llga
from . import profiler as _profiler
from ._llga import Graph
from .errors import CompileError, InputError, SpecializationMismatch, UnsupportedOpError


class CompiledGraph:
    """A compiled graph: call it with numpy arrays (or CPU torch tensors).

    Inputs are used in place (no copy); outputs are numpy arrays over llga's
    buffers (no copy). The graph's return structure (tensor, tuple, list) is
    kept. Safe to call from several threads at once.
    """

    def __init__(self, graph: Graph, impl, passes):
        # Made by llga.optimize: the graph the passes left, the plan the
        # driver built over it (src/driver/compile.h), the pass records.
        self.graph = graph
        self.passes = passes  # a PassList: a PassRecord per pass (the pass viewer in Jupyter)
        # The plan holds the weights it reads (not this object: after the first
        # call, those used only in a primitive's layout are let go, see memory).
        self._impl = impl
        self._single = len(graph.outputs) == 1
        self._output_types = [v.type for v in graph.outputs]
        # Default values of trailing inputs (a scripted forward's `targets=None`,
        # `num_flow_updates: int = 12`), taken from its schema: [] when none.
        self._defaults: List[Any] = []
        # The precision used ("fp32" or "bf16") and why (llga.precision).
        self.precision = "fp32"
        self.precision_note = ""
        # Other specializations (specialize-inputs, observable-layouts), by the
        # inputs' ranks, dtypes and memory orders (_signature), most recent
        # last; at most MAX_SPECIALIZATIONS.
        self._respecialize = None
        self._built_for = None  # a specialization: the _signature of the inputs it was compiled for
        self._specializations: "OrderedDict[tuple, CompiledGraph]" = OrderedDict()
        self._specializations_lock = threading.Lock()
        # compiled.set_batch_split: "auto", "off" or items per chunk.
        self._batch_split_mode: Any = "auto"
        # Where a model loaded with llga.load came from (llga.model_file.SavedInfo); None otherwise.
        self.saved = None
        # The example inputs it was compiled with, as [(shape, numpy dtype name)]
        # (kept in a saved model's manifest); None when compiled without.
        self.example_inputs_spec = None

    def save(self, path) -> None:
        """Writes this compiled model to one file (``.llga``) that
        :func:`llga.load` reads back without PyTorch; see llga.model_file."""
        from . import model_file

        model_file.save(self, path)

    @property
    def input_names(self):
        return list(self._impl.input_names)

    @property
    def weight_bytes(self) -> int:
        return self._impl.weight_bytes

    @property
    def memory(self) -> Dict[str, Any]:
        """Bytes held: ``weights`` (plain weights bound to the plan, shared
        with the caller where they came from it), ``weight_cache`` (weights
        reordered into primitives' layouts), ``released`` (original weights
        let go after the first call because every reader uses only its
        reordered copy: the plan no longer holds them and ``self.graph``'s
        tensor constants keep only shape and dtype; memory returns to the
        system once the caller drops its own references too), ``peak_activations`` ({input signature such
        as "1x3x224x224:Float": the most activation bytes live at once during
        a call with it}; empty before the first call) and ``arena`` ({input
        signature: the memory planner's state}: ``bytes`` of the arena whose
        static offsets serve the call's intermediate buffers, ``blocks`` given
        an offset, ``heap_blocks`` left on the heap because they outlive the
        call (outputs), and how many calls were ``recorded`` (on the heap),
        ``planned`` (from the arena) or ``deviations`` from the plan,
        ``failed_calls`` (ended in an exception: the plan stays) and
        ``in_use_blocks`` (planned blocks handed out and not yet freed: 0
        between calls unless a buffer outlives its call); see
        ``llga.set_memory_planning``)."""
        return self._impl.memory()

    @property
    def batch_split(self) -> "BatchSplitInfo":
        """Whether and how calls with a batch of several items run as smaller
        chunks: ``proved`` (the batch-rows pass proved every item is computed
        alone: ``return[batch_dim=0]`` on the graph), ``why_not`` (the op that
        stopped the proof, from the pass's note, or why splitting stopped at
        run time), ``mode`` ("auto": the chunk measured fastest per batch
        size, "off", or a fixed chunk) and ``sizes`` ({batch size: the chunk
        chosen (0 while still measuring; the batch size itself: run whole)
        and the ns per item each chunk tried took}). Batches of 8 items or
        more are split: a batch size's first calls try the next chunk (1
        item, or 1/32 of the batch, then doubling up to the whole batch)
        until one is 15% slower per item than the best; with two threads or
        more, then the same chunks side by side, one per thread (``lanes``).
        A chunk is timed over calls until they measured 2 ms or 8 calls, and
        counts at its fastest (a fast model takes about 100 calls to settle,
        a slow one one call a chunk); every call computes its own inputs,
        none twice."""
        why = self._impl.batch_split_refused()
        if not self._impl.batch_split_proved:
            why = next((n.split(": ", 1)[1] for r in self.passes if r.name == "batch-rows" for n in r.notes
                        if n.startswith("not split by batch: ")), "the batch-rows pass did not run")
        sizes = {r.items: BatchSplitSize(r.items, r.chunk, dict(r.ns_per_item), r.lanes,
                                         dict(r.ns_per_item_side_by_side))
                 for r in self._impl.batch_split_reports()}
        return BatchSplitInfo(proved=self._impl.batch_split_proved, why_not=why, mode=self._batch_split_mode,
                              sizes=sizes)

    def set_batch_split(self, mode="auto") -> None:
        """How batches are split (see batch_split): "auto" (the default:
        measured per batch size), "off" (every call runs whole) or an int,
        the items per chunk. Resets what was measured. Does nothing on a
        graph not proved separable (batch_split.proved)."""
        if isinstance(mode, bool) or not (mode in ("auto", "off") or isinstance(mode, int)):
            raise ValueError(f"batch split mode must be 'auto', 'off' or an int (items per chunk), got {mode!r}")
        if isinstance(mode, int) and mode < 1:
            raise ValueError(f"a batch chunk must be at least 1 item, got {mode}")
        self._batch_split_mode = mode
        self._impl.set_batch_split("fixed" if isinstance(mode, int) else mode, mode if isinstance(mode, int) else 0)
        with self._specializations_lock:
            for other in self._specializations.values():
                other.set_batch_split(mode)

    @property
    def flops(self) -> int:
        """FLOPs of one call of the convolutions and matrix products, from the
        compiled graph's recorded shapes (see llga.flops)."""
        from . import flops as _flops

        return _flops.count(self.graph)[0]

    @property
    def partitions(self) -> "PartitionList":
        """The fusion partitions of the compiled graph, in program order."""
        out = PartitionList()
        kernels = self._impl.kernel_reports()
        for node in self.graph.nodes(recursive=True):
            if node.kind != "llga::FusionGroup":
                continue
            sub = node.subgraph
            ops = [n.kind for n in sub.nodes() if n.kind != "prim::Constant"]
            k = kernels.get(node.outputs[0].name)
            out.append(Partition(
                id=len(out), pattern=str(node.attributes.get("pattern", "")), ops=ops,
                inputs=[_shape_of(v) for v in node.inputs], outputs=[_shape_of(v) for v in node.outputs],
                source=node.source,
                out_layouts=list(node.attributes.get("out_layouts", ["plain"] * len(node.outputs))),
                precision=str(node.attributes.get("precision", "fp32")), output_name=node.outputs[0].name,
                out_dtype=str(node.attributes.get("out_dtype", "fp32")),
                impl=k.impl if k else "", layouts=k.layouts if k else "",
                src=k.src if k else "", weights=k.weights if k else "", dst=k.dst if k else "",
                output=k.output if k else "", detail=k.detail if k else ""))
        return out

    @property
    def unfused(self) -> Dict[str, Dict[str, Any]]:
        """{op kind: {"count": n, "reasons": {reason: n}}} for ops the fuse pass left
        outside partitions (from its Unfused records)."""
        out: Dict[str, Dict[str, Any]] = {}
        for rec in self.passes:
            for u in rec.unfused:
                entry = out.setdefault(u.kind, {"count": 0, "reasons": {}})
                entry["count"] += 1
                entry["reasons"][u.reason] = entry["reasons"].get(u.reason, 0) + 1
        return out

    def _with_keywords(self, inputs, kwargs) -> tuple:
        """Positional inputs, then the keyword ones by the graph's input names
        (TorchScript's "x.1" answers to x), as the model's forward took them."""
        names = [re.sub(r"\.\d+$", "", n) for n in self._impl.input_names]
        unknown = [k for k in kwargs if k not in names]
        if unknown:
            raise TypeError(f"unexpected keyword argument(s) {', '.join(map(repr, unknown))}: "
                            f"the model's inputs are {', '.join(names)}")
        twice = [k for k in kwargs if names.index(k) < len(inputs)]
        if twice:
            raise TypeError(f"input(s) {', '.join(map(repr, twice))} given both by position and by keyword")
        args = list(inputs)
        last = max(names.index(k) for k in kwargs)
        n_defaults = len(self._defaults)
        for i in range(len(inputs), last + 1):
            if names[i] in kwargs:
                args.append(kwargs[names[i]])
            elif i >= len(names) - n_defaults:
                args.append(copy.deepcopy(self._defaults[i - (len(names) - n_defaults)]))
            else:
                raise TypeError(f"missing input {names[i]!r} (inputs: {', '.join(names)})")
        return tuple(args)

    def _args(self, inputs) -> list:
        args = [_to_numpy_if_torch(x, i) for i, x in enumerate(inputs)]
        n = len(self._impl.input_names)
        if len(args) < n and n - len(args) <= len(self._defaults):
            args += [copy.deepcopy(d) for d in self._defaults[len(self._defaults) - (n - len(args)):]]
        return args

    def _result(self, results):
        out = [_named(v, t) for v, t in zip(results, self._output_types)]
        return out[0] if self._single else tuple(out)

    def __call__(self, *inputs, **kwargs):
        if _llga.profiler_enabled():
            _profiler._watch(self)
        if kwargs:
            inputs = self._with_keywords(inputs, kwargs)
        args = self._args(inputs)
        try:
            results = self._impl.run(args)
        except SpecializationMismatch as e:
            if self._respecialize is None or self._built_for == _signature(args):
                raise _refused(e) from None
            return self._other_specialization(args)(*args)
        return self._result(results)

    def _observed_call(self, *inputs):
        """A call that also returns a copy of every tensor an op node gave,
        by the node's first output's name (llga.accuracy_report)."""
        args = self._args(inputs)
        try:
            results, values = self._impl.run(args, True)
        except SpecializationMismatch as e:
            if self._respecialize is None or self._built_for == _signature(args):
                raise _refused(e) from None
            return self._other_specialization(args)._observed_call(*args)
        return self._result(results), dict(values)

    MAX_SPECIALIZATIONS = 8

    def _other_specialization(self, args) -> "CompiledGraph":
        key = _signature(args)
        with self._specializations_lock:  # one compile per key, also when threads call at once
            found = self._specializations.get(key)
            if found is None:
                found = self._respecialize(args)  # _build sets found._built_for to key
                if self._batch_split_mode != "auto":
                    found.set_batch_split(self._batch_split_mode)
                if len(self._specializations) >= self.MAX_SPECIALIZATIONS:
                    self._specializations.popitem(last=False)  # the least recently used
                self._specializations[key] = found
            self._specializations.move_to_end(key)
        return found

    def __repr__(self):
        names = ", ".join(self.input_names)
        return (f"<llga.CompiledGraph ({names}) -> {len(self.graph.outputs)} output(s), "
                f"{len(self.partitions)} partition(s), {len(self.unfused)} op kind(s) outside>")

    def _repr_html_(self) -> str:
        import html as _html

        from . import viz

        mem = self.memory
        peak = max(mem["peak_activations"].values(), default=0)
        arena = max((a["bytes"] for a in mem["arena"].values()), default=0)
        unf = "".join(f"<li><code>{_html.escape(k)}</code> x{v['count']}: "
                      f"{_html.escape('; '.join(v['reasons']))}</li>" for k, v in self.unfused.items())
        return (f"<div><p><b>llga.CompiledGraph</b> ({_html.escape(', '.join(self.input_names))}) &rarr; "
                f"{len(self.graph.outputs)} output(s); {len(self.passes)} passes; "
                f"weights {mem['weights'] / 2**20:.1f} MiB, weight cache {mem['weight_cache'] / 2**20:.1f} MiB, "
                f"peak activations {peak / 2**20:.1f} MiB (planned arena {arena / 2**20:.1f} MiB)</p>"
                f"<details><summary>partitions ({len(self.partitions)})</summary>{self.partitions._repr_html_()}"
                f"</details><details><summary>ops outside partitions ({len(self.unfused)})</summary><ul>{unf}</ul>"
                f"</details><details open><summary>graph</summary>{viz.html_figure(self)}</details></div>")


@dataclass(frozen=True)
class Partition:
    """One llga::FusionGroup: its pattern (a fusion table entry), the aten ops
    inside, its inputs' and outputs' recorded (dtype, shape), and what oneDNN
    ran for it on the latest call."""

    id: int
    pattern: str
    ops: List[str]
    inputs: List[Tuple[Optional[str], Optional[Tuple[Optional[int], ...]]]]
    outputs: List[Tuple[Optional[str], Optional[Tuple[Optional[int], ...]]]]
    source: str = ""
    # llga's decision per output (the propagate-layouts pass, written on the
    # IR as out_layouts): "any" (the kernel may hand it on in its primitive's
    # blocked layout), "blocked", "strided" or "plain" (a reader needs it so).
    out_layouts: List[str] = field(default_factory=list)
    # llga's precision decision (assign-precision, written on the IR): "bf16"
    # (the anchor's activation and weights in bf16, fp32 accumulation and
    # output), "int8" (llga.quantize: activation and weights in 8 bits, int32
    # accumulation, fp32 output) or "fp32".
    precision: str = "fp32"
    # the dtype the partition hands its output on in: "bf16" where only bf16
    # convolutions read it, as their activation (out_dtype on the IR); "u8" or
    # "s8" where only int8 convolutions do (quantized as they read it); else "fp32"
    out_dtype: str = "fp32"
    # After a call (empty before it, and for partitions whose ops report
    # nothing): oneDNN's implementation ("brgconv:avx512_core"), the layouts
    # its primitive used, each a field (src "nChw16c", weights "OIhw16i16o",
    # dst "nChw16c") and as one line for display (layouts: "src nChw16c wei
    # OIhw16i16o dst nChw16c (kept)"), and where the output went (output:
    # "kept": on to the next partitions in dst's layout, without a reorder;
    # "plain"; "" when the kernel does not say).
    impl: str = ""
    layouts: str = ""
    src: str = ""
    weights: str = ""
    dst: str = ""
    output: str = ""
    detail: str = ""  # what else the kernel said (a bf16 partition that ran fp32 says why)
    output_name: str = ""  # the IR name of its first output


@dataclass(frozen=True)
class BatchSplitSize:
    """How calls with ``items`` rows run: in chunks of ``chunk`` items (0:
    still measuring; ``items``: whole), ``lanes`` of them side by side (each
    on one thread; 1: one after another, each on every thread), and the ns
    per item each chunk tried took ({chunk: ns}), one after another and side
    by side."""

    items: int
    chunk: int
    ns_per_item: Dict[int, float]
    lanes: int = 1
    ns_per_item_side_by_side: Dict[int, float] = field(default_factory=dict)


@dataclass(frozen=True)
class BatchSplitInfo:
    """compiled.batch_split: see CompiledGraph.batch_split."""

    proved: bool
    why_not: str
    mode: Any
    sizes: Dict[int, BatchSplitSize]


class PartitionList(list):
    """Partitions; a table in a terminal and in Jupyter."""

    def _rows(self):
        for p in self:
            shape = "x".join(str(d) for d in (p.outputs[0][1] or ())) if p.outputs else ""
            yield (str(p.id), p.pattern, " -> ".join(k.split("::")[-1] for k in p.ops), shape,
                   ",".join(p.out_layouts), p.precision, p.impl, p.layouts)

    def __repr__(self) -> str:
        rows = list(self._rows())
        if not rows:
            return "PartitionList([])"
        head = ("id", "pattern", "ops", "output", "allowed", "precision", "impl", "layouts")
        widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
        fmt = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
        return "\n".join([fmt(head)] + [fmt(r) for r in rows])

    __str__ = __repr__

    def _repr_html_(self) -> str:
        import html as _html

        head = "".join(f"<th>{h}</th>" for h in ("id", "pattern", "ops", "output", "allowed", "precision", "oneDNN impl",
                                                  "layouts"))
        body = "".join("<tr>" + "".join(f"<td>{_html.escape(c)}</td>" for c in r) + "</tr>" for r in self._rows())
        return f"<table class='llga-partitions'><tr>{head}</tr>{body}</table>"


_NAMED_TUPLES: Dict[Tuple[str, ...], Any] = {}


def _named(value, t):
    """A tuple returned as a named tuple where the graph's type names its items
    (``torch.max(x, dim)`` in a scripted graph: ``.values``, ``.indices``)."""
    if t.kind != "Tuple" or not isinstance(value, tuple) or len(value) != len(t.contained):
        return value
    value = tuple(_named(v, ti) for v, ti in zip(value, t.contained))
    names = tuple(t.field_names)
    if not names:
        return value
    cls = _NAMED_TUPLES.get(names)
    if cls is None:
        import collections

        cls = _NAMED_TUPLES[names] = collections.namedtuple("NamedTuple", names)
    return cls(*value)


def _shape_of(v):
    t = v.type
    if not t.is_tensor:
        return (t.kind, None)
    sizes = t.sizes
    return (t.dtype, tuple(sizes) if sizes is not None else None)


def _has_module_input(graph: Graph) -> bool:
    return any(v.type.kind == "Class" for v in graph.inputs)


def _to_numpy_if_torch(x: Any, i: int):
    mod = type(x).__module__
    if mod.startswith("torch") and hasattr(x, "numpy") and hasattr(x, "detach"):
        if x.device.type != "cpu":
            raise InputError(f"input {i}: llga runs on the CPU, got a tensor on {x.device}")
        return x.detach().numpy()
    return x


def _owner_of(graph):
    """The module a ``torch._C.Graph`` such as ``traced.graph`` belongs to, or
    None for a graph that needs none (no ``self`` input). A method graph whose
    module cannot be found is a CompileError saying what to pass."""
    from ._torch import find_owner

    inputs = list(graph.inputs())
    if not inputs or inputs[0].type().kind() != "ClassType":
        return None
    owner = find_owner(graph)
    if owner is None:
        cls = inputs[0].type().qualified_name()
        raise CompileError(
            f"this graph is a method of a TorchScript module (its first input is self : {cls}) and reads its "
            "weights and submodules, but llga cannot tell which live module it came from; pass the module itself "
            "(llga.optimize(traced)) or name it: llga.optimize(traced.graph, module=traced)")
    return owner


def _trailing_defaults(obj) -> List[Any]:
    """The default values of a scripted forward's (or function's) trailing
    arguments, from its schema, in order; [] when it has none or obj is not
    a ScriptModule/ScriptFunction."""
    if type(obj).__name__ == "TorchScriptModel" and type(obj).__module__ == "llga.torchscript":
        return list(obj.defaults)
    schema = None
    try:
        if hasattr(obj, "_c") and obj._c._has_method("forward"):
            schema = obj.forward.schema
        elif hasattr(obj, "schema"):
            schema = obj.schema
    except Exception:  # noqa: BLE001 - not a TorchScript object: no defaults
        return []
    if schema is None:
        return []
    defaults = []
    for arg in reversed([a for a in schema.arguments if a.name != "self"]):
        if not arg.has_default_value():
            break
        defaults.append(arg.default_value)
    return defaults[::-1]


def _load(obj, params: Optional[Mapping[str, Any]], module=None):
    weights: Dict[str, np.ndarray] = {}
    methods: Dict[str, Graph] = {}
    if module is None and type(obj).__name__ == "Graph" and type(obj).__module__.startswith("torch"):
        module = _owner_of(obj)
    if module is not None:
        from ._torch import import_with_methods

        graph, weights, methods = import_with_methods(obj, module)
    elif isinstance(obj, Graph):
        graph = obj
    elif type(obj).__name__ == "TorchScriptModel" and type(obj).__module__ == "llga.torchscript":
        graph, weights = obj.graph, dict(obj.params)  # llga.load_torchscript: read without PyTorch
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
             params: Optional[Mapping[str, Any]] = None, passes=None, module=None, route=None,
             precision="fp32") -> CompiledGraph:
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

    ``route``: which op kinds and fusion patterns may run fused, as
    ``llga.profiler.chart(compiled)`` lists them (a list of
    ``{"name": ..., "fused": bool}``, possibly edited) or ``{name: bool}``;
    names with ``fused: False`` are kept out of partitions and run op by op.
    Unknown names raise ValueError.

    ``precision``: "fp32" (default), "bf16", "auto" or ``{op kind: "bf16" |
    "fp32"}`` overrides of the bf16 policy (see :mod:`llga.precision`);
    ``compiled.precision`` says what was used, ``compiled.precision_note`` why.

    Raises :class:`llga.UnsupportedOpError` listing every op kind llga cannot
    run, :class:`llga.CompileError` for missing or malformed weights, and
    :class:`llga.PrecisionError` for a precision the CPU cannot run.
    """
    from . import precision as _precision
    prec = _precision.resolve(precision)
    rebuild = lambda args: optimize(obj, args, params=params, passes=passes, module=module, route=route,  # noqa: E731
                                    precision=precision)
    return _build(obj, example_inputs, params, passes, module, route, prec, None, rebuild)


def _refused(e: SpecializationMismatch) -> SpecializationMismatch:
    """A specialization mismatch no other specialization can serve, saying
    so where it is about memory order (a saved model, or a graph whose
    aliasing llga follows for row-major inputs only)."""
    if "memory order" in str(e) or "row-major" in str(e):
        return SpecializationMismatch(
            f"{e}. llga decided whether contiguous()/reshape() copy a value that is later written from the "
            "order the inputs lie in memory, and cannot compile that decision for this order "
            "(observable-layouts' notes in compiled.passes say where): pass C-contiguous arrays "
            "(numpy.ascontiguousarray)")
    return e


def _signature(args) -> tuple:
    """What an llga::Guard checks of a call's inputs: each array's rank,
    dtype and memory order (dims by decreasing stride, size-1 dims left out),
    else the argument's type."""
    def order(a):
        dims = [d for d in range(a.ndim) if a.shape[d] != 1 and a.strides[d] != 0]
        return tuple(sorted(dims, key=lambda d: -a.strides[d]))
    return tuple((a.ndim, a.dtype.str, order(a)) if isinstance(a, np.ndarray) else type(a).__name__ for a in args)


def _build(obj, example_inputs, params, passes, module, route, prec, quantization, rebuild) -> CompiledGraph:
    """optimize() and llga.quantize(): the driver on obj's graph with a
    resolved precision (llga.precision.Resolved) and, for int8,
    llga.quantize's options (a dict: calibration input sets, method,
    percentile, skip, only). `rebuild(args)` compiles the same again for
    other inputs (a new specialization)."""
    from . import passes as _passes
    route_off = _profiler._route_off(route)
    graph, weights, methods = _load(obj, params, module)
    graph = graph.copy()
    examples = None
    if example_inputs is not None:
        examples = [_to_numpy_if_torch(x, i) for i, x in enumerate(example_inputs)]
        if not all(isinstance(x, np.ndarray) for x in examples):
            examples = None  # numbers, lists: the passes take tensors only; shapes come from the graph's types
    initial_ir = str(graph)
    try:  # the driver: passes, then the plan (a graph still calling methods is a CompileError there)
        records, impl = _llga.compile(graph, _passes.pipeline_string(passes), dict(weights), dict(methods),
                                      None if examples is None else list(examples), list(route_off),
                                      prec.used, dict(prec.overrides), quantization)
    except UnsupportedOpError as e:
        _profiler._note_unsupported(e)
        raise
    _passes.log(records)
    compiled = CompiledGraph(graph, impl, _passes.PassList(records, initial_ir))
    compiled._defaults = _trailing_defaults(obj)
    compiled.precision, compiled.precision_note = prec.used, prec.note
    # A call whose inputs differ in rank or dtype from a specialization's
    # (its llga::Guard says so) compiles another from the same source, which
    # is kept for that (only when the passes specialized: otherwise nothing
    # holds the caller's objects and weight arrays past compilation).
    if "llga::Guard" in graph.node_counts():
        compiled._respecialize = rebuild
    if example_inputs is not None:
        as_numpy = [_to_numpy_if_torch(x, i) for i, x in enumerate(example_inputs)]
        compiled.example_inputs_spec = [(list(x.shape), str(x.dtype)) if isinstance(x, np.ndarray) else None
                                         for x in as_numpy]
        compiled._built_for = _signature(as_numpy)  # its guard refusing its own examples: raised, not recompiled
        compiled(*example_inputs)
    return compiled
