"""llga.load_torchscript: torch.jit.save archives read without PyTorch, run
against PyTorch's own result on the same archive."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
import warnings
import zipfile
from typing import List

import numpy as np
import pytest
import torch

import llga
from llga import zoo

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _flat(y):
    if isinstance(y, (tuple, list)):
        return [a for v in y for a in _flat(v)]
    return [np.asarray(y.detach().numpy() if hasattr(y, "detach") else y)]


def _model(name):
    if name == "bert":
        return zoo.bert_like(vocab=1000, hidden=64, layers=2, heads=4), zoo.bert_inputs(batch=1, seq=16, vocab=1000)
    if name in zoo.TORCHVISION_MODELS:
        return zoo.torchvision_model(name), (torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(0)),)
    return zoo.coverage_model(name)


def _save(tmp_path, name, frozen):
    m, x = _model(name)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(m.eval(), x, check_trace=False)
        if frozen:
            traced = torch.jit.freeze(traced)
    path = tmp_path / f"{name}.pt"
    torch.jit.save(traced, str(path))
    with torch.no_grad():
        want = _flat(torch.jit.load(str(path))(*x))  # PyTorch on the very archive
    return path, [a.numpy() for a in x], want


@pytest.mark.parametrize("name, frozen", [
    ("resnet18", False), ("resnet18", True), ("mobilenet_v3_large", True), ("bert", False), ("bert", True),
    ("gpt_einsum", False), ("lstm_tagger", True),
])
def test_archive_runs_as_pytorch_runs_it(tmp_path, name, frozen):
    path, x, want = _save(tmp_path, name, frozen)
    m = llga.load_torchscript(path)
    assert m.params and all(isinstance(a, np.ndarray) for a in m.params.values())
    got = _flat(llga.optimize(m, x)(*x))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(w).max())))


def test_weights_are_read_in_place(tmp_path):
    path, _, _ = _save(tmp_path, "resnet18", False)
    m = llga.load_torchscript(path)
    mapped = [a for a in m.params.values() if a.base is not None and not a.flags.owndata]
    assert len(mapped) == len(m.params)  # views over the mapped archive, not copies
    assert not any(a.flags.writeable for a in m.params.values())


def test_without_torch(tmp_path):
    path, x, want = _save(tmp_path, "bert", True)
    np.savez(tmp_path / "io.npz", **{f"in{i}": a for i, a in enumerate(x)}, **{f"out{i}": a for i, a in enumerate(want)})
    code = f"""
        import sys
        class NoTorch:
            def find_spec(self, name, path=None, target=None):
                if name == "torch" or name.startswith("torch."):
                    raise ImportError("torch is blocked in this test")
        sys.meta_path.insert(0, NoTorch())
        import numpy as np, llga
        z = np.load({str(tmp_path / 'io.npz')!r})
        xs = [z[f"in{{i}}"] for i in range({len(x)})]
        y = llga.optimize(llga.load_torchscript({str(path)!r}), xs)(*xs)
        y = list(y) if isinstance(y, tuple) else [y]
        for i, a in enumerate(y):
            np.testing.assert_allclose(a, z[f"out{{i}}"], rtol=1e-4, atol=1e-4)
        assert not any(k == "torch" or k.startswith("torch.") for k in sys.modules)
        print("ok")
    """
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]


class Scripted(torch.nn.Module):
    """if on a tensor, for over range with a list append, while with a
    loop-carried int and tensor, int arithmetic, a default argument."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x, n: int = 3):
        if x.sum() > 0:
            y = x * 2
        else:
            y = x - 1
        outs: List[torch.Tensor] = []
        for i in range(n):
            y = torch.relu(self.lin(y)) + i
            outs.append(y)
        k = 0
        while k < 2 and n > 1:
            k += 1
            y = y / 2
        return torch.cat(outs, 0), y, len(outs) * 2 + k


class Unsupported(torch.nn.Module):
    def forward(self, x):
        return torch.linalg.det(x)  # aten::linalg_det: an op llga does not run (LAPACK)


def test_scripted_control_flow_runs_as_pytorch_runs_it(tmp_path):
    torch.manual_seed(0)
    path = tmp_path / "s.pt"
    torch.jit.save(torch.jit.script(Scripted().eval()), str(path))
    ref = torch.jit.load(str(path))
    compiled = llga.optimize(llga.load_torchscript(path))
    assert "prim::Loop" in str(compiled.graph) or "prim::If" in str(compiled.graph)
    with torch.no_grad():
        for sign in (1.0, -1.0):
            x = torch.randn(2, 4) * sign + sign  # both branches of the if
            for n in (1, 2, 3, None):
                want = ref(x) if n is None else ref(x, n)
                got = compiled(x.numpy()) if n is None else compiled(x.numpy(), n)
                np.testing.assert_allclose(got[0], want[0].numpy(), rtol=1e-5, atol=1e-5)
                np.testing.assert_allclose(got[1], want[1].numpy(), rtol=1e-5, atol=1e-5)
                assert got[2] == want[2]


@pytest.mark.parametrize("name", ["resnet18", "densenet121", "mobilenet_v3_large"])
def test_scripted_torchvision_models(tmp_path, name):
    """torchvision's scripted code: functional helpers, Optional refinement,
    training-only branches, NamedTuples, RaiseException checks."""
    path = tmp_path / f"{name}.pt"
    torch.jit.save(torch.jit.script(zoo.torchvision_model(name)), str(path))
    x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = torch.jit.load(str(path))(x).numpy()
    got = llga.optimize(llga.load_torchscript(path), [x.numpy()])(x.numpy())
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max())))


def test_what_it_cannot_read_is_named(tmp_path):
    path = tmp_path / "u.pt"
    torch.jit.save(torch.jit.script(Unsupported()), str(path))
    with pytest.raises(llga.UnsupportedOpError, match=r"aten::linalg_det at code/.*:\d+") as e:
        llga.load_torchscript(path)
    assert "torch.jit.load" in str(e.value) and "aten::linalg_det" in e.value.ops


def test_not_an_archive(tmp_path):
    with pytest.raises(FileNotFoundError):
        llga.load_torchscript(tmp_path / "missing.pt")
    (tmp_path / "text.pt").write_text("hello")
    with pytest.raises(llga.FormatError, match="not a TorchScript archive"):
        llga.load_torchscript(tmp_path / "text.pt")
    torch.save(torch.nn.Linear(2, 2).state_dict(), str(tmp_path / "sd.pt"))
    with pytest.raises(llga.FormatError, match="state_dict"):
        llga.load_torchscript(tmp_path / "sd.pt")


class _Evil:
    def __reduce__(self):
        return (os.system, ("touch pwned",))


def _rewritten(src_path, dst_path, change):
    """A copy of an archive with each member's bytes passed through change(name, data)."""
    with zipfile.ZipFile(src_path) as src, zipfile.ZipFile(dst_path, "w") as dst:
        for info in src.infolist():
            dst.writestr(info, change(info.filename, src.read(info.filename)))
    return dst_path


def test_a_pickle_with_other_globals_is_refused_not_run(tmp_path):
    path, _, _ = _save(tmp_path, "resnet18", True)
    bad = _rewritten(path, tmp_path / "evil.pt",
                     lambda name, data: pickle.dumps(_Evil(), protocol=2) if name.endswith("/data.pkl") else data)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        with pytest.raises(llga.FormatError, match="refusing to unpickle"):
            llga.load_torchscript(bad)
    finally:
        os.chdir(cwd)
    assert not (tmp_path / "pwned").exists()


def test_a_damaged_storage_is_a_format_error(tmp_path):
    path, _, _ = _save(tmp_path, "resnet18", True)
    bad = _rewritten(path, tmp_path / "short.pt",
                     lambda name, data: data[:64] if "/constants/" in name and len(data) > 64 else data)
    with pytest.raises(llga.FormatError, match="bytes"):
        llga.load_torchscript(bad)
