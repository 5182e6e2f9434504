"""The PyTorch adapter: TorchScript objects to llga graphs and numpy weights.

Imported lazily: llga works without torch installed.
"""

from __future__ import annotations

from typing import Dict, Iterator, Tuple

import numpy as np

from . import parse
from ._llga import Graph


def _torch():
    try:
        import torch
    except ImportError as e:  # pragma: no cover - exercised only without torch
        raise ImportError("llga.import_torch needs PyTorch; parse graph.str() text with llga.parse instead") from e
    return torch


def tensor_to_numpy(t, name: str) -> np.ndarray:
    """A numpy view of a CPU tensor (no copy)."""
    torch = _torch()
    t = t.detach()
    if t.device.type != "cpu":
        raise TypeError(f"weight {name!r} is on {t.device}; llga runs on the CPU")
    if t.is_quantized or t.dtype in (torch.bfloat16, torch.complex32):
        raise TypeError(f"weight {name!r} has dtype {t.dtype}, which numpy cannot hold; convert the model to float32")
    return t.numpy()


def _walk(block) -> Iterator:
    for node in block.nodes():
        yield node
        for sub in node.blocks():
            yield from _walk(sub)


def _resolve(module, path: str, named: Dict[str, object]):
    if path in named:
        return named[path]
    obj = module
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _is_plain_constant(value) -> bool:
    """None, a bool, int, float or string, a list of them, a tuple of any of
    these (nested), or a dict of them: what a prim::Constant can hold."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, tuple):
        return all(_is_plain_constant(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, (str, int, float, bool)) and _is_plain_constant(v) and not isinstance(v, dict)
                   for k, v in value.items())
    return isinstance(value, list) and all(isinstance(v, (bool, int, float, str)) for v in value)


def import_torch(obj, *, inline: bool = True) -> Tuple[Graph, Dict[str, np.ndarray]]:
    torch = _torch()
    module = None
    if isinstance(obj, torch.jit.ScriptModule):
        module = obj
        if not obj._c._has_method("forward"):
            raise TypeError(
                f"llga.import_torch: the scripted {obj.original_name} has no forward method (its forward is "
                "overloaded, as nn.LSTM/GRU/RNN's are when scripted on their own): trace it, or script a module "
                "that calls it"
            )
        tgraph = obj.inlined_graph if inline else obj.graph.copy()  # a copy either way: attributes get folded below
    elif isinstance(obj, torch.jit.ScriptFunction):
        tgraph = obj.inlined_graph if inline else obj.graph
    elif isinstance(obj, torch._C.Graph):
        tgraph = obj.copy() if _tensor_list_constants(obj) else obj  # the caller's graph is never changed
    else:
        raise TypeError(
            "llga.import_torch takes a torch.jit.ScriptModule, ScriptFunction or torch._C.Graph, "
            f"got {type(obj).__name__} (trace or script the model first: torch.jit.trace(model, example))"
        )
    weights: Dict[str, np.ndarray] = {}
    if module is not None:
        named = dict(module.named_parameters())
        named.update(module.named_buffers())
        plain_attrs = []  # (GetAttr node, its non-tensor value)
        inputs = list(tgraph.inputs())
        paths = {inputs[0].debugName(): ""} if inputs else {}
        path_types = {}  # object path -> its type (the first GetAttr that reaches it)
        reads = []  # (GetAttr node, attribute path)
        mutated = set()  # attribute paths the graph writes with prim::SetAttr
        for node in _walk(tgraph):
            if node.kind() == "prim::SetAttr" and node.inputsAt(0).debugName() in paths:
                mutated.add(".".join(p for p in (paths[node.inputsAt(0).debugName()], node.s("name")) if p))
            if node.kind() != "prim::GetAttr":
                continue
            src = node.input().debugName()
            if src not in paths:
                continue
            path = ".".join(p for p in (paths[src], node.s("name")) if p)
            paths[node.output().debugName()] = path
            path_types.setdefault(path, node.output().type())
            reads.append((node, path))
        for node, path in reads:
            value = _resolve(module, path, named)
            if isinstance(value, torch.Tensor):
                if path not in mutated:
                    weights[path] = tensor_to_numpy(value, path)
            elif path not in mutated and (_is_plain_constant(value) or (
                    isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value))):
                plain_attrs.append((node, value))  # a list of tensors: an RNN's _flat_weights
        if mutated:
            # An attribute the graph writes is read as it is at that point:
            # its module value is set once at the start (reads stay reads,
            # and the forward-attributes pass follows them to the value set).
            _set_initial_values(tgraph, module, named, inputs[0], sorted(mutated), path_types)
        if plain_attrs:
            # A scripted module reads non-tensor attributes too (a conv's bias
            # that is None, batch_norm's `training`, a momentum): they become
            # constants, as torch.jit.freeze makes them (in the copy of the
            # graph: the module's own stays as it was).
            for node, value in plain_attrs:
                with tgraph.insert_point_guard(node):
                    if isinstance(value, (list, tuple)) and value and isinstance(value[0], torch.Tensor):
                        items = [tgraph.insertConstant(v.detach()) for v in value]
                        const = tgraph.insertNode(tgraph.create("prim::ListConstruct", items)).output()
                        const.setType(torch._C.ListType.ofTensors())
                    else:
                        const = tgraph.insertConstant(value)
                node.output().replaceAllUsesWith(const)
                node.destroy()
    _expand_tensor_list_constants(tgraph)
    if any(_is_quantized_constant(n) for n in _walk(tgraph)):
        tgraph = tgraph.copy() if tgraph is obj else tgraph  # the caller's graph is never changed
        _unquantize_constants(tgraph)
    _reject_python_ops(tgraph)
    graph = parse(tgraph.str(), filename="<torchscript>")

    for node in _walk(tgraph):
        if node.kind() == "prim::Constant" and node.hasAttribute("value") and node.kindOf("value") == "t":
            name = node.output().debugName()
            weights[name] = tensor_to_numpy(node.t("value"), name)
    return graph, weights


# PyTorch's ScalarType codes of its quantized dtypes (the `dtype` operand of quantize_per_tensor).
_QUANTIZED_DTYPE_CODES = {"torch.qint8": 12, "torch.quint8": 13, "torch.qint32": 14}


def _is_quantized_constant(node) -> bool:
    return (node.kind() == "prim::Constant" and node.hasAttribute("value") and node.kindOf("value") == "t"
            and node.t("value").is_quantized)


def _unquantize_constants(tgraph) -> None:
    """A frozen quantized model's weights are quantized tensors, which numpy
    cannot hold: each becomes its float values (exactly scale * (q - zero
    point)) quantized again by aten::quantize_per_channel or
    quantize_per_tensor with its own parameters, so the graph computes the
    same and import-quantization reads the parameters from it."""
    torch = _torch()
    for node in [n for n in _walk(tgraph) if _is_quantized_constant(n)]:
        t = node.t("value")
        code = _QUANTIZED_DTYPE_CODES.get(str(t.dtype))
        if code is None:
            raise TypeError(f"constant {node.output().debugName()!r} has quantized dtype {t.dtype}, which llga cannot read")
        with tgraph.insert_point_guard(node):
            values = tgraph.insertConstant(t.dequantize())
            if t.qscheme() in (torch.per_tensor_affine, torch.per_tensor_symmetric):
                args = [values, tgraph.insertConstant(float(t.q_scale())), tgraph.insertConstant(int(t.q_zero_point()))]
                kind = "aten::quantize_per_tensor"
            elif t.qscheme() in (torch.per_channel_affine, torch.per_channel_symmetric):
                args = [values, tgraph.insertConstant(t.q_per_channel_scales().double()),
                        tgraph.insertConstant(t.q_per_channel_zero_points().long()),
                        tgraph.insertConstant(int(t.q_per_channel_axis()))]
                kind = "aten::quantize_per_channel"
            else:
                raise TypeError(f"constant {node.output().debugName()!r} is quantized with {t.qscheme()}, "
                                "which llga cannot read")
            q = tgraph.insertNode(tgraph.create(kind, args + [tgraph.insertConstant(code)]))
            q.output().setType(torch._C.TensorType.get())
        node.output().replaceAllUsesWith(q.output())
        node.destroy()


def _set_initial_values(tgraph, module, named, self_value, mutated, path_types) -> None:
    """At the start of the graph: prim::SetAttr of each attribute in
    `mutated` (paths like "rpn.anchor_generator.cell_anchors") to its value
    in the module, reaching the owner through prim::GetAttr from `self`."""
    torch = _torch()
    first = next(iter(tgraph.nodes()), None)
    if first is None:
        return
    with tgraph.insert_point_guard(first):
        owners = {"": self_value}
        for path in mutated:
            parts = path.split(".")
            for i in range(1, len(parts)):
                sub = ".".join(parts[:i])
                if sub not in owners:
                    get = tgraph.insertNode(tgraph.create("prim::GetAttr", [owners[".".join(parts[:i - 1])]]))
                    get.s_("name", parts[i - 1])
                    get.output().setType(path_types[sub])
                    owners[sub] = get.output()
            value = _resolve(module, path, named)
            if isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value):
                items = [tgraph.insertConstant(v.detach()) for v in value]
                const = tgraph.insertNode(tgraph.create("prim::ListConstruct", items)).output()
                const.setType(torch._C.ListType.ofTensors())
            elif isinstance(value, torch.Tensor) or _is_plain_constant(value):
                const = tgraph.insertConstant(value.detach() if isinstance(value, torch.Tensor) else value)
            else:
                const = _made_object(tgraph, value, path_types.get(path))
                if const is None:
                    continue  # an object of another kind: its reads stay, and compiling says what is missing
            if const.node().kind() != "prim::CreateObject":
                const.setType(path_types.get(path, const.type()))
            tgraph.insertNode(tgraph.create("prim::SetAttr", [owners[".".join(parts[:-1])], const], 0)).s_("name", parts[-1])


def _made_object(tgraph, value, declared):
    """A TorchScript class instance held by a module attribute (set by an
    earlier eager call, e.g. MultiScaleRoIAlign's LevelMapper) rebuilt in the
    graph: prim::CreateObject and a prim::SetAttr per field, when every field
    is a plain constant; None otherwise."""
    torch = _torch()
    cls = declared.getElementType() if isinstance(declared, torch._C.OptionalType) else declared
    if not isinstance(cls, torch._C.ClassType) or not hasattr(value, "__dict__"):
        return None
    fields = vars(value)
    if not all(_is_plain_constant(v) for v in fields.values()):
        return None
    obj = tgraph.insertNode(tgraph.create("prim::CreateObject", [], 1)).output()
    obj.setType(cls)
    for name, v in fields.items():
        tgraph.insertNode(tgraph.create("prim::SetAttr", [obj, tgraph.insertConstant(v)], 0)).s_("name", name)
    return obj


def _reject_python_ops(tgraph) -> None:
    """A traced torch.autograd.Function (prim::PythonOp, e.g. nn.CrossMapLRN2d)
    is Python code the graph only names: nothing outside Python can run it."""
    from .errors import UnsupportedOpError

    found: Dict[str, list] = {}
    for node in _walk(tgraph):
        if node.kind() == "prim::PythonOp":
            name = node.pyname() if hasattr(node, "pyname") else "PythonOp"
            where = str(node.sourceRange()).split("\n")[0].strip() or "no source line"
            found.setdefault(f"prim::PythonOp ({name})", []).append(where)
    if found:
        lines = [f"  {k} ({len(v)}x), first at {v[0]}" for k, v in found.items()]
        raise UnsupportedOpError(
            f"llga cannot run {len(found)} op kind(s): Python functions (torch.autograd.Function) traced into the "
            "graph run only in Python; replace them with torch ops before tracing\n" + "\n".join(lines), found)


def _tensor_list_constants(tgraph) -> list:
    return [n for n in _walk(tgraph) if n.kind() == "prim::Constant" and n.hasAttribute("value")
            and n.kindOf("value") == "ival" and str(n.output().type()) in ("Tensor[]", "List[Tensor]")]


def _expand_tensor_list_constants(tgraph) -> None:
    """A frozen module's tensor lists (an RNN's _flat_weights) are constants
    PyTorch prints as ``[<Tensors>]``, without their data: each becomes a
    prim::ListConstruct of tensor constants (whose data the importer binds).
    Works on the graph llga imports (a copy, or the caller's inlined graph)."""
    for node in _tensor_list_constants(tgraph):
        out = node.output()
        items = out.toIValue()
        with tgraph.insert_point_guard(node):
            consts = [tgraph.insertConstant(t) for t in items]
            lst = tgraph.insertNode(tgraph.create("prim::ListConstruct", consts))
            lst.output().setType(_torch()._C.ListType.ofTensors())
        out.replaceAllUsesWith(lst.output())
        node.destroy()


def find_owner(graph):
    """The live ScriptModule whose method ``graph`` is (``traced.graph`` hands
    out the method's own graph object, so identity finds it), else the one
    live ScriptModule of the graph's ``self`` type; None when there is none
    or several could be meant."""
    import gc

    torch = _torch()
    inputs = list(graph.inputs())
    if not inputs or inputs[0].type().kind() != "ClassType":
        return None
    cls = inputs[0].type().qualified_name()
    same_type = {}  # by the C++ module: a traced module and its inner script module share one
    for obj in gc.get_objects():
        if not isinstance(obj, torch.jit.ScriptModule):
            continue
        try:
            if obj._c._type().qualified_name() != cls:
                continue
            for name in obj._c._method_names():
                if obj._c._get_method(name).graph is graph:
                    return obj
        except (AttributeError, RuntimeError):  # a half-built or foreign module
            continue
        same_type.setdefault(id(obj._c), obj)
    return next(iter(same_type.values())) if len(same_type) == 1 else None


def import_with_methods(graph, module) -> Tuple[Graph, Dict[str, np.ndarray], Dict[str, Graph]]:
    """`graph` (e.g. ``traced.graph``, with its prim::CallMethod calls) and
    what the inline pass needs to expand it: the method graphs of every
    submodule by ``"<class qualified name>.<method>"``, and every parameter
    and buffer by its qualified path."""
    torch = _torch()
    if not isinstance(module, torch.jit.ScriptModule):
        raise TypeError(f"module= must be the torch.jit.ScriptModule the graph belongs to, got {type(module).__name__}")
    if not isinstance(graph, torch._C.Graph):
        raise TypeError(f"with module=, the graph must be a torch._C.Graph, got {type(graph).__name__}")
    text = graph.str()
    llga_graph = parse(text, filename="<torchscript>")
    weights: Dict[str, np.ndarray] = {}
    for name, t in list(module.named_parameters()) + list(module.named_buffers()):
        weights[name] = tensor_to_numpy(t, name)
    methods: Dict[str, Graph] = {}
    for _, sub in module.named_modules():
        cls = sub._c._type().qualified_name()
        for mname in sub._c._method_names():
            key = f"{cls}.{mname}"
            if key not in methods:
                methods[key] = parse(sub._c._get_method(mname).graph.str(), filename=f"<{key}>")
    return llga_graph, weights, methods
