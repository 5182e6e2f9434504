"""Post-training static int8 quantization: ``llga.quantize``.

    q = llga.quantize(traced, calibration=[x0, x1, ...])
    q(x)   # numpy in, numpy out, as any compiled model

The model is compiled as :func:`llga.optimize` compiles it; then the
assign-precision pass runs the graph on each calibration batch, records the
range of every activation read by a convolution or a linear with constant
weights (and, for the percentile and histogram methods, a histogram of its
magnitudes) (the policy's int8 kinds: ``llga.precision.policy()`` lists them),
and writes its decision on the IR of each such op and its partition:

    precision="int8", act_scale=<scale>, act_dtype="u8" | "s8"

``act_dtype`` is u8 where calibration saw no negative value (after a relu),
else s8; the scale maps the largest magnitude seen to 255 or 127 (min-max
calibration, symmetric, zero point 0); with ``activations="asymmetric"`` a
signed activation is u8 over its calibrated [min, max] with
``act_zero_point``. Weights are quantized once to s8 with
a scale per output channel. The kernels quantize the activation on the way
in, multiply in int8 with int32 sums (VNNI or AMX where the CPU has them),
and scale back to fp32 before the bias, the fused post-ops and the output,
which stay fp32. A shape oneDNN has no int8 kernel for runs fp32, and its
partition's ``detail`` says so.

``compiled.partitions`` shows the decision per partition (``precision``
column); :func:`llga.accuracy_report` compares the result with fp32.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, List, Optional, Sequence

import numpy as np

from .errors import PrecisionError

# How a calibrated range becomes a scale (assign-precision): the largest
# magnitude seen; the `percentile`-th percentile of the magnitudes; or the
# clipping threshold with the least expected squared error (clipping plus
# rounding) over their histogram.
METHODS = ("minmax", "percentile", "histogram")
# How a signed activation is put on 8 bits: the s8 grid over its largest
# magnitude (zero point 0), or the u8 grid over its [min, max] with a zero
# point (PyTorch's affine observers, ONNX Runtime's QDQ default).
ACTIVATION_SCHEMES = ("symmetric", "asymmetric")
# oneDNN's ISAs with VNNI (AMX includes it). Without it, oneDNN's int8
# kernels multiply u8 by s8 into saturating 16-bit sums and halve the
# weights to make room: measured up to 0.3 off the int8 arithmetic (of
# outputs near 1) under ONEDNN_MAX_CPU_ISA=AVX2, so llga.quantize refuses
# there rather than give such results.
VNNI_ISAS = ("avx2_vnni", "avx512_core_vnni", "avx512_core_bf16", "avx512_core_amx")


def _calibration_sets(calibration) -> List[List[np.ndarray]]:
    from .compiler import _to_numpy_if_torch
    if calibration is None:
        raise PrecisionError("llga.quantize needs calibration: a list of input batches the model is run on")
    sets: List[List[np.ndarray]] = []
    for k, batch in enumerate(calibration):
        items = list(batch) if isinstance(batch, (tuple, list)) else [batch]
        arrays = []
        for i, x in enumerate(items):
            x = _to_numpy_if_torch(x, i)
            if not isinstance(x, np.ndarray):
                raise PrecisionError(f"calibration batch {k}, input {i}: expected an array or a tensor, "
                                     f"got {type(x).__name__}")
            arrays.append(np.ascontiguousarray(x))
        sets.append(arrays)
    if not sets:
        raise PrecisionError("llga.quantize: calibration is empty (give at least one input batch)")
    return sets


def quantize(obj, calibration: Optional[Iterable[Any]] = None, *, mode: str = "static", method: str = "minmax",
             percentile: float = 99.99, activations: str = "symmetric", skip: Sequence[str] = (),
             example_inputs: Optional[Sequence[Any]] = None,
             params=None, passes=None, module=None, route=None, _only: Optional[Sequence[str]] = None):
    """Compiles ``obj`` (what :func:`llga.optimize` takes) with int8
    convolutions and linears, calibrated on ``calibration``: a list of input
    batches (each an array or tensor for a one-input model, or a tuple of
    them). ``method``: "minmax" (the largest magnitude seen maps to the
    largest step), "percentile" (the ``percentile``-th percentile of the
    magnitudes does; larger ones saturate) or "histogram" (the threshold with
    the least expected squared error, clipping plus rounding, over a
    2048-bin histogram of the magnitudes). ``activations``: how a signed
    activation is quantized: "symmetric" (the s8 grid over
    [-threshold, threshold], zero point 0) or "asymmetric" (the u8 grid over
    its calibrated [min, max], clipped at the threshold, with the zero point
    that puts 0 on a step, as PyTorch's default observers; finer steps for
    lopsided ranges such as swish's or gelu's outputs). Activations that
    calibration saw non-negative are u8 with zero point 0 either way.
    ``skip`` keeps ops in fp32: an
    op kind (``"aten::linear"``) keeps every op of that kind; any other name
    keeps the partition whose output has that name
    (``compiled.partitions[i].output_name``, as
    :func:`quantization_sensitivity` lists them). Returns a
    :class:`llga.CompiledGraph` whose ``precision`` is "int8".

    ``mode="dynamic"`` (as ONNX Runtime's ``quantize_dynamic``): the linears
    alone, each activation quantized per call to s8 with the scale its
    largest magnitude gives; no calibration (pass none).

    Raises :class:`llga.PrecisionError` on a CPU without VNNI (as oneDNN sees
    it: ``ONEDNN_MAX_CPU_ISA`` counts), for missing or malformed
    calibration, an unknown method, or a kind or partition name in ``skip``
    that is no int8 candidate."""
    from . import precision as _precision
    from .compiler import _build
    isa = _precision._capabilities()["isa"]
    if isa not in VNNI_ISAS:
        raise PrecisionError(f"int8 needs a CPU with VNNI (AVX512-VNNI, AVX-VNNI or AMX); oneDNN's ISA here is {isa}: "
                             "its int8 kernels without VNNI saturate 16-bit sums and halve the weights")
    if mode not in ("static", "dynamic"):
        raise PrecisionError(f"mode {mode!r}: expected 'static' or 'dynamic'")
    if mode == "dynamic" and calibration is not None:
        raise PrecisionError("mode='dynamic' quantizes each call's activations with their own scale: "
                             "it takes no calibration")
    if method not in METHODS:
        raise PrecisionError(f"calibration method {method!r}: llga has {', '.join(METHODS)}")
    if not isinstance(percentile, (int, float)) or not 0 < percentile <= 100:
        raise PrecisionError(f"percentile {percentile!r}: expected a number in (0, 100]")
    if activations not in ACTIVATION_SCHEMES:
        raise PrecisionError(f"activations {activations!r}: expected one of {', '.join(ACTIVATION_SCHEMES)}")
    if mode == "dynamic" and activations != "symmetric":
        raise PrecisionError("mode='dynamic' quantizes each call's activations symmetrically (s8 over their largest "
                             "magnitude): activations='asymmetric' is for static quantization")
    if isinstance(skip, str):
        skip = [skip]
    rules = {r["kind"]: r for r in _precision.policy()}
    overrides, names = {}, []
    for item in skip:
        if not isinstance(item, str):
            raise PrecisionError(f"skip {item!r}: expected an op kind or a partition's output name (a str)")
        if "::" in item:
            if item not in rules or not rules[item]["int8_kernel"]:
                int8 = sorted(k for k, r in rules.items() if r["int8_kernel"])
                raise PrecisionError(f"skip {item!r}: not an op kind llga runs in int8 ({', '.join(int8)})")
            overrides[item] = "fp32"
        else:
            names.append(item)
    sets = _calibration_sets(calibration) if mode == "static" else []
    kept = sorted(overrides) + [f"%{n}" for n in names]
    how = ("dynamic: linears, activations quantized per call" if mode == "dynamic" else
           f"{method}" + (f" ({percentile}th)" if method == "percentile" else "")
           + f" calibration over {len(sets)} batch(es)"
           + (", asymmetric activations" if activations == "asymmetric" else ""))
    prec = _precision.Resolved(False, overrides, "int8", f"int8: {how}" + (f", {', '.join(kept)} kept fp32" if kept else ""))
    options = {"calibration": sets, "method": method, "percentile": float(percentile), "activations": activations,
               "skip": names,
               "only": None if _only is None else list(_only), "mode": mode}

    def rebuild(args):
        return quantize(obj, sets if mode == "static" else None, mode=mode, method=method, percentile=percentile,
                        activations=activations, skip=skip, example_inputs=args, params=params, passes=passes, module=module, route=route,
                        _only=_only)

    compiled = _build(obj, example_inputs, params, passes, module, route, prec, options, rebuild)
    if names:  # a name must be a partition whose anchor is of an int8 kind
        int8_kinds = {k for k, r in rules.items() if r["int8_kernel"]}
        known = {p.output_name for p in compiled.partitions if p.ops and p.ops[0] in int8_kinds}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise PrecisionError(f"skip {unknown[0]!r}: no convolution or linear partition has that output name "
                                 "(llga.quantization_sensitivity lists them)")
    return compiled


@dataclass(frozen=True)
class Sensitivity:
    """How far the model's outputs move from fp32 with one partition in int8."""
    output_name: str   # what llga.quantize(skip=[...]) takes
    ops: tuple
    max_rel: float     # largest output difference over the largest fp32 magnitude
    cosine: float


@dataclass
class SensitivityReport:
    rows: List[Sensitivity]   # most sensitive first
    all_int8: Sensitivity     # every candidate in int8 at once

    def __repr__(self) -> str:
        head = f"{'partition output':<24} {'ops':<40} {'max_rel':>10} {'cosine':>10}"
        lines = ["int8 sensitivity: one partition in int8 at a time, against fp32 (most sensitive first)", head]
        for r in self.rows + [self.all_int8]:
            lines.append(f"{r.output_name:<24} {','.join(r.ops)[:40]:<40} {r.max_rel:>10.3g} {r.cosine:>10.6f}")
        return "\n".join(lines)


def _difference(got, want) -> tuple:
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    worst, cos = 0.0, 1.0
    for g, w in zip(got, want):
        g, w = np.asarray(g, np.float64).ravel(), np.asarray(w, np.float64).ravel()
        scale = max(float(np.abs(w).max()), 1e-30)
        worst = max(worst, float(np.abs(g - w).max()) / scale)
        denom = float(np.linalg.norm(g) * np.linalg.norm(w))
        cos = min(cos, float(g @ w) / denom if denom > 0 else 1.0)
    return worst, cos


def quantization_sensitivity(obj, calibration: Iterable[Any], inputs: Sequence[Any], **options) -> SensitivityReport:
    """Per-layer sensitivity: for each partition :func:`quantize` would run
    in int8, the model quantized with only that partition in int8, its
    outputs on ``inputs`` (one input batch: an array, or a tuple of them)
    compared with fp32's. The rows come most sensitive first; their
    ``output_name`` is what ``llga.quantize(skip=[...])`` takes to keep a
    partition fp32. ``options`` are quantize's (method, percentile, params,
    ...). Compiles and calibrates once per partition."""
    from .compiler import optimize
    sets = _calibration_sets(calibration)
    args = [inputs] if not isinstance(inputs, (tuple, list)) else list(inputs)
    compile_options = {k: options[k] for k in ("params", "passes", "module", "route") if k in options}
    reference = optimize(obj, **compile_options)(*args)
    everything = quantize(obj, sets, **options)
    candidates = [p for p in everything.partitions if p.precision == "int8"]
    rows = []
    for p in candidates:
        one = quantize(obj, sets, _only=[p.output_name], **options)
        rows.append(Sensitivity(p.output_name, tuple(p.ops), *_difference(one(*args), reference)))
    rows.sort(key=lambda r: -r.max_rel)
    return SensitivityReport(rows, Sensitivity("(all int8)", ("every candidate",),
                                               *_difference(everything(*args), reference)))
