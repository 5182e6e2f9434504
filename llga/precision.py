"""Precision: which ops run in bf16 (``llga.optimize(..., precision=...)``).

``precision`` is one of
  "fp32"   (the default) everything in fp32;
  "bf16"   the policy's op kinds (convolutions, matrix products) in bf16:
           their activation and weights rounded to bf16, products accumulated
           in fp32, outputs and post-ops fp32; everything else fp32. Raises
           llga.PrecisionError where oneDNN has no bf16 kernels (CPUs without
           AVX-512): on AVX-512 without AVX512-BF16 it runs, emulated;
  "auto"   "bf16" where the CPU multiplies bf16 natively (AVX512-BF16 or
           AMX) *and* a bf16 convolution measured here runs at least
           AUTO_MIN_SPEEDUP times as fast as the fp32 one; else "fp32"
           (``compiled.precision_note`` says which and why, with the
           figures). The measurement matters: an Intel core with AVX512-BF16
           but no AMX (or with AMX hidden by its hypervisor) issues one bf16
           dot product where it issues two fp32 FMAs, so there bf16 runs at
           about half fp32's speed;
  {op kind: "bf16" | "fp32", ...}
           "bf16" with these kinds overridden (``{"aten::linear": "fp32"}``);
           the keys are those of :func:`policy`.

The policy is the C++ pass's own table (assign-precision): :func:`policy`
lists it. The decision is written on the IR (``precision="bf16"`` on the ops
and their partitions) and shown in ``compiled.partitions``.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional

from . import _llga
from .errors import PrecisionError

# oneDNN's ISAs that multiply bf16 in hardware (not emulated).
NATIVE_BF16_ISAS = ("avx512_core_bf16", "avx512_core_amx")
# "auto" takes bf16 only where its convolution is at least this much faster
# than fp32's here (AMX: 3-9x; AMD Zen with AVX512-BF16: about 2x; an Intel
# core with AVX512-BF16 and no AMX: about 0.5x).
AUTO_MIN_SPEEDUP = 1.2
# The measured convolution: 1x64x28x28, 64 output channels, 3x3 (58 MFLOP,
# a fraction of a millisecond in either precision); oneDNN's own choice of
# kernel and layouts in each.
_PROBE = (1, 64, 28, 28, 64, 3)


@dataclass(frozen=True)
class Resolved:
    bf16: bool
    overrides: Dict[str, str]
    used: str   # "fp32", "bf16" or "int8" (llga.quantize)
    note: str   # why


@functools.lru_cache(maxsize=None)
def _capabilities() -> Dict[str, Any]:  # oneDNN reads its ISA limit once per process too
    return dict(_llga.dnnl_capabilities())


def policy() -> List[Dict[str, Any]]:
    """The precision policy: one dict per op kind (kind, precision under
    "bf16", bf16_kernel: whether an override may choose bf16, why)."""
    return list(_llga.precision_policy())


def native_bf16() -> bool:
    """Whether the CPU (as oneDNN sees it, so ``ONEDNN_MAX_CPU_ISA`` counts)
    multiplies bf16 in hardware."""
    return _capabilities()["isa"] in NATIVE_BF16_ISAS


@dataclass(frozen=True)
class Bf16Speed:
    """bf16 against fp32 on this CPU, measured on one oneDNN convolution."""
    fp32_gflops: float
    bf16_gflops: float
    fp32_impl: str
    bf16_impl: str

    @property
    def speedup(self) -> float:
        return self.bf16_gflops / self.fp32_gflops

    def describe(self) -> str:
        return (f"a bf16 convolution runs at {self.speedup:.2f}x fp32's speed here ({self.bf16_gflops:.0f} against "
                f"{self.fp32_gflops:.0f} GFLOP/s, {self.bf16_impl} against {self.fp32_impl})")


@functools.lru_cache(maxsize=None)
def bf16_speed() -> Optional[Bf16Speed]:
    """Measures a bf16 and an fp32 convolution (interleaved, best of three
    rounds each, with oneDNN's current thread count), once per process;
    None where oneDNN has no bf16 kernels."""
    if not _capabilities()["bf16"]:
        return None
    best: Dict[str, Dict[str, Any]] = {}
    for _ in range(3):  # interleaved: a slow phase of a shared host hits both
        for dtype in ("f32", "bf16"):
            r = dict(_llga.conv_throughput(*_PROBE, dtype, 8))
            if dtype not in best or r["gflops"] > best[dtype]["gflops"]:
                best[dtype] = r
    return Bf16Speed(best["f32"]["gflops"], best["bf16"]["gflops"], best["f32"]["impl"], best["bf16"]["impl"])


def resolve(precision) -> Resolved:
    caps = _capabilities()
    isa = caps["isa"]
    overrides: Dict[str, str] = {}
    if isinstance(precision, Mapping):
        rules = {r["kind"]: r for r in policy()}
        for kind, value in precision.items():
            if not isinstance(kind, str) or kind not in rules:
                raise PrecisionError(f"precision override {kind!r}: not an op kind of the precision policy "
                                     f"(llga.precision.policy() lists them: {', '.join(sorted(rules))})")
            if value not in ("bf16", "fp32"):
                raise PrecisionError(f"precision override {kind!r}: {value!r} (expected 'bf16' or 'fp32')")
            if value == "bf16" and not rules[kind]["bf16_kernel"]:
                raise PrecisionError(f"precision override {kind!r}: 'bf16': llga has no bf16 kernel for it "
                                     f"({rules[kind]['why']})")
            overrides[kind] = value
        precision = "bf16"
    if precision is None or precision == "fp32":
        return Resolved(False, {}, "fp32", "fp32 asked for")
    if precision == "auto":
        if isa not in NATIVE_BF16_ISAS:
            return Resolved(False, {}, "fp32", f"auto: fp32, the CPU has no native bf16 (oneDNN ISA {isa}; "
                                               f"bf16 needs AVX512-BF16 or AMX)")
        speed = bf16_speed()
        if speed.speedup >= AUTO_MIN_SPEEDUP:
            return Resolved(True, {}, "bf16", f"auto: bf16, the CPU multiplies bf16 natively (oneDNN ISA {isa}) "
                                              f"and {speed.describe()}")
        return Resolved(False, {}, "fp32", f"auto: fp32, the CPU multiplies bf16 natively (oneDNN ISA {isa}) but "
                                           f"{speed.describe()}, under the {AUTO_MIN_SPEEDUP}x that would pay")
    if precision != "bf16":
        raise PrecisionError(f"precision must be 'fp32', 'bf16', 'auto' or a dict of per-op-kind overrides, "
                             f"got {precision!r}")
    if not caps["bf16"]:
        raise PrecisionError(f"precision='bf16': oneDNN has no bf16 kernels on this CPU (its ISA: {isa}; bf16 needs "
                             f"AVX-512, natively AVX512-BF16 or AMX); use precision='fp32' or 'auto'")
    if isa not in NATIVE_BF16_ISAS:
        return Resolved(True, overrides, "bf16", f"bf16, emulated on AVX-512 (slower than fp32; oneDNN ISA {isa})")
    speed = bf16_speed()
    slower = "; expect it slower than fp32" if speed.speedup < 1.0 else ""
    return Resolved(True, overrides, "bf16", f"bf16, natively (oneDNN ISA {isa}): {speed.describe()}{slower}")
