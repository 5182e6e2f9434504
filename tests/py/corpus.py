"""The parse corpus: TorchScript dumps PyTorch prints for real models.

Generated at test time (PyTorch 1.13.1 from Debian) and cached for the
session: each model is traced once and dropped after its dumps are taken.
"""

from __future__ import annotations

import functools
import warnings
from typing import Dict, List, Optional, Tuple

import torch

from llga import zoo

FORMS = ("graph", "inlined", "frozen")
BERT = "bert_like"
MODELS = zoo.TORCHVISION_MODELS + (BERT,)


def _count(block) -> int:
    n = 0
    for node in block.nodes():
        n += 1
        for sub in node.blocks():
            n += _count(sub)
    return n


def example_inputs(model: str, batch: int = 1):
    if model == BERT:
        return zoo.bert_inputs(batch=batch, vocab=1000)
    return (torch.randn(batch, 3, 224, 224, generator=torch.Generator().manual_seed(batch)),)


@functools.lru_cache(maxsize=None)
def traced(model: str):
    """(eager model, traced module): traced once per session, shared by every test."""
    torch.set_num_threads(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if model == BERT:
            m = zoo.bert_like(vocab=1000, hidden=128, layers=2, heads=4)
        else:
            m = zoo.torchvision_model(model)
        with torch.no_grad():
            t = torch.jit.trace(m, example_inputs(model), check_trace=False)
    return m, t


@functools.lru_cache(maxsize=None)
def frozen(model: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.jit.freeze(traced(model)[1])


@functools.lru_cache(maxsize=None)
def dumps(model: str) -> Dict[str, Tuple[str, int]]:
    """{form: (graph.str(), number of nodes torch sees)} for one model."""
    t = traced(model)[1]
    out = {}
    for form, g in (("graph", t.graph), ("inlined", t.inlined_graph), ("frozen", frozen(model).graph)):
        out[form] = (g.str(), _count(g))
    return out


# ---- scripted modules and functions: control flow, tuples, lists, optionals, strings


class Looping(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x, n: int, tag: str, extra: Optional[torch.Tensor] = None
                ) -> Tuple[torch.Tensor, List[int], Dict[str, torch.Tensor]]:
        y = x
        for i in range(n):
            y = y * 2.5 + 1e-5
            if i % 2 == 0:
                y = torch.relu(y)
        if extra is not None:
            y = y + extra
        else:
            y = y.clamp(min=-float("inf"), max=1e4) - 0.5
        while bool(y.sum() > 100.0):
            y = y / 2
        sizes: List[int] = []
        for s in y.shape:
            sizes.append(s)
        d = {"tag\n\"q": y, tag: y.neg()}
        return self.fc(y), sizes, d


def strings(s: str, parts: List[str]) -> Tuple[str, int, bool]:
    if len(parts) == 0:
        raise ValueError("no parts: " + s)
    joined = s.join(parts)
    return joined.upper() + "\t\\", len(joined), joined.startswith("a")


def tuples(x: torch.Tensor, t: Tuple[int, float], o: Optional[int]) -> Tuple[torch.Tensor, Tuple[int, float]]:
    a, b = t
    scale = o if o is not None else 1
    xs = torch.chunk(x, 2, dim=0)
    return torch.cat([xs[1], xs[0]], dim=0) * b * scale, (a + scale, b * 0.5)


SCRIPTED = ("looping_module", "looping_frozen", "strings_fn", "tuples_fn")


@functools.lru_cache(maxsize=None)
def scripted(name: str) -> Tuple[str, int]:
    if name == "looping_module":
        g = torch.jit.script(Looping()).graph
    elif name == "looping_frozen":
        g = torch.jit.freeze(torch.jit.script(Looping().eval())).graph
    elif name == "strings_fn":
        g = torch.jit.script(strings).graph
    elif name == "tuples_fn":
        g = torch.jit.script(tuples).graph
    else:
        raise KeyError(name)
    return g.str(), _count(g)
