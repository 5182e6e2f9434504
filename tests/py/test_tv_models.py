"""One torchvision model per task through llga, traced and scripted
(detection: scripted only; tracing bakes in the number of boxes), against
PyTorch: parity, and the heavy ops of CNN backbones inside partitions.
make test-zoo runs every model (scripts/zoo_sweep.py, docs/zoo.md)."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "scripts"))
import zoo_sweep  # noqa: E402

CASES = [(m, f) for m in zoo_sweep.LEAN for f in ("traced", "scripted")
         if not (f == "traced" and m == "fasterrcnn_mobilenet_v3_large_320_fpn")]


@pytest.mark.parametrize("model,form", CASES)
def test_torchvision_model_matches_pytorch(model, form):
    row = zoo_sweep.run_one(model, repeat=1, form=form)
    assert row["parity"], f"{model} ({form}): max rel. err {row['max_rel_err']:.2e}"
    assert row["outside"] == {}, f"{model} ({form}): heavy ops outside partitions: {row['outside']}"
