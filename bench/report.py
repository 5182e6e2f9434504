"""The bench's outputs: JSON (everything), a Markdown table, a PNG chart."""

from __future__ import annotations

import json
import math
import os
import shutil
from typing import List, Optional

ORDER = ("llga", "ofi", "eager", "ort")
LABELS = {"llga": "llga", "ofi": "PyTorch frozen+OFI", "eager": "PyTorch eager", "ort": "ONNX Runtime 1.30",
          "llga-bf16": "llga bf16", "autocast": "PyTorch autocast bf16", "llga-int8": "llga int8",
          "torch-int8": "PyTorch int8 (FX)", "llga-fx-int8": "llga on PyTorch's int8 graph",
          "ort-int8": "ONNX Runtime int8 (QDQ export)"}


def _ms(entry: Optional[dict]) -> Optional[float]:
    return entry.get("median_ms") if entry and entry.get("ok") else None


def _cell(entry: Optional[dict]) -> str:
    if not entry:
        return "-"
    if not entry.get("ok"):
        return "n/a"
    v = entry["median_ms"]
    return f"{v:.3f}" if v < 1 else f"{v:.1f}"


def _ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return a / b if a and b else None


def _geomean(xs: List[float]) -> Optional[float]:
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def _fmt_ratio(r: Optional[float]) -> str:
    return f"{r:.2f}x" if r else "-"


def _threads(run: dict) -> List[int]:
    """The run's thread counts (older runs hold one int)."""
    t = run.get("threads", 1)
    return list(t) if isinstance(t, (list, tuple)) else [t]


def _row_threads(run: dict, r: dict) -> int:
    return r.get("threads", _threads(run)[-1])


def _per_image(entry: Optional[dict], batch: int) -> str:
    v = _ms(entry)
    if v is None:
        return "-"
    v /= max(batch, 1)
    return f"{v:.3f}" if v < 1 else f"{v:.2f}"


def scaling(run: dict) -> List[str]:
    """Speed-up from the fewest threads to the most, per model and batch and
    system (its median at the fewest over its median at the most)."""
    counts = _threads(run)
    if len(counts) < 2:
        return []
    lo, hi = min(counts), max(counts)
    by_key: dict = {}
    for r in run["results"]:
        if "error" not in r:
            by_key.setdefault((r["model"], r["batch"]), {})[_row_threads(run, r)] = r
    lines = ["", f"Thread scaling, {lo} -> {hi} threads (time at {lo} / time at {hi}; {hi / lo:.0f}x would be perfect):", "",
             "| model | batch | " + " | ".join(LABELS[s] for s in ORDER) + " |",
             "|---|---|" + "---|" * len(ORDER)]
    for (model, batch), rows in by_key.items():
        if lo not in rows or hi not in rows:
            continue
        cells = []
        for s in ORDER:
            a, b = _ms(rows[lo]["systems"].get(s)), _ms(rows[hi]["systems"].get(s))
            cells.append(f"{a / b:.2f}x" if a and b else "-")
        lines.append(f"| {model} | {batch} | " + " | ".join(cells) + " |")
    return lines


def bf16_table(run: dict) -> List[str]:
    """With --precision bf16: llga bf16 next to llga fp32, PyTorch autocast bf16
    and ONNX Runtime fp32, paired by round against llga bf16."""
    rows = [r for r in run["results"] if "llga-bf16" in r.get("systems", {})]
    if not rows:
        return []
    m, lim = run["machine"], run["limit"]
    out = ["", f"bf16: oneDNN ISA {m.get('onednn_isa', '?')}, bf16 {m.get('bf16_path', '?')}; limit "
               + (f"{lim['bf16']['gflops']:.0f} GFLOP/s bf16 ({lim['bf16']['impl']}) against "
                  f"{lim['f32']['gflops']:.0f} f32" if lim["bf16"]["supported"] else "bf16 unsupported")
               + (f"; precision='auto' takes {m['auto_precision']} here" if "auto_precision" in m else "")
               + ". Ratios: llga bf16's time / the peer's, paired by round.",
           "",
           "| model | batch | threads | llga fp32 | llga bf16 | PyTorch autocast bf16 | ONNX Runtime fp32 "
           "| bf16/ORT | bf16/autocast | bf16/llga fp32 | llga bf16 rel. err. |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    by = {"ort": [], "autocast": [], "llga": []}
    for r in rows:
        sy, p = r["systems"], r.get("paired_bf16", {})
        for k in by:
            if p.get(k) is not None:
                by[k].append(p[k])
        err = sy["llga-bf16"].get("rel_err")
        out.append(f"| {r['model']} | {r['batch']} | {_row_threads(run, r)} | {_cell(sy.get('llga'))} | "
                   f"{_cell(sy.get('llga-bf16'))} | {_cell(sy.get('autocast'))} | {_cell(sy.get('ort'))} | "
                   f"{_fmt_ratio(p.get('ort'))} | {_fmt_ratio(p.get('autocast'))} | {_fmt_ratio(p.get('llga'))} | "
                   f"{'-' if err is None else f'{err:.1e}'} |")
    out.append(f"| geometric mean | | | | | | | {_fmt_ratio(_geomean(by['ort']))} | "
               f"{_fmt_ratio(_geomean(by['autocast']))} | {_fmt_ratio(_geomean(by['llga']))} | |")
    spans = _intervals(run, "llga-bf16", "ort")
    if spans:
        out += ["", "llga bf16 / ONNX Runtime fp32, 95% interval of each paired median: " + ", ".join(spans) + "."]
    return out


def int8_table(run: dict) -> List[str]:
    """With --precision int8: llga int8 (llga.quantize) next to llga fp32,
    PyTorch's FX int8 and ONNX Runtime fp32, paired by round against llga int8."""
    rows = [r for r in run["results"] if "llga-int8" in r.get("systems", {})]
    if not rows:
        return []
    m = run["machine"]
    out = ["", f"int8: oneDNN ISA {m.get('onednn_isa', '?')}; both int8 systems calibrated on the same 8 input sets "
               "(drawn like the timed input, never it). Ratios: llga int8's time / the peer's, paired by round.",
           "",
           "| model | batch | threads | llga fp32 | llga int8 | PyTorch int8 (FX) | llga on PyTorch's int8 graph "
           "| ONNX Runtime fp32 | ONNX Runtime int8 (QDQ) | int8/llga fp32 | int8/PyTorch int8 | int8/ORT fp32 "
           "| int8/ORT int8 | llga on PyTorch's graph/PyTorch int8 | rel. err.: llga int8, PyTorch int8, "
           "llga on PyTorch's graph, ORT int8 |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    by = {"llga": [], "torch-int8": [], "ort": [], "ort-int8": [], "fx": []}
    for r in rows:
        sy, p = r["systems"], dict(r.get("paired_int8", {}))
        # llga on PyTorch's graph / PyTorch int8, from the same rounds' ratios against llga int8
        if p.get("torch-int8") is not None and p.get("llga-fx-int8"):
            p["fx"] = p["torch-int8"] / p["llga-fx-int8"]
        for k in by:
            if p.get(k) is not None:
                by[k].append(p[k])
        errs = [sy.get(s, {}).get("rel_err") for s in ("llga-int8", "torch-int8", "llga-fx-int8", "ort-int8")]
        out.append(f"| {r['model']} | {r['batch']} | {_row_threads(run, r)} | {_cell(sy.get('llga'))} | "
                   f"{_cell(sy.get('llga-int8'))} | {_cell(sy.get('torch-int8'))} | {_cell(sy.get('llga-fx-int8'))} | "
                   f"{_cell(sy.get('ort'))} | {_cell(sy.get('ort-int8'))} | {_fmt_ratio(p.get('llga'))} | "
                   f"{_fmt_ratio(p.get('torch-int8'))} | {_fmt_ratio(p.get('ort'))} | {_fmt_ratio(p.get('ort-int8'))} | "
                   f"{_fmt_ratio(p.get('fx'))} | "
                   + ", ".join('-' if e is None else f'{e:.1e}' for e in errs) + " |")
    out.append(f"| geometric mean | | | | | | | | | {_fmt_ratio(_geomean(by['llga']))} | "
               f"{_fmt_ratio(_geomean(by['torch-int8']))} | {_fmt_ratio(_geomean(by['ort']))} | "
               f"{_fmt_ratio(_geomean(by['ort-int8']))} | {_fmt_ratio(_geomean(by['fx']))} | |")
    spans = _intervals(run, "llga-int8", "llga")
    if spans:
        out += ["", "llga int8 / llga fp32, 95% interval of each paired median: " + ", ".join(spans) + "."]
    return out


def _split_note(r: dict, llga_entry: dict) -> str:
    """How llga ran the batch (compiled.batch_split): the chunk it measured fastest, or why not split."""
    split = r["llga_batch_split"]
    if not split["proved"]:
        return f"not split ({split['why_not']})"
    size = split["sizes"].get(str(r["batch"]))
    if not size or not size["chunk"]:
        return "still measuring when timed"
    def ms(series):
        return ", ".join(f"{c}: {t / 1e6:.2f}" for c, t in series.items())

    tried = ms(size["ns_per_item"])
    side = size.get("ns_per_item_side_by_side") or {}
    if side:
        tried += "; side by side, one thread each: " + ms(side)
    lanes = size.get("lanes", 1)
    how = "whole" if size["chunk"] == r["batch"] else f"in chunks of {size['chunk']}" + (
        f", {lanes} side by side" if lanes > 1 else "")
    return (f"{how} (ms per image by chunk tried: {tried}; settled in "
            f"{llga_entry.get('settle_calls', 0)} warm-up calls before timing)")


def median_interval(xs: List[float], confidence: float = 0.95):
    """A distribution-free interval for the median of sorted `xs`: order
    statistics k and n - 1 - k, with k the largest count for which
    P(Binomial(n, 1/2) < k + 1) stays within (1 - confidence) / 2 (the sign
    test's interval). With fewer than six rounds it is the whole range."""
    n, tail, k = len(xs), (1 - confidence) / 2, -1
    below = 0.0
    for j in range(n // 2):
        below += math.comb(n, j) / 2**n  # P(Binomial(n, 1/2) == j), summed: P(<= j)
        if below > tail:
            break
        k = j
    k = max(k, 0)
    return xs[k], xs[n - 1 - k]


def round_ratios(num_ms: List[float], den_ms: List[float]) -> List[float]:
    """Each timing round's block median of one system over another's, sorted:
    what the paired ratio (their median) and its interval are read from."""
    return sorted(a / b for a, b in zip(num_ms, den_ms) if b > 0)


def _intervals(run: dict, base: str, peer: str) -> List[str]:
    """Per model: the interval of `base`'s paired ratio to `peer` (rounds'
    block medians, as the suite's ratio), where there are at least 6 rounds."""
    out = []
    for r in run["results"]:
        sy = r.get("systems", {})
        x, y = sy.get(base, {}), sy.get(peer, {})
        if not (x.get("ok") and y.get("ok")):
            continue
        pairs = round_ratios(x.get("round_ms", []), y.get("round_ms", []))
        if len(pairs) >= 6:
            lo, hi = median_interval(pairs)
            batch = "" if r["batch"] == 1 else f" (batch {r['batch']})"
            out.append(f"{r['model']}{batch} {lo:.2f}-{hi:.2f}")
    return out


# CPU a runner may use while another one is timed (a core's share): it only
# waits on its stdin then, so more means threads left spinning.
MAX_IDLE_CPU = 0.1


def markdown(run: dict) -> str:
    lim = run["limit"]
    m = run["machine"]
    lines = [
        f"llga benchmark, {run['date']}, {'/'.join(map(str, _threads(run)))} threads, fp32; median latency in ms; "
        f"ratios paired by timing round (median over rounds of llga's time / the peer's in the same round; "
        f"< 1: llga faster).",
        f"Machine: {m.get('cpu', '?')}, {m.get('cpus')} CPUs; limit (oneDNN conv 1x256x56x56 3x3): "
        f"{lim['f32']['gflops']:.0f} GFLOP/s f32 ({lim['f32']['impl']}), "
        + (f"{lim['bf16']['gflops']:.0f} GFLOP/s bf16 ({lim['bf16']['impl']})" if lim["bf16"]["supported"]
           else "bf16 unsupported") + ".",
        "",
        "| model | batch | threads | GFLOP | llga | PyTorch frozen+OFI | PyTorch eager | ONNX Runtime | llga/ORT | llga/OFI "
        "| llga ms/image | ORT ms/image | llga GFLOP/s (% limit) | llga compile s | peak RSS MiB llga / OFI / ORT "
        "| llga act. / cache MiB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    r_ort, r_ofi = [], []
    by_config: dict = {}  # (batch, threads) -> llga/ORT ratios
    notes = []
    for r in run["results"]:
        sy = r.get("systems", {})
        if "error" in r:
            notes.append(f"{r['model']} (batch {r['batch']}): {r['error']}")
            continue
        llga = _ms(sy.get("llga"))
        paired = r.get("paired", {})  # older runs: the ratio of the medians
        ro = paired.get("ort", _ratio(llga, _ms(sy.get("ort"))))
        rf = paired.get("ofi", _ratio(llga, _ms(sy.get("ofi"))))
        r_ort.append(ro)
        r_ofi.append(rf)
        threads = _row_threads(run, r)
        by_config.setdefault((r["batch"], threads), ([], []))
        by_config[(r["batch"], threads)][0].append(ro)
        by_config[(r["batch"], threads)][1].append(rf)
        l = sy.get("llga", {})
        gf = f"{l['gflops']:.0f} ({l['pct_limit']:.0f}%)" if l.get("gflops") else "-"
        rss = " / ".join(f"{sy[s]['maxrss_mib']:.0f}" if sy.get(s, {}).get("maxrss_mib") else "-"
                         for s in ("llga", "ofi", "ort"))
        mem = r.get("llga_memory") or {}
        act = max(mem.get("peak_activations", {}).values(), default=0)
        memcell = f"{act / 2**20:.1f} / {mem.get('weight_cache', 0) / 2**20:.0f}" if mem else "-"
        gflop = f"{r['flops'] / 1e9:.2f}" if r.get("flops") is not None else "-"
        lines.append(f"| {r['model']} | {r['batch']} | {threads} | {gflop} | {_cell(sy.get('llga'))} | "
                     f"{_cell(sy.get('ofi'))} | {_cell(sy.get('eager'))} | {_cell(sy.get('ort'))} | {_fmt_ratio(ro)} | "
                     f"{_fmt_ratio(rf)} | {_per_image(sy.get('llga'), r['batch'])} | "
                     f"{_per_image(sy.get('ort'), r['batch'])} | {gf} | {l.get('compile_s', 0):.2f} | {rss} | {memcell} |")
        for s, e in sy.items():
            if not e.get("ok"):
                notes.append(f"{r['model']} (batch {r['batch']}), {LABELS[s]}: {e.get('error')}")
            if e.get("idle_cpu_share", 0) > MAX_IDLE_CPU:
                notes.append(f"{r['model']} (batch {r['batch']}), {LABELS[s]} used {e['idle_cpu_share']:.0%} of a core "
                             "while the other systems' blocks ran (threads left spinning): their times carry it")
        if r["batch"] > 1 and r.get("llga_batch_split"):
            notes.append(f"{r['model']} (batch {r['batch']}), llga batch split: {_split_note(r, l)}")
    if len(by_config) > 1:
        for (batch, threads), (ro_list, rf_list) in sorted(by_config.items()):
            lines.append(f"| geometric mean, batch {batch}, {threads} threads | | | | | | | | "
                         f"{_fmt_ratio(_geomean(ro_list))} | {_fmt_ratio(_geomean(rf_list))} | | | | | | |")
    lines.append(f"| geometric mean | | | | | | | | {_fmt_ratio(_geomean(r_ort))} | {_fmt_ratio(_geomean(r_ofi))} "
                 "| | | | | | |")
    spans = _intervals(run, "llga", "ort")
    if spans:
        lines += ["", "llga / ONNX Runtime, 95% interval of each paired median (the sign test's, over the rounds): "
                  + ", ".join(spans) + "."]
    lines += bf16_table(run)
    lines += int8_table(run)
    lines += scaling(run)
    if notes:
        lines.append("")
        lines += [f"- {n}" for n in notes]
    lines.append("")
    lines.append(f"Command: `{run['command']}`; {run['seconds']:.0f} s. Versions: "
                 + ", ".join(f"{k} {v}" for k, v in run["versions"].items()) + ".")
    return "\n".join(lines)


def chart(run: dict, path: str) -> Optional[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    results = [r for r in run["results"] if "error" not in r]
    if not results:
        return None
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(results)), 5))
    width = 0.8 / len(ORDER)
    colors = {"llga": "#d62728", "ofi": "#1f77b4", "eager": "#aec7e8", "ort": "#2ca02c"}
    for i, s in enumerate(ORDER):
        xs, ys = [], []
        for j, r in enumerate(results):
            v = _ms(r["systems"].get(s))
            if v:
                xs.append(j + (i - (len(ORDER) - 1) / 2) * width)
                ys.append(v)
        ax.bar(xs, ys, width, label=LABELS[s], color=colors[s])
    for j, r in enumerate(results):
        if r.get("floor_ms"):
            ax.hlines(r["floor_ms"], j - 0.45, j + 0.45, colors="black", linestyles="dashed",
                      label="limit (FLOPs / f32 conv GFLOP/s)" if j == 0 else None)
    ax.set_yscale("log")
    ax.set_xticks(range(len(results)))
    ax.set_xticklabels([f"{r['model']}\nb{r['batch']} t{_row_threads(run, r)}" for r in results])
    ax.set_ylabel("median latency, ms (log)")
    ax.set_title(f"llga vs peers, {'/'.join(map(str, _threads(run)))} threads, fp32 ({run['date'][:10]})")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=5, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write(run: dict, out_dir: str, stamp: str, latest_name: str = "latest") -> List[str]:
    os.makedirs(out_dir, exist_ok=True)
    base = os.path.join(out_dir, f"run-{stamp}")
    paths = []
    with open(base + ".json", "w") as f:
        json.dump(run, f, indent=1, default=lambda o: None if isinstance(o, float) and math.isinf(o) else str(o))
    paths.append(base + ".json")
    with open(base + ".md", "w") as f:
        f.write(markdown(run) + "\n")
    paths.append(base + ".md")
    if chart(run, base + ".png"):
        paths.append(base + ".png")
    for p in list(paths):
        latest = os.path.join(out_dir, latest_name + os.path.splitext(p)[1])
        shutil.copyfile(p, latest)
        paths.append(latest)
    return paths
