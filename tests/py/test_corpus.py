"""Every dump of the corpus parses, prints back identically and round-trips."""

import pytest

import corpus
import llga


def check_roundtrip(text: str, torch_nodes: int):
    g = llga.parse(text)
    assert g.verify() == []
    # What torch counts, we count (an independent check on the structure).
    assert len(g.nodes(recursive=True)) == torch_nodes
    printed = str(g)
    # PyTorch's own text comes back byte for byte.
    if printed != text:
        import difflib
        diff = "".join(list(difflib.unified_diff(text.splitlines(True), printed.splitlines(True), n=1))[:40])
        pytest.fail("printed text differs from PyTorch's:\n" + diff)
    again = llga.parse(printed)
    assert str(again) == printed
    assert again.node_counts() == g.node_counts()
    assert [str(v.type) for v in again.inputs] == [str(v.type) for v in g.inputs]


@pytest.mark.parametrize("form", corpus.FORMS)
@pytest.mark.parametrize("model", corpus.MODELS)
def test_model_dump_roundtrips(model, form):
    text, torch_nodes = corpus.dumps(model)[form]
    check_roundtrip(text, torch_nodes)


@pytest.mark.parametrize("name", corpus.SCRIPTED)
def test_scripted_dump_roundtrips(name):
    text, torch_nodes = corpus.scripted(name)
    check_roundtrip(text, torch_nodes)


def test_scripted_control_flow_structure():
    g = llga.parse(corpus.scripted("looping_module")[0])
    kinds = g.node_counts()
    assert kinds["prim::Loop"] >= 3  # for, while, for over shape
    assert kinds["prim::If"] >= 2
    loop = next(n for n in g.nodes() if n.kind == "prim::Loop")
    body = loop.blocks[0]
    # block inputs: the iteration counter and every carried value
    assert len(body.inputs) == len(loop.inputs) - 1
    assert str(body.inputs[0].type) == "int"
    assert str(g.inputs[4].type) == "Tensor?"
    ret = g.outputs[0]
    assert str(ret.type) == "(Tensor, int[], Dict(str, Tensor))"


def test_frozen_dump_has_tensor_constants():
    g = llga.parse(corpus.dumps("resnet50")["frozen"][0])
    consts = [n for n in g.nodes() if n.kind == "prim::Constant" and isinstance(n.attributes.get("value"), llga.TensorConstant)]
    assert len(consts) >= 50
    c = consts[0].attributes["value"]
    assert not c.bound and c.dtype == "Float"
    assert c.shape == tuple(consts[0].outputs[0].type.sizes)
