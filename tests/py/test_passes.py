"""The pass pipeline from Python: records, choices of pipeline, LLGA_LOG."""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

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
    assert str(by["remove-dropout"]).startswith("remove-dropout: changed")


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


def test_resnet50_batchnorm_folded_and_weights_frozen():
    c = llga.optimize(corpus.traced("resnet50")[1])
    rec = {r.name: r for r in c.passes}
    assert rec["freeze"].before.kinds["prim::GetAttr"] > 0
    assert rec["freeze"].after.kinds.get("prim::GetAttr", 0) <= rec["freeze"].before.kinds["prim::GetAttr"]
    assert rec["fold-batchnorm"].before.kinds["aten::batch_norm"] == 53
    assert "aten::batch_norm" not in rec["fold-batchnorm"].after.kinds
    assert "aten::batch_norm" not in str(c.graph)
    assert c.graph.node_counts().get("prim::GetAttr", 0) == 0
    for r in c.passes:
        print(f"{r.name:22s} {r.before.nodes:5d} -> {r.after.nodes:5d} nodes  {r.seconds * 1e3:6.2f} ms")


def test_folded_values_match_pytorch_fusion():
    conv = torch.nn.Conv2d(3, 4, 3, bias=True).eval()
    bn = torch.nn.BatchNorm2d(4).eval()
    with torch.no_grad():
        bn.running_mean.normal_()
        bn.running_var.uniform_(0.5, 2.0)
        bn.weight.normal_()
        bn.bias.normal_()
    traced = torch.jit.trace(torch.nn.Sequential(conv, bn), torch.randn(1, 3, 8, 8))
    c = llga.optimize(traced)
    consts = {n.outputs[0].name: n.attributes["value"] for n in c.graph.nodes()
              if n.kind == "prim::Constant" and isinstance(n.attributes.get("value"), llga.TensorConstant)}
    w = next(v for k, v in consts.items() if k.endswith("_fused_bn") and len(v.shape) == 4)
    b = next(v for k, v in consts.items() if k.endswith("_fused_bn") and len(v.shape) == 1)
    want_w, want_b = torch.nn.utils.fusion.fuse_conv_bn_weights(
        conv.weight, conv.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias)
    np.testing.assert_allclose(w.numpy(), want_w.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b.numpy(), want_b.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_inline_expands_traced_graph_given_its_module():
    eager, traced = corpus.traced("resnet18")
    assert "prim::CallMethod" in traced.graph.str()
    c = llga.optimize(traced.graph, module=traced)
    rec = {r.name: r for r in c.passes}
    assert rec["inline"].changed and rec["inline"].before.kinds["prim::CallMethod"] > 0
    assert "prim::CallMethod" not in rec["inline"].after.kinds
    assert c.graph.node_counts().get("prim::GetAttr", 0) == 0  # freeze resolved every chain
    assert "aten::batch_norm" not in str(c.graph)
    x = corpus.example_inputs("resnet18")[0]
    with torch.no_grad():
        want = eager(x).numpy()
    np.testing.assert_allclose(c(x.numpy()), want, rtol=1e-4, atol=1e-4)


def test_inline_without_module_leaves_calls_and_says_so():
    g = llga.import_torch(corpus.traced("resnet18")[1].graph)[0]
    # an llga.Graph carries no module: a CompileError saying what to pass, not a "missing op"
    with pytest.raises(llga.CompileError, match=r"still calls 10 submodule method\(s\) \(prim::CallMethod, the first __torch__\..*\.forward\): .*"
                                                r"pass the ScriptModule"):
        llga.optimize(g)
    rec = llga.passes.run(g, "inline")[0]
    assert not rec.changed and "no graph for method" in rec.notes[0]


@pytest.mark.parametrize("norm_first,activation", [(False, "gelu"), (True, "relu")])
def test_decompose_encoder_layer_matches_pytorch(norm_first, activation):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, activation=activation,
                                             batch_first=True, norm_first=norm_first).eval()
    x = torch.randn(2, 7, 32)
    with torch.no_grad():
        traced = torch.jit.trace(layer, x, check_trace=False)
        want = layer(x).numpy()
    assert "aten::_transformer_encoder_layer_fwd" in traced.inlined_graph.str()
    c = llga.optimize(traced)
    rec = {r.name: r for r in c.passes}["decompose"]
    assert rec.changed and rec.notes == []
    kinds = dict(c.graph.node_counts())  # outside partitions, plus the ops inside them
    for p in c.partitions:
        for op in p.ops:
            kinds[op] = kinds.get(op, 0) + 1
    assert "aten::_transformer_encoder_layer_fwd" not in kinds
    assert kinds["aten::layer_norm"] == 2 and kinds["aten::softmax"] == 1 and kinds["aten::linear"] == 4
    assert kinds[f"aten::{activation}"] == 1
    np.testing.assert_allclose(c(x.numpy()), want, rtol=1e-4, atol=1e-5)
    # Another batch and length: the decomposition reads sizes at run time.
    x2 = torch.randn(3, 5, 32)
    with torch.no_grad():
        np.testing.assert_allclose(c(x2.numpy()), layer(x2).numpy(), rtol=1e-4, atol=1e-5)


def test_decompose_leaves_attention_whose_weights_are_read():
    mha = torch.nn.MultiheadAttention(16, 2, batch_first=True).eval()

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.mha = mha

        def forward(self, x):
            return self.mha(x, x, x, need_weights=True)

    x = torch.randn(1, 5, 16)
    with torch.no_grad():
        traced = torch.jit.trace(M().eval(), x, check_trace=False)
        want_out, want_w = M().eval()(x)
    c = llga.optimize(traced)
    rec = {r.name: r for r in c.passes}["decompose"]
    if "aten::_native_multi_head_attention" in traced.inlined_graph.str():
        assert any("its attention weights are read" in n for n in rec.notes)
    out, w = c(x.numpy())
    np.testing.assert_allclose(out, want_out.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(w, want_w.numpy(), rtol=1e-4, atol=1e-5)


def test_propagate_shapes_from_example_inputs():
    @torch.jit.script
    def f(x: torch.Tensor, y: torch.Tensor):
        z = torch.matmul(x, y.t())
        return torch.relu(z).sum(1)

    assert "Float(" not in f.graph.str()
    x, y = np.ones((2, 3), np.float32), np.ones((5, 3), np.float32)
    c = llga.optimize(f, example_inputs=(x, y))
    rec = {r.name: r for r in c.passes}["propagate-shapes"]
    assert rec.changed
    assert "Float(2, 5, strides=[5, 1], requires_grad=0, device=cpu) = aten::matmul" in rec.ir
    assert "Float(2, strides=[1], requires_grad=0, device=cpu) = aten::sum" in rec.ir
    np.testing.assert_allclose(c(x, y), np.full((2,), 15, np.float32))
    # Without example inputs and with incomplete types, it says why it did nothing.
    rec = {r.name: r for r in llga.optimize(f).passes}["propagate-shapes"]
    assert not rec.changed and "no example inputs" in rec.notes[0]


def test_batch_norm_before_an_unpadded_conv_folds_into_it():
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm2d(6)
    with torch.no_grad():  # statistics and affine parameters away from identity
        bn.running_mean.uniform_(-1, 1), bn.running_var.uniform_(0.5, 2), bn.weight.uniform_(0.5, 2), bn.bias.uniform_(-1, 1)
    m = torch.nn.Sequential(bn, torch.nn.Conv2d(6, 5, 1), torch.nn.ReLU(), torch.nn.BatchNorm2d(5),
                            torch.nn.Conv2d(5, 4, 3, padding=1)).eval()
    x = torch.randn(2, 6, 7, 9)
    with torch.no_grad():
        c = llga.optimize(torch.jit.trace(m, x), (x,))
        want = m(x).numpy()
    np.testing.assert_allclose(c(x.numpy()), want, rtol=1e-4, atol=1e-4)
    # The first folds into the 1x1 conv; the second feeds a padded conv, whose
    # border would see its shift: it stays, and says why.
    assert c.graph.node_counts().get("aten::batch_norm") == 1
    notes = [n for r in c.passes if r.name == "fold-batchnorm" for n in r.notes]
    assert len(notes) == 1 and "nor is its reader an unpadded conv" in notes[0], notes


class _ConstantMask(torch.nn.Module):
    """A mask built from constants (emformer's blocks of ones and zeros), and
    a zeros tensor the model also returns."""

    def forward(self, x):
        z = torch.zeros(2, 3)
        mask = (1 - torch.cat([torch.ones(2, 1), torch.zeros(2, 2)], 1)).to(torch.bool)
        return x.masked_fill(mask, -1.0) + z, z


def test_small_constant_tensors_fold_but_returned_ones_stay_fresh():
    x = torch.randn(2, 3)
    with torch.no_grad():
        c = llga.optimize(torch.jit.trace(_ConstantMask(), x))
        want = _ConstantMask()(x)
    text = str(c.graph)
    assert "aten::cat" not in text and "aten::ones" not in text and "aten::rsub" not in text, text
    assert text.count("aten::zeros") == 1, text  # the returned one: each call's own buffer
    y, z = c(x.numpy())
    np.testing.assert_array_equal(y, want[0].numpy())
    z[...] = 5.0  # the caller owns what it got back
    y2, z2 = c(x.numpy())
    np.testing.assert_array_equal(z2, np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(y2, want[0].numpy())


class _RelativeBias(torch.nn.Module):
    """Swin's relative position bias: rows of a learned table picked by a
    constant index (Tensor?[] indices), then view, permute, contiguous; and a
    gather along dim 1 (a trace writes it as a full slice of dim 0, then an
    index with a None item)."""

    def __init__(self, heads: int):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(13, heads))
        self.register_buffer("index", torch.randint(0, 13, (49,)))
        self.register_buffer("cols", torch.tensor([4, 0, 4, 2]))
        self.heads = heads

    def forward(self, x, y):
        bias = self.table[self.index].view(7, 7, self.heads).permute(2, 0, 1).contiguous()
        cols = (self.table * 2)[:, self.cols]
        return torch.softmax(x + bias.unsqueeze(0), -1), y + cols


@pytest.mark.parametrize("heads", [5, 2048])  # 2048: a 392 KiB bias, under the 1 MiB limit
def test_a_constant_gather_folds_and_matches_pytorch(heads):
    torch.manual_seed(0)
    model = _RelativeBias(heads).eval()
    x, y = torch.randn(2, heads, 7, 7), torch.randn(13, 4)
    with torch.no_grad():
        traced = torch.jit.trace(model, (x, y))
        want = model(x, y)
    c = llga.optimize(traced)
    text = str(c.graph)
    assert "aten::index" not in text and "aten::slice" not in text, text
    got = c(x.numpy(), y.numpy())
    np.testing.assert_allclose(got[0], want[0].numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(got[1], want[1].numpy())


class _Attention(torch.nn.Module):
    """Q, K, V projections of one input (and an odd-sized fourth), heads split
    by view; `flat` reads q through a view that merges the last dim (only a
    reshape can do that on a slice)."""

    def __init__(self, flat: bool):
        super().__init__()
        self.q, self.k, self.v = (torch.nn.Linear(24, 24) for _ in range(3))
        self.g = torch.nn.Linear(24, 5, bias=False)
        self.flat = flat

    def forward(self, x):
        b, s, _ = x.shape
        q = self.q(x).view(b, s, 4, 6).permute(0, 2, 1, 3)
        k = self.k(x).view(b, s, 4, 6).permute(0, 2, 3, 1)
        v = self.v(x).view(b, s, 4, 6).permute(0, 2, 1, 3)
        att = torch.softmax(torch.matmul(q, k) / 6 ** 0.5, dim=-1)
        out = torch.matmul(att, v).permute(0, 2, 1, 3).reshape(b, s, 24) * torch.sigmoid(self.g(x)).sum(-1, keepdim=True)
        if self.flat:
            out = out + self.q.weight[0, 0] * 0 + self.q(x).view(b, s * 24).view(b, s, 24)
        return out


@pytest.mark.parametrize("flat", [False, True])
def test_merge_linears_stacks_projections_of_one_input_and_matches_pytorch(flat):
    torch.manual_seed(0)
    model = _Attention(flat).eval()
    x = torch.randn(2, 7, 24)
    with torch.no_grad():
        traced = torch.jit.trace(model, x)
        ref = model(x).numpy()
    c = llga.optimize(traced)
    rec = {r.name: r for r in c.passes}["merge-linears"]
    assert rec.changed and any("merged 4 linears" in n or "merged 5 linears" in n for n in rec.notes), rec.notes
    assert rec.after.kinds.get("aten::linear", 0) == 1
    np.testing.assert_allclose(c(x.numpy()), ref, rtol=1e-5, atol=1e-5)
    x2 = torch.randn(3, 5, 24)  # another shape: the slices and reshapes follow
    with torch.no_grad():
        np.testing.assert_allclose(c(x2.numpy()), model(x2).numpy(), rtol=1e-5, atol=1e-5)


def test_traced_shape_arithmetic_runs_on_ints():
    # nn.MultiheadAttention traces bsz * num_heads and embed_dim // num_heads
    # as 0-dim int64 tensors read back with Int(); canonicalize makes them int
    # arithmetic on the sizes (int-of-tensor-arithmetic), which still follows
    # the input's sizes call by call.
    torch.manual_seed(0)
    m = torch.nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, dropout=0.0).eval()
    x = torch.randn(10, 2, 32)
    c = llga.optimize(torch.jit.trace(m, x))
    kinds = c.passes[-1].after.kinds
    assert "prim::NumToTensor" not in kinds and "aten::Int" not in kinds, kinds
    by = {r.name: r for r in c.passes}
    assert any("int-of-tensor-arithmetic" in n for r in c.passes if r.name == "canonicalize" for n in r.notes), [
        r.notes for r in c.passes if r.name == "canonicalize"]
    for shape in [(10, 2, 32), (7, 3, 32), (1, 1, 32)]:
        x = torch.randn(*shape)
        with torch.no_grad():
            want = m(x).numpy()
        np.testing.assert_allclose(c(x.numpy()), want, rtol=1e-4, atol=1e-5)
    assert by["canonicalize"].changed
