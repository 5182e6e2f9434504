"""Where the time goes: per-op and per-partition times, the kernel log, a
Chrome trace, and routing ops off the fused path.

    import llga
    llga.profiler.enable()            # or: with llga.profiler.profile(): ...
    compiled(x)
    llga.profiler.disable()
    print(llga.profiler.stats("ExecTime"))
    llga.profiler.export_chrome_trace("trace.json")   # Perfetto / chrome://tracing

    llga.profiler.kernel_log.enable(); compiled(x); print(llga.profiler.kernel_log.json())

    route = llga.profiler.chart(compiled)            # [{"name": "aten::gelu", "fused": True, ...}, ...]
    route[i]["fused"] = False                        # edit
    compiled2 = llga.optimize(traced, route=route)   # gelu now runs op by op

Recording happens in the C++ plan around each executed instruction; when
nothing records, the cost is one relaxed atomic load per instruction.
``LLGA_VERBOSE=1`` (read once at import) prints one line per executed kernel.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import weakref
from typing import Any, Dict, List, Optional, Sequence, Union

from . import _llga

KEYS = ("ExecTime", "ExecTime-Raw", "ExecTime-Latex", "Unimpl", "Specializations")

_compiled: "weakref.WeakSet" = weakref.WeakSet()  # compiled graphs run while enabled (for Unimpl reasons)
_unsupported: Dict[str, List[str]] = {}  # op kind -> where, from optimize() failures while enabled
_spec_base: Dict[str, int] = {}


# ------------------------------------------------------------------ control

def enable() -> None:
    """Starts recording every executed instruction (adds to what is recorded)."""
    global _spec_base
    _spec_base = dict(_llga.specialization_stats())
    _llga.profiler_enable(True)


def disable() -> None:
    _llga.profiler_enable(False)


def is_in_roi() -> bool:
    """Whether recording is on (inside the region of interest)."""
    return bool(_llga.profiler_enabled())


def clear() -> None:
    """Forgets recorded events and unsupported ops."""
    _llga.profiler_clear()
    _unsupported.clear()
    _compiled.clear()


@contextlib.contextmanager
def profile(clear_first: bool = True):
    """``with llga.profiler.profile(): ...`` records the block's calls."""
    if clear_first:
        clear()
    enable()
    try:
        yield
    finally:
        disable()


def _watch(compiled) -> None:
    if is_in_roi():
        _compiled.add(compiled)


def _note_unsupported(err) -> None:
    if is_in_roi():
        for kind, where in (getattr(err, "ops", None) or {}).items():
            _unsupported.setdefault(kind, []).extend(where)


def events() -> List[Dict[str, Any]]:
    """The raw recorded events (dicts: name, pattern, partition, depth, start_ns, dur_ns, ...).
    depth -1 is a whole call (a chunk's, where the batch split ran it as
    chunks), -2 a call the batch split ran as chunks, 0 an instruction of the
    graph, 1+ an op inside a partition that runs op by op."""
    return list(_llga.profiler_events())


# ------------------------------------------------------------------ stats

def _label(e) -> str:
    return f"partition:{e['pattern']}" if e["pattern"] else e["name"]


def _exec_rows() -> Dict[str, Any]:
    evs = events()
    calls = [e for e in evs if e["depth"] == -1]
    top = [e for e in evs if e["depth"] == 0]
    rows: Dict[str, Dict[str, Any]] = {}
    for e in top:
        r = rows.setdefault(_label(e), {"name": _label(e), "type": "partition" if e["pattern"] else "op",
                                        "calls": 0, "total_ms": 0.0})
        r["calls"] += 1
        r["total_ms"] += e["dur_ns"] * 1e-6
    ops_ms = sum(r["total_ms"] for r in rows.values())
    call_ms = sum(e["dur_ns"] for e in calls) * 1e-6
    out = sorted(rows.values(), key=lambda r: -r["total_ms"])
    for r in out:
        r["avg_ms"] = r["total_ms"] / r["calls"]
        r["share"] = r["total_ms"] / ops_ms if ops_ms else 0.0
    return {"rows": out, "calls": len(calls), "call_ms": call_ms, "ops_ms": ops_ms}


def _exec_text(t) -> str:
    if not t["rows"]:
        return "no recorded execution (enable the profiler, then call a compiled graph)"
    w = max(len(r["name"]) for r in t["rows"])
    lines = [f"{'op kind / partition pattern':<{w}}  {'type':<9} {'calls':>6} {'total ms':>10} {'avg ms':>9} {'share':>7}"]
    for r in t["rows"]:
        lines.append(f"{r['name']:<{w}}  {r['type']:<9} {r['calls']:>6} {r['total_ms']:>10.3f} {r['avg_ms']:>9.4f} "
                     f"{100 * r['share']:>6.1f}%")
    cov = f" ({100 * t['ops_ms'] / t['call_ms']:.1f}% of {t['call_ms']:.3f} ms in {t['calls']} call(s))" if t["call_ms"] else ""
    lines.append(f"{'total':<{w}}  {'':<9} {sum(r['calls'] for r in t['rows']):>6} {t['ops_ms']:>10.3f}{cov}")
    return "\n".join(lines)


def _latex(t) -> str:
    esc = lambda s: s.replace("_", r"\_").replace("&", r"\&").replace("%", r"\%")  # noqa: E731
    lines = [r"\begin{tabular}{llrrrr}", r"\hline",
             r"Op kind / pattern & Type & Calls & Total (ms) & Avg (ms) & Share (\%) \\", r"\hline"]
    for r in t["rows"]:
        lines.append(f"{esc(r['name'])} & {r['type']} & {r['calls']} & {r['total_ms']:.3f} & {r['avg_ms']:.4f} & "
                     f"{100 * r['share']:.1f} \\\\")
    lines += [r"\hline", r"\end{tabular}"]
    return "\n".join(lines)


def _unimpl() -> Dict[str, Dict[str, Any]]:
    """{op kind: {"count": executions outside partitions (or 0), "reasons": {...}, "runs": bool}}."""
    out: Dict[str, Dict[str, Any]] = {}
    for e in events():
        if e["depth"] != 0 or e["pattern"] or not e["name"].startswith("aten::"):
            continue
        out.setdefault(e["name"], {"count": 0, "reasons": {}, "runs": True})["count"] += 1
    for c in list(_compiled):
        for kind, info in c.unfused.items():
            if kind in out:
                for why, n in info["reasons"].items():
                    out[kind]["reasons"][why] = out[kind]["reasons"].get(why, 0) + n
    for kind, where in _unsupported.items():
        entry = out.setdefault(kind, {"count": 0, "reasons": {}, "runs": False})
        entry["runs"] = False
        entry["reasons"][f"llga cannot run it (first at {where[0]})"] = len(where)
    return out


def _unimpl_text(u) -> str:
    if not u:
        return "every executed op ran inside a partition"
    lines = []
    for kind, info in sorted(u.items(), key=lambda kv: -kv[1]["count"]):
        what = "cannot run" if not info["runs"] else f"{info['count']} execution(s) outside partitions"
        reasons = "; ".join(f"{why} (x{n})" for why, n in info["reasons"].items()) or "-"
        lines.append(f"{kind}: {what}: {reasons}")
    return "\n".join(lines)


def _specializations() -> Dict[str, int]:
    now = _llga.specialization_stats()
    return {k: now[k] - _spec_base.get(k, 0) if k != "max_per_kernel" else now[k] for k in now}


def stats(key: Union[str, Sequence[str]] = "ExecTime"):
    """One key: its result; a list of keys: {key: result}.

    - ``ExecTime``: a table (text) of time per op kind and per partition pattern
      (total, calls, average, share), with how much of the call time they cover;
    - ``ExecTime-Raw``: the same as a list of dicts;
    - ``ExecTime-Latex``: the table as LaTeX;
    - ``Unimpl``: text listing op kinds that ran outside partitions (with the
      fuse pass's reasons) or that llga could not run at all;
    - ``Specializations``: shape specializations built, hit and evicted since enable().
    """
    if not isinstance(key, str):
        return {k: stats(k) for k in key}
    if key not in KEYS:
        raise ValueError(f"unknown stats key {key!r}; known: {', '.join(KEYS)}")
    if key == "Unimpl":
        return _unimpl_text(_unimpl())
    if key == "Specializations":
        return _specializations()
    t = _exec_rows()
    if key == "ExecTime":
        return _exec_text(t)
    if key == "ExecTime-Latex":
        return _latex(t)
    return [dict(r) for r in t["rows"]]


def unimpl() -> Dict[str, Dict[str, Any]]:
    """Unimpl as data: {op kind: {"count", "reasons", "runs"}}."""
    return _unimpl()


# ------------------------------------------------------------------ trace

def export_chrome_trace(path: str) -> str:
    """Writes the recorded events in the Trace Event format (Perfetto,
    chrome://tracing): one complete ("X") event per call and per instruction."""
    evs = events()
    t0 = min((e["start_ns"] for e in evs), default=0)
    pid = os.getpid()
    tids: Dict[int, int] = {}
    trace = []
    for e in evs:
        tid = tids.setdefault(e["thread"], len(tids))
        name = ("llga call" if e["depth"] == -1 else "llga batch split" if e["depth"] == -2 else
                f"{e['pattern']} #{e['partition']}" if e["pattern"] else e["name"])
        args = {"op": e["name"], "source": e["source"]}
        if e["pattern"]:
            args.update(pattern=e["pattern"], partition=e["partition"])
        trace.append({"name": name, "cat": "call" if e["depth"] < 0 else ("partition" if e["pattern"] else "op"),
                      "ph": "X", "ts": (e["start_ns"] - t0) / 1e3, "dur": e["dur_ns"] / 1e3, "pid": pid, "tid": tid,
                      "args": args})
    meta = [{"name": "process_name", "ph": "M", "pid": pid, "args": {"name": "llga"}}]
    with open(path, "w") as f:
        json.dump({"traceEvents": meta + trace, "displayTimeUnit": "ms"}, f)
    return path


# ------------------------------------------------------------------ kernel log

class _KernelLog:
    """One entry per kernel call: partition id, pattern, oneDNN primitive kind
    and implementation, input/output shapes and layouts, time."""

    def enable(self) -> None:
        _llga.profiler_kernel_log(True)

    def disable(self) -> None:
        _llga.profiler_kernel_log(False)

    def is_enabled(self) -> bool:
        return bool(_llga.profiler_kernel_log_enabled())

    def clear(self) -> None:
        _llga.profiler_clear_kernel_log()

    def entries(self) -> List[Dict[str, Any]]:
        out = []
        for e in _llga.profiler_kernel_events():
            k = e["kernel"]  # a KernelReport: fields, not text to split
            out.append({"op": e["name"], "partition": e["partition"] if e["partition"] >= 0 else None,
                        "pattern": e["pattern"] or None, "primitive": e["primitive"] or None,
                        "impl": k.impl or None, "layouts": k.layouts or None, "src": k.src or None,
                        "weights": k.weights or None, "dst": k.dst or None, "output": k.output or None,
                        "detail": k.detail or None,
                        "inputs": e["inputs"],
                        "outputs": e["outputs"], "time_ms": e["dur_ns"] * 1e-6, "depth": e["depth"],
                        "source": e["source"]})
        return out

    def json(self, indent: Optional[int] = None) -> str:
        return json.dumps(self.entries(), indent=indent)


kernel_log = _KernelLog()


# ------------------------------------------------------------------ chart and route

def chart(compiled) -> List[Dict[str, Any]]:
    """The op kinds and partition patterns of a compiled graph, each with
    ``"fused"``: whether it runs inside partitions. JSON-able; pass it
    (edited) to ``llga.optimize(..., route=...)``."""
    patterns, fused_ops, loose_ops = {}, {}, {}
    for p in compiled.partitions:
        patterns[p.pattern] = patterns.get(p.pattern, 0) + 1
        for k in p.ops:
            fused_ops[k] = fused_ops.get(k, 0) + 1
    for node in compiled.graph.nodes(recursive=True):
        if node.kind.startswith("aten::"):
            loose_ops[node.kind] = loose_ops.get(node.kind, 0) + 1
    out = [{"name": n, "type": "pattern", "fused": True, "count": c} for n, c in sorted(patterns.items())]
    for k in sorted(set(fused_ops) | set(loose_ops)):
        out.append({"name": k, "type": "op", "fused": k in fused_ops and k not in loose_ops,
                    "count": fused_ops.get(k, 0) + loose_ops.get(k, 0)})
    return out


def _known_names() -> set:
    return {p["name"] for p in _llga.fusion_patterns()} | {e["kind"] for e in _llga.supported_ops()}


def _route_off(route) -> List[str]:
    """Names to keep out of partitions; raises ValueError on unknown names."""
    if route is None:
        return []
    if isinstance(route, dict):
        items = [{"name": k, "fused": v} for k, v in route.items()]
    else:
        items = list(route)
    known = _known_names()
    off = []
    for i, item in enumerate(items):
        if isinstance(item, str):
            item = {"name": item, "fused": False}
        if not isinstance(item, dict) or "name" not in item or "fused" not in item:
            raise ValueError(f"route[{i}]: expected {{'name': ..., 'fused': bool}} (as llga.profiler.chart gives), "
                             f"got {item!r}")
        name = item["name"]
        if name not in known:
            close = difflib.get_close_matches(str(name), known, n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise ValueError(f"route[{i}]: unknown op kind or fusion pattern {name!r}{hint}")
        if not isinstance(item["fused"], bool):
            raise ValueError(f"route[{i}] ({name}): 'fused' must be true or false, got {item['fused']!r}")
        if not item["fused"]:
            off.append(name)
    return off


_VERBOSE = os.environ.get("LLGA_VERBOSE", "")
if _VERBOSE not in ("", "0"):
    _llga.profiler_verbose(int(_VERBOSE) if _VERBOSE.isdigit() else 1)
