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
    if isinstance(obj, torch.jit.ScriptModule) and _reads_packed_weights(obj):
        # PyTorch's int8 modules keep their weights packed in attributes: a
        # frozen copy has them as constants, which the adapter unpacks (the
        # caller's module stays as it is)
        if obj.training:
            raise TypeError("llga.import_torch: this int8 module is in training mode; call .eval() first "
                            "(llga freezes a copy of it to read its packed weights)")
        traced_types = [v.type() for v in list(obj.graph.inputs())[1:]]  # freezing drops the traced input types
        obj = torch.jit.freeze(obj)
    else:
        traced_types = None
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
        _refuse_state_between_calls(tgraph, inputs[0].debugName() if inputs else None)
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
    if traced_types is not None:  # the frozen copy's inputs typed as traced (shapes: the fuser needs them)
        for v, t in zip(list(tgraph.inputs())[1:], traced_types):
            if isinstance(t, torch._C.TensorType) and t.sizes() is not None:
                v.setType(t)
    _expand_tensor_list_constants(tgraph)
    if any(n.kind().startswith("quantized::") or _is_quantized_constant(n) for n in _walk(tgraph)):
        tgraph = tgraph.copy() if tgraph is obj else tgraph  # the caller's graph is never changed
        _lower_quantized_ops(tgraph)
        _unquantize_constants(tgraph)
    _reject_python_ops(tgraph)
    graph = parse(tgraph.str(), filename="<torchscript>")

    for node in _walk(tgraph):
        if node.kind() == "prim::Constant" and node.hasAttribute("value") and node.kindOf("value") == "t":
            name = node.output().debugName()
            weights[name] = tensor_to_numpy(node.t("value"), name)
    return graph, weights


def _reads_packed_weights(module) -> bool:
    """Whether the module's forward reads packed quantized weights from its
    attributes (PyTorch's int8 modules before torch.jit.freeze)."""
    if not module._c._has_method("forward"):
        return False
    return any(n.kind() == "prim::GetAttr" and "PackedParams" in str(n.output().type())
               for n in _walk(module.inlined_graph))


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


# Ops that PyTorch runs on quantized tensors keeping the input's scale and
# zero point: they run on the dequantized values and quantize again alike.
_SAME_QPARAMS_OPS = {
    "aten::flatten", "aten::reshape", "aten::view", "aten::relu", "aten::relu_", "aten::hardtanh", "aten::hardtanh_",
    "aten::max_pool1d", "aten::max_pool2d", "aten::max_pool3d", "aten::adaptive_avg_pool1d", "aten::adaptive_avg_pool2d",
    "aten::adaptive_avg_pool3d", "aten::avg_pool1d", "aten::avg_pool2d", "aten::avg_pool3d", "aten::contiguous",
    "aten::permute", "aten::transpose", "aten::squeeze", "aten::unsqueeze", "aten::clamp", "aten::clamp_",
    "aten::dropout", "aten::upsample_nearest2d", "aten::chunk", "aten::__getitem__", "aten::slice", "aten::select",
    "aten::mean", "aten::size",
}


# Ops PyTorch runs on quantized tensors writing fixed parameters: (scale,
# zero point) by the input's dtype code (13 quint8, 12 qint8).
_FIXED_QPARAMS_OPS = {
    "aten::sigmoid": {13: (1 / 256, 0), 12: (1 / 256, -128)},
    "aten::hardsigmoid": {13: (1 / 256, 0), 12: (1 / 256, -128)},
    "aten::tanh": {13: (1 / 128, 128), 12: (1 / 128, 0)},
}


# Ops splitting a quantized tensor into a list of parts with its parameters.
_LIST_QPARAMS_OPS = {"aten::chunk", "aten::split", "aten::unbind", "aten::split_with_sizes"}
_SAME_QPARAMS_OPS |= _LIST_QPARAMS_OPS

def _bn(a, c):  # quantized::batch_norm*(qx, weight, bias, mean, var, eps, scale, zp)
    return [a[0], a[1], a[2], a[3], a[4], c(False), c(0.1), a[5], c(False)]


# quantized:: ops with their output's scale and zero point: kind ->
# (the float op, the positions of the output scale and zero point among the
# op's arguments, the float op's arguments from the op's (its quantized
# inputs dequantized) and a constant maker). The batch_norm*_relu forms add a
# relu (_QUANTIZED_THEN_RELU).
_QUANTIZED_WITH_QPARAMS = {
    **{f"quantized::{k}": (f"aten::{k}", (1, 2), lambda a, c: [a[0]]) for k in ("hardswish", "sigmoid", "relu6")},
    **{f"quantized::batch_norm{d}d{r}": ("aten::batch_norm", (6, 7), _bn) for d in (1, 2, 3) for r in ("", "_relu")},
    "quantized::layer_norm": ("aten::layer_norm", (5, 6), lambda a, c: [a[0], a[1], a[2], a[3], a[4], c(False)]),
    "quantized::group_norm": ("aten::group_norm", (5, 6), lambda a, c: [a[0], a[1], a[2], a[3], a[4], c(False)]),
    "quantized::instance_norm": ("aten::instance_norm", (4, 5),
                                 lambda a, c: [a[0], a[1], a[2], c(None), c(None), c(True), c(0.1), a[3], c(False)]),
    "quantized::leaky_relu": ("aten::leaky_relu", (3, 4), lambda a, c: [a[0], a[1]]),
    "quantized::elu": ("aten::elu", (1, 2), lambda a, c: [a[0], a[3], a[4], a[5]]),
    "quantized::celu": ("aten::celu", (1, 2), lambda a, c: [a[0], a[3]]),
    "quantized::softmax": ("aten::softmax", (2, 3), lambda a, c: [a[0], a[1], c(None)]),
    "quantized::matmul": ("aten::matmul", (2, 3), lambda a, c: [a[0], a[1]]),
    "quantized::prelu": ("aten::prelu", (2, 3), lambda a, c: [a[0], a[1]]),
}
_QUANTIZED_THEN_RELU = {f"quantized::batch_norm{d}d_relu" for d in (1, 2, 3)}


# The integer range of a quantized dtype code (13 quint8, 12 qint8).
_QUANTIZED_RANGES = {13: (0, 255), 12: (-128, 127)}


def _constant_qparams(params):
    """(scale, zero point, dtype code) as Python numbers, where the graph
    holds them as constants (a number or a one-element tensor); else None."""
    if params is None or not all(v.node().kind() == "prim::Constant" for v in params):
        return None
    values = [v.toIValue() for v in params]
    values = [v.item() if hasattr(v, "item") else v for v in values]
    if values[2] not in _QUANTIZED_RANGES:
        return None
    return float(values[0]), int(values[1]), int(values[2])


def _scalar_qparams(op: str, scale: float, zero_point: int, code: int, c: float):
    """PyTorch's quantized::add/mul with a number c (BinaryOps.cpp,
    qmul.cpp): (the float added to the dequantized input, or None for mul;
    the output's scale; its zero point). add adds scale * round(c / scale)
    and keeps the step unless the zero point would leave the dtype's range,
    then the step widens so that the range holds the shifted values; mul
    scales the step by |c| (the integers flip when c < 0; all zero at 0, on
    step 1)."""
    q_min, q_max = _QUANTIZED_RANGES[code]
    if op == "mul":
        if c > 0:
            return None, c * scale, zero_point
        if c == 0:
            return None, 1.0, 0
        return None, abs(c) * scale, q_max - (zero_point - q_min)
    c_q = round(c / scale)  # half to even, as nearbyint
    shifted = zero_point - c_q
    if shifted < q_min:
        return scale * c_q, (q_max - shifted) / (q_max - q_min) * scale, q_min
    if shifted > q_max:
        return scale * c_q, (shifted - q_min) / (q_max - q_min) * scale, q_max
    return scale * c_q, scale, shifted


def _lower_quantized_ops(tgraph) -> None:
    """PyTorch's int8 graph (convert_fx without is_reference, or eager
    quantization), frozen: quantized::conv*/linear (with packed weights),
    quantized::add/mul/cat (with their output's scale and zero point) and
    the ops PyTorch runs on quantized tensors, rewritten in reference form:
    each reads its quantized inputs dequantized, computes in float and
    quantizes its output (with the scale and zero point PyTorch's op writes).
    The packed weights are unpacked into quantized constants (which
    _unquantize_constants turns into float values and their parameters)."""
    torch = _torch()
    from .errors import UnsupportedOpError

    tensor_t = torch._C.TensorType.get()
    qparams = {}  # quantized value (by unique id) -> (scale, zero point, dtype) values

    def made(kind, inputs):
        n = tgraph.insertNode(tgraph.create(kind, inputs))
        n.output().setType(tensor_t)
        return n.output()

    def dequantized(v):
        # a value quantized in the graph, or a quantized constant (convnext's layer_scale
        # in a quantized::mul: _unquantize_constants then writes it quantize_per_tensor(float))
        if v.unique() not in qparams and not _is_quantized_constant(v.node()):
            return v
        return made("aten::dequantize", [v])

    def quantize(v, scale, zp, dtype):
        q = made("aten::quantize_per_tensor", [v, scale, zp, dtype])
        qparams[q.unique()] = (scale, zp, dtype)
        return q

    def where(node):
        outs = list(node.outputs())
        return outs[0].debugName() if outs else node.kind()

    def dtype_of(v):
        """The dtype code value of quantized input v (PyTorch's ops write their input's); quint8's if unknown."""
        params = qparams.get(v.unique())
        return params[2] if params is not None else tgraph.insertConstant(13)

    list_qparams = {}  # a list of a quantized tensor's parts (chunk, split) -> its parameters
    unsupported: Dict[str, list] = {}
    for node in list(tgraph.nodes()):
        kind = node.kind()
        ins = list(node.inputs())
        if kind in ("prim::ListConstruct", "prim::TupleConstruct"):
            continue  # quantized::cat reads its list's items dequantized; anything else stays, and llga names it
        if kind == "prim::ListUnpack" and ins and ins[0].unique() in list_qparams:
            # the parts of a quantized tensor (chunk, split): each quantized again as it was
            params = list_qparams[ins[0].unique()]
            after = node
            for o in list(node.outputs()):
                qn = tgraph.create("aten::quantize_per_tensor", [o, *params])
                qn.output().setType(tensor_t)
                qn.insertAfter(after)
                after = qn
                qparams[qn.output().unique()] = params
                o.replaceAllUsesAfterNodeWith(qn, qn.output())
            continue
        if kind in ("aten::quantize_per_tensor", "aten::quantize_per_channel"):
            qparams[node.output().unique()] = tuple(ins[1:4]) if kind == "aten::quantize_per_tensor" else None
            continue
        quantized_in = [v for v in ins if v.unique() in qparams]
        lowered = None
        with tgraph.insert_point_guard(node):
            base = kind.split("::")[-1]
            if kind.startswith("quantized::conv") or (kind.startswith("quantized::linear") and "dynamic" not in kind):
                packed_node = ins[1].node()
                if packed_node.kind() != "prim::Constant":
                    raise TypeError(f"{kind}: its packed weights are not a constant; freeze the quantized model first "
                                    "(torch.jit.freeze(traced.eval()))")
                packed = ins[1].toIValue()
                linear = kind.startswith("quantized::linear")
                relu = base.endswith("_relu")
                if base not in ("conv1d", "conv2d", "conv3d", "conv1d_relu", "conv2d_relu", "conv3d_relu", "linear",
                                "linear_relu", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"):
                    unsupported.setdefault(kind, []).append(where(node))
                    continue
                w_q, bias = torch.ops.quantized.linear_unpack(packed) if linear else packed.unpack()
                w = made("aten::dequantize", [tgraph.insertConstant(w_q)])
                b = tgraph.insertConstant(bias.detach()) if bias is not None else tgraph.insertConstant(None)
                x = dequantized(ins[0])
                if linear:
                    y = made("aten::linear", [x, w, b])
                elif base.startswith("conv_transpose"):  # a float op between its quantizations (not an int8 kind)
                    if not packed.transpose():
                        unsupported.setdefault(kind + " (packed as a direct convolution)", []).append(where(node))
                        continue
                    lists = [tgraph.insertConstant(list(v)) for v in (packed.stride(), packed.padding(),
                                                                      packed.output_padding())]
                    y = made(f"aten::conv_transpose{w_q.dim() - 2}d",
                             [x, w, b] + lists + [tgraph.insertConstant(int(packed.groups())),
                                                  tgraph.insertConstant(list(packed.dilation()))])
                else:
                    if packed.transpose():
                        unsupported.setdefault(kind + " (transposed)", []).append(where(node))
                        continue
                    args = [x, w, b] + [tgraph.insertConstant(list(v)) for v in (packed.stride(), packed.padding(),
                                                                                  packed.dilation())]
                    y = made(f"aten::conv{w_q.dim() - 2}d", args + [tgraph.insertConstant(int(packed.groups()))])
                if relu:
                    y = made("aten::relu", [y])
                lowered = quantize(y, ins[2], ins[3], dtype_of(ins[0]))
            elif kind in ("quantized::linear_dynamic", "quantized::linear_relu_dynamic"):
                # dynamic quantization (quantize_dynamic): the activation quantized per call to
                # quint8 from its range (reduce_range: [0, 127]), float output
                packed_node = ins[1].node()
                if packed_node.kind() != "prim::Constant":
                    raise TypeError(f"{kind}: its packed weights are not a constant; freeze the quantized model first "
                                    "(torch.jit.freeze(traced.eval()))")
                w_q, bias = torch.ops.quantized.linear_unpack(ins[1].toIValue())
                w = made("aten::dequantize", [tgraph.insertConstant(w_q)])
                b = tgraph.insertConstant(bias.detach()) if bias is not None else tgraph.insertConstant(None)
                reduce_range = ins[2] if len(ins) > 2 else tgraph.insertConstant(False)
                xq = made("aten::quantize_per_tensor_dynamic", [ins[0], tgraph.insertConstant(13), reduce_range])
                y = made("aten::linear", [made("aten::dequantize", [xq]), w, b])
                lowered = made("aten::relu", [y]) if "relu" in kind else y
            elif kind in ("quantized::add", "quantized::add_relu", "quantized::mul", "quantized::mul_relu") \
                    and len(ins) == 2:
                # a Python number and a quantized tensor (either order): PyTorch picks the output's
                # parameters from the input's and the number (_scalar_qparams)
                qv, cv = (ins[1], ins[0]) if ins[1].unique() in qparams else (ins[0], ins[1])
                got = _constant_qparams(qparams.get(qv.unique()))
                c = cv.toIValue() if cv.node().kind() == "prim::Constant" else None
                if got is None or not isinstance(c, (int, float)) or isinstance(c, bool):
                    unsupported.setdefault(f"{kind} with a scalar operand, where the number or the tensor's "
                                           "quantization is not a constant", []).append(where(node))
                    continue
                add = "add" in base
                offset, scale, zp = _scalar_qparams("add" if add else "mul", *got, float(c))
                x = dequantized(qv)
                y = made("aten::add", [x, tgraph.insertConstant(offset), tgraph.insertConstant(1)]) if add \
                    else made("aten::mul", [x, tgraph.insertConstant(float(c))])
                if base.endswith("_relu"):
                    y = made("aten::relu", [y])
                lowered = quantize(y, tgraph.insertConstant(scale), tgraph.insertConstant(zp), qparams[qv.unique()][2])
            elif kind in ("quantized::add", "quantized::add_relu", "quantized::mul", "quantized::mul_relu"):
                if len(ins) != 4:  # the out= overloads
                    unsupported.setdefault(f"{kind} with an out= operand", []).append(where(node))
                    continue
                a_, b_ = dequantized(ins[0]), dequantized(ins[1])
                y = made("aten::add", [a_, b_, tgraph.insertConstant(1)]) if "add" in base else made("aten::mul", [a_, b_])
                if base.endswith("_relu"):
                    y = made("aten::relu", [y])
                lowered = quantize(y, ins[2], ins[3], dtype_of(ins[0]))
            elif kind == "quantized::dropout" and len(ins) == 5 and ins[4].node().kind() == "prim::Constant" \
                    and not ins[4].toIValue():
                lowered = ins[0]  # eval: PyTorch returns its input, whatever the output parameters say
            elif kind in _QUANTIZED_WITH_QPARAMS and node.outputsSize() == 1:
                float_kind, (at_scale, at_zp), make_args = _QUANTIZED_WITH_QPARAMS[kind]
                if len(ins) <= at_zp:
                    unsupported.setdefault(kind, []).append(where(node))
                    continue
                y = made(float_kind, make_args([dequantized(v) for v in ins], tgraph.insertConstant))
                if kind in _QUANTIZED_THEN_RELU:
                    y = made("aten::relu", [y])
                lowered = quantize(y, ins[at_scale], ins[at_zp], dtype_of(ins[0]))
            elif kind in ("aten::cat", "aten::stack") and ins and ins[0].node().kind() == "prim::ListConstruct" \
                    and any(v.unique() in qparams for v in ins[0].node().inputs()):
                # PyTorch's cat/stack of quantized tensors: the items requantized to the first's parameters
                items = list(ins[0].node().inputs())
                params = qparams.get(items[0].unique())
                if params is None or not all(v.unique() in qparams for v in items):
                    unsupported.setdefault(f"{kind} of quantized tensors (per-channel, or mixed with float)",
                                           []).append(where(node))
                    continue
                lst = tgraph.insertNode(tgraph.create("prim::ListConstruct", [dequantized(v) for v in items]))
                lst.output().setType(torch._C.ListType.ofTensors())
                lowered = quantize(made(kind, [lst.output()] + ins[1:]), *params)
            elif kind == "quantized::cat":
                parts = ins[0].node()
                if parts.kind() != "prim::ListConstruct":
                    unsupported.setdefault(kind, []).append(where(node))
                    continue
                lst = tgraph.insertNode(tgraph.create("prim::ListConstruct", [dequantized(v) for v in parts.inputs()]))
                lst.output().setType(torch._C.ListType.ofTensors())
                y = made("aten::cat", [lst.output(), ins[1]])
                first = next(iter(parts.inputs()), None)
                lowered = quantize(y, ins[2], ins[3], dtype_of(first) if first is not None else tgraph.insertConstant(13))
            elif kind.startswith("quantized::"):
                unsupported.setdefault(kind, []).append(where(node))
                continue
            elif quantized_in and kind.rstrip("_") in _FIXED_QPARAMS_OPS and len(ins) == 1:
                params = qparams[ins[0].unique()]
                code = params[2].toIValue() if params is not None else None
                fixed = _FIXED_QPARAMS_OPS[kind.rstrip("_")].get(code)
                if fixed is None:
                    unsupported.setdefault(f"{kind} on a quantized tensor of this dtype", []).append(where(node))
                    continue
                y = made(kind.rstrip("_"), [dequantized(ins[0])])
                lowered = quantize(y, tgraph.insertConstant(fixed[0]), tgraph.insertConstant(fixed[1]), params[2])
            elif quantized_in and kind != "aten::dequantize":
                if kind not in _SAME_QPARAMS_OPS or len(quantized_in) != 1 or node.outputsSize() != 1:
                    unsupported.setdefault(f"{kind} on a quantized tensor", []).append(where(node))
                    continue
                src = quantized_in[0]
                params = qparams[src.unique()]
                if params is None:
                    unsupported.setdefault(f"{kind} on a per-channel quantized tensor", []).append(where(node))
                    continue
                args = [dequantized(v) if v is src else v for v in ins]
                out_kind = kind[:-1] if kind.endswith("_") else kind  # on a float copy: no aliasing to keep
                y = made(out_kind, args)
                if str(node.output().type()) in ("int", "int[]", "List[int]"):  # size(): a number, not a tensor
                    y.setType(node.output().type())
                    lowered = y
                elif kind in _LIST_QPARAMS_OPS:  # float parts; prim::ListUnpack quantizes each again
                    y.setType(node.output().type())
                    list_qparams[y.unique()] = params
                    lowered = y
                else:
                    lowered = quantize(y, *params)
        if lowered is not None:
            node.output().replaceAllUsesWith(lowered)
            node.destroy()
    for node in list(tgraph.nodes()):  # the packed weights, unpacked above
        if node.kind() == "prim::Constant" and "PackedParams" in str(node.output().type()) and not node.output().uses():
            node.destroy()
    if unsupported:
        lines = [f"  {k} ({len(v)}x), first at %{v[0]}" for k, v in unsupported.items()]
        raise UnsupportedOpError(
            f"llga cannot import {len(unsupported)} quantized op kind(s) of this int8 graph; "
            "quantize with convert_to_reference_fx instead, or leave these ops in float\n" + "\n".join(lines),
            unsupported)


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
                # what errors name (a write into it); not the attribute's own name, which freeze
                # would bind to the module's weight of that name
                const.setDebugName(path.replace(".", "_") + "_at_call_start")
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


def _refuse_state_between_calls(tgraph, self_name) -> None:
    """A module attribute whose new value (prim::SetAttr) is computed from
    the value it had when the call began (``self.n += 1``, ``self.state =
    self.state * 0.5 + x``) carries state from one call to the next, which
    llga does not keep: each call would start again from the module's value
    and answer what the first call answered. Refused, naming the attribute.
    A value set without reading the old one (a lazily built cache, a flag)
    is the same on every call and stays allowed."""
    from .errors import CompileError

    if self_name is None:
        return
    paths = {self_name: ""}
    set_so_far = set()
    first_reads: Dict[str, str] = {}  # value name -> attribute path, read before any set of it in this call
    for node in _walk(tgraph):
        kind = node.kind()
        if kind not in ("prim::GetAttr", "prim::SetAttr") or node.inputsAt(0).debugName() not in paths:
            continue
        path = ".".join(p for p in (paths[node.inputsAt(0).debugName()], node.s("name")) if p)
        if kind == "prim::GetAttr":
            paths[node.output().debugName()] = path
            if path not in set_so_far:
                first_reads[node.output().debugName()] = path
            continue
        olds = {v for v, p in first_reads.items() if p == path}
        if olds and _depends_on(node.inputsAt(1), olds):
            where = next((w for w in (str(n.sourceRange()).split("\n")[0].strip()
                                      for n in (node, node.inputsAt(1).node())) if w), "no source line")
            raise CompileError(
                f"the model keeps state between calls: it sets self.{path} from its previous value (at {where}). "
                "llga compiles a module's attributes as constants and keeps no state between calls, so every call "
                "would answer as the first did. Pass the state in and return the new one (keep it outside the "
                "model), or leave this module in PyTorch")
        set_so_far.add(path)


def _depends_on(value, names) -> bool:
    """Whether `value` is computed from one of the values named (through its
    producers' inputs, and the results of the blocks of an if or loop)."""
    seen = set()
    work = [value]
    while work:
        v = work.pop()
        name = v.debugName()
        if name in names:
            return True
        if name in seen:
            continue
        seen.add(name)
        node = v.node()
        work.extend(node.inputs())
        for block in node.blocks():
            work.extend(block.returnNode().inputs())
    return False


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
            and n.kindOf("value") == "ival" and str(n.output().type()) in ("Tensor[]", "List[Tensor]", "Tensor?[]",
                                                                            "List[Optional[Tensor]]")]


def _expand_tensor_list_constants(tgraph) -> None:
    """A frozen module's tensor lists (an RNN's _flat_weights; aten::index's
    indices, Tensor?[], once freezing folds them) are constants PyTorch
    prints as ``[<Tensors>]``, without their data: each becomes a
    prim::ListConstruct of tensor constants (whose data the importer binds).
    Works on the graph llga imports (a copy, or the caller's inlined graph)."""
    for node in _tensor_list_constants(tgraph):
        out = node.output()
        items = out.toIValue()
        with tgraph.insert_point_guard(node):
            consts = [tgraph.insertConstant(t) for t in items]
            lst = tgraph.insertNode(tgraph.create("prim::ListConstruct", consts))
            lst.output().setType(out.type())
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
    if graph is module.graph and _reads_packed_weights(module):  # an int8 module: its frozen copy (import_torch)
        llga_graph, weights = import_torch(module)
        return llga_graph, weights, {}
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
