"""llga.profiler: ExecTime adds up, Unimpl, the kernel log, the Chrome trace,
LLGA_VERBOSE, routing ops off the fused path, and the CLI."""

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
from torch import nn

import corpus
import llga

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(autouse=True)
def fresh_profiler():
    llga.profiler.disable()
    llga.profiler.clear()
    llga.profiler.kernel_log.disable()
    llga.profiler.kernel_log.clear()
    yield
    llga.profiler.disable()
    llga.profiler.kernel_log.disable()


@pytest.fixture(scope="module")
def resnet18():
    model, traced = corpus.traced("resnet18")
    compiled = llga.optimize(traced)
    x = corpus.example_inputs("resnet18")[0].numpy()
    compiled(x)
    return compiled, x


class SmallNet(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 8, 3)
        self.fc = nn.Linear(8 * 6 * 6, 10)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        z = self.fc(torch.flatten(y, 1))
        return torch.linalg.det(z[:, :9].reshape(-1, 3, 3)) if self.unsupported else z.sum(1)

    unsupported = False


def trace(model, *xs):
    with torch.no_grad():
        return torch.jit.trace(model.eval(), xs, check_trace=False)


def test_exec_time_adds_up_to_the_call_time(resnet18):
    compiled, x = resnet18
    with llga.profiler.profile():
        assert llga.profiler.is_in_roi()
        t0 = time.perf_counter()
        for _ in range(5):
            compiled(x)
        wall_ms = (time.perf_counter() - t0) * 1e3
    assert not llga.profiler.is_in_roi()
    rows = llga.profiler.stats("ExecTime-Raw")
    ops_ms = sum(r["total_ms"] for r in rows)
    assert 0.9 * wall_ms <= ops_ms <= wall_ms, (ops_ms, wall_ms)
    by_name = {r["name"]: r for r in rows}
    assert by_name["partition:conv_post_ops"]["calls"] == 5 * 20  # 20 conv partitions per call
    assert abs(sum(r["share"] for r in rows) - 1) < 1e-9
    text = llga.profiler.stats("ExecTime")
    assert "partition:conv_post_ops" in text and "% of" in text
    latex = llga.profiler.stats("ExecTime-Latex")
    assert latex.startswith(r"\begin{tabular}") and r"partition:conv\_post\_ops" in latex
    both = llga.profiler.stats(["ExecTime-Raw", "Specializations"])
    assert both["Specializations"]["built"] == 0 and both["Specializations"]["hits"] > 0


def test_nothing_recorded_while_disabled(resnet18):
    compiled, x = resnet18
    compiled(x)
    assert llga.profiler.events() == []
    assert llga.profiler.stats("ExecTime-Raw") == []


def test_unimpl_lists_unfused_and_unsupported_ops():
    model = SmallNet()
    x = torch.randn(2, 3, 8, 8)
    compiled = llga.optimize(trace(model, x))
    model.unsupported = True
    with llga.profiler.profile():
        compiled(x.numpy())
        with pytest.raises(llga.UnsupportedOpError, match="aten::linalg_det"):
            llga.optimize(trace(model, x))
    u = llga.profiler.unimpl()
    assert u["aten::sum"]["count"] == 1 and u["aten::sum"]["runs"]
    assert any("no fusion pattern" in why for why in u["aten::sum"]["reasons"])
    assert u["aten::linalg_det"]["runs"] is False
    text = llga.profiler.stats("Unimpl")
    assert "aten::linalg_det: cannot run" in text and "aten::sum" in text
    assert "aten::_convolution" not in u and "aten::linear" not in u  # those ran fused


def test_kernel_log_has_one_entry_per_kernel_with_shapes():
    model = SmallNet()
    x = torch.randn(2, 3, 8, 8)
    compiled = llga.optimize(trace(model, x))
    llga.profiler.kernel_log.enable()
    compiled(x.numpy())
    llga.profiler.kernel_log.disable()
    compiled(x.numpy())  # not logged
    log = json.loads(llga.profiler.kernel_log.json())
    top = [e for e in log if e["depth"] == 0]
    # conv+relu partition, flatten, linear partition, sum
    assert [(e["pattern"] or e["op"]) for e in top] == ["conv_post_ops", "aten::flatten", "matmul_post_ops", "aten::sum"]
    conv, _, fc, _ = top
    assert conv["partition"] == 0 and conv["primitive"] == "convolution" and ":" in conv["impl"]
    assert conv["inputs"][0].startswith("2x3x8x8:Float") and conv["outputs"][0].startswith("2x8x6x6:Float")
    assert fc["partition"] == 1 and fc["primitive"] == "matmul" and fc["outputs"][0].startswith("2x10:Float")
    assert all(e["time_ms"] > 0 for e in log)
    llga.profiler.kernel_log.clear()
    assert llga.profiler.kernel_log.entries() == []


def test_chrome_trace_is_valid_json_with_the_events(resnet18, tmp_path):
    compiled, x = resnet18
    with llga.profiler.profile():
        compiled(x)
        compiled(x)
    path = llga.profiler.export_chrome_trace(str(tmp_path / "trace.json"))
    with open(path) as f:
        trace_events = json.load(f)["traceEvents"]
    complete = [e for e in trace_events if e["ph"] == "X"]
    calls = [e for e in complete if e["cat"] == "call"]
    assert len(calls) == 2
    assert len([e for e in complete if e["cat"] == "partition" and e["name"].startswith("conv_post_ops")]) == 40
    for call in calls:  # every instruction lies within its call
        inside = [e for e in complete if e["cat"] != "call" and call["ts"] <= e["ts"] <= call["ts"] + call["dur"]]
        assert len(inside) >= 24
    assert all(e["dur"] >= 0 and {"pid", "tid", "ts"} <= set(e) for e in complete)


def test_route_gelu_off_the_fused_path_keeps_parity():
    model, traced = corpus.traced(corpus.BERT)
    ids, mask = corpus.example_inputs(corpus.BERT)
    with torch.no_grad():
        ref = model(ids, mask)
    fused = llga.optimize(traced)
    assert any("aten::gelu" in p.ops for p in fused.partitions)
    route = llga.profiler.chart(fused)
    json.dumps(route)  # JSON-able
    (gelu,) = [r for r in route if r["name"] == "aten::gelu"]
    assert gelu["fused"] is True
    gelu["fused"] = False
    routed = llga.optimize(traced, route=route)
    assert not any("aten::gelu" in p.ops for p in routed.partitions)
    assert "routed off" in " ".join(routed.unfused["aten::gelu"]["reasons"])
    assert len(routed.partitions) >= len(fused.partitions)  # the linear stays a partition alone
    chart = {r["name"]: r["fused"] for r in llga.profiler.chart(routed)}
    assert chart["aten::gelu"] is False and chart["aten::linear"] is True
    out = routed(ids.numpy(), mask.numpy())
    for o, r in zip(out, ref):
        np.testing.assert_allclose(o, r.numpy(), rtol=1e-4, atol=1e-4 * float(r.abs().max()))
    # a whole pattern can be routed off too
    no_ln = llga.optimize(traced, route={"layernorm_post_ops": False})
    assert not any(p.pattern == "layernorm_post_ops" for p in no_ln.partitions)


def test_bad_route_raises():
    _, traced = corpus.traced(corpus.BERT)
    with pytest.raises(ValueError, match="unknown op kind or fusion pattern 'aten::gleu'.*aten::gelu"):
        llga.optimize(traced, route=[{"name": "aten::gleu", "fused": False}])
    with pytest.raises(ValueError, match="'fused' must be true or false"):
        llga.optimize(traced, route=[{"name": "aten::gelu", "fused": "no"}])
    with pytest.raises(ValueError, match="expected"):
        llga.optimize(traced, route=[42])


def test_bad_stats_key_raises():
    with pytest.raises(ValueError, match="unknown stats key 'ExecTim'"):
        llga.profiler.stats("ExecTim")


def run_py(code, **env):
    e = dict(os.environ, PYTHONPATH=ROOT, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=300)


def test_llga_verbose_prints_one_line_per_kernel():
    code = ("import numpy as np, llga\n"
            "c = llga.optimize('graph(%x : Float(2, 4)):\\n  %y : Float(2, 4) = aten::relu(%x)\\n"
            "  %z : Float(2, 4) = aten::sigmoid(%y)\\n  return (%z)')\n"
            "c(np.ones((2, 4), np.float32)); c(np.ones((2, 4), np.float32))\n")
    r = run_py(code, LLGA_VERBOSE="1")
    assert r.returncode == 0, r.stderr
    lines = [l for l in r.stderr.splitlines() if l.startswith("llga_verbose,exec,")]
    # per call: the eltwise partition, and the two ops it runs in sequence
    assert len([l for l in lines if ",llga::FusionGroup,eltwise_post_ops," in l]) == 2, r.stderr
    assert len([l for l in lines if ",aten::relu," in l]) == 2 and len(lines) == 6, r.stderr
    assert "in:2x4:Float plain" in lines[0] and float(lines[0].rsplit(",", 1)[1]) >= 0
    quiet = run_py(code)
    assert "llga_verbose" not in quiet.stderr


def test_cli_profile(tmp_path):
    model = SmallNet()
    path = str(tmp_path / "small.pt")
    torch.jit.save(trace(model, torch.randn(1, 3, 8, 8)), path)
    r = subprocess.run([sys.executable, "-m", "llga", "profile", path, "--input", "1x3x8x8", "--runs", "3",
                        "--trace", str(tmp_path / "t.json")], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "partition:conv_post_ops" in r.stdout and "aten::sum" in r.stdout and "Unimpl" in r.stdout
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    bad = subprocess.run([sys.executable, "-m", "llga", "profile", "nosuchmodel"], capture_output=True, text=True,
                         cwd=ROOT, timeout=300)
    assert bad.returncode == 2 and "neither a file nor a torchvision model" in bad.stderr
    bad_shape = subprocess.run([sys.executable, "-m", "llga", "profile", "resnet18", "--input", "1xax3"],
                               capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert bad_shape.returncode == 2 and "expected a shape" in bad_shape.stderr


def test_kernel_log_names_a_transposed_convolution_deconvolution():
    model = nn.Sequential(nn.ConvTranspose2d(4, 3, 3, stride=2), nn.ReLU())
    x = torch.randn(1, 4, 5, 5)
    compiled = llga.optimize(trace(model, x))
    llga.profiler.kernel_log.enable()
    y = compiled(x.numpy())
    llga.profiler.kernel_log.disable()
    (entry,) = llga.profiler.kernel_log.entries()
    assert entry["primitive"] == "deconvolution" and entry["pattern"] == "conv_post_ops"
    with torch.no_grad():
        np.testing.assert_allclose(y, model(x).numpy(), rtol=1e-4, atol=1e-5)
