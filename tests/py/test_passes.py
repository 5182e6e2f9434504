"""The pass pipeline from Python: records, choices of pipeline, LLGA_LOG."""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch  # noqa: F401 (corpus traces with it)

import corpus
import llga


def test_default_pipeline_records():
    c = llga.optimize(corpus.traced("alexnet")[1])
    names = [r.name for r in c.passes]
    assert names == llga.passes.default_pipeline().split(",")
    by = {r.name: r for r in c.passes}
    assert by["remove-dropout"].changed
    assert by["remove-dropout"].before.kinds.get("aten::dropout", 0) == 2
    assert "aten::dropout" not in by["remove-dropout"].after.kinds
    assert "aten::dropout" not in by["remove-dropout"].ir
    for r in c.passes:
        assert r.seconds >= 0 and r.verify_errors == [] and r.error == ""
        assert r.ir.startswith("graph(")
    assert c.passes[-1].after.nodes == len(c.graph.nodes(recursive=True))
    assert str(c.passes[0]).startswith("remove-dropout: changed")


def test_pipeline_choices():
    traced = corpus.traced("resnet18")[1]
    assert llga.optimize(traced, passes="").passes == []
    assert [r.name for r in llga.optimize(traced, passes=["dce", "cse"]).passes] == ["dce", "cse"]
    with pytest.raises(ValueError, match=r"unknown pass 'nope' \(known passes: .*constant-propagation"):
        llga.optimize(traced, passes="dce,nope")
    assert set(llga.list_passes()) >= {"dce", "cse", "remove-dropout", "constant-propagation"}


def test_callers_graph_is_not_modified():
    g, w = llga.import_torch(corpus.traced("alexnet")[1])
    before = str(g)
    llga.optimize(g, params=w)
    assert str(g) == before


def test_llga_log_prints_named_dumps():
    code = ("import sys; sys.path[:0] = [%r, %r]; import corpus, llga; "
            "llga.optimize(corpus.traced('squeezenet1_0')[1])") % (os.path.dirname(llga.__path__[0]), os.path.dirname(__file__))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "LLGA_LOG": ">>remove-dropout:dce"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert "// IR after remove-dropout (changed)" in out.stderr
    assert "// IR after dce (" in out.stderr
    assert "// IR after cse" not in out.stderr


def test_pipeline_time_on_the_largest_model():
    # Not a timed test: prints per-pass times (the figures for the notes) and
    # checks the pipeline leaves the graph valid.
    g = llga.parse(corpus.dumps("swin_t")["inlined"][0])
    records = llga.passes.run(g)
    for r in records:
        print(f"{r.name:22s} {r.seconds * 1e3:7.2f} ms  {r.before.nodes} -> {r.after.nodes} nodes")
    assert g.verify() == []


def inplace_kinds(kinds):
    return {k: n for k, n in kinds.items() if k.endswith("_") and not k.endswith("__")}


@pytest.mark.parametrize("model", ["resnet50", "mobilenet_v3_large", "efficientnet_b0"])
def test_no_inplace_ops_left_in_cnns(model):
    c = llga.optimize(corpus.traced(model)[1])
    rec = {r.name: r for r in c.passes}["remove-mutation"]
    assert inplace_kinds(rec.before.kinds), "the traced graph has in-place ops to begin with"
    assert inplace_kinds(c.passes[-1].after.kinds) == {}
    assert rec.notes == []


def test_mutation_left_alone_says_why():
    c = llga.optimize(corpus.traced("swin_t")[1])
    rec = {r.name: r for r in c.passes}["remove-mutation"]
    assert inplace_kinds(rec.after.kinds) == {"aten::fill_": 45}
    assert len(rec.notes) == 45 and "aten::fill_ at " in rec.notes[0]
