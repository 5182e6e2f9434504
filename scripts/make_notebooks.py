"""Writes notebooks/*.ipynb (stored without outputs; the tests execute them).

    /usr/bin/python3 scripts/make_notebooks.py
"""
import os

import nbformat as nbf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def nb(cells):
    n = nbf.v4.new_notebook()
    n.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    n.cells = [nbf.v4.new_markdown_cell(c[1]) if c[0] == "md" else nbf.v4.new_code_cell(c[1]) for c in cells]
    for i, cell in enumerate(n.cells):
        cell.id = f"cell-{i:02d}"  # stable ids: regenerating changes only what changed
    return n

setup = """import warnings
import numpy as np
import torch
import llga
from llga import zoo

torch.set_num_threads(2)
llga.set_num_threads(2)
warnings.simplefilter("ignore")
print("llga", llga.__version__, "from", llga.__file__)"""

# resnet18, traced and compiled: the start of most notebooks (each must run on its own)
RESNET18 = """model = zoo.torchvision_model("resnet18")
x = torch.randn(1, 3, 224, 224)
with torch.no_grad():
    traced = torch.jit.trace(model, x, check_trace=False)
compiled = llga.optimize(traced)
"""

# the BERT-like encoder, small (2 layers, hidden 128)
BERT = """bert = zoo.bert_like(vocab=1000, hidden=128, layers=2, heads=4)
ids, mask = zoo.bert_inputs(batch=1, seq=16, vocab=1000)
with torch.no_grad():
    bert_traced = torch.jit.trace(bert, (ids, mask), check_trace=False)
"""

quick = nb([
 ("md", "# 01 · Quickstart\n\nTrace a PyTorch model, hand it to llga, run the compiled model on numpy arrays and compare with PyTorch. Weights are random (torchvision ships none here), which is all a comparison needs."),
 ("code", setup),
 ("code", RESNET18 + "compiled"),
 ("md", "The compiled model takes numpy arrays (used in place, no copy) and returns numpy arrays."),
 ("code", """y = compiled(x.numpy())
with torch.no_grad():
    ref = model(x).numpy()
rel = float(np.abs(y - ref).max() / np.abs(ref).max())
print(f"output {y.shape}, max relative difference to PyTorch: {rel:.1e}")
assert rel < 1e-4"""),
 ("md", "Timing, interleaved with PyTorch so that machine noise hits both alike (the benchmark suite, `make bench`, does this properly against ONNX Runtime too)."),
 ("code", """from llga.timing import interleaved, summary_ms

xn = x.numpy()
with torch.no_grad():
    t = interleaved({"llga": lambda: compiled(xn), "PyTorch eager": lambda: model(x)}, runs=5)
{k: round(summary_ms(v)["median"], 1) for k, v in t.items()}"""),
 ("md", "What llga did, in numbers: FLOPs of the heavy ops, memory held, partitions."),
 ("code", """print(f"{compiled.flops / 1e9:.2f} GFLOP per call")
print({k: (v if isinstance(v, dict) else f"{v / 2**20:.1f} MiB") for k, v in compiled.memory.items()})
compiled.partitions[:5]"""),
 ("md", "Bad input gets a clear error naming the input:"),
 ("code", """try:
    compiled(np.zeros((1, 3, 224), np.float32))
except llga.InputError as e:
    print("InputError:", e)"""),
])

pipeline = nb([
 ("md", "# 02 · The pass pipeline, pass by pass\n\n`compiled.passes` records every pass: whether it changed the graph, its time, node counts and the IR after it. In Jupyter it displays as a table; click a row to open its IR diff (unified, or side by side), the graph before and after, and the list of nodes it removed, created or replaced. The checkbox hides passes that changed nothing."),
 ("code", setup),
 ("code", RESNET18 + "compiled.passes"),
 ("md", "In a terminal the same records print as text:"),
 ("code", "print(repr(compiled.passes))"),
 ("md", "## What fold-batchnorm did\n\nEach `batch_norm` after a convolution is folded into the convolution's weight and bias. The diff shows it; `changes()` lists it by value name."),
 ("code", """ch = compiled.passes.changes("fold-batchnorm")
print(len(ch["removed"]), "removed, e.g.", [c for c in ch["removed"] if "batch_norm" in c[1]][:3])
print(compiled.passes.diff("fold-batchnorm")[:1500])"""),
 ("md", "## Following one node across passes\n\n`%input.5` starts as the in-place `relu_` after the first convolution, becomes `relu` when mutation is removed, and ends inside fusion group 0."),
 ("code", """for step in compiled.passes.track("input.5"):
    print(f"{step['after']:>22}: {step['producer']}")"""),
 ("md", "## The same on a BERT-like encoder\n\nExplicit `linear`, `matmul`, `softmax`, `layer_norm` and `gelu`, the way Hugging Face's BERT traces (2 layers, hidden 128, to keep it small)."),
 ("code", BERT + """bert_compiled = llga.optimize(bert_traced)
bert_compiled.passes"""),
 ("code", """out = bert_compiled(ids.numpy(), mask.numpy())
with torch.no_grad():
    ref = bert(ids, mask)
print([float(np.abs(o - r.numpy()).max()) for o, r in zip(out, ref)])"""),
 ("md", "The final graph, partitions drawn as colored clusters:"),
 ("code", "bert_compiled.graph"),
])

parts = nb([
 ("md", "# 03 · Partitions and layouts\n\nWhat fused, what did not and why, and which memory layout each tensor travels in between partitions."),
 ("code", setup),
 ("code", RESNET18 + """compiled(x.numpy())  # layouts and oneDNN implementations are known after a call
compiled.partitions"""),
 ("md", "Each `conv_post_ops` partition is one oneDNN convolution with its batch norm folded in and relu / residual add as post-ops. `(kept)` means its output went on to the next partitions in the primitive's layout (here `nhwc`) without a reorder; `(to plain)` marks the boundaries with ops outside partitions and graph outputs."),
 ("code", """kept = sum(p.layouts.endswith("(kept)") for p in compiled.partitions)
print(f"{kept} of {len(compiled.partitions)} partitions hand their output on blocked")
compiled.unfused"""),
 ("md", "The fusion pattern table the partitioner reads (each entry with its diagram):"),
 ("code", """for p in llga.fusion_patterns()[:3]:
    print(p["name"], "tier", p["tier"], "anchors", p["anchors"][:3])
    print(p["diagram"])"""),
 ("md", "## The graph\n\nPartitions are clusters colored by pattern, edges carry shape, dtype and layout, ops left outside are red with the reason. A large graph is collapsed by module scope; open a scope with `expand`, or look at one node's neighbourhood with `focus`."),
 ("code", "from IPython.display import SVG, display\ndisplay(SVG(llga.viz.svg(compiled, collapse=1, expand=['layer1'])))"),
 ("code", "display(SVG(llga.viz.svg(compiled, focus='input.13', radius=2)))"),
 ("md", "## Why something did not fuse\n\nA lone softmax is not a partition (as in PyTorch's oneDNN Graph bridge), and an op with no pattern stays outside with its reason:"),
 ("code", """class Small(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, -1).sum(-1)

small = llga.optimize(torch.jit.trace(Small(), torch.randn(2, 8)))
print(small.unfused)
small"""),
])

prof = nb([
 ("md", "# 04 · Profiling\n\n`llga.profiler` records the time of every executed instruction: per op kind and per partition pattern, the kernel log with oneDNN implementations and layouts, a Chrome trace, and routing ops off the fused path to bisect a numerical difference."),
 ("code", setup),
 ("code", RESNET18 + """xn = x.numpy()
compiled(xn)  # warm-up

with llga.profiler.profile():
    for _ in range(3):
        compiled(xn)
print(llga.profiler.stats("ExecTime"))"""),
 ("code", "print(llga.profiler.stats('Unimpl'))\nllga.profiler.stats('Specializations')"),
 ("md", "The kernel log: one entry per kernel call."),
 ("code", """import json
llga.profiler.kernel_log.clear()
llga.profiler.kernel_log.enable()
compiled(xn)
llga.profiler.kernel_log.disable()
log = json.loads(llga.profiler.kernel_log.json())
log[2]"""),
 ("md", "A Chrome trace opens in Perfetto (ui.perfetto.dev) or chrome://tracing:"),
 ("code", """import os, tempfile
path = llga.profiler.export_chrome_trace(os.path.join(tempfile.mkdtemp(), "resnet18.json"))
print(path, os.path.getsize(path), "bytes")"""),
 ("md", "## Routing: move one op kind off the fused path\n\n`chart()` lists op kinds and patterns with `fused` flags; edit it and pass it back as `route`. Here gelu leaves the linear partitions of a BERT-like encoder, the results stay the same."),
 ("code", BERT + """fused = llga.optimize(bert_traced)
route = llga.profiler.chart(fused)
for r in route:
    if r["name"] == "aten::gelu":
        r["fused"] = False
routed = llga.optimize(bert_traced, route=route)
a, b = fused(ids.numpy(), mask.numpy()), routed(ids.numpy(), mask.numpy())
print("partitions with gelu:", sum("aten::gelu" in p.ops for p in fused.partitions), "->",
      sum("aten::gelu" in p.ops for p in routed.partitions))
print("max difference:", float(np.abs(a[0] - b[0]).max()))
routed.unfused["aten::gelu"]"""),
 ("md", "The routed model's partitions: the linear layers that fed gelu are partitions of their own now."),
 ("code", "routed.partitions"),
])

for name, n in [("01_quickstart", quick), ("02_pass_pipeline", pipeline), ("03_partitions_and_layouts", parts),
                ("04_profiling", prof)]:
    nbf.write(n, os.path.join(ROOT, "notebooks", f"{name}.ipynb"))
