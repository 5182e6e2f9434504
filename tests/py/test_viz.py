"""llga.viz and the rich displays: partitions as clusters, shapes and layouts
on edges, unfused reasons, collapse/expand/focus, the pass viewer, and a real
browser (headless Chromium) rendering it."""

import os
import re
import shutil
import subprocess

import pytest
import torch

import corpus
import llga
from llga import viz

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ARTIFACTS = os.path.join(ROOT, "tests", "artifacts")
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz not installed")


@pytest.fixture(scope="module")
def resnet18():
    model, traced = corpus.traced("resnet18")
    c = llga.optimize(traced)
    c(corpus.example_inputs("resnet18")[0].numpy())
    return c


@pytest.fixture(scope="module")
def bert():
    _, traced = corpus.traced(corpus.BERT)
    c = llga.optimize(traced)
    c(*[t.numpy() for t in corpus.example_inputs(corpus.BERT)])
    return c


def test_dot_shows_partitions_shapes_layouts_and_reasons(resnet18):
    dot = viz.to_dot(resnet18, collapse=0)
    assert len(re.findall(r"subgraph cluster_p\d+ \{", dot)) == len(resnet18.partitions) == 23
    assert '"#0 conv_post_ops"' in dot and '"#22 matmul_post_ops"' in dot
    # Edges between partitions carry the layout the producer's primitive
    # chose (whatever oneDNN picks on this CPU: Winograd's nChw16c, brgconv's
    # nhwc, jit's nChw8c), marked kept where no reorder happens.
    convs = [p for p in resnet18.partitions if p.pattern == "conv_post_ops"]
    assert convs[1].output == "kept", convs[1].layouts  # conv -> conv: always kept
    for p in (convs[1], convs[-1]):  # the last one feeds the pool: kept where dense (nhwc), else plain
        shape = "x".join(map(str, p.outputs[0][1]))
        label = f"{shape} f32\\n{p.dst} (kept)" if p.output == "kept" else f"{shape} f32\\nplain"
        assert label in dot, (label, p.layouts)
    assert "1x1000 f32\\nplain" in dot  # the classifier's output
    # flatten stays outside, drawn red with the fuse pass's reason
    flat = [l for l in dot.splitlines() if "flatten" in l and "[label=" in l]
    assert flat and "not fused: no fusion pattern" in flat[0] and "#d62728" in flat[0]
    assert "input %x.1" in dot and "output %" in dot and "shape=note" in dot  # input, output, weights


def test_collapse_expand_and_focus(resnet18):
    full = viz.to_dot(resnet18, collapse=0)
    coll = viz.to_dot(resnet18, collapse=1)
    assert "box_layer1 " in coll and "box_layer1_0" not in coll and "cluster_p3" not in coll
    assert coll.count("\n") < full.count("\n") / 2
    opened = viz.to_dot(resnet18, collapse=1, expand=["layer1"])
    assert "box_layer1_0 " in opened and "box_layer1 " not in opened and "box_layer2 " in opened
    foc = viz.to_dot(resnet18, focus="input.13", radius=1)
    assert 0 < len(re.findall(r"cluster_p\d+", foc)) <= 4
    with pytest.raises(KeyError, match="no value %nope"):
        viz.to_dot(resnet18, focus="nope")


def test_big_graph_collapses_by_itself():
    _, traced = corpus.traced("densenet121")
    c = llga.optimize(traced)
    dot = viz.to_dot(c)
    assert "collapsed by module scope" in dot and "box_features" in dot
    if shutil.which("dot"):
        assert viz.svg(c).startswith("<svg")


@needs_dot
def test_svg_and_rich_reprs(resnet18, bert):
    s = viz.svg(resnet18)
    assert s.startswith("<svg") and "conv_post_ops" in s
    assert "<svg" in resnet18.graph._repr_html_()
    html = resnet18._repr_html_()
    assert "<svg" in html and "llga-partitions" in html and "aten::flatten" in html
    impl = resnet18.partitions[0].impl  # oneDNN's name for the first conv's kernel ("brgconv:avx512_core", ...)
    assert ":" in impl and impl in resnet18.partitions._repr_html_()
    assert "<svg" in viz.svg(bert) and "matmul_post_ops" in viz.to_dot(bert)
    # plain reprs stay short
    assert len(repr(resnet18)) < 200 and "\n" not in repr(resnet18)
    assert repr(resnet18.partitions).splitlines()[0].split() == ["id", "pattern", "ops", "output", "allowed", "precision", "impl", "layouts"]
    assert len(repr(resnet18.passes).splitlines()) == len(resnet18.passes) + 1


def test_without_graphviz_a_clear_message_and_text(resnet18, monkeypatch):
    monkeypatch.setattr(viz.shutil, "which", lambda name: None)
    viz._SVG_CACHE.clear()
    with pytest.raises(viz.VizUnavailable, match="apt-get install graphviz"):
        viz.svg(resnet18)
    html = viz.html_figure(resnet18)
    assert "apt-get install graphviz" in html and "[#0 conv_post_ops] _convolution -&gt; relu" in html


def test_pass_viewer_html(resnet18):
    h = resnet18.passes._repr_html_()
    assert h.count('class="pass ') == len(resnet18.passes)
    assert h.count('class="pass unchanged"') == sum(not r.changed for r in resnet18.passes)
    assert 'class="llga-hide"' in h and "hide passes that changed nothing" in h
    assert 'class="diff unified"' in h and 'class="del"' in h and 'class="add"' in h
    assert "IR diff (side by side)" in h and "graph before / after" in h


def test_pass_changes_and_provenance(resnet18):
    ch = resnet18.passes.changes("fold-batchnorm")
    assert {k for _, k in ch["removed"]} >= {"aten::batch_norm"}
    assert len([1 for _, k in ch["removed"] if k == "aten::batch_norm"]) == 20
    steps = resnet18.passes.track("input.5")
    assert steps[0]["producer"] == "aten::relu_"  # traced in place
    after = {s["after"]: s["producer"] for s in steps}
    assert after["remove-mutation"] == "aten::relu" and after["fuse"].startswith("llga::FusionGroup")
    assert "-  %input.5" in resnet18.passes.diff("fuse")
    with pytest.raises(KeyError, match="no pass named 'nope'"):
        resnet18.passes.diff("nope")


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


@pytest.mark.skipif(_chromium() is None, reason="chromium not installed (scripts/bootstrap.sh installs it)")
@pytest.mark.parametrize("model", ["resnet18", "bert"])
def test_headless_chromium_renders_the_pass_viewer(model, request):
    compiled = request.getfixturevalue(model)
    os.makedirs(ARTIFACTS, exist_ok=True)
    page = os.path.join(ARTIFACTS, f"pass_viewer_{model}.html")
    compiled.passes.to_html(page, title=f"llga pass pipeline: {model}")
    common = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--hide-scrollbars", "--virtual-time-budget=5000"]
    dom = subprocess.run(common + ["--dump-dom", "file://" + page], capture_output=True, text=True, timeout=180)
    assert dom.returncode == 0, dom.stderr[-2000:]
    rendered = dom.stdout
    # the browser parsed the page: the SVG graphs, the diff tables and the pass rows are in its DOM
    assert rendered.count("<svg") >= 2
    assert 'class="diff unified"' in rendered and '<table class="diff"' in rendered
    assert rendered.count('class="pass ') == len(compiled.passes)
    shot = os.path.join(ARTIFACTS, f"pass_viewer_{model}.png")
    if os.path.exists(shot):
        os.remove(shot)
    r = subprocess.run(common + ["--window-size=1300,1600", f"--screenshot={shot}", "file://" + page],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0 and os.path.getsize(shot) > 20000, r.stderr[-2000:]  # a real picture, not blank
