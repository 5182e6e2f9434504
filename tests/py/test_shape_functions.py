"""The per-op shape functions (src/passes/shape_functions.cpp) against
execution: for every corpus model, propagate-shapes types each value once from
the shape functions only and once by running the graph, and every value the
functions type must have exactly the type execution observes (dtype, sizes,
strides). Traced graphs already carry types, so the graph's node types are
erased first (graph inputs and constants keep theirs)."""
import re

import pytest

import corpus
import llga
from llga import passes
from llga.compiler import _load

BEFORE = "freeze,remove-dropout,remove-mutation,decompose,propagate-shapes"
_TENSOR_TYPE = re.compile(r"(%[\w.]+ : )(?:Float|Long|Int|Bool|Double|Half|BFloat16|Byte|Char|Short)\([^()]*\)")

# Values only execution types (the functions leave them): swin_t's pooling of
# a permuted tensor follows the input's dimension order, which no function
# models; everything after it follows.
EXPECTED_UNTYPED = {"swin_t": {"aten::adaptive_avg_pool2d", "aten::flatten", "aten::linear"}}


def _erase_node_types(text: str) -> str:
    lines = []
    for line in text.splitlines():
        if " = " in line and "prim::Constant" not in line:
            line = _TENSOR_TYPE.sub(r"\1Tensor", line)
        lines.append(line)
    return "\n".join(lines) + "\n"


def _typed(model, shapes: str):
    traced = corpus.traced(model)[1] if isinstance(model, str) else model
    graph, weights, methods = _load(traced, None, None)
    g = graph.copy()
    passes.run(g, "inline", weights, methods=methods)
    g = llga.parse(_erase_node_types(str(g)))
    records = passes.run(g, BEFORE, weights, shapes=shapes)
    out = {}
    for n in g.nodes(recursive=True):
        if n.kind == "prim::Constant":
            continue
        for v in n.outputs:
            if v.type.is_tensor and str(v.type) != "Tensor":
                out[v.name] = (str(v.type), n.kind)
    return out, records[-1]


def _agree(model, min_typed=10):
    functions, _ = _typed(model, "functions")
    executed, record = _typed(model, "execute")
    assert record.changed and len(executed) >= min_typed, record.notes  # execution typed the graph: the reference is real
    wrong = {k: (functions[k][1], functions[k][0], executed[k][0])
             for k in functions if k in executed and functions[k][0] != executed[k][0]}
    assert not wrong, list(wrong.items())[:5]
    assert set(functions) <= set(executed), sorted(set(functions) - set(executed))[:5]
    return {executed[k][1] for k in set(executed) - set(functions)}


@pytest.mark.parametrize("model", corpus.MODELS)
def test_shape_functions_agree_with_execution(model):
    untyped = _agree(model)
    assert untyped == EXPECTED_UNTYPED.get(model, set()), untyped


def _recurrent(cls, x, **kw):
    import torch
    torch.manual_seed(0)
    return torch.jit.trace(cls(4, 6, **kw).eval(), x)


# Ops outside the corpus whose functions are not exercised by a corpus model.
EXTRA = {
    "lstm_bidirectional_batch_first": lambda torch: _recurrent(torch.nn.LSTM, torch.randn(2, 5, 4), num_layers=2,
                                                               bidirectional=True, batch_first=True),
    "lstm_projection_unbatched": lambda torch: _recurrent(torch.nn.LSTM, torch.randn(5, 4), proj_size=3),
    "gru": lambda torch: _recurrent(torch.nn.GRU, torch.randn(5, 2, 4), num_layers=3),
    "rnn_relu_bidirectional": lambda torch: _recurrent(torch.nn.RNN, torch.randn(5, 2, 4), nonlinearity="relu",
                                                       bidirectional=True),
}


@pytest.mark.parametrize("name", list(EXTRA))
def test_shape_functions_agree_on_other_ops(name):
    import torch
    assert _agree(EXTRA[name](torch), min_typed=2) == set()


def test_default_pipeline_runs_nothing_where_the_functions_type_everything():
    # resnet18: the shape functions type every value, so propagate-shapes does
    # not run the graph (it would say so in a note) and the result is the same.
    _, infer = _typed("resnet18", "infer")
    assert infer.changed and not infer.notes, infer.notes
    # swin_t: one value the functions cannot type; the graph runs for it.
    _, infer = _typed("swin_t", "infer")
    assert any("by running the graph" in n for n in infer.notes), infer.notes


def test_bad_shape_source_is_a_clear_error():
    g = llga.parse("graph(%x : Float(2)):\n  %y : Tensor = aten::relu(%x)\n  return (%y)\n")
    with pytest.raises(ValueError, match="shapes must be"):
        passes.run(g, "propagate-shapes", shapes="guess")
