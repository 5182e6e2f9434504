"""The pass pipeline as Python sees it: PassRecord objects, LLGA_LOG dumps."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Union

from . import _llga


@dataclass(frozen=True)
class GraphStats:
    nodes: int
    fusion_groups: int
    kinds: Dict[str, int]


@dataclass(frozen=True)
class PassRecord:
    """What one pass did: its name, whether it changed the graph, its time,
    the IR after it, node statistics before and after, verifier findings."""

    name: str
    changed: bool
    seconds: float
    ir: str = field(repr=False)
    before: GraphStats = field(repr=False)
    after: GraphStats = field(repr=False)
    verify_errors: List[str] = field(default_factory=list, repr=False)
    notes: List[str] = field(default_factory=list, repr=False)  # what the pass left alone, and why
    error: str = ""

    @staticmethod
    def from_dict(d) -> "PassRecord":
        return PassRecord(d["name"], d["changed"], d["seconds"], d["ir"], GraphStats(**d["before"]),
                          GraphStats(**d["after"]), list(d["verify_errors"]), list(d["notes"]), d["error"])

    def __str__(self) -> str:
        state = "changed" if self.changed else "unchanged"
        return (f"{self.name}: {state}, {self.seconds * 1e3:.2f} ms, "
                f"{self.before.nodes} -> {self.after.nodes} nodes")


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


def run(graph, passes: Optional[Union[str, Sequence[str]]] = None, weights=None, *, methods=None,
        example_inputs=None, route_off: Sequence[str] = ()) -> List[PassRecord]:
    """Runs a pipeline on `graph` in place. `passes`: a comma-separated string or a
    list of names; None means the default pipeline, "" or [] none. `weights`
    ({name: numpy array}) lets freeze and fold-batchnorm see the module's weights;
    `methods` ({"<class>.<method>": Graph}) lets inline expand prim::CallMethod;
    `example_inputs` (numpy arrays) give propagate-shapes its shapes;
    `route_off` names op kinds or fusion patterns fuse must leave out."""
    if passes is None:
        pipeline = default_pipeline()
    elif isinstance(passes, str):
        pipeline = passes
    else:
        pipeline = ",".join(passes)
    records = [PassRecord.from_dict(d) for d in _llga.run_passes(graph, pipeline, dict(weights or {}), dict(methods or {}),
                                                                     None if example_inputs is None else list(example_inputs),
                                                                     list(route_off))]
    for r in records:
        if r.name in _LOGGED:
            state = "changed" if r.changed else "unchanged"
            print(f"// IR after {r.name} ({state})\n{r.ir}", file=sys.stderr, end="")
    return records
