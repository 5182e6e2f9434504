"""Differential cases for the TorchScript language itself: the conversions
(bool(), float(), int() and the implicit tensor-to-number ones), the
operators on bools, ints and tensors (&, |, ^, not, is, //), list, tuple,
dict and str values (literals, indexing, unpacking, len, list(), append,
join, lower/upper, startswith/endswith), tensor queries (dim, numel, size,
dtype, device), Optional refinement, early returns and raise. Each case is
a scripted program (one traced) whose branches, loop trip counts and list
lengths follow the generated tensor's shape and values, compared with
PyTorch's interpreter running the same program; some draws make PyTorch
raise (an index out of range, a one-element tensor expected, a raise
statement) and then llga must raise llga.LlgaError too.

Several kinds appear only in graphs of a particular form; the program
filed under each says which construct produces it."""

from typing import Dict, List, Optional, Tuple

import torch
from hypothesis import strategies as st

from differential_common import Case, shapes, tensors

# kind -> a known llga/PyTorch mismatch with its minimal repro (strict xfail in
# test_differential.py). Each repro is a scripted `f(x: Tensor)` compiled with
# llga.optimize(torch.jit.script(f)).
KNOWN_BUGS = {}


def one(dt, ranks=range(5)):
    """A tuple of one tensor of a rank drawn evenly from `ranks` (the programs
    branch on the rank, and shapes() mostly draws rank 0), any sizes and layout."""
    return st.tuples(st.sampled_from(list(ranks)).flatmap(lambda r: shapes(r, r)).flatmap(lambda s: tensors(dt, s)))


def scripted(fn, **kw):
    """A scripted case over one tensor (see one())."""
    return Case(fn, one, script=True, **kw)


# ------------------------------------------------ conversions


def _bool(x: torch.Tensor) -> Tuple[bool, bool, bool, bool]:
    n = x.numel()
    t = x.flatten()[n // 2] if n > 1 else x if n == 1 or x.dim() == 2 else x.sum()  # empty: PyTorch raises
    return bool(t.round()), bool(n % 3), bool(float(x.dim()) - 2.0), bool(x.long().sum())


def _float(x: torch.Tensor) -> Tuple[float, float, float, float, float]:
    n = x.numel()
    t = x.sum() if x.dim() % 2 == 0 else x.flatten()[:1]  # any one-element tensor; an empty one raises
    s = "-1.5e" + str(x.dim() - 2)
    return float(t), float(n) / 7, float(x.dim() > 2), float(s), float(x.long().sum())


def _int(x: torch.Tensor) -> Tuple[int, int, int, int, int]:
    n = x.numel()
    # an empty tensor raises, as does nan (the mean of an empty tensor)
    t = x.flatten()[:1] * 10 if x.dim() % 2 else x.mean() * 10 if x.dim() == 2 else x.sum() * 10
    return int(t), int(float(n) / -3.0), int(x.dim() > 1), int(str(n) + "7"), int(x.long().sum())


def _float_implicit(x: torch.Tensor) -> torch.Tensor:
    # a tensor where a float argument is expected: aten::FloatImplicit (which
    # rejects tensors of one or more dims, as drawn for some rank-1 inputs)
    eps = x.abs()[:1] if x.dim() == 1 and x.numel() % 3 == 1 else x.abs().mean()
    return torch.layer_norm(x, x.shape[-1:], None, None, eps)


def _scalar_implicit(x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # a tensor where a Scalar argument is expected: aten::ScalarImplicit, of
    # float, int and bool tensors (and of 1-dim ones now and then, which PyTorch rejects)
    a = x[:1] if x.dim() == 1 and x.numel() % 3 == 1 else x.sum()
    b = x.long().sum()
    c = (x > 0).any()
    return torch.full([2], a), torch.full([x.dim()], b), torch.full([1], c)


# ------------------------------------------------ operators on bools, ints and tensors


def _and(x: torch.Tensor) -> Tuple[bool, int, int, torch.Tensor, torch.Tensor]:
    n = x.numel()
    b = (x.dim() > 1) & (n % 2 == 0)
    i = n & x.dim()
    j = -n & 6
    if x.dtype == torch.bool:
        t = x & torch.flip(x, [0]) if x.dim() > 0 else x & ~x
    elif x.dtype == torch.int64:
        t = x & 5
    else:
        t = (x > 0) & (x < 1.5)
    u = x & x.sum().to(x.dtype) if n % 4 == 3 else (x > 0) & (x < 0)  # of float tensors: PyTorch raises
    return b, i, j, t, u


def _or(x: torch.Tensor) -> Tuple[bool, int, int, torch.Tensor, torch.Tensor]:
    n = x.numel()
    b = (x.dim() > 1) | (n % 2 == 0)
    i = n | x.dim()
    j = -n | 6
    if x.dtype == torch.bool:
        t = x | torch.flip(x, [0]) if x.dim() > 0 else x | ~x
    elif x.dtype == torch.int64:
        t = x | 5
    else:
        t = (x > 0) | (x < -1.5)
    u = x | x.sum().to(x.dtype) if n % 4 == 3 else (x > 0) | (x < 0)
    return b, i, j, t, u


def _xor(x: torch.Tensor) -> Tuple[bool, int, int, torch.Tensor, torch.Tensor]:
    n = x.numel()
    b = (x.dim() > 1) ^ (n % 2 == 0)
    i = n ^ x.dim()
    j = -n ^ 6
    if x.dtype == torch.bool:
        t = x ^ torch.flip(x, [0]) if x.dim() > 0 else x ^ ~x
    elif x.dtype == torch.int64:
        t = x ^ 5
    else:
        t = (x > 0) ^ (x < 1.5)
    u = x ^ x.sum().to(x.dtype) if n % 4 == 3 else (x > 0) ^ (x < 0)
    return b, i, j, t, u


def _not(x: torch.Tensor) -> Tuple[bool, bool, List[bool]]:
    flags: List[bool] = []
    for d in x.shape:
        flags.append(not d > 2)
    return not x.dim() > 1, not bool(x.numel() % 3), flags


def _floordiv(x: torch.Tensor) -> Tuple[int, int, float, int]:
    n = x.numel()
    d = x.dim() - 2  # 0 for rank 2: integer division by zero raises
    return n // 3, -n // 4, float(n) // -2.5, (n - 7) // d


def _is(x: torch.Tensor) -> Tuple[bool, bool, bool]:
    # `is None` on Optionals that are None on some inputs only: aten::__is__
    y: Optional[int] = None if x.dim() > 2 else x.dim()
    t: Optional[torch.Tensor] = x if x.numel() % 2 == 0 else None
    return y is None, t is None, (None if x.numel() > 3 else "s") is None


def _isnot(x: torch.Tensor) -> Tuple[bool, int, torch.Tensor]:
    # `is not None` refines an Optional: the refined value is a
    # prim::unchecked_cast of it
    y: Optional[int] = None if x.dim() > 2 else x.dim()
    t: Optional[torch.Tensor] = x if x.numel() % 2 == 0 else None
    z = 0
    if y is not None:
        z = y + 1
    out = torch.zeros(1)
    if t is not None:
        out = t.sum().reshape(1)
    return y is not None, z, out


def _unchecked_cast(x: torch.Tensor) -> Tuple[int, List[int], torch.Tensor]:
    # Optional refinement (`if v is not None: use v`, `assert v is not None`)
    # types the value as non-Optional through prim::unchecked_cast
    best: Optional[int] = None
    for d in x.shape:
        if best is None or d > best:
            best = d
    sizes: Optional[List[int]] = list(x.shape) if x.dim() % 2 == 1 else None
    out: List[int] = []
    if sizes is not None:
        out = sizes
    t: Optional[torch.Tensor] = x * 2 if x.numel() > 2 else None
    assert t is not None or x.dim() != 2, "too few elements"  # PyTorch raises for some rank-2 inputs
    if t is None:
        t = x
    return (best if best is not None else -1), out, t


# ------------------------------------------------ tensor queries


def _dim(x: torch.Tensor) -> Tuple[int, List[int], torch.Tensor]:
    dims: List[int] = []
    y = x
    while y.dim() > 0:
        dims.append(y.dim())
        y = y.sum(0)
    return x.dim(), dims, y


def _numel(x: torch.Tensor) -> Tuple[int, int, bool]:
    return x.numel(), x[..., :2].numel() if x.dim() else -1, x.numel() == 0


def _size(x: torch.Tensor) -> Tuple[List[int], int, int, List[int]]:
    k = x.numel() % (2 * x.dim() + 1) - x.dim()  # == x.dim() now and then: out of range, PyTorch raises
    none: List[int] = []
    i = x.size(k) if x.dim() or x.item() > 0 else -1
    return x.size(), i, x.shape[-1] if x.dim() else 0, x.sum(0).size() if x.dim() else none


def _dtype(x: torch.Tensor) -> Tuple[int, bool, torch.Tensor, List[int]]:
    n = x.numel()
    y = x.long() if n % 3 == 0 else x.to(torch.bool) if n % 3 == 1 else x
    z = torch.zeros(2, dtype=y.dtype)
    kinds: List[int] = []
    for t in [x, y, z.double(), x.int()]:
        kinds.append(t.dtype)
    return y.dtype, y.dtype == torch.float32, z, kinds


def _device(x: torch.Tensor) -> Tuple[str, bool, bool, torch.Tensor]:
    # Device values are used, not returned (llga returns a device as its name)
    d = x.device
    z = torch.ones(x.dim(), device=d)
    return str(d), d == torch.device("cpu"), d != x.sum().device, z


def _type(x: torch.Tensor) -> Tuple[str, bool, int]:
    # the .type of a Device value: prim::type
    d = x.device
    n = 0
    if d.type == "cpu":
        n = x.numel()
    return d.type, d.type.startswith("cu"), n


# ------------------------------------------------ str values


def _lower(x: torch.Tensor) -> Tuple[str, str, List[str]]:
    s = "Shape " + str(x.shape) + " N=" + str(x.numel()) + (" Ok" if x.dim() % 2 else " nO")
    words = ["Shape", str(x.shape), "N=" + str(x.numel()), "Ok" if x.dim() % 2 else "nO", ""]
    low: List[str] = []
    for w in words[x.numel() % 3:]:
        low.append(w.lower())
    return s.lower(), (str(x.dim() - 2) + "-aB_Zz").lower(), low


def _upper(x: torch.Tensor) -> Tuple[str, str, List[str]]:
    s = "Shape " + str(x.shape) + " n=" + str(x.numel()) + (" Ok" if x.dim() % 2 else " nO")
    words = ["Shape", str(x.shape), "n=" + str(x.numel()), "Ok" if x.dim() % 2 else "nO", ""]
    up: List[str] = []
    for w in words[x.numel() % 3:]:
        up.append(w.upper())
    return s.upper(), (str(x.dim() - 2) + "-aB_Zz").upper(), up


# A start past the string's end makes PyTorch 1.13 raise (std::string::substr's
# out_of_range) where Python answers False: the programs keep start <= len(s).


def _startswith(x: torch.Tensor) -> Tuple[bool, bool, bool, bool, bool]:
    s = str(x.numel()) + "x" + str(x.dim())
    p = str(x.numel() % 10)
    return s.startswith(p), s.startswith("1"), s.startswith("x", min(x.dim(), len(s))), \
        s.startswith(p, 0, x.dim()), s.startswith("", x.dim() % 2)


def _endswith(x: torch.Tensor) -> Tuple[bool, bool, bool, bool, bool]:
    s = str(x.numel()) + "x" + str(x.dim())
    p = "x" + str(x.numel() % 5)
    return s.endswith(p), s.endswith("2"), s.endswith("x", 0, x.dim()), \
        s.endswith(str(x.dim()), min(x.dim(), len(s))), s.endswith("", 0, x.dim() % 2)


def _join(x: torch.Tensor) -> Tuple[str, str, str]:
    parts: List[str] = []
    for d in x.shape:
        parts.append(str(d))
    return ",".join(parts), "".join(parts), " x ".join([str(x.numel())] + parts)


# ------------------------------------------------ lists, tuples, dicts


def _len(x: torch.Tensor) -> Tuple[int, int, int, int, int]:
    sizes = list(x.shape)
    d = {"a": 1} if x.dim() % 2 else {"a": 1, "b": 2}
    return len(sizes), len(str(x.numel())), len(d), len(x.unbind(0)) if x.dim() else 0, \
        len(x) if x.dim() or x.item() > 0 else 0  # len() of a 0-dim tensor: PyTorch raises


def _list(x: torch.Tensor) -> Tuple[List[int], List[int], List[str], List[torch.Tensor]]:
    sizes = list(x.shape)
    copy = list(sizes)
    copy.append(x.numel())  # a copy: sizes is unchanged
    chars = list(str(x.dim()) + "ab")
    parts = list(x.unbind(0)) if x.dim() else [x]
    return sizes, copy, chars, parts


def _append(x: torch.Tensor) -> Tuple[List[int], List[torch.Tensor], List[List[int]]]:
    out: List[int] = []
    for i in range(x.numel() % 7):
        out.append(i * x.dim())
    rows: List[torch.Tensor] = []
    for i in range(x.size(0) if x.dim() else 0):
        rows.append(x[i].sum())
    nested: List[List[int]] = []
    for d in x.shape:
        nested.append([d] * d)
    return out, rows, nested


def _getitem(x: torch.Tensor) -> Tuple[int, int, str, int, torch.Tensor]:
    # list, str and dict indexing: aten::__getitem__
    sizes = list(x.shape)
    n = x.numel()
    i = n % 5 - 2
    a = sizes[i] if -len(sizes) <= i < len(sizes) else -1
    if n % 7 == 3:
        a = sizes[len(sizes)]  # out of range: PyTorch raises
    s = str(x.shape)
    d = {"rank": x.dim(), "n": n}
    key = "rank" if n % 2 else "n"
    if n % 11 == 5:
        key = "missing"  # a missing key: PyTorch raises
    parts = x.unbind(-1) if x.dim() else [x]
    t = parts[n % len(parts)] if len(parts) else x
    return a, sizes[-1] if len(sizes) else 0, s[n % len(s)] + s[-2], d[key], t


def _dict_construct(x: torch.Tensor) -> Tuple[Dict[str, int], Dict[int, torch.Tensor], List[str]]:
    # dict literals: prim::DictConstruct (a repeated key keeps its last value)
    a = "k" + str(x.dim() % 2)
    b = "k" + str(x.numel() % 2)
    d = {a: x.dim(), b: x.numel(), "z": 0}
    e = {x.dim(): x.sum(), 1: x * 2}
    return d, e, list(d.keys())


def _list_construct(x: torch.Tensor) -> Tuple[List[int], List[torch.Tensor], torch.Tensor, List[List[int]]]:
    # list literals: prim::ListConstruct
    a = [x.dim(), x.numel(), -1]
    b = [x, x + 1, x.abs()]
    c = torch.stack([x.sum(), x.amax() if x.numel() else x.sum(), torch.tensor(1.0)])
    empty: List[int] = []
    return a, b, c, [a, [x.dim()], empty]


def _list_unpack(x: torch.Tensor) -> Tuple[int, int, torch.Tensor, torch.Tensor]:
    # unpacking a list (of statically unknown length) into names:
    # prim::ListUnpack, which raises when the length differs
    sizes = x.shape[-2:] if x.dim() != 1 or x.numel() % 3 == 1 else [-1, -1]
    h, w = sizes  # rank 0 and some rank 1: PyTorch raises
    a, b = x.chunk(2, 0) if x.dim() else [x, x]  # one chunk only where size(0) < 2: raises
    return h, w, a, b


def _num_to_tensor(x: torch.Tensor) -> torch.Tensor:
    # traced arithmetic on x.size(i): the tracer records the sizes as
    # tensors (prim::NumToTensor) and converts back with aten::Int
    return torch.zeros(x.size(0) * 2 + x.size(-1)) + x.sum()


def _raise(x: torch.Tensor) -> Tuple[torch.Tensor, int]:
    if x.numel() > 30:
        raise ValueError("too many elements: " + str(x.numel()))
    if x.dim() == 3 and x.size(1) == 0:
        raise RuntimeError("empty middle dim")
    return x * 2, x.numel()


def _tuple_construct(x: torch.Tensor) -> Tuple[Tuple[int, Tuple[torch.Tensor, str]], Tuple[()], List[Tuple[int, int]]]:
    pairs: List[Tuple[int, int]] = []
    for i, d in enumerate(x.shape):
        pairs.append((i, d))
    return (x.dim(), (x + 1, str(x.numel()))), (), pairs


def _tuple_index(x: torch.Tensor) -> Tuple[int, torch.Tensor]:
    # a tuple indexed by a non-constant int: prim::TupleIndex (out of range
    # for rank 4: PyTorch raises)
    k = x.dim() - 1
    t = (x.numel(), x.dim(), 7)
    u = (x, x * 2)
    return t[k], u[x.numel() % 2]


def _tuple_unpack(x: torch.Tensor) -> Tuple[int, int, torch.Tensor]:
    # unpacking tuples that come from a list: prim::TupleUnpack
    pairs = [(x.dim(), 1), (x.numel(), 2)]
    for d in x.shape:
        pairs.append((d, d + 1))
    s = 0
    for a, b in pairs:
        s += a * b
    m, i = pairs[x.numel() % len(pairs)]
    y, z = [(x, x.sum()), (x * 2, x.mean())][x.dim() % 2]
    return s, m - i, y + z


def _uninitialized(x: torch.Tensor) -> Tuple[int, int]:
    # a return inside a loop, and a raise in one branch: the values not set on
    # those paths are prim::Uninitialized
    return _first_empty(x), _count_or_raise(x)


def _first_empty(x: torch.Tensor) -> int:
    for i in range(x.dim()):
        if x.size(i) == 0:
            return i
    return -1


def _count_or_raise(x: torch.Tensor) -> int:
    if x.numel() % 5 == 4:
        n = x.numel()
    elif x.dim() == 4:
        raise ValueError("rank 4 with " + str(x.numel()) + " elements")
    else:
        n = -x.dim()
    return n


CASES = {
    "aten::Bool": scripted(_bool),
    "aten::Float": scripted(_float),
    "aten::Int": scripted(_int),
    "aten::FloatImplicit": scripted(_float_implicit),
    "aten::ScalarImplicit": scripted(_scalar_implicit),
    "aten::__and__": scripted(_and),
    "aten::__or__": scripted(_or),
    "aten::__xor__": scripted(_xor),
    "aten::__not__": scripted(_not),
    "aten::floordiv": scripted(_floordiv),
    "aten::__is__": scripted(_is),
    "aten::__isnot__": scripted(_isnot),
    "prim::unchecked_cast": scripted(_unchecked_cast),
    "aten::dim": scripted(_dim),
    "aten::numel": scripted(_numel),
    "aten::size": scripted(_size),
    "prim::dtype": scripted(_dtype),
    "prim::device": scripted(_device),
    "prim::type": scripted(_type),
    "aten::lower": scripted(_lower),
    "aten::upper": scripted(_upper),
    "aten::startswith": scripted(_startswith),
    "aten::endswith": scripted(_endswith),
    "aten::join": scripted(_join),
    "aten::len": scripted(_len),
    "aten::list": scripted(_list),
    "aten::append": scripted(_append),
    "aten::__getitem__": scripted(_getitem),
    "prim::DictConstruct": scripted(_dict_construct),
    "prim::ListConstruct": scripted(_list_construct),
    "prim::ListUnpack": scripted(_list_unpack),
    "prim::NumToTensor": Case(_num_to_tensor, lambda dt: one(dt, range(1, 5)), kinds=("aten::Int",)),
    "prim::RaiseException": scripted(_raise),
    "prim::TupleConstruct": scripted(_tuple_construct),
    "prim::TupleIndex": scripted(_tuple_index),
    "prim::TupleUnpack": scripted(_tuple_unpack),
    "prim::Uninitialized": scripted(_uninitialized),
}
