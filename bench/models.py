"""The benchmark's models: name -> (eager model, example inputs).

Each builder is deterministic (seeded), so every runner process builds the
same weights; the inputs are written once by the driver and read by all.
"""

from __future__ import annotations

from typing import Callable, Dict, Tuple

DEFAULT = ("resnet50", "resnet18", "mobilenet_v2", "efficientnet_b0", "densenet121", "vit_b_16", "bert", "tiny")
QUICK = ("resnet18", "tiny")


def _torchvision(name: str, batch: int):
    import torch

    from llga import zoo

    model = zoo.torchvision_model(name)
    x = torch.randn(batch, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    return model, (x,)


def _bert(batch: int):
    from llga import zoo

    return zoo.bert_like(), zoo.bert_inputs(batch=batch, seq=128)


def _tiny(batch: int):
    """One nn.Linear(28, 64) on a 32x28 input: per-call overhead. `batch`
    multiplies the 32 rows."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Linear(28, 64).eval()
    return model, (torch.randn(32 * batch, 28, generator=torch.Generator().manual_seed(1)),)


BUILDERS: Dict[str, Callable[[int], Tuple[object, tuple]]] = {
    "bert": _bert,
    "tiny": _tiny,
}
for _name in ("resnet50", "resnet18", "mobilenet_v2", "efficientnet_b0", "densenet121", "vit_b_16"):
    BUILDERS[_name] = (lambda n: (lambda batch: _torchvision(n, batch)))(_name)

DESCRIPTIONS = {
    "bert": "BERT-base encoder, seq 128, explicit ops",
    "tiny": "nn.Linear(28, 64) on 32x28",
}


def build(name: str, batch: int):
    if name not in BUILDERS:
        raise SystemExit(f"unknown model {name!r}; known: {', '.join(BUILDERS)}")
    return BUILDERS[name](batch)
