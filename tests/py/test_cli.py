"""The command line, ``python -m llga run|inspect|profile``.

Each CLI call in a subprocess starts Python and imports PyTorch (seconds of
CPU), so the module fixture ``jobs`` starts them all at once, a few at a time,
in the background; each test waits for its own. The successes, the user errors
found before PyTorch is imported and one found by llga run in subprocesses;
the other user errors call ``llga.__main__.main`` in this process (where an
uncaught exception fails the test as a traceback would). User errors must end
as one line on stderr and exit status 2, never a traceback.
"""

import json
import os
import subprocess
import sys
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from torch import nn

import llga
from llga import __main__ as cli
from llga.quantization import VNNI_ISAS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Multi(nn.Module):
    """Several outputs, nested: (relu, (conv * 2, sum))."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        y = self.conv(x)
        return y.relu(), (y * 2, y.sum())


class Det(nn.Module):
    def forward(self, x):
        return torch.linalg.det(x.relu())  # aten::linalg_det: an op llga lacks (LAPACK)


def _trace(model, x):
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        return torch.jit.trace(model.eval(), (x,))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    torch.manual_seed(0)
    x = torch.randn(1, 3, 8, 8)
    models = {"conv": nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()), "multi": Multi(), "det": Det()}
    for name, model in models.items():
        torch.jit.save(_trace(model, x), str(d / f"{name}.pt"))
    np.save(d / "x.npy", x.numpy())
    np.save(d / "x_uint32.npy", np.zeros((1, 3, 8, 8), np.uint32))
    np.save(d / "x_rank2.npy", np.zeros((3, 8), np.float32))
    np.savez(d / "arrays.npz", a=np.zeros(3))
    (d / "text.pt").write_text("not a TorchScript archive\n")
    (d / "text.npy").write_text("not a .npy file\n")
    (d / "out").mkdir()
    return d


def _jobs(d):
    pt = {k: str(d / f"{k}.pt") for k in ("conv", "multi", "det", "text")}
    x, out = str(d / "x.npy"), d / "out"
    return {
        # successes
        "run_npy": ["run", pt["conv"], "--input", x, "-o", str(out / "conv.npy"), "--threads", "1"],
        "run_shape_multi": ["run", pt["multi"], "--input", "1x3x8x8", "-o", str(out / "multi"), "--threads", "1"],
        "run_summary": ["run", pt["multi"], "--input", x],
        "run_torchvision": ["run", "squeezenet1_0", "--input", "1x3x64x64", "-o", str(out / "squeezenet.npy")],
        "inspect": ["inspect", pt["conv"], "--input", x, "--threads", "1"],
        "inspect_json": ["inspect", pt["multi"], "--input", "1x3x8x8", "--json", "--threads", "1"],
        "profile": ["profile", pt["conv"], "--input", "1x3x8x8", "--runs", "1", "--threads", "1"],
        # user errors found before PyTorch is imported
        "missing_file": ["run", str(d / "nosuch.pt"), "--input", "1x3x8x8"],
        "unknown_model": ["run", "resnet9000"],
        "bad_shape": ["run", pt["conv"], "--input", "1x3xq"],
        "zero_dim": ["run", pt["conv"], "--input", "0x3x8x8"],
        "unreadable_npy": ["run", pt["conv"], "--input", str(d / "text.npy")],
        "missing_npy": ["run", pt["conv"], "--input", str(d / "nosuch.npy")],
        "npz_input": ["inspect", pt["conv"], "--input", str(d / "arrays.npz")],
        "file_without_input": ["run", pt["conv"]],
        "inspect_without_input": ["inspect", pt["conv"], "--json"],
        "unwritable_output": ["run", pt["conv"], "--input", x, "-o", str(d / "no" / "such" / "dir" / "y.npy")],
        "output_is_dir": ["run", pt["conv"], "--input", x, "-o", str(out)],
        # user errors found by PyTorch or llga
        "not_torchscript": ["run", pt["text"], "--input", "1x3x8x8"],
        "input_count": ["run", pt["conv"], "--input", x, "--input", x],
        "input_dtype": ["run", pt["conv"], "--input", str(d / "x_uint32.npy")],
        "input_rank": ["run", pt["conv"], "--input", str(d / "x_rank2.npy")],
        "unsupported_op": ["run", pt["det"], "--input", "1x3x8x8"],
        "unsupported_op_inspect": ["inspect", pt["det"], "--input", "1x3x8x8", "--json"],
        "execution_error": ["run", pt["conv"], "--input", "1x4x8x8"],
        "trace_error": ["run", "squeezenet1_0", "--input", "1x3"],
    }


def _cli(args, cwd):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "llga", *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=300)


IN_PROCESS = {"run_summary", "run_torchvision", "not_torchscript", "input_count", "input_dtype", "input_rank",
              "unsupported_op_inspect", "execution_error", "trace_error"}


@pytest.fixture(scope="module")
def jobs(files):
    """{name: Future of the CompletedProcess}, all started when first asked for."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        yield {name: pool.submit(_cli, args, str(files)) for name, args in _jobs(files).items()
               if name not in IN_PROCESS}


def _main(files, job, capsys):
    """Runs a job's command line in this process: a CompletedProcess-like result."""
    capsys.readouterr()
    args = _jobs(files)[job]
    status = cli.main(args)
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(args, status, captured.out, captured.err)


def _ok(r):
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    return r


def test_run_npy_input_writes_what_pytorch_computes(jobs, files):
    r = _ok(jobs["run_npy"].result())
    out = np.load(files / "out" / "conv.npy")
    expected = torch.jit.load(str(files / "conv.pt"))(torch.from_numpy(np.load(files / "x.npy")))
    np.testing.assert_allclose(out, expected.detach().numpy(), rtol=1e-4, atol=1e-6)
    assert f"wrote {files / 'out' / 'conv.npy'} (out: shape 1x4x6x6 float32" in r.stdout
    assert "compile" in r.stdout.splitlines()[-1] and "first call" in r.stdout.splitlines()[-1]


def test_run_shape_input_and_several_outputs(jobs, files):
    r = _ok(jobs["run_shape_multi"].result())
    # a shape input is standard-normal float32 seeded with its position
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8), dtype=np.float32)
    relu, (doubled, total) = torch.jit.load(str(files / "multi.pt"))(torch.from_numpy(x))
    for i, expected in enumerate([relu, doubled, total]):
        path = files / "out" / f"multi_{i}.npy"
        assert f"wrote {path}" in r.stdout
        np.testing.assert_allclose(np.load(path), expected.detach().numpy(), rtol=1e-4, atol=1e-5)
    assert not (files / "out" / "multi.npy").exists()


def test_run_without_output_prints_a_line_per_output(files, capsys):
    r = _ok(_main(files, "run_summary", capsys))
    lines = r.stdout.splitlines()
    assert [ln.split(":")[0] for ln in lines[:3]] == ["out[0]", "out[1][0]", "out[1][1]"], r.stdout
    assert lines[0].startswith("out[0]: shape 1x4x6x6 float32 min 0 max ") and " mean " in lines[0]
    assert lines[2].startswith("out[1][1]: shape scalar float32")
    assert "load" in lines[3] and "compile" in lines[3] and "first call" in lines[3] and len(lines) == 4


def test_run_torchvision_model(files, capsys):
    from llga import zoo

    _ok(_main(files, "run_torchvision", capsys))
    x = np.random.default_rng(0).standard_normal((1, 3, 64, 64), dtype=np.float32)
    with torch.no_grad():
        expected = zoo.torchvision_model("squeezenet1_0")(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(np.load(files / "out" / "squeezenet.npy"), expected, rtol=1e-4, atol=1e-5)


def test_inspect_prints_partitions_unfused_memory_and_passes(jobs):
    out = _ok(jobs["inspect"].result()).stdout
    assert "Partitions (1):" in out and "conv_post_ops" in out and "_convolution -> relu" in out
    assert "Ops outside partitions (0):" in out
    assert "Memory:" in out and "weight_cache" in out and "peak_activations" in out and "arena" in out
    assert "Passes (" in out and "\nfuse " in out


def test_inspect_json(jobs):
    report = json.loads(_ok(jobs["inspect_json"].result()).stdout)
    assert set(report) == {"model", "inputs", "timing", "partitions", "unfused", "memory", "passes", "saved"}
    assert report["saved"] is None  # compiled here, not loaded from a .llga file
    assert report["inputs"] == [{"source": "1x3x8x8", "dtype": "float32", "shape": [1, 3, 8, 8]}]
    assert set(report["timing"]) == {"load_ms", "compile_ms", "first_call_ms"}
    part, relu = report["partitions"]
    assert part["pattern"] == "conv_post_ops" and part["ops"] == ["aten::_convolution"] and part["impl"]
    # relu, mul and sum read the conv's output, which the tuple returns too: the relu is a
    # partition of its own, a lone mul is none, sum has no pattern: outside, with reasons
    assert relu["pattern"] == "eltwise_post_ops" and relu["ops"] == ["aten::relu"]
    assert set(report["unfused"]) == {"aten::mul", "aten::sum"}
    assert report["unfused"]["aten::sum"]["count"] == 1 and report["unfused"]["aten::sum"]["reasons"]
    assert {"weights", "weight_cache", "released", "peak_activations", "arena"} <= set(report["memory"])
    assert report["memory"]["weight_cache"] > 0 and list(report["memory"]["peak_activations"]) == ["1x3x8x8:Float"]
    assert [p["name"] for p in report["passes"]][-5:] == ["fuse", "assign-precision", "propagate-layouts", "batch-rows", "mark-shape-only"]
    assert all(set(p) >= {"name", "changed", "seconds"} for p in report["passes"])


def test_profile_still_works(jobs):
    out = _ok(jobs["profile"].result()).stdout
    assert "over 1 profiled runs" in out and "partition:conv_post_ops" in out and "Unimpl:" in out


def test_the_unsupported_op_model_is_unsupported(files):
    with pytest.raises(llga.UnsupportedOpError) as e:
        llga.optimize(torch.jit.load(str(files / "det.pt")))
    assert set(e.value.ops) == {"aten::linalg_det"}


USER_ERRORS = {  # job: what its one line says
    "missing_file": "no such file",
    "unknown_model": "neither a file nor a torchvision model",
    "bad_shape": "neither a .npy file nor a shape such as 1x3x224x224",
    "zero_dim": "dimensions must be positive",
    "unreadable_npy": "cannot read --input",
    "missing_npy": "cannot read --input",
    "npz_input": "not a .npy file",
    "file_without_input": "pass each of its inputs with --input",
    "inspect_without_input": "pass each of its inputs with --input",
    "unwritable_output": "does not exist",
    "output_is_dir": "names a directory",
    "not_torchscript": "cannot load",
    "input_count": "InputError: the graph takes 1 input(s)",
    "input_dtype": "InputError: input 0",
    "input_rank": "ExecutionError:",
    "unsupported_op": "UnsupportedOpError: llga cannot run 1 op kind(s): aten::linalg_det",
    "unsupported_op_inspect": "UnsupportedOpError: llga cannot run 1 op kind(s): aten::linalg_det",
    "execution_error": "ExecutionError: llga::FusionGroup",
    "trace_error": "cannot trace squeezenet1_0",
}


@pytest.mark.parametrize("job", list(USER_ERRORS))
def test_user_error_is_one_line_and_status_2(jobs, files, job, capsys):
    r = _main(files, job, capsys) if job in IN_PROCESS else jobs[job].result()
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].strip(), r.stderr
    cmd = _jobs(files)[job][0]
    assert lines[0].startswith(f"llga {cmd}: ") and USER_ERRORS[job] in lines[0], lines[0]
    assert "wrote" not in r.stdout


def test_compile_error_is_one_line(files, monkeypatch, capsys):
    def fails(obj, *args, **kwargs):
        raise llga.CompileError("weight 'conv.weight' is missing\n(second line of detail)")

    monkeypatch.setattr(llga, "optimize", fails)
    assert cli.main(["run", str(files / "conv.pt"), "--input", "1x3x8x8"]) == 2
    err = capsys.readouterr().err
    assert err == "llga run: CompileError: weight 'conv.weight' is missing; (second line of detail)\n"


def test_write_failure_is_one_line(files, monkeypatch, capsys):
    def fails(path, *args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "save", fails)
    assert cli.main(["run", str(files / "conv.pt"), "--input", "1x3x8x8", "-o", str(files / "out" / "full")]) == 2
    err = capsys.readouterr().err
    assert err == f"llga run: cannot write '{files / 'out' / 'full.npy'}': [Errno 28] No space left on device\n"


def test_usage_errors_exit_2():
    r = _cli(["run", "squeezenet1_0", "--threads", "0"], ROOT)
    assert r.returncode == 2 and "--threads" in r.stderr and "Traceback" not in r.stderr


# ---- model files: compile -> run / inspect without PyTorch ------------------

_NO_TORCH = """
import sys
class NoTorch:  # any import of torch fails: a .llga model needs none
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("torch is blocked here")
sys.meta_path.insert(0, NoTorch())
from llga.__main__ import main
sys.exit(main(sys.argv[1:]))
"""


def _cli_without_torch(args, cwd):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", _NO_TORCH, *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=300)


def test_compile_then_run_and_inspect_without_torch(files, capsys):
    x = str(files / "x.npy")
    out = files / "out" / "conv.llga"
    # (no --threads here: in this process it would change llga's and torch's threads for every later test)
    assert cli.main(["compile", str(files / "conv.pt"), "--input", x, "-o", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    y = files / "out" / "conv_from_llga.npy"
    r = _ok(_cli_without_torch(["run", str(out), "--input", x, "-o", str(y)], str(files)))
    assert "saved llga model" in r.stdout
    model = torch.jit.load(str(files / "conv.pt"))
    with torch.no_grad():
        np.testing.assert_allclose(np.load(y), model(torch.from_numpy(np.load(x))).numpy(), rtol=1e-5, atol=1e-5)
    # inspect reads the input shape from the file when none is given
    r = _ok(_cli_without_torch(["inspect", str(out), "--json"], str(files)))
    report = json.loads(r.stdout)
    assert report["saved"]["meta"]["format"] == "1" and report["saved"]["packed"] > 0
    assert report["partitions"] and report["timing"]["compile_ms"] == 0


def test_compile_int8_with_calibration(files, capsys):
    for i in range(3):
        np.save(files / f"calib{i}.npy", np.random.default_rng(i).standard_normal((1, 3, 8, 8), dtype=np.float32))
    out = files / "out" / "conv_int8.llga"
    args = ["compile", str(files / "conv.pt"), "--input", str(files / "x.npy"), "--precision", "int8", "-o", str(out)]
    for i in range(3):
        args += ["--calibration", str(files / f"calib{i}.npy")]
    isa = llga.cpu_capabilities()["isa"]
    if isa not in VNNI_ISAS:
        # without VNNI llga refuses int8 (test_quantize.py::test_int8_needs_vnni): the CLI says so in one line
        assert cli.main(args) == 2
        err = capsys.readouterr().err
        assert err.startswith("llga compile: PrecisionError: int8 needs a CPU with VNNI") and err.count("\n") == 1
        assert not out.exists()
        return
    assert cli.main(args) == 0
    assert "int8" in capsys.readouterr().out
    assert any(p.precision == "int8" for p in llga.load(out).partitions)


@pytest.mark.parametrize("args, message", [
    (["--precision", "int8"], "needs --calibration"),
    (["--calibration", "x.npy"], "is for --precision int8"),
    (["-o", "model.bin"], "ends in .llga"),
])
def test_compile_user_errors(files, capsys, args, message):
    argv = ["compile", str(files / "conv.pt"), "--input", "1x3x8x8"] + args
    if "-o" not in args:
        argv += ["-o", str(files / "out" / "e.llga")]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("llga compile: ") and message in err and err.count("\n") == 1


def test_a_damaged_model_file_is_a_one_line_error(files, capsys):
    src = files / "out" / "conv.llga"
    if not src.exists():
        assert cli.main(["compile", str(files / "conv.pt"), "--input", "1x3x8x8", "-o", str(src)]) == 0
    bad = files / "out" / "damaged.llga"
    data = bytearray(src.read_bytes())
    bad.write_bytes(bytes(data[: len(data) // 2]))
    capsys.readouterr()
    assert cli.main(["run", str(bad), "--input", "1x3x8x8"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("llga run: cannot load") and "truncated" in err and err.count("\n") == 1


def test_compile_a_torchscript_file_without_torch(files):
    """Where PyTorch is missing, compile reads the archive with llga.load_torchscript."""
    out = files / "out" / "conv_no_torch.llga"
    r = _ok(_cli_without_torch(["compile", str(files / "conv.pt"), "--input", str(files / "x.npy"), "-o", str(out)],
                               str(files)))
    assert "read without PyTorch" in r.stdout
    model = torch.jit.load(str(files / "conv.pt"))
    x = np.load(files / "x.npy")
    with torch.no_grad():
        np.testing.assert_allclose(llga.load(out)(x), model(torch.from_numpy(x)).numpy(), rtol=1e-5, atol=1e-5)
