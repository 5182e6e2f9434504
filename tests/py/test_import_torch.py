"""llga.import_torch: graphs and zero-copy weights from TorchScript objects."""

import subprocess
import sys
import textwrap
import warnings
from typing import Optional

import numpy as np
import pytest
import torch

import llga
from llga import zoo


@pytest.fixture(scope="module")
def resnet18():
    m = zoo.torchvision_model("resnet18")
    with torch.no_grad():
        traced = torch.jit.trace(m, torch.randn(1, 3, 224, 224), check_trace=False)
    return m, traced


def qualified_getattr_paths(g):
    """Follow prim::GetAttr chains from the first input, using only llga's API."""
    paths = {g.inputs[0].name: ""}
    out = {}
    for n in g.nodes(recursive=True):
        if n.kind == "prim::GetAttr" and n.inputs[0].name in paths:
            p = ".".join(x for x in (paths[n.inputs[0].name], n.attributes["name"]) if x)
            paths[n.outputs[0].name] = p
            if str(n.outputs[0].type) == "Tensor":
                out[n.outputs[0].name] = p
    return out


def test_traced_module_weights_are_named_and_shared(resnet18):
    model, traced = resnet18
    g, weights = llga.import_torch(traced)
    params = dict(model.named_parameters())
    params.update(model.named_buffers())
    # Exactly the tensors the graph reads (num_batches_tracked is never read).
    assert set(weights) < set(params)
    assert set(params) - set(weights) == {k for k in params if k.endswith("num_batches_tracked")}
    for name, arr in weights.items():
        t = params[name].detach()
        assert arr.shape == tuple(t.shape)
        assert np.shares_memory(arr, t.numpy()), name
    # Every tensor GetAttr chain in the graph resolves to a weight.
    paths = qualified_getattr_paths(g)
    assert len(paths) == len(weights)
    assert set(paths.values()) == set(weights)
    assert "layer1.0.conv1.weight" in weights


def test_weights_alias_torch_storage(resnet18):
    model, traced = resnet18
    _, weights = llga.import_torch(traced)
    before = float(weights["fc.bias"][0])
    with torch.no_grad():
        model.fc.bias[0] += 1.0
    assert weights["fc.bias"][0] == pytest.approx(before + 1.0)
    with torch.no_grad():
        model.fc.bias[0] -= 1.0


def test_frozen_constants_by_value_name(resnet18):
    _, traced = resnet18
    frozen = torch.jit.freeze(traced)
    g, weights = llga.import_torch(frozen)
    consts = {n.outputs[0].name: n for n in g.nodes()
              if n.kind == "prim::Constant" and isinstance(n.attributes.get("value"), llga.TensorConstant)}
    assert set(consts) == set(weights)
    for name, node in consts.items():
        assert list(weights[name].shape) == node.outputs[0].type.sizes
    assert any(name.endswith("_fused_bn") for name in weights)


class _Gather(torch.nn.Module):
    """x[idx] with a buffer of indices: freezing folds the index list (a
    Tensor?[] constant PyTorch prints as [<Tensors>], without data), as in
    swin_v2's relative position bias."""

    def __init__(self):
        super().__init__()
        self.register_buffer("idx", torch.randint(0, 5, (100,), generator=torch.Generator().manual_seed(0)))

    def forward(self, x):
        return x[self.idx] * 2


def test_frozen_index_list_constant_is_expanded():
    frozen = torch.jit.freeze(torch.jit.script(_Gather().eval()))
    assert any(str(n.output().type()) == "List[Optional[Tensor]]" for n in frozen.graph.nodes()
               if n.kind() == "prim::Constant")
    x = torch.randn(5, 4)
    np.testing.assert_array_equal(llga.optimize(frozen)(x.numpy()), frozen(x).numpy())


def test_graph_form_and_plain_graph(resnet18):
    _, traced = resnet18
    g, _ = llga.import_torch(traced, inline=False)
    assert g.node_counts().get("prim::CallMethod", 0) > 0
    g2, w2 = llga.import_torch(traced.inlined_graph)
    assert "aten::_convolution" in g2.node_counts() and w2 == {}


def test_script_function():
    @torch.jit.script
    def f(x: torch.Tensor, n: int) -> torch.Tensor:
        for _ in range(n):
            x = torch.relu(x) * 2
        return x

    g, weights = llga.import_torch(f)
    assert weights == {}
    assert "prim::Loop" in g.node_counts()


def test_rejects_eager_modules():
    with pytest.raises(TypeError, match="torch.jit.trace"):
        llga.import_torch(torch.nn.Linear(2, 2))


def test_llga_works_without_torch():
    code = textwrap.dedent("""
        import sys
        sys.modules["torch"] = None  # any import of torch now fails
        import llga
        g = llga.parse("graph(%x : Tensor):\\n  %y : Tensor = aten::relu(%x)\\n  return (%y)\\n")
        assert [n.kind for n in g.nodes()] == ["aten::relu"]
        try:
            llga.import_torch(object())
        except ImportError as e:
            assert "needs PyTorch" in str(e)
        else:
            raise SystemExit("import_torch did not fail")
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=llga.__path__[0] + "/..")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_scripted_module_with_none_and_bool_attributes(resnet18):
    # torch.jit.script keeps `self.bias` (None for these convs) and
    # batch_norm's `self.training` as attribute reads: they become constants.
    model, _ = resnet18
    scripted = torch.jit.script(model)
    x = torch.randn(1, 3, 224, 224)
    compiled = llga.optimize(scripted)
    with torch.no_grad():
        want = model(x).numpy()
    np.testing.assert_allclose(compiled(x.numpy()), want, rtol=1e-3, atol=1e-3)
    # The module's own graph is left as it was (the importer folds a copy).
    g = scripted.inlined_graph.str()
    assert 'prim::GetAttr[name="training"]' in g and 'prim::GetAttr[name="bias"]' in g


def test_scripted_attribute_of_another_kind_is_a_clear_error():
    class Table(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = {"a": torch.tensor(2.0)}  # a dict of tensors: no prim::Constant holds it

        def forward(self, x):
            return x * self.scale["a"]

    with pytest.raises(llga.LlgaError, match="scale"):
        llga.optimize(torch.jit.script(Table()))


def test_scripted_module_not_inlined_keeps_its_graph():
    m = torch.jit.script(torch.nn.Conv2d(3, 4, 3, bias=False))
    before = m.graph.str()
    g, weights = llga.import_torch(m, inline=False)
    assert m.graph.str() == before
    assert "weight" in weights and "bias" not in weights
    assert 'prim::GetAttr[name="bias"]' not in str(g)  # folded to a None constant in llga's copy


class _TupleAttrs(torch.nn.Module):
    """A module reading tuple attributes (flat, one-element, nested with a
    string and None) and a dict (torchvision's return_layers), as mvit's and
    the segmentation and R-CNN models' scripted forms do."""

    def __init__(self):
        super().__init__()
        self.size = (2, 3)
        self.one = (5,)
        self.nested = ((1, 2.5), "x", None)
        self.layers = {"body": "out", "aux": "aux"}

    def forward(self, x):
        y = x.reshape(self.size[0], self.size[1]) * self.one[0]
        if self.nested[2] is None and self.nested[1] == "x" and "body" in self.layers:
            y = y + self.nested[0][1] + len(self.layers["aux"])
        return y, self.nested


@pytest.mark.parametrize("form", ["scripted", "frozen"])
def test_tuple_attributes_and_constants_import_and_run(form):
    m = torch.jit.script(_TupleAttrs().eval())
    if form == "frozen":
        m = torch.jit.freeze(m)
        assert "prim::Constant[value=(" in str(m.graph)  # PyTorch folds them into tuple constants
    x = torch.randn(6)
    want_y, want_t = m(x)
    text = str(m.graph)
    assert str(llga.parse(str(llga.parse(text)))) == str(llga.parse(text))  # reads and round-trips
    got_y, got_t = llga.optimize(m)(x.numpy())
    np.testing.assert_allclose(got_y, want_y.numpy(), rtol=1e-6)
    assert got_t == want_t


@torch.jit.script
class _Scale:
    """A TorchScript class a module makes lazily (as MultiScaleRoIAlign makes its LevelMapper)."""

    def __init__(self, k: float, shift: int):
        self.k = k
        self.shift = shift

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.k + self.shift


class _LazyScale(torch.nn.Module):
    __annotations__ = {"scale": Optional[_Scale]}  # as torchvision's poolers declare theirs

    def __init__(self):
        super().__init__()
        self.scale = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.scale is None:
            self.scale = _Scale(float(x.shape[-1]), 2)
        s = self.scale
        if s is None:
            raise ValueError("scale is not set")
        return s.apply(x)


@pytest.mark.parametrize("called_first", [False, True], ids=["fresh", "called_in_eager_first"])
def test_scripted_module_whose_object_attribute_an_eager_call_set(called_first):
    """Users often call a model once before scripting it: the object its first
    call made is then an attribute; it is rebuilt in the graph (CreateObject and
    its fields), so the lazy set-up branch folds away as it does when fresh."""
    model = _LazyScale()
    x = torch.randn(2, 5)
    if called_first:
        model(x)
        assert model.scale is not None
    scripted = torch.jit.script(model)
    compiled = llga.optimize(scripted)
    np.testing.assert_allclose(compiled(x.numpy()), x.numpy() * 5 + 2, rtol=1e-6)
    assert "prim::CreateObject" not in str(compiled.graph) and "prim::SetAttr" not in str(compiled.graph)


def test_printed_tensor_constants_fold_with_their_exact_values():
    # A traced `buffer.abs() + 0.123456789` has the scalar as a 0-dim tensor
    # constant that graph.str() prints to ~4 digits; the importer passes it
    # exactly, and constant propagation must fold that value, not the printed
    # one (found by scripts/fuzz_graphs.py: the fold failed to compile).
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("p", torch.randn(8))

        def forward(self, x):
            v = x / (self.p.abs() + 0.123456789)
            return torch.stack([x, v], 1).sum(1)

    m = M()
    x = torch.randn(1, 8, 5, 8)
    c = llga.optimize(torch.jit.trace(m, x), [x])
    np.testing.assert_allclose(c(x.numpy()), m(x).numpy(), rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------- state between calls

class _Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.n = 0

    def forward(self, x):
        self.n += 1
        return x * self.n


class _CallsBuffer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(1))

    def forward(self, x):
        self.calls += 1
        return x * self.calls


class _Streaming(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("state", torch.zeros(3))

    def forward(self, x):
        self.state.copy_(self.state * 0.5 + x)
        return self.state * 1


class _LazyFlagScale(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ready = False
        self.scale = 1.0

    def forward(self, x):
        if not self.ready:
            self.scale = 2.0
            self.ready = True
        return x * self.scale


@pytest.mark.parametrize("make,how,error,match", [
    (_Counter, "script", llga.CompileError, r"keeps state between calls: it sets self\.n from its previous value"),
    (_CallsBuffer, "script", llga.CompileError, r"it sets self\.calls from its previous value"),
    (_Streaming, "script", llga.PassError, r"aten::copy_ writes into 'state.*a module buffer or parameter"),
    (_Streaming, "trace", llga.PassError, r"aten::copy_ writes into 'state.*keeps no state between calls"),
], ids=["int counter", "buffer +=", "buffer copy_", "traced buffer copy_"])
def test_a_model_that_keeps_state_between_calls_is_refused(make, how, error, match):
    # each PyTorch call starts where the last left off; llga would answer the
    # first call's result every time (and wrote into the module's buffer)
    m = make()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog = torch.jit.script(m) if how == "script" else torch.jit.trace(m, torch.ones(3), check_trace=False)
    before = {k: v.clone() for k, v in m.state_dict().items()}
    with pytest.raises(error, match=match):
        llga.optimize(prog)
    for k, v in prog.state_dict().items():  # nothing of the module was written
        assert torch.equal(v, before[k]), k


def test_a_value_set_without_reading_the_old_one_is_the_same_every_call():
    prog = torch.jit.script(_LazyFlagScale())
    compiled = llga.optimize(prog)
    x = np.ones(3, np.float32)
    for _ in range(3):
        np.testing.assert_array_equal(compiled(x), prog(torch.from_numpy(x)).numpy())
