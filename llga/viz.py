"""Pictures of graphs: Graphviz DOT/SVG with fusion partitions as colored
clusters, shapes/dtypes/layouts on edges, and why an op was not fused.

    svg = llga.viz.svg(compiled)                        # the compiled graph
    svg = llga.viz.svg(graph, collapse=1)               # one box per top-level module
    svg = llga.viz.svg(graph, collapse=1, expand=["layer1"])
    svg = llga.viz.svg(compiled, focus="input.13", radius=2)
    dot = llga.viz.to_dot(graph)                        # the DOT text

Rendering needs Graphviz's ``dot`` (Debian: ``apt-get install graphviz``);
without it, ``svg()`` raises :class:`VizUnavailable` and the rich displays
fall back to text.
"""

from __future__ import annotations

import hashlib
import html
import re
import shutil
import subprocess
from collections import defaultdict, deque
from typing import Dict, List, Optional, Sequence, Set, Tuple

AUTO_COLLAPSE_NODES = 250  # larger graphs are collapsed by module scope unless asked otherwise

_PALETTE = ["#fde0dd", "#deebf7", "#e5f5e0", "#fff7bc", "#efedf5", "#fee6ce", "#e0f3f8", "#f7f4f9", "#edf8e9"]


class VizUnavailable(RuntimeError):
    """Graphviz's ``dot`` is not installed (or failed); the message says what to do."""


# ------------------------------------------------------------------ helpers

def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _short(kind: str) -> str:
    return kind.split("::", 1)[1] if kind.startswith(("aten::", "prim::")) else kind


def _shape(v) -> str:
    t = v.type
    if not t.is_tensor:
        return str(t)
    sizes = t.sizes
    dims = "x".join("?" if s is None else str(s) for s in sizes) if sizes is not None else "?"
    dt = {"Float": "f32", "Long": "i64", "Int": "i32", "Bool": "bool", "Double": "f64", "BFloat16": "bf16",
          "Half": "f16"}.get(t.dtype or "", t.dtype or "?")
    return f"{dims or 'scalar'} {dt}"


def module_path(scope: str) -> str:
    """``__module.layer1/__module.layer1.0/__module.layer1.0.conv1`` -> ``layer1.0.conv1``."""
    last = scope.rsplit("/", 1)[-1] if scope else ""
    return last[len("__module."):] if last.startswith("__module.") else last


def _is_hidden(node) -> bool:
    """Bookkeeping nodes not drawn: non-tensor constants, module attribute reads."""
    if node.kind == "prim::Constant":
        return not node.outputs[0].type.is_tensor
    if node.kind == "prim::GetAttr":
        return not node.outputs[0].type.is_tensor
    return False


def _is_weight(node) -> bool:
    return node.kind in ("prim::Constant", "prim::GetAttr") and node.outputs[0].type.is_tensor


def _compiled_parts(obj):
    """(graph, compiled or None)."""
    if hasattr(obj, "graph") and hasattr(obj, "partitions"):
        return obj.graph, obj
    return obj, None


def unfused_reasons(compiled) -> Dict[str, str]:
    """{output value name: why the fuse pass left that op outside partitions}."""
    out: Dict[str, str] = {}
    for rec in getattr(compiled, "passes", []) or []:
        if rec.name != "fuse":
            continue
        for u in rec.unfused:
            if u.value:
                out[u.value] = u.reason
    return out


def value_layouts(compiled) -> Dict[str, str]:
    """{value name: layout} for partition outputs, from the latest call: the
    primitive's layout when the value went on blocked ("nhwc, kept"), else plain."""
    out: Dict[str, str] = {}
    if compiled is None:
        return out
    for p, node in zip(compiled.partitions, (n for n in compiled.graph.nodes(recursive=True)
                                            if n.kind == "llga::FusionGroup")):
        if p.output == "kept":
            out[node.outputs[0].name] = f"{p.dst} (kept)"
        elif p.layouts:
            out[node.outputs[0].name] = "plain"
    return out


# ------------------------------------------------------------------ the model of the picture

class _Picture:
    """Drawable items of a graph: op nodes, partitions (clusters) and the value edges."""

    def __init__(self, graph):
        self.graph = graph
        self.items: Dict[str, dict] = {}  # id -> {label parts, scope, cluster, node}
        self.producer: Dict[str, str] = {}  # value name -> item id drawing it
        self.values: Dict[str, object] = {}  # value name -> Value
        self.edges: List[Tuple[str, str, str]] = []  # (from id, to id, value name)
        self.clusters: Dict[str, dict] = {}
        self._build()

    def _add(self, iid: str, **kw):
        self.items[iid] = kw
        return iid

    def _build(self):
        g = self.graph
        for i, v in enumerate(g.inputs):
            if v.type.kind == "Class":
                continue
            iid = self._add(f"in{i}", kind="input", label=f"input %{v.name}", scope="", cluster=None, node=None)
            self.producer[v.name] = iid
            self.values[v.name] = v
        n_groups = 0
        for k, node in enumerate(g.nodes()):
            if _is_hidden(node):
                continue
            if node.kind == "llga::FusionGroup":
                cid = f"p{n_groups}"
                self.clusters[cid] = {"id": n_groups, "pattern": str(node.attributes.get("pattern", "")),
                                      "scope": module_path(node.scope), "node": node}
                n_groups += 1
                self._add_group(node, cid)
                continue
            iid = self._add(f"n{k}", kind="weight" if _is_weight(node) else "op", node=node,
                            scope=module_path(node.scope), cluster=None)
            for v in node.inputs:
                if v.name in self.producer:
                    self.edges.append((self.producer[v.name], iid, v.name))
            for v in node.outputs:
                self.producer[v.name] = iid
                self.values[v.name] = v
        for j, v in enumerate(g.outputs):
            oid = self._add(f"out{j}", kind="output", label=f"output %{v.name}", scope="", cluster=None, node=None)
            if v.name in self.producer:
                self.edges.append((self.producer[v.name], oid, v.name))

    def _add_group(self, group, cid: str):
        sub = group.subgraph
        outer = {si.name: gi for si, gi in zip(sub.inputs, group.inputs)}
        inner_prod: Dict[str, str] = {}
        for k, node in enumerate(sub.nodes()):
            if node.kind == "prim::Constant":
                continue
            iid = self._add(f"{cid}_{k}", kind="op", node=node, scope=module_path(group.scope), cluster=cid)
            for v in node.inputs:
                if v.name in inner_prod:
                    self.edges.append((inner_prod[v.name], iid, v.name))
                elif v.name in outer and outer[v.name].name in self.producer:
                    ov = outer[v.name]
                    self.edges.append((self.producer[ov.name], iid, ov.name))
            for v in node.outputs:
                inner_prod[v.name] = iid
                self.values.setdefault(v.name, v)
        for so, go in zip(sub.outputs, group.outputs):
            if so.name in inner_prod:
                self.producer[go.name] = inner_prod[so.name]
                self.values[go.name] = go

    # ---- views

    def focus(self, name: str, radius: int) -> Set[str]:
        if name not in self.producer:
            raise KeyError(f"no value %{name} in the graph")
        adj: Dict[str, Set[str]] = defaultdict(set)
        for a, b, _ in self.edges:
            adj[a].add(b)
            adj[b].add(a)
        start = self.producer[name]
        seen, todo = {start: 0}, deque([start])
        while todo:
            cur = todo.popleft()
            if seen[cur] >= radius:
                continue
            for nxt in adj[cur]:
                if nxt not in seen:
                    seen[nxt] = seen[cur] + 1
                    todo.append(nxt)
        return set(seen)


def _group_key(scope: str, depth: int, expand: Sequence[str]) -> Optional[str]:
    """The collapsed box a scope falls in, or None to draw it expanded."""
    if not scope:
        return None
    parts = scope.split(".")
    d = depth
    for e in expand:  # an expanded scope shows its children one level deeper
        ep = e.split(".")
        if parts[: len(ep)] == ep:
            d = max(d, len(ep) + 1)
    if len(parts) <= d - 1:
        return None
    return ".".join(parts[:d])


def to_dot(obj, *, collapse: Optional[int] = None, expand: Sequence[str] = (), focus: Optional[str] = None,
           radius: int = 2, title: Optional[str] = None, unfused: Sequence = ()) -> str:
    """Graphviz DOT text for an llga.Graph or a CompiledGraph.

    ``collapse=k`` draws every module scope k levels deep (``layer1`` at 1,
    ``layer1.0`` at 2) as one box; ``expand`` lists scopes to open inside a
    collapsed view. ``unfused`` (a fuse PassRecord's Unfused records) mark
    unfused ops when drawing a dump. Graphs with more than AUTO_COLLAPSE_NODES drawn nodes are
    collapsed at depth 1 unless ``collapse=0``. ``focus`` (a value name)
    draws only the ops within ``radius`` edges of the op producing it.
    """
    graph, compiled = _compiled_parts(obj)
    pic = _Picture(graph)
    reasons = unfused_reasons(compiled) if compiled is not None else {}
    for u in unfused:  # a fuse record's, when drawing a dump
        if u.value:
            reasons[u.value] = u.reason
    layouts = value_layouts(compiled)
    keep = pic.focus(focus, radius) if focus else set(pic.items)
    n_ops = sum(1 for i in keep if pic.items[i]["kind"] in ("op", "weight"))
    note = ""
    if collapse is None and not focus and n_ops > AUTO_COLLAPSE_NODES:
        collapse = 1
        note = f" ({n_ops} ops: collapsed by module scope; collapse=0 draws all, expand=[...] opens a scope)"
    collapse = collapse or 0
    box_of: Dict[str, str] = {}
    box_count: Dict[str, int] = defaultdict(int)
    box_parts: Dict[str, Set[str]] = defaultdict(set)
    if collapse > 0:
        for iid in keep:
            it = pic.items[iid]
            key = _group_key(it["scope"], collapse, expand) if it["kind"] in ("op", "weight") else None
            if key:
                box_of[iid] = "box_" + re.sub(r"\W", "_", key)
                box_count[key] += it["kind"] == "op"
                if it["cluster"]:
                    box_parts[key].add(pic.clusters[it["cluster"]]["pattern"])

        # A weight goes into the box of the ops that read it (it has no scope of its own).
        readers: Dict[str, Set[str]] = defaultdict(set)
        for a, b, _ in pic.edges:
            if a in keep and b in keep and pic.items[a]["kind"] == "weight":
                readers[a].add(box_of.get(b, b))
        for w, boxes in readers.items():
            if len(boxes) == 1 and next(iter(boxes)).startswith("box_"):
                box_of[w] = next(iter(boxes))

    def target(iid):
        return box_of.get(iid, iid)

    lines = ["digraph llga {", '  graph [rankdir=TB, fontname="Helvetica", fontsize=11, nodesep=0.25, ranksep=0.3,'
             f" label={_q((title or 'llga graph') + note)}, labelloc=t];",
             '  node [shape=box, style="rounded,filled", fillcolor="#ffffff", fontname="Helvetica", fontsize=10,'
             ' height=0.3];', '  edge [fontname="Helvetica", fontsize=8, color="#555555", arrowsize=0.6];']
    # collapsed boxes
    for key, n in sorted(box_count.items()):
        pats = ", ".join(sorted(box_parts[key]))
        label = f"{key}\n{n} ops" + (f"\npartitions: {pats}" if pats else "")
        bid = "box_" + re.sub(r"\W", "_", key)
        lines.append(f'  {bid} [label={_q(label)}, shape=box3d, fillcolor="#f0f0f0", tooltip={_q(key)}];')
    # clusters then loose nodes
    by_cluster: Dict[Optional[str], List[str]] = defaultdict(list)
    for iid in pic.items:
        if iid in keep and iid not in box_of:
            by_cluster[pic.items[iid]["cluster"]].append(iid)
    colors = {}
    for cid, members in by_cluster.items():
        if cid is None:
            continue
        c = pic.clusters[cid]
        colors.setdefault(c["pattern"], _PALETTE[len(colors) % len(_PALETTE)])
        lines.append(f"  subgraph cluster_{cid} {{")
        lines.append(f'    label={_q("#%d %s" % (c["id"], c["pattern"]))}; style="rounded,filled"; '
                     f'fillcolor="{colors[c["pattern"]]}"; color="#888888"; fontsize=9;')
        for iid in members:
            lines.append("    " + _node_line(iid, pic.items[iid], reasons))
        lines.append("  }")
    for iid in by_cluster.get(None, []):
        lines.append("  " + _node_line(iid, pic.items[iid], reasons))
    seen_edges = set()
    for a, b, vname in pic.edges:
        if a not in keep or b not in keep:
            continue
        ta, tb = target(a), target(b)
        if ta == tb or (ta, tb, vname) in seen_edges:
            continue
        seen_edges.add((ta, tb, vname))
        v = pic.values.get(vname)
        label = _shape(v) if v is not None else ""
        if vname in layouts:
            if ":bf16" in layouts[vname]:  # handed on in bf16 (out_dtype): the edge's dtype, not the IR's Float
                label = label.replace(" f32", " bf16")
            label += f"\n{layouts[vname]}"
        style = ', style=dashed, color="#aaaaaa"' if pic.items[a]["kind"] == "weight" else ""
        lines.append(f"  {ta} -> {tb} [label={_q(label)}, tooltip={_q('%' + vname)}{style}];")
    lines.append("}")
    return "\n".join(lines)


def _node_line(iid: str, it: dict, reasons: Dict[str, str]) -> str:
    kind = it["kind"]
    if kind == "input":
        return f'{iid} [label={_q(it["label"])}, shape=ellipse, fillcolor="#c7e9c0"];'
    if kind == "output":
        return f'{iid} [label={_q(it["label"])}, shape=ellipse, fillcolor="#fdd0a2"];'
    node = it["node"]
    out = node.outputs[0] if node.outputs else None
    if kind == "weight":
        label = f"weight\n{_shape(out)}"
        return f'{iid} [label={_q(label)}, shape=note, fontsize=8, fillcolor="#eeeeee", tooltip={_q("%" + out.name)}];'
    label = _short(node.kind)
    attrs = _key_attrs(node)
    if attrs:
        label += "\n" + attrs
    extra = ""
    why = reasons.get(out.name) if out is not None else None
    if why:
        label += "\nnot fused: " + _wrap(why, 34)
        extra = ', color="#d62728", penwidth=1.6, style="rounded,filled,dashed", fillcolor="#fff5f5"'
    tip = f"{node.kind} %{out.name if out is not None else '?'}" + (f"\n{node.source}" if node.source else "")
    return f"{iid} [label={_q(label)}, tooltip={_q(tip)}{extra}];"


def _key_attrs(node) -> str:
    """Short constant arguments (strides, dims, scalars) in call order."""
    parts = []
    for v in node.inputs:
        p = v.node
        if p.kind == "prim::Constant" and not v.type.is_tensor:
            val = p.attributes.get("value")
            if val is None:
                continue
            s = str(val).replace(" ", "")
            if len(s) <= 14:
                parts.append(s)
    s = " ".join(parts[:4])
    return s


def _wrap(text: str, width: int) -> str:
    words, lines, cur = text.split(), [], ""
    for w in words:
        if cur and len(cur) + 1 + len(w) > width:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}".strip()
    if cur:
        lines.append(cur)
    return "\n".join(lines[:3]) + ("..." if len(lines) > 3 else "")


# ------------------------------------------------------------------ rendering

def dot_available() -> bool:
    return shutil.which("dot") is not None


_SVG_CACHE: Dict[str, str] = {}


def render(dot: str, fmt: str = "svg", timeout: float = 60) -> str:
    """Runs Graphviz's ``dot`` on DOT text; returns the SVG text."""
    exe = shutil.which("dot")
    if exe is None:
        raise VizUnavailable("Graphviz's 'dot' is not installed (Debian: apt-get install graphviz); "
                             "use llga.viz.text(graph) or str(graph) instead")
    key = hashlib.sha1((fmt + dot).encode()).hexdigest()
    if key in _SVG_CACHE:
        return _SVG_CACHE[key]
    try:
        r = subprocess.run([exe, f"-T{fmt}"], input=dot, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise VizUnavailable(f"Graphviz took longer than {timeout:.0f} s; draw less (collapse=1, focus=...)") from None
    if r.returncode != 0:
        raise VizUnavailable(f"Graphviz failed: {r.stderr.strip()[:300]}")
    out = r.stdout
    i = out.find("<svg")  # drop the XML prolog and DOCTYPE: the SVG is embedded in HTML
    out = out[i:] if i >= 0 else out
    if len(_SVG_CACHE) > 64:
        _SVG_CACHE.clear()
    _SVG_CACHE[key] = out
    return out


def svg(obj, **kw) -> str:
    """SVG text of a Graph or CompiledGraph (see to_dot for the options)."""
    return render(to_dot(obj, **kw))


def text(obj, max_lines: int = 60) -> str:
    """A text fallback: one line per op, partitions grouped."""
    graph, compiled = _compiled_parts(obj)
    reasons = unfused_reasons(compiled) if compiled is not None else {}
    lines = []
    n_groups = 0
    for node in graph.nodes():
        if _is_hidden(node) or _is_weight(node):
            continue
        outs = ", ".join(f"%{v.name} : {_shape(v)}" for v in node.outputs)
        if node.kind == "llga::FusionGroup":
            ops = " -> ".join(_short(n.kind) for n in node.subgraph.nodes() if n.kind != "prim::Constant")
            lines.append(f"[#{n_groups} {node.attributes.get('pattern', '')}] {ops} => {outs}")
            n_groups += 1
        else:
            why = reasons.get(node.outputs[0].name) if node.outputs else None
            lines.append(f"{node.kind} => {outs}" + (f"   (not fused: {why})" if why else ""))
    if len(lines) > max_lines:
        lines = lines[:max_lines] + [f"... {len(lines) - max_lines} more"]
    return "\n".join(lines)


def html_figure(obj, **kw) -> str:
    """An HTML fragment: the SVG, or the text fallback with the reason."""
    try:
        return f'<div class="llga-graph">{svg(obj, **kw)}</div>'
    except VizUnavailable as e:
        return (f'<div class="llga-graph"><p><i>{html.escape(str(e))}</i></p>'
                f"<pre>{html.escape(text(obj))}</pre></div>")


# ------------------------------------------------------------------ the pass pipeline viewer

def producers(ir: str) -> Dict[str, str]:
    """{value name: kind of the node producing it} in IR text, read with llga's
    parser (nested blocks included; fusion-group bodies, which are graphs of
    their own, left out). A dump that does not parse gives {}."""
    from . import ParseError, parse

    try:
        g = parse(ir)
    except ParseError:
        return {}
    return {v.name: n.kind for n in g.nodes(recursive=True) for v in n.outputs}


def changes(before_ir: str, after_ir: str) -> Dict[str, List[Tuple[str, ...]]]:
    """What a pass did to the outer graph, by value name: ``removed``
    [(name, old kind)], ``created`` [(name, new kind)], ``replaced``
    [(name, old kind, new kind)] (the name survived, its producer changed)."""
    a, b = producers(before_ir), producers(after_ir)
    return {
        "removed": sorted((n, k) for n, k in a.items() if n not in b),
        "created": sorted((n, k) for n, k in b.items() if n not in a),
        "replaced": sorted((n, a[n], b[n]) for n in a.keys() & b.keys() if a[n] != b[n]),
    }


def unified_diff(before_ir: str, after_ir: str, context: int = 2) -> List[str]:
    import difflib

    return list(difflib.unified_diff(before_ir.splitlines(), after_ir.splitlines(), "before", "after", n=context,
                                     lineterm=""))


_CSS = """<style>
.llga-passes{font-family:Helvetica,Arial,sans-serif;font-size:12px}
.llga-passes .row{display:grid;grid-template-columns:2.5em 13em 6em 6em 11em 6em 1fr;gap:4px;padding:2px 4px}
.llga-passes .head{font-weight:bold;border-bottom:1px solid #999}
.llga-passes details.pass{border-bottom:1px solid #eee}
.llga-passes details.pass>summary{list-style:none;cursor:pointer}
.llga-passes details.pass>summary::-webkit-details-marker{display:none}
.llga-passes details.pass[open]>summary{background:#eef3fb}
.llga-passes .changed .flag{color:#1a7f37;font-weight:bold}
.llga-passes .unchanged{color:#777}
.llga-hide:checked~.llga-list .unchanged{display:none}
.llga-passes .body{padding:6px 10px 10px 30px}
.llga-passes pre.diff{font-family:monospace;font-size:11px;max-height:420px;overflow:auto;background:#fafafa;
  border:1px solid #ddd;padding:4px;margin:4px 0}
.llga-passes .add{background:#e6ffec;display:block}.llga-passes .del{background:#ffebe9;display:block}
.llga-passes .hunk{color:#6f42c1;display:block}
.llga-passes table.diff{font-family:monospace;font-size:10px;border-collapse:collapse}
.llga-passes table.diff td{padding:0 4px;white-space:pre}
.llga-passes .diff_add{background:#e6ffec}.llga-passes .diff_sub{background:#ffebe9}
.llga-passes .diff_chg{background:#fff5b1}
.llga-passes .graphs{display:flex;gap:12px;overflow:auto;max-height:700px}
.llga-passes .graphs>div{flex:1;min-width:300px}
.llga-passes .graphs svg{max-width:100%;height:auto}
.llga-passes ul.nodes{margin:2px 0 6px 0;max-height:160px;overflow:auto}
</style>"""


def _diff_html(lines: List[str], limit: int = 600) -> str:
    out = []
    for line in lines[:limit]:
        cls = "add" if line.startswith("+") and not line.startswith("+++") else \
              "del" if line.startswith("-") and not line.startswith("---") else \
              "hunk" if line.startswith("@@") else ""
        esc = html.escape(line)
        out.append(f'<span class="{cls}">{esc}</span>' if cls else esc + "\n")
    more = f"\n... {len(lines) - limit} more diff lines" if len(lines) > limit else ""
    return f'<pre class="diff unified">{"".join(out)}{html.escape(more)}</pre>'


def _side_by_side(before: str, after: str) -> str:
    import difflib

    a, b = before.splitlines(), after.splitlines()
    if len(a) + len(b) > 6000:
        return "<p><i>(too long for a side-by-side view; see the unified diff)</i></p>"
    return difflib.HtmlDiff(wrapcolumn=90).make_table(a, b, "before", "after", context=True, numlines=1)


def _graph_svg(ir: str, unfused: Sequence = ()) -> str:
    from . import parse

    try:
        g = parse(ir)
    except Exception as e:  # noqa: BLE001 - a viewer must not fail on one bad dump
        return f"<p><i>cannot draw: {html.escape(str(e))}</i></p>"
    try:
        return render(to_dot(g, title="", unfused=unfused))
    except VizUnavailable as e:
        return f"<p><i>{html.escape(str(e))}</i></p><pre>{html.escape(text(g))}</pre>"


def passes_html(records, initial_ir: str = "", graphs: bool = True, uid: Optional[str] = None,
                open_last: bool = True) -> str:
    """The pass pipeline as HTML: a row per pass (changed, time, nodes before and
    after, fusion groups, notes); each row opens on its IR diff (unified and
    side by side), the graph before and after, and the nodes it removed,
    created or replaced. A checkbox hides the passes that changed nothing."""
    uid = uid or hashlib.sha1(str(id(records)).encode()).hexdigest()[:8]
    parts = [f'<div class="llga-passes">{_CSS}',
             f'<input type="checkbox" class="llga-hide" id="llga-hide-{uid}">'
             f'<label for="llga-hide-{uid}"> hide passes that changed nothing</label>',
             '<div class="llga-list"><div class="row head"><span>#</span><span>pass</span><span>changed</span>'
             '<span>ms</span><span>nodes before &rarr; after</span><span>groups</span><span>notes</span></div>']
    prev = initial_ir
    prev_svg: Optional[str] = None
    last_changed = max((i for i, r in enumerate(records) if r.changed), default=-1) if open_last else -1
    for i, r in enumerate(records):
        is_open = " open" if i == last_changed else ""
        state = "changed" if r.changed else "unchanged"
        summary = (f'<summary class="row"><span>{i}</span><span><b>{html.escape(r.name)}</b></span>'
                   f'<span class="flag">{"yes" if r.changed else "no"}</span><span>{r.seconds * 1e3:.2f}</span>'
                   f"<span>{r.before.nodes} &rarr; {r.after.nodes}</span><span>{r.after.fusion_groups}</span>"
                   f"<span>{len(r.notes) + len(r.unfused)}</span></summary>")
        body = []
        if r.error:
            body.append(f"<p><b>error:</b> {html.escape(r.error)}</p>")
        if r.changed and prev:
            ch = changes(prev, r.ir)
            for what, items in ch.items():
                ops = [t for t in items if "prim::Constant" not in t[1:]]
                n_const = len(items) - len(ops)
                if items:
                    lis = "".join(f"<li><code>%{html.escape(t[0])}</code>: {html.escape(' → '.join(t[1:]))}</li>"
                                  for t in ops[:200])
                    if len(ops) > 200:
                        lis += f"<li>... {len(ops) - 200} more</li>"
                    if n_const:
                        lis += f"<li><i>and {n_const} prim::Constant node(s)</i></li>"
                    body.append(f"<div><b>{what}</b> ({len(ops)} ops)<ul class='nodes'>{lis}</ul></div>")
            body.append("<details open><summary>IR diff (unified)</summary>"
                        + _diff_html(unified_diff(prev, r.ir)) + "</details>")
            body.append("<details><summary>IR diff (side by side)</summary>" + _side_by_side(prev, r.ir)
                        + "</details>")
            if graphs:
                before_svg = prev_svg if prev_svg is not None else _graph_svg(prev)
                after_svg = _graph_svg(r.ir, r.unfused)
                prev_svg = after_svg
                body.append(f"<details{is_open}><summary>graph before / after</summary><div class='graphs'>"
                            f"<div><b>before</b>{before_svg}</div><div><b>after</b>{after_svg}</div></div></details>")
        elif not r.changed:
            body.append("<p>no change</p>")
        if r.notes:
            lis = "".join(f"<li>{html.escape(n)}</li>" for n in r.notes[:300])
            more = f"<li>... {len(r.notes) - 300} more</li>" if len(r.notes) > 300 else ""
            body.append(f"<details><summary>notes ({len(r.notes)})</summary><ul class='nodes'>{lis}{more}</ul></details>")
        if r.unfused:
            lis = "".join(f"<li><code>{html.escape(u.kind)}</code>"
                          + (f" at {html.escape(u.source)}" if u.source else "")
                          + (f" (<code>%{html.escape(u.value)}</code>)" if u.value else "")
                          + f": {html.escape(u.reason)}</li>" for u in r.unfused[:300])
            more = f"<li>... {len(r.unfused) - 300} more</li>" if len(r.unfused) > 300 else ""
            body.append(f"<details><summary>left outside partitions ({len(r.unfused)})</summary>"
                        f"<ul class='nodes'>{lis}{more}</ul></details>")
        if r.verify_errors:
            body.append("<p><b>verifier:</b> " + html.escape("; ".join(r.verify_errors)) + "</p>")
        parts.append(f'<details class="pass {state}"{is_open}>{summary}<div class="body">{"".join(body)}</div>'
                     "</details>")
        prev = r.ir
    parts.append("</div></div>")
    return "".join(parts)
