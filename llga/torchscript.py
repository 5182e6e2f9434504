"""Reading a ``torch.jit.save`` archive without PyTorch.

    m = llga.load_torchscript("model.pt")      # numpy and llga only
    compiled = llga.optimize(m, [x])           # as with the TorchScript module itself

A TorchScript archive is a zip holding the module's source code
(``code/__torch__/....py``: Python syntax, one class per module type),
pickles of its attributes (``data.pkl``) and of its constants
(``constants.pkl``), and raw tensor storages (``data/N``, ``constants/N``).
``llga._torchscript_archive`` reads them with Python's ``zipfile`` and a
``pickle`` unpickler that accepts only the classes such archives use (module
objects, tensors and their storages, ``OrderedDict``); this module parses
the code with ``ast`` and writes the forward method
as TorchScript IR, as ``traced.inlined_graph`` would print it: submodule
calls inlined, attributes read as constants, every argument PyTorch's
printer omitted filled in from the operator's signature
(``llga/data/torch_schemas.json``, generated from PyTorch's registry by
``scripts/gen_torch_schemas.py``). Weights are numpy arrays over the
archive's bytes (mapped, not read, where the zip stores them uncompressed).

Read: traced modules (frozen or not) and scripted ones: calls of aten and
prim ops, submodule methods and the archive's own functions (inlined),
attribute reads, literals, lists, dicts, tuples and NamedTuples, ``if``
(``prim::If``; a condition known while reading, such as ``self.training``,
keeps only its branch, and ``is None`` tests are decided from the types, as
TorchScript refines Optionals), ``for`` over ``range(n)`` or a list and
``while`` (``prim::Loop``, loop-carried values found from the assignments).
Scalar arithmetic on values known while reading is computed then. Anything
else (an op llga does not run, ``with``, an early return inside a block,
``isinstance``) raises :class:`llga.UnsupportedOpError` naming it and its
line; anything malformed raises :class:`llga.FormatError`.
"""

from __future__ import annotations

import ast
import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ._torchscript_archive import _Archive, _ScriptObject
from .errors import FormatError, UnsupportedOpError

_IR_DTYPES = {np.dtype(np.float32): "Float", np.dtype(np.float64): "Double", np.dtype(np.float16): "Half",
              np.dtype(np.int64): "Long", np.dtype(np.int32): "Int", np.dtype(np.int16): "Short",
              np.dtype(np.int8): "Char", np.dtype(np.uint8): "Byte", np.dtype(np.bool_): "Bool"}


@dataclass
class TorchScriptModel:
    """A TorchScript archive read without PyTorch: its forward as an
    llga.Graph, the weights it reads (``params``, numpy arrays by value
    name), and the IR text. ``llga.optimize`` takes it as it takes a module."""

    graph: Any
    params: Dict[str, np.ndarray]
    text: str
    path: str = ""
    defaults: List[Any] = field(default_factory=list)

    def __repr__(self) -> str:
        n = sum(a.nbytes for a in self.params.values())
        return (f"<llga.TorchScriptModel {self.path}: {len(self.graph.inputs)} input(s), "
                f"{len(self.params)} weights ({n / 2**20:.1f} MiB)>")


# ---- op signatures ------------------------------------------------------------

_SCHEMAS: Optional[Dict[str, list]] = None


def _schemas() -> Dict[str, list]:
    global _SCHEMAS
    if _SCHEMAS is None:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "torch_schemas.json")
        with open(path) as f:
            _SCHEMAS = json.load(f)["schemas"]
    return _SCHEMAS


# ---- IR emission -------------------------------------------------------------

@dataclass(frozen=True)
class _V:
    """An IR value: its name (without %) and its type as IR text."""

    name: str
    type: str


@dataclass(frozen=True)
class _Lit:
    """A Python literal not yet written as a prim::Constant."""

    value: Any


class _Module:
    def __init__(self, obj: _ScriptObject, path: str):
        self.obj = obj
        self.path = path


@dataclass(frozen=True)
class _Function:
    """A free function of the archive's code (``__torch__.torch.nn.functional.relu``)."""

    qualname: str


class _Unsupported(Exception):
    def __init__(self, kind: str, where: str):
        super().__init__(kind)
        self.kind = kind
        self.where = where


def _ir_type_of_annotation(node: Optional[ast.expr]) -> str:
    """The IR type of a forward argument's annotation (``Tensor``, ``int``,
    ``List[int]``, ``Optional[Tensor]``, ``Tuple[Tensor, Tensor]``)."""
    if node is None:
        return "Tensor"
    if isinstance(node, ast.Name):
        return {"Tensor": "Tensor", "int": "int", "float": "float", "bool": "bool", "str": "str",
                "Device": "Device"}.get(node.id, "Tensor")
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        inner = node.slice
        items = inner.elts if isinstance(inner, ast.Tuple) else [inner]
        sub = [_ir_type_of_annotation(i) for i in items]
        if node.value.id == "List":
            return f"{sub[0]}[]"
        if node.value.id == "Optional":
            return f"{sub[0]}?"
        if node.value.id == "Tuple":
            return "(" + ", ".join(sub) + ")"
        if node.value.id == "Dict" and len(sub) == 2:
            return f"Dict({sub[0]}, {sub[1]})"
    raise FormatError(f"an argument annotation llga does not read: {ast.unparse(node)}")


class _Emitter:
    def __init__(self, archive: _Archive, constants):
        self.archive = archive
        self.constants = constants
        # Constants and weights go first (a prim::Constant has no inputs, so
        # there it serves every block); ops go to the innermost open block.
        self.prelude: List[str] = []
        self.blocks: List[List[str]] = [[]]
        self.params: Dict[str, np.ndarray] = {}
        self.weights: Dict[int, _V] = {}  # id(array) -> its constant
        self.consts: Dict[Tuple[str, str], _V] = {}
        self.n = 0
        self.unsupported: Dict[str, List[str]] = {}
        self.classes: Dict[str, ast.ClassDef] = {}
        self.sources: Dict[str, str] = {}
        self.depth = 0

    # values
    def fresh(self, hint: str = "") -> str:
        self.n += 1
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in hint)[:40]
        return f"{base}.{self.n}" if base and not base[0].isdigit() else str(self.n)

    def op(self, kind: str, inputs: List[_V], out_types: List[str], attrs: str = "", hint: str = "",
           where: str = "", blocks: Optional[List[Tuple[List[_V], List[str], List[_V]]]] = None,
           prelude: bool = False) -> List[_V]:
        """Writes one node; `blocks`: (block inputs, block lines, block outputs) each (prim::If, prim::Loop)."""
        outs = [_V(self.fresh(hint), t) for t in out_types]
        lhs = ", ".join(f"%{o.name} : {o.type}" for o in outs)
        args = ", ".join(f"%{v.name}" for v in inputs)
        src = f" # {where}" if where else ""
        lines = self.prelude if prelude else self.blocks[-1]
        lines.append(f"{lhs} = {kind}{attrs}({args}){src}" if outs else f"= {kind}{attrs}({args}){src}")
        for i, (params, body, results) in enumerate(blocks or []):
            lines.append(f"  block{i}(" + ", ".join(f"%{v.name} : {v.type}" for v in params) + "):")
            lines.extend("    " + ln for ln in body)
            lines.append("    -> (" + ", ".join(f"%{v.name}" for v in results) + ")")
        return outs

    def constant(self, value: Any, type_hint: Optional[str] = None) -> _V:
        if isinstance(value, _V):
            return value
        if isinstance(value, np.ndarray):
            return self.weight(value, "const")
        if value is None:  # typed Optional where annotated so (annotate(Optional[Tensor], None))
            t, attr = (type_hint if type_hint and type_hint.endswith("?") else "NoneType"), ""
        elif isinstance(value, bool):
            t, attr = "bool", f"[value={int(value)}]"
        elif isinstance(value, int):
            if type_hint == "float":
                t, attr = "float", f"[value={_fmt_float(float(value))}]"
            else:
                t, attr = "int", f"[value={value}]"
        elif isinstance(value, float):
            t, attr = "float", f"[value={_fmt_float(value)}]"
        elif isinstance(value, str):
            t, attr = (type_hint if type_hint == "Device" else "str"), f"[value={json.dumps(value)}]"
        elif isinstance(value, _Device):
            t, attr = "Device", f"[value={json.dumps(value.name)}]"
        elif isinstance(value, list) and all(isinstance(x, bool) for x in value) and value:
            t, attr = "bool[]", "[value=[" + ", ".join("True" if x else "False" for x in value) + "]]"
        elif isinstance(value, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in value):
            if type_hint == "float[]" and value:
                t, attr = "float[]", "[value=[" + ", ".join(_fmt_float(float(x)) for x in value) + "]]"
            else:
                t, attr = "int[]", "[value=[" + ", ".join(str(x) for x in value) + "]]"
        elif isinstance(value, list) and value and all(isinstance(x, str) for x in value):
            t, attr = "str[]", "[value=[" + ", ".join(json.dumps(x) for x in value) + "]]"
        elif isinstance(value, list) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value):
            t, attr = "float[]", "[value=[" + ", ".join(_fmt_float(float(x)) for x in value) + "]]"
        else:
            raise FormatError(f"a constant llga cannot write: {value!r}")
        key = (t, attr)
        if key not in self.consts:
            self.consts[key] = self.op("prim::Constant", [], [t], attr, prelude=True)[0]
        return self.consts[key]

    def weight(self, arr: np.ndarray, name: str) -> _V:
        found = self.weights.get(id(arr))
        if found is not None:
            return found
        if arr.dtype not in _IR_DTYPES:
            raise FormatError(f"{self.archive.path}: tensor {name} has dtype {arr.dtype}, which llga does not take")
        v = _V(self.fresh(name), _tensor_type(arr))
        self.prelude.append(f"%{v.name} : {v.type} = prim::Constant[value=<Tensor>]()")
        self.params[v.name] = arr
        self.weights[id(arr)] = v
        return v

    # classes and methods
    def class_def(self, qualname: str) -> Tuple[ast.ClassDef, str]:
        module, _, cls = qualname.rpartition(".")
        if self._code(module) is None:
            raise FormatError(f"{self.archive.path}: no code for module {module}")
        found = self.classes.get(qualname)
        if not found or not isinstance(found[0], ast.ClassDef):
            raise FormatError(f"{self.archive.path}: no class {cls} in {module}")
        return found

    def _code(self, module: str):
        """Parses code/<module path>.py once: {name: (definition, file name)}."""
        fname = "code/" + module.replace(".", "/") + ".py"
        if fname not in self.sources:
            full = f"{self.archive.root}/{fname}"
            if full not in self.archive.names:
                self.sources[fname] = None
                return None
            text = self.archive.read(fname).decode("utf-8")
            self.sources[fname] = text
            try:
                tree = ast.parse(text, filename=fname)
            except SyntaxError as e:
                raise FormatError(f"{self.archive.path}: {fname} does not parse as Python: {e}") from None
            for node in tree.body:
                if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
                    self.classes[f"{module}.{node.name}"] = (node, fname)
        return self.sources[fname]

    def named_tuple(self, qualname: str) -> Optional[List[str]]:
        """The fields of a NamedTuple class of the archive's code, or None."""
        module, _, _ = qualname.rpartition(".")
        if not module or self._code(module) is None:
            return None
        found = self.classes.get(qualname)
        if not found or not isinstance(found[0], ast.ClassDef):
            return None
        cls = found[0]
        if not any(isinstance(b, ast.Name) and b.id == "NamedTuple" for b in cls.bases):
            return None
        return [st.target.id for st in cls.body if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)]

    def resolve(self, qualname: str):
        """A function of the archive's code by its qualified name, or None."""
        module, _, name = qualname.rpartition(".")
        if module and self._code(module) is not None:
            found = self.classes.get(qualname)
            if found and isinstance(found[0], ast.FunctionDef):
                return _Function(qualname)
        return None

    def method(self, mod: _Module, name: str) -> Tuple[ast.FunctionDef, str]:
        cls, fname = self.class_def(mod.obj.qualname)
        for node in cls.body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                return node, fname
        raise FormatError(f"{self.archive.path}: class {mod.obj.qualname} has no method {name}")


def _fmt_float(v: float) -> str:
    r = repr(float(v))
    return r if any(c in r for c in ".en") else r + "."


@dataclass(frozen=True)
class _Namespace:
    """A dotted prefix of the archive's code (``__torch__.torch.nn``) on the way to a function."""

    path: str


class _Device:
    def __init__(self, name: str):
        self.name = name


def _tensor_type(arr: np.ndarray) -> str:
    sizes = ", ".join(str(s) for s in arr.shape)
    strides = ", ".join(str(s // arr.itemsize) for s in arr.strides)
    sep = ", " if arr.ndim else ""
    return f"{_IR_DTYPES[arr.dtype]}({sizes}{sep}strides=[{strides}], requires_grad=0, device=cpu)"


# ---- evaluating the code --------------------------------------------------------

class _Frame:
    def __init__(self, em: _Emitter, fname: str, env: Dict[str, Any]):
        self.em = em
        self.fname = fname
        self.env = env

    def where(self, node) -> str:
        return f"{self.fname}:{getattr(node, 'lineno', 0)}"

    def run(self, body: List[ast.stmt], top: bool = True):
        """Runs statements; at the top of a method, returns what it returns.
        Inside a block (top=False) a return is not allowed (TorchScript's
        printer writes none there)."""
        for st in body:
            if isinstance(st, ast.Return):
                if not top:
                    raise _Unsupported("an early return inside a block", self.where(st))
                return self.expr(st.value) if st.value is not None else _Lit(None)
            if isinstance(st, ast.Assign) and len(st.targets) == 1:
                self.assign(st.targets[0], self.expr(st.value), st)
            elif isinstance(st, ast.AnnAssign) and st.value is not None:
                self.assign(st.target, self.expr(st.value), st)
            elif isinstance(st, ast.Expr):
                self.expr(st.value)
            elif isinstance(st, ast.Pass):
                continue
            elif isinstance(st, ast.If):
                self.if_(st)
            elif isinstance(st, ast.For):
                self.for_(st)
            elif isinstance(st, ast.While):
                self.while_(st)
            else:
                kind = {ast.With: "with", ast.Assert: "assert", ast.Raise: "raise", ast.Try: "try",
                        ast.AugAssign: "augmented assignment"}.get(type(st), type(st).__name__)
                raise _Unsupported(f"a {kind} statement", self.where(st))
        return _Lit(None)

    # ---- control flow: prim::If and prim::Loop with blocks ----

    def _block(self, body: List[ast.stmt], env: Dict[str, Any]) -> Tuple[List[str], Dict[str, Any]]:
        """Runs `body` in a new block over a copy of `env`: (its lines, its env)."""
        self.em.blocks.append([])
        frame = _Frame(self.em, self.fname, dict(env))
        try:
            frame.run(body, top=False)
        finally:
            lines = self.em.blocks.pop()
        return lines, frame.env

    def _in_block(self, lines: List[str], fn):
        """Runs fn() with `lines` as the open block (to add its outputs' ops)."""
        self.em.blocks.append(lines)
        try:
            return fn()
        finally:
            self.em.blocks.pop()

    def condition(self, node) -> Any:
        c = self.expr(node)
        if _kind_of(c) == "Tensor":
            return self.call_op("aten::Bool", [c], {}, node)
        if _kind_of(c) != "bool":
            raise FormatError(f"{self.where(node)}: a condition of type {_describe(c)}")
        return c

    def if_(self, st: ast.If):
        cond = self.condition(st.test)
        if isinstance(cond, _Lit):  # known now: only the taken branch exists
            out = _Frame(self.em, self.fname, self.env)
            out.run(st.body if cond.value else st.orelse, top=False)
            return
        then_lines, then_env = self._block(st.body, self.env)
        else_lines, else_env = self._block(st.orelse, self.env)
        names = [n for n in then_env if n in else_env and not (then_env[n] is self.env.get(n) and
                                                                 else_env[n] is self.env.get(n))]
        names = [n for n in names if not isinstance(then_env[n], _Module)]
        then_out = self._in_block(then_lines, lambda: [self.materialize(then_env[n]) for n in names])
        else_out = self._in_block(else_lines, lambda: [self.materialize(else_env[n]) for n in names])
        types = [_unify(a.type, b.type, f"{self.where(st)}: {n}") for n, a, b in zip(names, then_out, else_out)]
        outs = self.em.op("prim::If", [self.materialize(cond)], types, where=self.where(st),
                          blocks=[([], then_lines, then_out), ([], else_lines, else_out)])
        self.env.update(zip(names, outs))

    def _loop(self, st, trip: _V, cond: _V, index_hint: str, carried_names: List[str],
              body_fn, next_cond_fn):
        """A prim::Loop: block (index, carried...) -> (condition, carried...)."""
        init = [self.materialize(self.env[n]) for n in carried_names]
        if any(v.type == "NoneType" for v in init):
            raise _Unsupported("a loop-carried value that is None before the loop (annotate it Optional)",
                               self.where(st))
        params = [_V(self.em.fresh(index_hint or "i"), "int")]
        params += [_V(self.em.fresh(n), _loose(v.type)) for n, v in zip(carried_names, init)]
        env = dict(self.env)
        env.update(zip(carried_names, params[1:]))
        self.em.blocks.append([])
        frame = _Frame(self.em, self.fname, env)
        try:
            body_fn(frame, params[0])
            frame.run(st.body, top=False)
            results = [next_cond_fn(frame)] + [frame.materialize(frame.env[n]) for n in carried_names]
        finally:
            lines = self.em.blocks.pop()
        for n, p, r in zip(carried_names, params[1:], results[1:]):
            if _loose(r.type) != p.type and p.type not in (_loose(r.type) + "?", "NoneType"):
                raise FormatError(f"{self.where(st)}: {n} is a {p.type} before the loop and a {r.type} in it")
        outs = self.em.op("prim::Loop", [trip, cond] + init, [p.type for p in params[1:]], where=self.where(st),
                          blocks=[(params, lines, results)])
        self.env.update(zip(carried_names, outs))

    def for_(self, st: ast.For):
        if st.orelse:
            raise _Unsupported("a for ... else statement", self.where(st))
        if not isinstance(st.target, ast.Name):
            raise _Unsupported("a for loop over tuples", self.where(st))
        it = st.iter
        carried = [n for n in _assigned(st.body) if n in self.env and n != st.target.id and _is_value(self.env[n])]
        true = self.em.constant(True)
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range" and len(it.args) == 1:
            trip = self.materialize(self.expr(it.args[0]))
            bind = lambda frame, i: frame.env.__setitem__(st.target.id, i)  # noqa: E731
        else:
            seq = self.materialize(self.expr(it))
            if not seq.type.endswith("[]"):
                raise _Unsupported("a for loop over something other than range(n) or a list", self.where(st))
            trip = self.call_op("aten::len", [seq], {}, st)

            def bind(frame, i):
                frame.env[st.target.id] = frame.call_op("aten::__getitem__", [seq, i], {}, st)
        self._loop(st, trip, true, st.target.id, carried, bind, lambda frame: true)

    def while_(self, st: ast.While):
        if st.orelse:
            raise _Unsupported("a while ... else statement", self.where(st))
        cond_name = st.test.id if isinstance(st.test, ast.Name) else None
        carried = [n for n in _assigned(st.body) if n in self.env and n != cond_name and _is_value(self.env[n])]
        first = self.condition(st.test)
        if isinstance(first, _Lit) and not first.value:
            return  # never runs
        trip = self.em.constant(2**63 - 1)
        self._loop(st, trip, self.materialize(first), "", carried, lambda frame, i: None,
                   lambda frame: frame.materialize(frame.condition(st.test)))
        if cond_name:
            self.env[cond_name] = _Lit(False)

    def assign(self, target, value, st):
        if isinstance(target, ast.Name):
            if isinstance(value, (list, dict)):
                # a named list or dict may be mutated (append, setitem): it gets one identity,
                # a prim::ListConstruct / DictConstruct, never a shared constant
                value = self.construct(value, st)
            self.env[target.id] = value
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            items = self.unpack(value, len(target.elts), st)
            for t, v in zip(target.elts, items):
                self.assign(t, v, st)
            return
        raise FormatError(f"{self.where(st)}: an assignment to {ast.unparse(target)}")

    def unpack(self, value, n: int, st):
        if isinstance(value, tuple):
            if len(value) != n:
                raise FormatError(f"{self.where(st)}: unpacking {len(value)} values into {n}")
            return list(value)
        if isinstance(value, _V) and value.type.startswith("("):
            types = _split_tuple_type(value.type)
            if len(types) != n:
                raise FormatError(f"{self.where(st)}: unpacking a {value.type} into {n}")
            return self.em.op("prim::TupleUnpack", [value], types, where=self.where(st))
        if isinstance(value, _V) and value.type.endswith("[]"):
            return self.em.op("prim::ListUnpack", [value], [value.type[:-2]] * n, where=self.where(st))
        raise FormatError(f"{self.where(st)}: cannot unpack {value!r}")

    def construct(self, value, st, type_hint: Optional[str] = None) -> _V:
        """A fresh, mutable list or dict value."""
        if isinstance(value, dict):
            keys = [self.materialize(k) for k in value]
            vals = [self.materialize(v) for v in value.values()]
            kt, vt = (type_hint[5:-1].split(", ", 1) if type_hint and type_hint.startswith("Dict(") else
                      ((keys[0].type if keys else "str"), (_loose(vals[0].type) if vals else "Tensor")))
            items = [x for kv in zip(keys, vals) for x in kv]
            return self.em.op("prim::DictConstruct", items, [f"Dict({kt}, {vt})"], where=self.where(st))[0]
        elem_hint = type_hint[:-2] if type_hint and type_hint.endswith("[]") else None
        items = [self.materialize(v, elem_hint) for v in value]
        elem = elem_hint or _list_elem(items)
        return self.em.op("prim::ListConstruct", items, [f"{elem}[]"], where=self.where(st))[0]

    def materialize(self, value, type_hint: Optional[str] = None) -> _V:
        em = self.em
        if isinstance(value, _V):
            return value
        if isinstance(value, _Lit):
            return em.constant(value.value, type_hint)
        if isinstance(value, np.ndarray):
            return em.weight(value, "tensor")
        if isinstance(value, _Device):
            return em.constant(value)
        if isinstance(value, tuple):
            items = [self.materialize(v) for v in value]
            return em.op("prim::TupleConstruct", items, ["(" + ", ".join(i.type for i in items) + ")"])[0]
        if isinstance(value, list):
            lits = [v.value if isinstance(v, _Lit) else v for v in value]
            if all(not isinstance(v, (_V, np.ndarray, tuple, list, _Module)) for v in lits):
                try:
                    return em.constant(lits, type_hint)
                except FormatError:
                    pass
            elem_hint = type_hint[:-2] if type_hint and type_hint.endswith("[]") else None
            items = [self.materialize(v, elem_hint) for v in value]
            elem = elem_hint or _list_elem(items)
            return em.op("prim::ListConstruct", items, [f"{elem}[]"])[0]
        if isinstance(value, dict):
            return self.construct(value, None, type_hint)
        if isinstance(value, _Module):
            raise FormatError(f"module {value.path or 'self'} used as a value")
        return em.constant(value, type_hint)

    # expressions
    def expr(self, node):
        em = self.em
        if isinstance(node, ast.Constant):
            return _Lit(node.value)
        if isinstance(node, ast.Name):
            if node.id in self.env:
                return self.env[node.id]
            if node.id == "__torch__":
                return _Namespace("__torch__")
            if node.id in ("True", "False", "None", "inf", "nan"):
                return _Lit({"True": True, "False": False, "None": None, "inf": float("inf"),
                             "nan": float("nan")}[node.id])
            raise FormatError(f"{self.where(node)}: name {node.id} is not defined")
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = self.expr(node.operand)
            if isinstance(inner, _Lit) and isinstance(inner.value, (int, float)) and not isinstance(inner.value, bool):
                return _Lit(-inner.value)
            raise _Unsupported("scripted arithmetic (negation of a value)", self.where(node))
        if isinstance(node, ast.List):
            return [self.expr(e) for e in node.elts]
        if isinstance(node, ast.Tuple):
            return tuple(self.expr(e) for e in node.elts)
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                raise _Unsupported("a dict literal with ** unpacking", self.where(node))
            return {self.expr(k): self.expr(v) for k, v in zip(node.keys, node.values)}
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "CONSTANTS" and node.attr.startswith("c"):
                i = int(node.attr[1:])
                if not isinstance(em.constants, tuple) or i >= len(em.constants):
                    raise FormatError(f"{self.where(node)}: CONSTANTS.{node.attr} is not in constants.pkl")
                c = em.constants[i]
                return em.weight(c, f"CONSTANTS.c{i}") if isinstance(c, np.ndarray) else _Lit(c)
            base = self.expr(node.value)
            return self.attribute(base, node.attr, node)
        if isinstance(node, ast.Subscript):
            base = self.expr(node.value)
            idx = self.expr(node.slice)
            if isinstance(base, tuple) and isinstance(idx, _Lit) and isinstance(idx.value, int):
                return base[idx.value]
            return self.call_op("aten::__getitem__", [base, idx], {}, node)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, (ast.BinOp, ast.Compare, ast.BoolOp, ast.IfExp)):
            raise _Unsupported(f"scripted arithmetic ({type(node).__name__})", self.where(node))
        raise FormatError(f"{self.where(node)}: an expression llga does not read: {ast.unparse(node)}")

    def attribute(self, base, name: str, node):
        if isinstance(base, _Namespace):
            qual = f"{base.path}.{name}"
            return self.em.resolve(qual) or _Namespace(qual)
        if isinstance(base, _Module):
            attrs = base.obj.attrs
            if name not in attrs:
                raise FormatError(f"{self.where(node)}: module {base.path or 'self'} has no attribute {name}")
            value = attrs[name]
            path = f"{base.path}.{name}" if base.path else name
            if isinstance(value, _ScriptObject):
                return _Module(value, path)
            if isinstance(value, np.ndarray):
                return self.em.weight(value, path)
            return _literal(value)
        raise FormatError(f"{self.where(node)}: attribute {name} of something that is not a module")

    def call(self, node: ast.Call):
        func = node.func
        if isinstance(func, ast.Name) and func.id == "annotate" and len(node.args) == 2:
            return self.annotate(node)
        if isinstance(func, ast.Name) and func.id == "uninitialized" and len(node.args) == 1:
            t = _ir_type_of_annotation(node.args[0])
            return self.em.op("prim::Uninitialized", [], [t], where=self.where(node))[0]
        if isinstance(func, ast.Name) and func.id in ("unchecked_cast", "isinstance") and len(node.args) == 2:
            if func.id == "unchecked_cast":
                return self.expr(node.args[1])
            raise _Unsupported("isinstance", self.where(node))
        args = [self.expr(a) for a in node.args]
        kwargs = {k.arg: self.expr(k.value) for k in node.keywords}
        # (submodule).method(args)
        if isinstance(func, ast.Attribute):
            owner = func.value
            dotted = _dotted(func)
            if dotted and dotted.startswith("torch.") and dotted.count(".") == 1:
                name = func.attr
                if name == "device":
                    return _Device(args[0].value if args and isinstance(args[0], _Lit) else "cpu")
                if name in ("__is__", "__isnot__") and len(args) == 2:
                    known = _identity(args[0], args[1])
                    if known is not None:  # decided by the types, as TorchScript refines Optionals
                        return _Lit(known if name == "__is__" else not known)
                if name in ("is_autocast_enabled", "is_grad_enabled", "is_autocast_cpu_enabled") and not args:
                    return _Lit(False)  # llga runs inference: no autocast, no autograd
                if name == "format":  # vararg: format(str, ...) -> str
                    items = [self.materialize(a) for a in args]
                    return self.em.op("aten::format", items, ["str"], where=self.where(node))[0]
                return self.call_op(f"aten::{name}", args, kwargs, node)
            if dotted == "ops.prim.unchecked_cast" and len(args) == 1:
                return args[0]
            if dotted and (dotted.startswith("ops.prim.") or dotted.startswith("ops.aten.")):
                ns, name = dotted.split(".")[1:3]
                return self.call_op(f"{ns}::{name}", args, kwargs, node)
            target = self.expr(owner)
            if isinstance(target, _Module):
                return self.inline(target, func.attr, args, node)
            if isinstance(target, _Namespace):
                qual = f"{target.path}.{func.attr}"
                f = self.em.resolve(qual)
                if f is not None:
                    return self.call_function(f, args, kwargs, node)
                fields = self.em.named_tuple(qual)
                if fields is not None:  # a NamedTuple: a tuple of its fields
                    if kwargs or len(args) != len(fields):
                        raise FormatError(f"{self.where(node)}: {qual} takes its {len(fields)} fields in order")
                    return tuple(args)
            raise FormatError(f"{self.where(node)}: a method call llga does not read: {ast.unparse(node)[:80]}")
        if isinstance(func, ast.Name) and isinstance(self.env.get(func.id), _Function):
            return self.call_function(self.env[func.id], args, kwargs, node)
        if isinstance(func, ast.Name):
            if func.id == "getattr" and len(args) == 2 and isinstance(args[1], _Lit):
                return self.attribute(args[0], str(args[1].value), node)
            if func.id in ("int", "float", "bool"):
                return self.call_op(f"aten::{func.id.capitalize()}", args, kwargs, node)
            if func.id == "len":
                return self.call_op("aten::len", args, kwargs, node)
            if func.id == "str" and len(args) == 1 and isinstance(args[0], _Lit):
                return _Lit(str(args[0].value))
        raise _Unsupported(f"the call {ast.unparse(func)}", self.where(node))

    def annotate(self, node: ast.Call):
        value = self.expr(node.args[1])
        if isinstance(node.args[0], ast.Name) and node.args[0].id == "number":
            # a 0-dim tensor (prim::NumToTensor's) passed as a Scalar, as a traced graph passes it
            return self.call_op("aten::ScalarImplicit", [value], {}, node) if _kind_of(value) == "Tensor" else value
        hint = _ir_type_of_annotation(node.args[0])
        if isinstance(value, (list, dict)):
            return self.construct(value, node, hint)
        return self.materialize(value, hint)

    def call_function(self, f: _Function, args, kwargs, node):
        em = self.em
        fn, fname = em.classes[f.qualname]
        names = [a.arg for a in fn.args.args]
        if len(args) > len(names):
            raise FormatError(f"{self.where(node)}: {f.qualname} takes {len(names)} argument(s), got {len(args)}")
        defaults = dict(zip(names[len(names) - len(fn.args.defaults):], fn.args.defaults))
        env: Dict[str, Any] = {}
        for i, n in enumerate(names):
            if i < len(args):
                env[n] = args[i]
            elif n in kwargs:
                env[n] = kwargs[n]
            elif n in defaults:
                try:
                    env[n] = _literal(ast.literal_eval(defaults[n]))
                except ValueError:
                    raise FormatError(f"{self.where(node)}: a default of {f.qualname} is not a literal") from None
            else:
                raise FormatError(f"{self.where(node)}: {f.qualname} needs its argument {n}")
        em.depth += 1
        if em.depth > 200:
            raise FormatError(f"{self.where(node)}: calls nest more than 200 deep")
        out = _Frame(em, fname, env).run(fn.body)
        em.depth -= 1
        return out

    def inline(self, mod: _Module, name: str, args, node):
        em = self.em
        fn, fname = em.method(mod, name)
        params = [a.arg for a in fn.args.args]
        if len(params) - 1 != len(args):
            raise FormatError(f"{self.where(node)}: {mod.obj.qualname}.{name} takes {len(params) - 1} argument(s), "
                              f"got {len(args)}")
        em.depth += 1
        if em.depth > 200:
            raise FormatError(f"{self.where(node)}: method calls nest more than 200 deep")
        env = {params[0]: mod}
        env.update(zip(params[1:], args))
        out = _Frame(em, fname, env).run(fn.body)
        em.depth -= 1
        return out

    def call_op(self, kind: str, args, kwargs, node):
        where = self.where(node)
        folded = _fold(kind, args, kwargs)
        if folded is not None:  # Python values known now: computed here, as constant propagation would
            return folded
        overloads = _schemas().get(kind)
        if overloads is None:
            raise _Unsupported(kind, where)
        for ov in overloads:
            bound = _bind(ov, args, kwargs)
            if bound is None:
                continue
            inputs = [self.materialize(v, _hint(t)) for v, t in bound]
            types = [_return_type(r, bound) for r in ov["returns"]]
            outs = self.em.op(kind, inputs, types, hint="", where=where)
            return outs[0] if len(outs) == 1 else tuple(outs)
        shown = ", ".join(_describe(a) for a in args)
        raise FormatError(f"{where}: no signature of {kind} takes ({shown}"
                          f"{', ' if args and kwargs else ''}{', '.join(kwargs)})")


_TENSOR_TYPE_PREFIXES = tuple(f"{d}(" for d in _IR_DTYPES.values())


def _py_div(a, b):
    return a / b


_FOLDABLE = {
    "aten::__not__": lambda a: not a, "aten::eq": lambda a, b: a == b, "aten::ne": lambda a, b: a != b,
    "aten::lt": lambda a, b: a < b, "aten::gt": lambda a, b: a > b, "aten::le": lambda a, b: a <= b,
    "aten::ge": lambda a, b: a >= b, "aten::add": lambda a, b: a + b, "aten::sub": lambda a, b: a - b,
    "aten::mul": lambda a, b: a * b, "aten::div": _py_div, "aten::floordiv": lambda a, b: a // b,
    "aten::remainder": lambda a, b: a % b, "aten::neg": lambda a: -a, "aten::Bool": bool, "aten::Int": int,
    "aten::Float": float, "aten::__is__": lambda a, b: a is b, "aten::__isnot__": lambda a, b: a is not b,
    "aten::__and__": lambda a, b: a and b, "aten::__or__": lambda a, b: a or b,
}


def _fold(kind: str, args, kwargs) -> Optional[_Lit]:
    """The op on Python scalars (numbers, bools, None, strings) known now, or
    None. Only exact results: a division by zero or a string operand to
    arithmetic is left to run."""
    fn = _FOLDABLE.get(kind)
    if fn is None or kwargs or not all(isinstance(a, _Lit) for a in args):
        return None
    vals = [a.value for a in args]
    if any(isinstance(v, (list, tuple, dict)) for v in vals):
        return None
    if kind not in ("aten::__is__", "aten::__isnot__", "aten::eq", "aten::ne", "aten::__not__", "aten::Bool") and \
            any(v is None or isinstance(v, str) for v in vals):
        return None
    try:
        return _Lit(fn(*vals))
    except (ZeroDivisionError, TypeError, ValueError, OverflowError):
        return None


def _list_elem(items: List[_V]) -> str:
    if not items:
        return "int"
    types = {_loose(i.type) for i in items}
    if len(types) == 1:
        return types.pop()
    if types == {"Tensor", "NoneType"}:
        return "Tensor?"
    raise FormatError(f"a list of {sorted(types)}")


def _literal(v):
    """A Python default value as the evaluator holds literals."""
    if isinstance(v, list):
        return [_literal(x) for x in v]
    if isinstance(v, tuple):
        return tuple(_literal(x) for x in v)
    return _Lit(v)


def _identity(a, b) -> Optional[bool]:
    """`a is b` when the types decide it (None against None, or against a
    value that cannot be None); None when only running can tell."""
    def none(v):
        if isinstance(v, _Lit):
            return v.value is None
        if isinstance(v, _V):
            return True if v.type == "NoneType" else (None if v.type.endswith("?") else False)
        return False
    na, nb = none(a), none(b)
    if na is True and nb is True:
        return True
    if (na is True and nb is False) or (na is False and nb is True):
        return False
    return None


def _assigned(body: List[ast.stmt]) -> List[str]:
    """Names a block assigns (nested blocks too), in order of first assignment."""
    out: List[str] = []

    def target(t):
        if isinstance(t, ast.Name):
            if t.id not in out:
                out.append(t.id)
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                target(e)

    for node in body:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Assign):
                for t in sub.targets:
                    target(t)
            elif isinstance(sub, (ast.AnnAssign, ast.AugAssign, ast.For)):
                target(sub.target)
    return out


def _is_value(v) -> bool:
    """A value a block can carry (not a module, function or namespace, which are read, never changed)."""
    return not isinstance(v, (_Module, _Function, _Namespace))


def _is_tensor_type(t: str) -> bool:
    return t == "Tensor" or t.startswith(_TENSOR_TYPE_PREFIXES)


def _loose(t: str) -> str:
    """A block's value type: any tensor type is Tensor."""
    return "Tensor" if _is_tensor_type(t) else t


def _unify(a: str, b: str, what: str) -> str:
    if _loose(a) == _loose(b):
        return _loose(a)
    if a == "NoneType":
        return _loose(b) + "?"
    if b == "NoneType":
        return _loose(a) + "?"
    raise FormatError(f"{what} is a {a} in one branch and a {b} in the other")


def _dotted(node) -> Optional[str]:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _split_tuple_type(t: str) -> List[str]:
    inner, depth, cur, out = t[1:-1], 0, "", []
    for c in inner:
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        if c == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += c
    if cur.strip():
        out.append(cur.strip())
    return out


def _kind_of(v) -> str:
    """The IR type class of an argument: Tensor, int, float, bool, None, str,
    Device, list:<elem>, tuple, module."""
    if isinstance(v, _V):
        t = v.type
        if t == "Tensor" or t.startswith(_TENSOR_TYPE_PREFIXES):
            return "Tensor"
        if t.endswith("[]"):
            e = t[:-2]
            return "list:" + ("Tensor" if e == "Tensor" or e.startswith(_TENSOR_TYPE_PREFIXES) else e)
        if t.startswith("("):
            return "tuple"
        return {"NoneType": "None"}.get(t, t)
    if isinstance(v, np.ndarray):
        return "Tensor"
    if isinstance(v, _Device):
        return "Device"
    if isinstance(v, _Lit):
        x = v.value
        if x is None:
            return "None"
        return {bool: "bool", int: "int", float: "float", str: "str"}.get(type(x), "other")
    if isinstance(v, list):
        kinds = {_kind_of(e) for e in v}
        if not kinds:
            return "list:empty"
        if kinds <= {"int"}:
            return "list:int"
        if kinds <= {"int", "float"}:
            return "list:float"
        if kinds <= {"Tensor"}:
            return "list:Tensor"
        if kinds <= {"Tensor", "None"}:
            return "list:Tensor?"
        if kinds <= {"bool"}:
            return "list:bool"
        if kinds <= {"str"}:
            return "list:str"
        return "list:other"
    if isinstance(v, tuple):
        return "tuple"
    return "other"


def _accepts(t: str, v) -> bool:
    k = _kind_of(v)
    if t.startswith("Optional["):
        return k == "None" or _accepts(t[9:-1], v)
    if t == "Tensor":
        return k == "Tensor"
    if t == "number":
        return k in ("int", "float", "bool", "Scalar")
    if t == "int":
        return k == "int"
    if t == "float":
        return k == "float" or (k == "int" and isinstance(v, _Lit))
    if t in ("bool", "str", "Device"):
        return k == t or (t == "Device" and k == "str" and isinstance(v, _Lit))
    if t in ("t", "t1", "t2", "Any"):
        return k != "other"
    if t.startswith("Dict["):
        key = t[5:t.index(",")]
        return k.startswith(f"Dict({key},") or (key == "t" and k.startswith("Dict("))
    if t.startswith("List["):
        e = t[5:-1]
        if k == "list:empty":
            return True
        if e == "t":
            return k.startswith("list:")
        if e == "int":
            return k == "list:int"
        if e == "float":
            return k in ("list:float", "list:int") and isinstance(v, list)
        if e == "Tensor":
            return k == "list:Tensor"
        if e == "Optional[Tensor]":
            return k in ("list:Tensor", "list:Tensor?")
        if e == "bool":
            return k == "list:bool"
        if e == "str":
            return k == "list:str"
        return False
    return False


def _bind(ov, args, kwargs):
    """[(value, schema type)] in the schema's order with defaults filled, or
    None when the call does not fit this overload."""
    params = ov["args"]
    positional = [p for p in params if not p["kwarg_only"]]
    if len(args) > len(positional):
        return None
    out = []
    names = {p["name"] for p in params}
    if any(k not in names for k in kwargs):
        return None
    for i, p in enumerate(params):
        if i < len(args) and not p["kwarg_only"]:
            if p["name"] in kwargs:
                return None
            v = args[i]
        elif p["name"] in kwargs:
            v = kwargs[p["name"]]
        elif "default" in p:
            d = p["default"]
            if isinstance(d, dict):
                if "float" in d:
                    d = float(d["float"])
                else:
                    return None  # a default llga cannot write: this overload needs it given
            v = [_Lit(e) for e in d] if isinstance(d, list) else _Lit(d)
        else:
            return None
        if not _accepts(p["type"], v):
            return None
        out.append((v, p["type"]))
    return out


def _hint(t: str) -> Optional[str]:
    t = t[9:-1] if t.startswith("Optional[") else t
    return {"float": "float", "List[float]": "float[]", "Device": "Device", "List[int]": "int[]"}.get(t)


def _ir_type(t: str) -> str:
    if t.startswith("Optional["):
        return _ir_type(t[9:-1]) + "?"
    if t.startswith("List["):
        return _ir_type(t[5:-1]) + "[]"
    return {"number": "Scalar"}.get(t, t)


def _return_type(r: str, bound) -> str:
    if "t" in (r, r[5:-1] if r.startswith("List[") else None):
        elem = None
        for v, t in bound:
            if t == "t" and isinstance(v, _V):
                elem = v.type
            elif t.startswith("Dict[") and isinstance(v, _V) and v.type.startswith("Dict("):
                elem = v.type[5:-1].split(", ", 1)[1]
            elif t == "List[t]":
                k = _kind_of(v)
                if k.startswith("list:") and k not in ("list:empty", "list:other"):
                    elem = k[5:]
        elem = elem or "Tensor"
        return f"{elem}[]" if r.startswith("List[") else elem
    return _ir_type(r)


def _describe(v) -> str:
    k = _kind_of(v)
    return k.replace("list:", "List[") + "]" if k.startswith("list:") else k


# ---- the entry point ----------------------------------------------------------

def load_torchscript(path) -> TorchScriptModel:
    """Reads a ``torch.jit.save`` archive without importing PyTorch; see the
    module's documentation for what it supports. ``llga.optimize`` takes the
    result (``llga.optimize(llga.load_torchscript(p), [x])``)."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(2, "No such file or directory", path)
    if os.path.isdir(path):
        raise IsADirectoryError(21, "Is a directory", path)
    archive = _Archive(path)
    try:
        return _load(archive, path)
    finally:
        archive.close()


def _load(archive: _Archive, path: str) -> TorchScriptModel:
    from . import parse

    module = archive.unpickle("data.pkl", "data")
    constants = archive.unpickle("constants.pkl", "constants")
    if not isinstance(module, _ScriptObject):
        raise FormatError(f"{path}: data.pkl holds a {type(module).__name__}, not a TorchScript module")
    em = _Emitter(archive, constants)
    root = _Module(module, "")
    fn, fname = em.method(root, "forward")
    params = fn.args.args[1:]
    inputs = [_V(a.arg, _ir_type_of_annotation(a.annotation)) for a in params]
    defaults = []
    for d in fn.args.defaults:
        try:
            defaults.append(ast.literal_eval(d))
        except ValueError:
            raise FormatError(f"{path}: forward's default value {ast.unparse(d)} is not a literal") from None
    frame = _Frame(em, fname, {fn.args.args[0].arg: root, **{a.arg: v for a, v in zip(params, inputs)}})
    try:
        result = frame.run(fn.body)
        out = frame.materialize(result)
    except _Unsupported as u:
        raise UnsupportedOpError(
            f"llga.load_torchscript cannot read {u.kind} at {u.where} of {path}; where PyTorch is installed, load it "
            "with PyTorch instead: llga.optimize(torch.jit.load(path))", {u.kind: [u.where]}) from None
    header = "graph(" + ",\n      ".join(f"%{v.name} : {v.type}" for v in inputs) + "):"
    text = "\n".join([header] + ["  " + ln for ln in em.prelude + em.blocks[0]] + [f"  return (%{out.name})", ""])
    try:
        graph = parse(text)
    except Exception as e:  # noqa: BLE001 - our own text: a bug or a construct we mis-wrote
        raise FormatError(f"{path}: the IR written for its forward does not parse ({e})") from None
    return TorchScriptModel(graph, em.params, text, path, defaults)
