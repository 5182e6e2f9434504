"""Differential cases for TorchScript's builtin library (str, list, dict and
number ops, range bookkeeping, tensor queries, warnings, isinstance): each a
scripted program whose results depend on the generated tensor's shape and
values, compared with PyTorch's interpreter."""

import math
import warnings
from typing import Any, Dict, List, Tuple

import torch
from hypothesis import strategies as st

from differential_common import Case, tensors


def scripted(fn, **kw):
    """A scripted case over one tensor of any shape and layout."""
    return Case(fn, lambda dt: st.tuples(tensors(dt, None)), script=True, **kw)


def _str_ops(x: torch.Tensor) -> Tuple[str, int, int, str, List[str], List[str], List[str], str, str]:
    s = "size={} dims={} ok={} r={}".format(x.size(), x.dim(), x.numel() > 2, 1.5 * x.dim())
    d = {"n": [str(x.numel()), "x"]}
    k = x.dim() * 3 - 4
    return (s, s.find("dims"), s.find("ok", 3, -1), str(x.shape) + str(x.numel() / 4) + str(d) + str((x.dim(),)),
            s.split(), s.split(", ", x.dim() - 1), (" \t" + s).split(None, 1), s[k:], s[1:k:x.dim() % 3 + 1])


def _contains(x: torch.Tensor) -> Tuple[bool, bool, bool, bool]:
    d = {"a": 1, "b": x.dim()}
    return x.dim() in x.shape, "b" in d, "c" in d, "ims" in "dims" + str(x.dim())


def _dict_ops(x: torch.Tensor) -> Tuple[List[str], List[int], int, Dict[str, int]]:
    d: Dict[str, int] = {}
    for i in range(x.dim()):
        d["d" + str(i)] = x.size(i)
    e = dict(d)
    e["extra"] = x.numel()
    total = 0
    for k, v in e.items():
        total += v * len(k)
    return list(d.keys()), list(e.values()), total, e


def _list_ops(x: torch.Tensor) -> Tuple[List[int], int, int, float, List[int], List[List[int]], int, float]:
    sizes = list(x.shape)
    sizes.insert(0, x.dim())
    sizes.insert(-1, 7)
    sizes[1] = x.numel()
    sizes.extend([x.dim(), 1])
    dims = list(x.shape)  # slices of every sign, as RAFT's l[::-1]
    slices = [dims[::-1], dims[-2::-2], dims[3:0:-1], dims[:-10:-1], dims[1::-1], dims[1:], dims[::2]]
    halves = [float(v) * 0.5 + 0.1 for v in sizes]
    return sizes, max(sizes), min(sizes), max(2.5, float(x.dim())), [x.dim()] * (x.numel() % 4), slices, sum(sizes), \
        sum(halves)


def _ranges(x: torch.Tensor) -> Tuple[List[int], int]:
    out: List[int] = []
    n = x.numel()
    for i in range(n % 7, 20, 3):
        out.append(i)
    for j in range(n, -5, -4):
        out.append(j)
    acc = 0
    for k in range(x.dim(), 0, -1):
        acc = acc * 10 + k
    return out, acc


def _items(x: torch.Tensor) -> Tuple[float, int, List[List[float]], bool]:
    s = x.float().sum()
    i = x.long().sum()
    m = x.reshape(-1)[:4].reshape(2, -1) if x.numel() >= 4 else torch.zeros(2, 2)
    rows: List[List[float]] = m.float().tolist()
    return float(s.item()), int(i.item()), rows, x.is_floating_point()


def _implicit(x: torch.Tensor) -> torch.Tensor:
    n = x.long().sum().clamp(0, 3)
    return torch.ones(n, dtype=torch.float32)  # a 0-dim int tensor where an int is expected: aten::IntImplicit


def _queries(x: torch.Tensor) -> Tuple[bool, bool, bool, bool, str, List[bool]]:
    dev = torch.device("cpu" if x.dim() >= 0 else "meta")  # not a constant: aten::device runs
    kinds = [x.is_nested, x.is_sparse, x.is_mkldnn, x.is_quantized, x.is_meta, x.is_xpu, x.is_vulkan, x.is_mps]
    return x.is_cuda, x.requires_grad, torch.is_grad_enabled(), x.device == dev, str(x.device), kinds


def _warns(x: torch.Tensor) -> torch.Tensor:
    if x.dim() < 2:
        warnings.warn("fewer than two dims: " + str(x.dim()))
    return x + 1


# Traced and scripted code records torch.swapaxes as transpose, but graphs
# of real models hold it (maxvit's): the case compiles this IR text.
SWAP_IR = """graph(%x : Tensor):
  %a : int = prim::Constant[value=0]()
  %b : int = prim::Constant[value=-1]()
  %c : int = prim::Constant[value=1]()
  %s : Tensor = aten::swapaxes(%x, %a, %b)
  %t : Tensor = aten::swapdims(%x, %c, %b)
  return (%s, %t)
"""


def _list_mutations(x: torch.Tensor) -> Tuple[List[int], List[float], List[str], Dict[str, int], List[int], int,
                                                 int, int, List[float], Tuple[str, int], Dict[str, int], int, List[int]]:
    # the mutations a dead-code pass must keep: each returns nothing (or a value
    # the program ignores), and the list or dict it changed is returned
    sizes = list(x.shape) + [x.dim(), 1, x.numel() % 3]
    sizes.sort()
    sizes.reverse()
    vals: List[float] = x.reshape(-1)[:5].tolist()
    vals.sort(reverse=True)
    words = ["d" + str(v) for v in sizes]
    words.sort()
    d = {"a": x.dim(), "b": x.numel()}
    d.update({"c": 3, "a": 0})
    d.setdefault("e", 5)
    d.setdefault("a", 9)
    got = d.get("b", -1) + d.get("q", -1)
    if len(sizes) > 2:
        del sizes[1]
    del d["b"]
    first = sizes.pop(0) if len(sizes) else -1
    last = sizes.pop() if len(sizes) else -1
    kept = sizes.copy()
    sizes.clear()
    sizes.append(first)
    kept.append(1)
    kept.remove(1)
    e = d.copy()
    e.clear()
    item = d.popitem()
    popped = d.pop("c") + d.pop("zz", 7)
    more = [x.dim(), 2]
    more += [x.numel()]  # in place: the list itself grows
    flags = [v > 0.0 for v in vals]
    where = more.index(2) + words[0].index("d") + int("d1" < words[-1]) + int(words[0] >= "d2")
    return (kept, vals, words, d, sizes, got, kept.count(1) + "d1d1".count("d1"), last, sorted(vals),
            item, e, popped + where + int(any(flags)) + int(all(flags)), more)


def _str_methods(x: torch.Tensor) -> Tuple[List[str], List[bool], List[int]]:
    # strings built from the tensor's shape and values: spaces, digits, cases, signs
    s = " \t" + str(x.shape) + " a" + "".join(["B"] * x.dim()) + "-" + str(x.numel()) + "x\n"
    w = x.numel() % 9 + len(s) - 3
    d = str(x.numel())
    words = [s.strip(), s.lstrip(), s.rstrip(), s.strip(" \t\n[]"), s.replace(" ", "_"), s.replace("a", "", 1),
             s.replace("a", "<>", 0), s.zfill(w), d.zfill(w - 10), s.ljust(w), s.rjust(w, "*"), s.center(w), d.center(7, "-"),
             s.title(), s.capitalize(), s.swapcase(), chr(65 + x.dim()) + chr(300)]
    tests = [d.isdigit(), s.isdigit(), s.isalpha(), "aB".isalpha(), d.isalnum(), s.isalnum(), s.isspace(), " \t".isspace(),
             s.isupper(), "AB1".isupper(), s.islower(), "ab-c".islower(), "".isdigit()]
    places = [s.rfind("a"), s.rfind("B", 2), s.rfind("x", 0, 5), ord(s[2]), ord(d[0])]
    return words, tests, places


def _number_builtins(x: torch.Tensor) -> Tuple[int, float, float, int]:
    n = x.dim() - x.numel()
    v = float(n) / 3.0 - 1.0
    print("dims", x.dim(), "sizes", x.shape, v)  # to standard output, as PyTorch's interpreter prints
    return abs(n), abs(v), math.fabs(v), abs(-x.numel())


def _more_builtins(x: torch.Tensor) -> Tuple[List[str], List[str], Tuple[str, str, str], str, int, int,
                                           Tuple[int, int], Tuple[float, float], float, float, float, int]:
    s = str(x.shape) + "\n" + str(x.dim()) + " a\r\nb  c\n"
    i = x.numel() - 3 * x.dim()
    v = float(x.dim()) * 0.75 - 1.1
    return (s.splitlines(), s.rsplit(" ", 1), s.partition(" a"), hex(i) + bin(i) + oct(i), i << 3, i >> 1,
            divmod(i, 3), divmod(v, 0.5), math.degrees(v), math.radians(v), math.gamma(v + 3.0), math.factorial(x.dim()))


def _isinstance(x: torch.Tensor) -> Tuple[bool, bool]:
    z: Any = x.shape if x.dim() > 1 else x
    return isinstance(z, (list, tuple)), isinstance(z, torch.Tensor)


CASES = {
    "aten::str": scripted(_str_ops, kinds=("aten::format", "aten::find", "aten::split", "aten::slice")),
    "aten::__contains__": scripted(_contains),
    "aten::dict": scripted(_dict_ops, kinds=("aten::_set_item", "aten::keys", "aten::values", "aten::items")),
    "aten::insert": scripted(_list_ops, kinds=("prim::max", "prim::min", "aten::extend", "aten::sum")),
    "aten::__range_length": scripted(_ranges, kinds=("aten::__derive_index",)),
    "aten::item": scripted(_items, kinds=("prim::tolist", "aten::is_floating_point")),
    "aten::IntImplicit": scripted(_implicit),
    "aten::is_grad_enabled": scripted(_queries, kinds=(
        "prim::is_cuda", "prim::requires_grad", "aten::device", "prim::is_nested", "prim::is_sparse", "prim::is_mkldnn",
        "prim::is_quantized", "prim::is_meta", "prim::is_xpu", "prim::is_vulkan", "prim::is_mps")),
    "aten::warn": scripted(_warns),
    "prim::isinstance": scripted(_isinstance),
    "prim::abs": scripted(_number_builtins, kinds=("aten::fabs", "prim::Print")),
    "aten::splitlines": scripted(_more_builtins, kinds=(
        "aten::rsplit", "aten::partition", "aten::hex", "aten::bin", "aten::oct", "aten::__lshift__", "aten::__rshift__",
        "aten::divmod", "aten::degrees", "aten::radians", "aten::gamma", "aten::factorial")),
    "aten::strip": scripted(_str_methods, kinds=(
        "aten::lstrip", "aten::rstrip", "aten::replace", "aten::zfill", "aten::ljust", "aten::rjust", "aten::center",
        "aten::title", "aten::capitalize", "aten::swapcase", "aten::chr", "aten::isdigit", "aten::isalpha",
        "aten::isalnum", "aten::isspace", "aten::isupper", "aten::islower", "aten::rfind", "aten::ord")),
    "aten::reverse": scripted(_list_mutations, kinds=(
        "aten::sort", "aten::sorted", "aten::Delete", "aten::pop", "aten::popitem", "aten::clear", "aten::remove",
        "aten::copy", "aten::count", "aten::get", "aten::setdefault", "aten::update", "aten::add_", "aten::index",
        "aten::any", "aten::all", "aten::lt", "aten::ge")),
    "aten::swapaxes": Case(lambda x: (torch.swapaxes(x, 0, -1), torch.swapdims(x, 1, -1)),
                           lambda dt: st.tuples(tensors(dt, None)).filter(lambda a: a[0].dim() >= 2),
                           ir=SWAP_IR, kinds=("aten::swapdims",)),
}
# Kinds the programs above exercise besides the one each is filed under.
ALSO_COVERED = {k for case in CASES.values() for k in case.kinds}
