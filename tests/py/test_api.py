"""The Python view of the IR: graphs, nodes, values, types, attributes."""

import pytest

import llga

TEXT = """graph(%self.1 : __torch__.Net,
      %x.1 : Float(1, 3, 8, 8, strides=[192, 64, 8, 1], requires_grad=0, device=cpu)):
  %w : Float(4, 3, 1, 1, strides=[3, 1, 1, 1], requires_grad=0, device=cpu) = prim::Constant[value=<Tensor>]()
  %b : Float(2, strides=[1], requires_grad=0, device=cpu) = prim::Constant[value= 0.5000 -1.2500 [ CPUFloatType{2} ]]()
  %n : NoneType = prim::Constant()
  %s : int[] = prim::Constant[value=[1, 1]]()
  %e : float = prim::Constant[value=1.0000000000000001e-05]()
  %t : bool = prim::Constant[value=1]()
  %y : Float(1, 4, 8, 8, strides=[256, 64, 8, 1], requires_grad=0, device=cpu) = aten::conv2d(%x.1, %w, %n, %s, %s, %s, %t), scope: __module.conv # net.py:7:11
  %z : Tensor = aten::relu(%y)
  %r : (Tensor, Tensor) = prim::TupleConstruct(%z, %y)
  return (%r)
"""


@pytest.fixture
def g():
    return llga.parse(TEXT)


def test_graph_inputs_outputs(g):
    assert [v.name for v in g.inputs] == ["self.1", "x.1"]
    assert [v.name for v in g.outputs] == ["r"]
    assert "2 output" not in repr(g) and "1 output(s)" in repr(g)
    assert str(g) == TEXT


def test_iteration_and_kinds(g):
    kinds = [n.kind for n in g]
    assert kinds[-3:] == ["aten::conv2d", "aten::relu", "prim::TupleConstruct"]
    assert g.node_counts()["prim::Constant"] == 6


def test_node_details(g):
    conv = next(n for n in g.nodes() if n.kind == "aten::conv2d")
    assert conv.scope == "__module.conv"
    assert conv.source == "net.py:7:11"
    assert [v.name for v in conv.inputs] == ["x.1", "w", "n", "s", "s", "s", "t"]
    assert conv.outputs[0].uses == [(next(n for n in g.nodes() if n.kind == "aten::relu"), 0),
                                    (next(n for n in g.nodes() if n.kind == "prim::TupleConstruct"), 1)]
    assert str(conv).startswith("%y : Float(1, 4, 8, 8")
    assert conv.blocks == [] and conv.subgraph is None


def test_attributes(g):
    by_name = {n.outputs[0].name: n for n in g.nodes() if n.kind == "prim::Constant"}
    assert by_name["s"].attributes == {"value": [1, 1]}
    assert by_name["e"].attributes["value"] == pytest.approx(1e-5)
    assert by_name["n"].attributes == {}
    w = by_name["w"].attributes["value"]
    assert isinstance(w, llga.TensorConstant) and not w.bound and w.shape == (4, 3, 1, 1)
    with pytest.raises(ValueError, match="no data"):
        w.numpy()
    b = by_name["b"].attributes["value"]
    assert b.bound and b.approximate
    arr = b.numpy()
    assert arr.dtype.name == "float32" and arr.tolist() == [0.5, -1.25]
    assert not arr.flags.writeable


def test_types(g):
    x = g.find_value("%x.1")
    t = x.type
    assert t.is_tensor and t.kind == "Tensor"
    assert t.dtype == "Float" and t.sizes == [1, 3, 8, 8] and t.strides == [192, 64, 8, 1]
    assert t.requires_grad is False and t.device == "cpu"
    assert g.find_value("self.1").type.kind == "Class"
    assert g.find_value("self.1").type.name == "__torch__.Net"
    r = g.find_value("r").type
    assert r.kind == "Tuple" and [str(c) for c in r.contained] == ["Tensor", "Tensor"]
    assert g.find_value("z").type.sizes is None
    assert g.find_value("nope") is None
    assert llga.parse_type("Float(*, 3)").sizes == [None, 3]
    assert llga.parse_type("int[]") == llga.parse_type("int[]")


def test_copy_is_independent(g):
    c = g.copy()
    assert str(c) == str(g)
    assert c.find_value("y") != g.find_value("y")


def test_parse_error_fields():
    with pytest.raises(llga.ParseError) as info:
        llga.parse("graph(%x : Tensor):\n  %y : Tensor = aten::relu(%q)\n  return (%y)\n", filename="m.ir")
    e = info.value
    assert (e.line, e.column) == (2, 28)
    assert e.message == "use of undefined value %q"
    assert e.excerpt == "  %y : Tensor = aten::relu(%q)"
    assert str(e).startswith("m.ir:2:28: use of undefined value %q")
    assert isinstance(e, ValueError)


def test_blocks_are_visible():
    g = llga.parse("""graph(%c : bool, %x : Tensor):
  %y : Tensor = prim::If(%c)
    block0():
      %r : Tensor = aten::relu(%x)
      -> (%r)
    block1():
      -> (%x)
  return (%y)
""")
    (ifn,) = g.nodes()
    assert len(ifn.blocks) == 2
    assert [n.kind for n in ifn.blocks[0].nodes()] == ["aten::relu"]
    assert [v.name for v in ifn.blocks[0].outputs] == ["r"]
    assert [n.kind for n in g.nodes(recursive=True)] == ["prim::If", "aten::relu"]


def test_optimize_a_traced_graph_finds_its_module():
    """llga.optimize(traced.graph): the method graph of a live module, found
    by identity (or, for a copy such as inlined_graph, by its self type)."""
    torch = pytest.importorskip("torch")
    import numpy as np

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 1))
    x = torch.randn(1, 3, 10, 10)
    traced = torch.jit.trace(model.eval(), x)
    other = torch.jit.trace(torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3)).eval(), x)  # another live module
    with torch.no_grad():
        ref = model(x).numpy()
    for graph in (traced.graph, traced.inlined_graph):
        np.testing.assert_allclose(llga.optimize(graph)(x.numpy()), ref, rtol=1e-5, atol=1e-6)
    assert other is not None


def test_optimize_a_method_graph_without_its_module_says_what_to_pass():
    torch = pytest.importorskip("torch")
    import gc

    traced = torch.jit.trace(torch.nn.Conv2d(3, 8, 3).eval(), torch.randn(1, 3, 8, 8))
    graph = traced.inlined_graph  # a copy: no identity to find it by
    del traced
    gc.collect()
    with pytest.raises(llga.CompileError, match=r"self : __torch__\..*pass the module itself \(llga.optimize\(traced\)\) "
                                                r"or name it: llga.optimize\(traced.graph, module=traced\)"):
        llga.optimize(graph)


def test_docs_ops_md_is_generated_from_supported_ops():
    """docs/ops.md is `python -m llga ops --markdown`: regenerate it when the op
    table changes (the kinds come from the core, the dtype claims from llga/ops.py)."""
    import os

    path = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "ops.md")
    with open(path) as f:
        assert f.read() == llga.ops.markdown(), "docs/ops.md is stale: python3 -m llga ops --markdown > docs/ops.md"
    kinds = [o.kind for o in llga.supported_ops()]
    assert len(kinds) == len(set(kinds)) and "aten::lstm" in kinds and "aten::baddbmm" in kinds
    assert all(o.via in ("kernel", "decompose") for o in llga.supported_ops())
