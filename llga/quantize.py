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
calibration, symmetric, zero point 0). Weights are quantized once to s8 with
a scale per output channel. The kernels quantize the activation on the way
in, multiply in int8 with int32 sums (VNNI or AMX where the CPU has them),
and scale back to fp32 before the bias, the fused post-ops and the output,
which stay fp32. A shape oneDNN has no int8 kernel for runs fp32, and its
partition's ``detail`` says so.

``compiled.partitions`` shows the decision per partition (``precision``
column); :func:`llga.accuracy_report` compares the result with fp32.
"""
from __future__ import annotations

from typing import Any, Iterable, List, Optional, Sequence

import numpy as np

from .errors import PrecisionError

# How a calibrated range becomes a scale (assign-precision): the largest
# magnitude seen; the `percentile`-th percentile of the magnitudes; or the
# clipping threshold with the least expected squared error (clipping plus
# rounding) over their histogram.
METHODS = ("minmax", "percentile", "histogram")


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


def quantize(obj, calibration: Iterable[Any], *, method: str = "minmax", percentile: float = 99.99,
             skip: Sequence[str] = (), example_inputs: Optional[Sequence[Any]] = None, params=None, passes=None,
             module=None, route=None):
    """Compiles ``obj`` (what :func:`llga.optimize` takes) with int8
    convolutions and linears, calibrated on ``calibration``: a list of input
    batches (each an array or tensor for a one-input model, or a tuple of
    them). ``method``: "minmax" (the largest magnitude seen maps to the
    largest step), "percentile" (the ``percentile``-th percentile of the
    magnitudes does; larger ones saturate) or "histogram" (the threshold with
    the least expected squared error, clipping plus rounding, over a
    2048-bin histogram of the magnitudes). ``skip``: op kinds kept in
    fp32 (``["aten::linear"]``). Returns a :class:`llga.CompiledGraph` whose
    ``precision`` is "int8".

    Raises :class:`llga.PrecisionError` for missing or malformed calibration,
    an unknown method or an unknown kind in ``skip``."""
    from . import precision as _precision
    from .compiler import _build
    if method not in METHODS:
        raise PrecisionError(f"calibration method {method!r}: llga has {', '.join(METHODS)}")
    if not isinstance(percentile, (int, float)) or not 0 < percentile <= 100:
        raise PrecisionError(f"percentile {percentile!r}: expected a number in (0, 100]")
    rules = {r["kind"]: r for r in _precision.policy()}
    overrides = {}
    for kind in skip:
        if kind not in rules or not rules[kind]["int8_kernel"]:
            int8 = sorted(k for k, r in rules.items() if r["int8_kernel"])
            raise PrecisionError(f"skip {kind!r}: not an op kind llga runs in int8 ({', '.join(int8)})")
        overrides[kind] = "fp32"
    sets = _calibration_sets(calibration)
    prec = _precision.Resolved(False, overrides, "int8",
                               f"int8: {method}" + (f" ({percentile}th)" if method == "percentile" else "")
                               + f" calibration over {len(sets)} batch(es)"
                               + (f", {', '.join(sorted(overrides))} kept fp32" if overrides else ""))

    def rebuild(args):
        return quantize(obj, sets, method=method, percentile=percentile, skip=skip, example_inputs=args,
                        params=params, passes=passes, module=module, route=route)

    return _build(obj, example_inputs, params, passes, module, route, prec, sets, rebuild, method, percentile)
