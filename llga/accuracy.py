"""How far a lower-precision compiled model is from its reference.

    fp32 = llga.optimize(traced)
    bf16 = llga.optimize(traced, precision="bf16")
    report = llga.accuracy_report(bf16, fp32, [x1, x2, ...])
    report                      # a table per output, then per partition
    report.outputs[0].cosine    # fields, not text
    report.worst_partitions(3)  # where precision is lost first

Per output (over all calls): the largest absolute difference, the largest
difference relative to the reference's largest magnitude (max_rel), the
mean absolute difference relative to the reference's mean magnitude
(mean_rel), the cosine similarity, and for outputs whose last dimension
holds classes (logits: floating point, at least 2 values in the last
dimension) top-1 agreement (rows whose argmax agree) and top-5 agreement
(the mean share of the reference's 5 largest classes among the model's 5
largest; rows of fewer than 5 classes: None).

Per partition, when both models are llga compiled models of the same graph
(the same passes, so the same partitions and value names): each partition's
first output compared the same way (without top-k: feature maps hold no
classes), in program order, with the partition's precision, so the first
partition whose error jumps is where precision goes.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np


@dataclass(frozen=True)
class Agreement:
    """One output's (or partition output's) difference from the reference."""

    name: str
    shape: tuple
    max_abs: float
    max_rel: float
    mean_rel: float
    cosine: float
    top1: Optional[float] = None
    top5: Optional[float] = None
    # partitions only: the partition's id, pattern and precision
    partition: Optional[int] = None
    pattern: str = ""
    precision: str = ""


@dataclass
class AccuracyReport:
    outputs: List[Agreement]
    partitions: List[Agreement] = field(default_factory=list)
    calls: int = 0
    note: str = ""  # why there are no partition rows, if there are none

    def worst_partitions(self, n: int = 5) -> List[Agreement]:
        """The n partitions furthest from the reference (by max_rel)."""
        return sorted(self.partitions, key=lambda a: -a.max_rel)[:n]

    def _rows(self, items: List[Agreement], partitions: bool):
        for a in items:
            f = lambda v: "" if v is None else f"{v:.4g}"  # noqa: E731
            row = [str(a.partition) if partitions else a.name, "x".join(str(d) for d in a.shape), f(a.max_abs),
                   f(a.max_rel), f(a.mean_rel), f"{a.cosine:.6f}", f(a.top1), f(a.top5)]
            if partitions:
                row[1:1] = [a.pattern, a.precision]
            yield row

    def _tables(self):
        out = [(("output", "shape", "max_abs", "max_rel", "mean_rel", "cosine", "top1", "top5"),
                list(self._rows(self.outputs, False)))]
        if self.partitions:
            out.append((("partition", "pattern", "precision", "shape", "max_abs", "max_rel", "mean_rel", "cosine",
                         "top1", "top5"), list(self._rows(self.partitions, True))))
        return out

    def __repr__(self) -> str:
        lines = [f"accuracy over {self.calls} call(s)"]
        for head, rows in self._tables():
            widths = [max(len(str(r[i])) for r in rows + [list(head)]) for i in range(len(head))]
            lines.append("  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip())
            lines += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        if self.note:
            lines.append(self.note)
        return "\n".join(lines)

    __str__ = __repr__

    def _repr_html_(self) -> str:
        import html as _html

        parts = [f"<p>accuracy over {self.calls} call(s)</p>"]
        for head, rows in self._tables():
            th = "".join(f"<th>{_html.escape(h)}</th>" for h in head)
            body = "".join("<tr>" + "".join(f"<td>{_html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
            parts.append(f"<table class='llga-accuracy'><tr>{th}</tr>{body}</table>")
        if self.note:
            parts.append(f"<p>{_html.escape(self.note)}</p>")
        return "".join(parts)


def _agreement(name: str, got: List[np.ndarray], want: List[np.ndarray], classes: bool = True, **extra) -> Agreement:
    g = np.concatenate([np.asarray(a, np.float64).ravel() for a in got])
    w = np.concatenate([np.asarray(a, np.float64).ravel() for a in want])
    if g.shape != w.shape:
        raise ValueError(f"{name}: shapes differ between the model and the reference "
                         f"({got[0].shape} and {want[0].shape})")
    diff = np.abs(g - w)
    wmax, wmean = float(np.abs(w).max(initial=0.0)), float(np.abs(w).mean()) if w.size else 0.0
    norm = float(np.linalg.norm(g) * np.linalg.norm(w))
    cos = float(g @ w / norm) if norm > 0 else (1.0 if np.array_equal(g, w) else 0.0)
    top1 = top5 = None
    a0 = np.asarray(want[0])
    if classes and a0.ndim >= 1 and a0.shape[-1] >= 2 and np.issubdtype(a0.dtype, np.floating):
        gr = np.concatenate([np.asarray(a).reshape(-1, a0.shape[-1]) for a in got])
        wr = np.concatenate([np.asarray(a).reshape(-1, a0.shape[-1]) for a in want])
        top1 = float(np.mean(gr.argmax(-1) == wr.argmax(-1)))
        if a0.shape[-1] >= 5:
            gk, wk = np.argsort(-gr, -1)[:, :5], np.argsort(-wr, -1)[:, :5]
            top5 = float(np.mean([len(set(x) & set(y)) / 5 for x, y in zip(gk, wk)]))
    return Agreement(name, tuple(np.asarray(got[0]).shape), float(diff.max(initial=0.0)),
                     float(diff.max(initial=0.0) / wmax) if wmax > 0 else float(diff.max(initial=0.0)),
                     float(diff.mean() / wmean) if wmean > 0 else float(diff.mean()) if diff.size else 0.0,
                     cos, top1, top5, **extra)


def _flat(out) -> List[np.ndarray]:
    """A call's tensor outputs, in order (nested tuples and lists flattened)."""
    if isinstance(out, (tuple, list)):
        return [a for o in out for a in _flat(o)]
    if hasattr(out, "detach") and hasattr(out, "numpy"):  # a torch tensor
        out = out.detach().numpy()
    return [np.asarray(out)] if isinstance(out, np.ndarray) or np.isscalar(out) else []


def _caller(model) -> Callable:
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(model, (torch.nn.Module, torch.jit.ScriptFunction)):
        def call(*arrays):
            with torch.no_grad():
                return model(*[torch.from_numpy(np.ascontiguousarray(a)) if isinstance(a, np.ndarray) else a
                               for a in arrays])
        return call
    if not callable(model):
        raise TypeError(f"expected a compiled model, a torch module or a callable, got {type(model).__name__}")
    return model


def accuracy_report(model, reference, inputs: Sequence[Any], *, partitions: bool = True) -> AccuracyReport:
    """Compares ``model`` (an llga compiled model, usually bf16) with
    ``reference`` (the fp32 compiled model, a torch module, or any callable)
    over ``inputs``: a sequence of calls, each a tuple of arguments (or one
    array). See the module's docstring for what is measured."""
    from .compiler import CompiledGraph

    calls = [tuple(c) if isinstance(c, (tuple, list)) else (c,) for c in inputs]
    if not calls:
        raise ValueError("accuracy_report: no inputs")
    both = partitions and isinstance(model, CompiledGraph) and isinstance(reference, CompiledGraph)
    got: List[List[np.ndarray]] = []
    want: List[List[np.ndarray]] = []
    seen_got: List[Dict[str, np.ndarray]] = []
    seen_want: List[Dict[str, np.ndarray]] = []
    ref_call, model_call = _caller(reference), _caller(model)
    for args in calls:
        if both:
            g, vg = model._observed_call(*args)
            w, vw = reference._observed_call(*args)
            seen_got.append(vg)
            seen_want.append(vw)
        else:
            g, w = model_call(*args), ref_call(*args)
        got.append(_flat(g))
        want.append(_flat(w))
    if any(len(g) != len(w) for g, w in zip(got, want)):
        raise ValueError(f"accuracy_report: the model gives {len(got[0])} output(s), the reference {len(want[0])}")
    outs = [_agreement(f"output {i}", [g[i] for g in got], [w[i] for w in want]) for i in range(len(got[0]))]
    report = AccuracyReport(outs, calls=len(calls))
    if not both:
        report.note = ("no partition rows: they need two llga compiled models of the same graph"
                       if partitions else "")
        return report
    for p in model.partitions:
        node_name = p.output_name
        if not node_name or not all(node_name in v for v in seen_got + seen_want):
            continue
        report.partitions.append(_agreement(
            node_name, [v[node_name] for v in seen_got], [v[node_name] for v in seen_want], classes=False,
            partition=p.id, pattern=p.pattern, precision=p.precision))
    return report
