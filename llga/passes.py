"""The pass pipeline as Python sees it: PassRecord objects, LLGA_LOG dumps."""

from __future__ import annotations

import os
import sys
from typing import Dict, List, Optional, Sequence, Union

from . import _llga


# Typed records made by the C++ pass manager (src/passes/pass.h), bound as
# classes: name, changed, seconds, ir, before/after (GraphStats),
# verify_errors, notes, unfused (Unfused: kind, source, value, reason), error.
GraphStats = _llga.GraphStats
PassRecord = _llga.PassRecord
Unfused = _llga.Unfused


class PassList(list):
    """The PassRecords of a pipeline run, in order. In Jupyter it displays as
    the pass viewer (llga.viz.passes_html); in a terminal, one line per pass.
    ``initial_ir`` is the graph before the first pass."""

    def __init__(self, records=(), initial_ir: str = ""):
        super().__init__(records)
        self.initial_ir = initial_ir

    def ir_before(self, i: int) -> str:
        return self.initial_ir if i == 0 else self[i - 1].ir

    def _index(self, which) -> int:
        if isinstance(which, int):
            return which
        for i, r in enumerate(self):
            if r.name == which:
                return i
        raise KeyError(f"no pass named {which!r} in this pipeline ({', '.join(r.name for r in self)})")

    def diff(self, which, context: int = 2) -> str:
        """Unified diff of the IR across one pass (by index or name)."""
        from .viz import unified_diff

        i = self._index(which)
        return "\n".join(unified_diff(self.ir_before(i), self[i].ir, context))

    def changes(self, which) -> Dict[str, list]:
        """{"removed", "created", "replaced"}: what the pass did, by value name."""
        from .viz import changes

        i = self._index(which)
        return changes(self.ir_before(i), self[i].ir)

    def track(self, value: str) -> List[Dict[str, Optional[str]]]:
        """Follows a value (by name, e.g. "input.5") across the pipeline: the kind
        of the node producing it before the first pass and after each pass
        (None once it is gone)."""
        from .viz import producers

        name = value.lstrip("%")
        out = [{"after": "(input)", "producer": producers(self.initial_ir).get(name)}] if self.initial_ir else []
        for r in self:
            out.append({"after": r.name, "producer": producers(r.ir).get(name)})
        return out

    def to_html(self, path: Optional[str] = None, title: str = "llga pass pipeline", graphs: bool = True) -> str:
        """A standalone HTML page of the viewer; written to `path` if given."""
        from .viz import passes_html

        page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title></head><body>"
                f"<h2>{title}</h2>{passes_html(self, self.initial_ir, graphs=graphs)}</body></html>")
        if path:
            with open(path, "w") as f:
                f.write(page)
        return page

    def _repr_html_(self) -> str:
        from .viz import passes_html

        return passes_html(self, self.initial_ir)

    def __repr__(self) -> str:
        if not self:
            return "PassList([])"
        w = max(len(r.name) for r in self)
        lines = [f"{'pass':<{w}}  changed      ms  nodes before -> after  groups"]
        for r in self:
            lines.append(f"{r.name:<{w}}  {'yes' if r.changed else 'no':<7} {r.seconds * 1e3:7.2f}  "
                         f"{r.before.nodes:>12} -> {r.after.nodes:<6}  {r.after.fusion_groups:>6}")
        return "\n".join(lines)

    __str__ = __repr__


def _parse_log_spec(spec: str):
    """LLGA_LOG=">>fuse:remove-mutation" names the passes whose dumps go to stderr."""
    spec = spec.strip()
    while spec.startswith(">"):
        spec = spec[1:]
    return {p.strip() for p in spec.split(":") if p.strip()}


# Read once, at import (like PYTORCH_JIT_LOG_LEVEL).
_LOGGED = _parse_log_spec(os.environ.get("LLGA_LOG", ""))


def list_passes() -> Dict[str, str]:
    """{name: one-line description} of every registered pass."""
    return dict(_llga.list_passes())


def default_pipeline() -> str:
    return _llga.default_pipeline()


def pipeline_string(passes: Optional[Union[str, Sequence[str]]]) -> str:
    """None: the default pipeline; a comma-separated string or a list of names; "" or []: none."""
    if passes is None:
        return default_pipeline()
    if isinstance(passes, str):
        return passes
    return ",".join(passes)


def log(records) -> None:
    """Prints the dumps LLGA_LOG asked for to stderr."""
    for r in records:
        if r.name in _LOGGED:
            state = "changed" if r.changed else "unchanged"
            print(f"// IR after {r.name} ({state})\n{r.ir}", file=sys.stderr, end="")


def run(graph, passes: Optional[Union[str, Sequence[str]]] = None, weights=None, *, methods=None,
        example_inputs=None, route_off: Sequence[str] = (), shapes: str = "infer") -> "PassList":
    """Runs a pipeline on `graph` in place. `passes`: a comma-separated string or a
    list of names; None means the default pipeline, "" or [] none. `weights`
    ({name: numpy array}) lets freeze and fold-batchnorm see the module's weights;
    `methods` ({"<class>.<method>": Graph}) lets inline expand prim::CallMethod;
    `example_inputs` (numpy arrays) give propagate-shapes its shapes;
    `route_off` names op kinds or fusion patterns fuse must leave out; `shapes`
    says where propagate-shapes takes shapes from: "infer" (the per-op shape
    functions, and running the graph for what they cannot type), "functions"
    (those only) or "execute" (running the graph only)."""
    initial_ir = str(graph)
    records = _llga.run_passes(graph, pipeline_string(passes), dict(weights or {}), dict(methods or {}),
                               None if example_inputs is None else list(example_inputs), list(route_off), shapes)
    log(records)
    return PassList(records, initial_ir)
