"""The torchvision dump corpus: every graph PyTorch 1.13 prints for every
model ``torchvision.models.list_models()`` lists (classification,
quantizable models in float form, segmentation, detection, video, optical
flow), traced and scripted, each as ``graph``, ``inlined_graph`` and frozen.

Generated at test time, one model per subprocess (the largest, like
regnet_y_128gf, need several GiB while tracing and freezing), and cached
on disk under build/tv-dumps/<torch>-<torchvision>/ so that later runs
reuse them. ``LEAN`` is one model per task for ``make test``;
``make test-zoo`` sets LLGA_ZOO=all for every model.

    python3 tests/py/tv_corpus.py NAME DIR   # writes NAME's dumps into DIR
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import warnings
from typing import Dict, Tuple, Union

import torch
import torchvision

from llga import zoo

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CACHE = os.path.join(ROOT, "build", "tv-dumps", f"{torch.__version__}-{torchvision.__version__}")

FORMS = ("traced", "traced_inlined", "traced_frozen", "scripted", "scripted_inlined", "scripted_frozen")
# One model per task, chosen for what their dumps hold: NamedTuple outputs
# (googlenet), isinstance[types=[list, tuple]] and dict/list bookkeeping
# (the R-CNNs), tuple constants once frozen (mvit), correlation and grid
# sampling (raft).
LEAN = ("resnet18", "quantized_googlenet", "lraspp_mobilenet_v3_large", "fasterrcnn_mobilenet_v3_large_320_fpn",
        "mvit_v1_b", "raft_small")


def models():
    catalog = zoo.torchvision_catalog()
    return tuple(sorted(catalog)) if os.environ.get("LLGA_ZOO") == "all" else LEAN


def count_nodes(block) -> int:
    n = 0
    for node in block.nodes():
        n += 1
        for sub in node.blocks():
            n += count_nodes(sub)
    return n


class Flat(torch.nn.Module):
    """A detection model with its list of dicts as a flat tuple of tensors
    (boxes, labels, scores, ... per image, keys sorted): what tracing can
    return, and how detection models are traced for export."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, images):
        return tuple(d[k] for d in self.model(images) for k in sorted(d))


# A dump is (graph.str(), nodes torch counts), or the reason PyTorch could not produce it.
Dump = Union[Tuple[str, int], str]


@functools.lru_cache(maxsize=2)
def dumps(name: str) -> Dict[str, Dump]:
    """{form: dump} for one model, from the cache or a subprocess that makes them."""
    meta = os.path.join(CACHE, name + ".json")
    if not os.path.exists(meta):
        os.makedirs(CACHE, exist_ok=True)
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        r = subprocess.run([sys.executable, os.path.abspath(__file__), name, CACHE], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1800)
        if r.returncode != 0:
            raise RuntimeError(f"making the dumps of {name} failed (exit {r.returncode}):\n{r.stdout[-3000:]}")
    with open(meta) as f:
        info = json.load(f)
    out: Dict[str, Dump] = {}
    for form, v in info.items():
        if isinstance(v, str):
            out[form] = v
        else:
            with open(os.path.join(CACHE, f"{name}.{form}.ir")) as f:
                out[form] = (f.read(), v)
    return out


def make_dumps(name: str) -> Dict[str, Dump]:
    torch.set_num_threads(2)
    model, inputs, task = zoo.torchvision_any(name)
    out: Dict[str, Dump] = {}

    def take(prefix, module):
        out[prefix] = (module.graph.str(), count_nodes(module.graph))
        out[prefix + "_inlined"] = (module.inlined_graph.str(), count_nodes(module.inlined_graph))
        try:
            frozen = torch.jit.freeze(module.eval())
            out[prefix + "_frozen"] = (frozen.graph.str(), count_nodes(frozen.graph))
        except Exception as e:  # noqa: BLE001 - PyTorch's own limitation, reported as the reason
            out[prefix + "_frozen"] = f"torch.jit.freeze failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}"

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            take("scripted", torch.jit.script(model))
        except Exception as e:  # noqa: BLE001
            for f in ("scripted", "scripted_inlined", "scripted_frozen"):
                out[f] = f"torch.jit.script failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
        try:
            with torch.no_grad():
                traced = torch.jit.trace(Flat(model) if task == "detection" else model, inputs,
                                         check_trace=False, strict=False)
            take("traced", traced)
        except Exception as e:  # noqa: BLE001
            for f in ("traced", "traced_inlined", "traced_frozen"):
                out[f] = f"torch.jit.trace failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
    del model
    return out


def main(name: str, out_dir: str) -> None:
    made = make_dumps(name)
    info = {}
    for form, v in made.items():
        if isinstance(v, str):
            info[form] = v
        else:
            with open(os.path.join(out_dir, f"{name}.{form}.ir"), "w") as f:
                f.write(v[0])
            info[form] = v[1]
    tmp = os.path.join(out_dir, name + ".json.tmp")
    with open(tmp, "w") as f:
        json.dump(info, f)
    os.replace(tmp, os.path.join(out_dir, name + ".json"))  # complete dumps only


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
