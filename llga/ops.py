"""What llga runs: every op kind, how (a kernel of llga's, or rewritten by the
decompose pass into ops that have one), the arity its schema allows, and the
dtypes llga claims for it.

The kinds come from the core (the kernel registry and the decompose pass's
table), so nothing is listed that does not run. The dtype claims are the data
below; tests/py/test_differential.py generates cases for every listed kind and
every claimed dtype and compares with PyTorch, and fails for a kind it has no
case generator for, so nothing is claimed untested. docs/ops.md is generated
from this list (``python3 -m llga ops --markdown``; a test keeps it current).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from . import _llga

F32 = ("float32",)
F32_I64 = ("float32", "int64")
ALL = ("float32", "int64", "bool")

# Claims beyond float32, by kind (an in-place variant "aten::x_" shares "aten::x"'s). Only dtypes
# PyTorch 1.13 takes too (nearest upsampling and max pooling with indices/unpooling of int64 it
# rejects: llga's results there would be checked against nothing).
_DTYPES: Dict[str, Tuple[str, ...]] = {
    **{k: ALL for k in (
        # elementwise binary and comparisons (PyTorch's promotion), logical/bitwise ops
        "aten::add", "aten::sub", "aten::mul", "aten::maximum", "aten::minimum", "aten::eq", "aten::ne", "aten::lt",
        "aten::le", "aten::gt", "aten::ge", "aten::where", "aten::logical_and", "aten::logical_not",
        "aten::__and__", "aten::__or__", "aten::__xor__", "aten::bitwise_and", "aten::bitwise_not", "aten::masked_fill",
        # data movement: any dtype moves
        "aten::cat", "aten::stack", "aten::flip", "aten::roll", "aten::repeat", "aten::tile", "aten::tril", "aten::triu",
        "aten::gather", "aten::index_select", "aten::index", "aten::index_put", "aten::scatter", "aten::take_along_dim",
        "aten::masked_select", "aten::nonzero", "aten::permute", "aten::transpose", "aten::reshape", "aten::view",
        "aten::flatten", "aten::squeeze", "aten::unsqueeze", "aten::expand", "aten::slice", "aten::select",
        "aten::narrow", "aten::chunk", "aten::split", "aten::split_with_sizes", "aten::tensor_split", "aten::unbind",
        "aten::movedim", "aten::moveaxis", "aten::diagonal", "aten::t", "aten::contiguous", "aten::clone",
        "aten::pixel_shuffle", "aten::pixel_unshuffle", "aten::channel_shuffle", "aten::repeat_interleave",
        "aten::any", "aten::all", "aten::prod", "aten::sum", "aten::cumsum", "aten::cumprod", "aten::to",
        "aten::zeros_like", "aten::ones_like", "aten::full_like", "aten::constant_pad_nd", "aten::pad")},
    **{k: F32_I64 for k in (
        "aten::div", "aten::remainder", "aten::floor_divide", "aten::abs", "aten::neg", "aten::sign", "aten::clamp",
        "aten::relu", "aten::square", "aten::sort", "aten::argsort", "aten::topk", "aten::kthvalue", "aten::median", "aten::fmod", "aten::fmax", "aten::fmin",
        "aten::gcd", "aten::heaviside", "aten::isnan", "aten::isinf", "aten::isfinite",
        "aten::nanmedian", "aten::mode", "aten::max",
        "aten::min", "aten::argmax", "aten::argmin", "aten::amax", "aten::amin", "aten::scatter_add", "aten::embedding")},
}


# Kinds that take and give scalars, strings and lists (TorchScript's builtins):
# no tensor dtypes to claim.
_NON_TENSOR = {
    "aten::Bool", "aten::Float", "aten::Int", "aten::ScalarImplicit", "aten::__getitem__", "aten::__is__",
    "aten::__isnot__", "aten::__not__", "aten::append", "aten::endswith", "aten::startswith", "aten::format",
    "aten::join", "aten::len", "aten::list", "aten::lower", "aten::upper", "aten::floordiv",
}


@dataclass(frozen=True)
class OpSupport:
    """One op kind llga runs."""

    kind: str                    # "aten::conv2d"
    via: str                     # "kernel" (a kernel of llga's) or "decompose" (rewritten into ops with kernels)
    min_inputs: Optional[int]    # the arity the kernel takes (None for decomposed kinds)
    max_inputs: Optional[int]
    dtypes: Tuple[str, ...]      # tensor dtypes checked against PyTorch by the differential test
                                 # (empty for prim:: ops and TorchScript's scalar/list builtins)


def _claims(kind: str) -> Tuple[str, ...]:
    if kind in _NON_TENSOR or kind.startswith("prim::"):
        return ()
    if kind in _DTYPES:
        return _DTYPES[kind]
    if kind.endswith("_") and not kind.endswith("__") and kind[:-1] in _DTYPES:
        return _DTYPES[kind[:-1]]
    return F32


def supported_ops() -> List[OpSupport]:
    """Every op kind of PyTorch's llga runs, sorted by kind (the compiler's own
    node kinds, llga::FusionGroup and llga::Guard, are not listed)."""
    out = [OpSupport(e["kind"], e["via"], e["min_inputs"], e["max_inputs"], _claims(e["kind"]))
           for e in _llga.supported_ops() if not e["kind"].startswith("llga::")]
    return sorted(out, key=lambda o: o.kind)


def markdown() -> str:
    """docs/ops.md: the table of supported_ops()."""
    rows = supported_ops()
    lines = [
        "# Supported ops",
        "",
        "Generated by `python3 -m llga ops --markdown` from `llga.supported_ops()`; do not edit.",
        "Every kind and every dtype listed here is checked against PyTorch by",
        "`tests/py/test_differential.py` (generated cases: random shapes including 0-size and",
        "broadcasting, strided inputs); a kind without cases fails that test.",
        "",
        f"{len(rows)} op kinds: {sum(o.via == 'kernel' for o in rows)} with kernels, "
        f"{sum(o.via == 'decompose' for o in rows)} rewritten by the decompose pass.",
        "",
        "| op | via | inputs | dtypes |",
        "|---|---|---|---|",
    ]
    for o in rows:
        arity = "" if o.min_inputs is None else (
            str(o.min_inputs) if o.min_inputs == o.max_inputs else f"{o.min_inputs}-{o.max_inputs}")
        lines.append(f"| `{o.kind}` | {o.via} | {arity} | {', '.join(o.dtypes) or 'scalars, lists'} |")
    return "\n".join(lines) + "\n"
