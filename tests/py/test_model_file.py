"""Model files (.llga): compiled.save(path) and llga.load(path).

Round trips are bit for bit against the in-memory compiled model (fp32,
bf16, llga int8, PyTorch's int8 graphs; saved before and after the first
call, when weights are pre-packed); loading needs no torch; anything wrong
with a file is an llga.FormatError, never a crash.
"""

from __future__ import annotations

import os
import random
import struct
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import torch

import llga
from concurrency import run_concurrently
from llga import zoo

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEADER = 64
ENTRY = 48


class SmallNet(torch.nn.Module):
    """Layouts that weight packing treats differently: a plain conv with batch
    norm (folded), a grouped and a depthwise conv (5-D weight descriptors),
    a square linear (a transposed descriptor that looks plain) and a
    non-square one."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(16)
        self.g = torch.nn.Conv2d(16, 32, 3, padding=1, groups=4)
        self.dw = torch.nn.Conv2d(32, 32, 3, padding=1, groups=32)
        self.fc1 = torch.nn.Linear(32, 32)
        self.fc2 = torch.nn.Linear(32, 10)

    def forward(self, x):
        x = torch.relu(self.bn(self.c1(x)))
        x = torch.relu(self.dw(torch.relu(self.g(x))))
        x = x.mean((2, 3))
        return self.fc2(torch.relu(self.fc1(x)))


def _small():
    torch.manual_seed(0)
    m = SmallNet().eval()
    with torch.no_grad():
        m.bn.running_mean.uniform_(-1, 1)
        m.bn.running_var.uniform_(0.5, 2)
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        return m, torch.jit.trace(m, x), x


def _bert():
    m = zoo.bert_like(vocab=1000, hidden=64, layers=2, heads=4)
    x = zoo.bert_inputs(batch=1, seq=16, vocab=1000)
    with torch.no_grad():
        return torch.jit.trace(m, x, check_trace=False), x


def _torch_int8():
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    m, _, x = _small()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prepared = prepare_fx(m, get_default_qconfig_mapping("fbgemm"), (x,))
        with torch.no_grad():
            for _ in range(4):
                prepared(torch.randn_like(x))
            q = convert_fx(prepared)
            return torch.jit.freeze(torch.jit.trace(q, x).eval()), x


def _flat(y):
    if isinstance(y, (tuple, list)):
        return [a for v in y for a in _flat(v)]
    return [np.array(y, copy=True)]


def _same(a, b):
    a, b = _flat(a), _flat(b)
    return len(a) == len(b) and all(x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True) for x, y in zip(a, b))


def _compile(kind, examples=True):
    """(compiled, numpy inputs); with `examples`, compiled with them as
    example inputs (which calls it once)."""
    ex = lambda x: list(x) if examples else None  # noqa: E731
    if kind == "fp32":
        _, t, x = _small()
        return llga.optimize(t, ex([x])), [x.numpy()]
    if kind == "bert":
        t, x = _bert()
        return llga.optimize(t, ex(x)), [v.numpy() for v in x]
    if kind == "bf16":
        if not llga.cpu_capabilities()["bf16"]:
            pytest.skip("oneDNN has no bf16 kernels on this CPU")
        _, t, x = _small()
        return llga.optimize(t, ex([x]), precision="bf16"), [x.numpy()]
    if kind == "int8":
        _, t, x = _small()
        calib = [torch.randn_like(x) for _ in range(4)]
        try:
            return llga.quantize(t, calib, example_inputs=ex([x])), [x.numpy()]
        except llga.PrecisionError as e:  # no VNNI here (ONEDNN_MAX_CPU_ISA=AVX2)
            pytest.skip(str(e))
    if kind == "torch-int8":
        t, x = _torch_int8()
        return llga.optimize(t, ex([x])), [x.numpy()]
    raise ValueError(kind)


@pytest.mark.parametrize("kind", ["fp32", "bert", "bf16", "int8", "torch-int8"])
@pytest.mark.parametrize("when", ["before_first_call", "after_first_call"])
def test_round_trip_is_bit_for_bit(tmp_path, kind, when):
    compiled, x = _compile(kind, examples=when == "after_first_call")
    path = tmp_path / "m.llga"
    compiled.save(path)
    want = compiled(*x)
    loaded = llga.load(path)
    assert _same(loaded(*x), want)
    assert _same(loaded(*x), want)  # a second call (planned memory) too
    assert loaded.precision == compiled.precision
    assert [p.precision for p in loaded.partitions] == [p.precision for p in compiled.partitions]
    if kind == "int8":
        assert any(p.precision == "int8" for p in loaded.partitions)
    if when == "after_first_call" and kind in ("fp32", "bert"):
        # weights compacted into primitive layouts are stored so, and used as stored here
        assert loaded.saved.packed > 0 and loaded.saved.packed_used
    if when == "before_first_call":
        assert loaded.saved.packed == 0


def test_loaded_model_shows_what_the_compiler_did(tmp_path):
    compiled, x = _compile("fp32")
    compiled(*x)
    compiled.save(tmp_path / "m.llga")
    loaded = llga.load(tmp_path / "m.llga")
    loaded(*x)
    assert str(loaded.graph) == str(compiled.graph)
    assert [(p.pattern, p.ops, p.out_layouts, p.impl, p.layouts) for p in loaded.partitions] == \
        [(p.pattern, p.ops, p.out_layouts, p.impl, p.layouts) for p in compiled.partitions]
    assert [(r.name, r.changed, r.ir, r.notes) for r in loaded.passes] == \
        [(r.name, r.changed, r.ir, r.notes) for r in compiled.passes]
    assert loaded.passes.initial_ir == compiled.passes.initial_ir
    assert loaded.unfused == compiled.unfused
    assert loaded.passes.diff("fuse") == compiled.passes.diff("fuse")
    info = loaded.saved
    assert info.meta["format"] == "1" and info.meta["llga_version"] == llga.__version__
    assert info.meta["cpu_isa"] == llga.cpu_capabilities()["isa"] and info.same_cpu
    assert [i["name"] for i in info.manifest["inputs"]] == compiled.input_names
    assert "pre-packed" in repr(info)


def test_save_a_loaded_model_again(tmp_path):
    compiled, x = _compile("bert")
    compiled(*x)
    compiled.save(tmp_path / "a.llga")
    a = llga.load(tmp_path / "a.llga")
    a(*x)
    a.save(tmp_path / "b.llga")
    b = llga.load(tmp_path / "b.llga")
    assert _same(b(*x), compiled(*x))


def test_loaded_model_takes_other_sizes_but_not_other_ranks(tmp_path):
    m, t, x = _small()
    compiled = llga.optimize(t, [x])
    compiled.save(tmp_path / "m.llga")
    loaded = llga.load(tmp_path / "m.llga")
    x4 = torch.randn(4, 3, 20, 20)
    got = loaded(x4.numpy())
    with torch.no_grad():
        np.testing.assert_allclose(got, m(x4).numpy(), rtol=1e-4, atol=1e-4)
    assert _same(got, compiled(x4.numpy()))
    with pytest.raises(llga.InputError):
        loaded(np.zeros((3, 16, 16), np.float32))


def test_loaded_model_from_threads(tmp_path):
    compiled, x = _compile("bert")
    compiled.save(tmp_path / "m.llga")
    loaded = llga.load(tmp_path / "m.llga")
    want = compiled(*x)
    results = []

    def work(_):
        for _ in range(5):
            results.append(_same(loaded(*x), want))

    run_concurrently(work, 3)
    assert all(results) and len(results) == 15


def _run_python(code: str, env_extra=None):
    env = dict(os.environ, PYTHONPATH=ROOT, **(env_extra or {}))
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_load_and_run_without_torch(tmp_path):
    compiled, x = _compile("bert")
    compiled(*x)
    compiled.save(tmp_path / "m.llga")
    want = _flat(compiled(*x))
    np.savez(tmp_path / "io.npz", **{f"in{i}": a for i, a in enumerate(x)}, **{f"out{i}": a for i, a in enumerate(want)})
    out = _run_python(f"""
        import sys
        class NoTorch:  # any import of torch fails
            def find_spec(self, name, path=None, target=None):
                if name == "torch" or name.startswith("torch."):
                    raise ImportError("torch is blocked in this test")
        sys.meta_path.insert(0, NoTorch())
        import numpy as np, llga
        llga.set_num_threads({llga.get_num_threads()})  # as the outputs were made: their last bits depend on it
        m = llga.load({str(tmp_path / 'm.llga')!r})
        z = np.load({str(tmp_path / 'io.npz')!r})
        y = m(z["in0"], z["in1"])
        y = list(y) if isinstance(y, tuple) else [y]
        assert len(y) == {len(_flat(compiled(*x)))} and all(np.array_equal(a, z[f"out{{i}}"]) for i, a in enumerate(y))
        assert not any(k == "torch" or k.startswith("torch.") for k in sys.modules)
        print("ok", m.saved.packed_used)
    """)
    assert out.split() == ["ok", "True"]


def test_another_cpu_repacks_the_weights(tmp_path):
    """Saved after a call here (pre-packed for this CPU), loaded where oneDNN
    runs another ISA: the weights are written back plain and the kernels pack
    them their way, with the same result as a file saved with plain weights."""
    if llga.cpu_capabilities()["isa"] in ("avx2", "sse41", "any"):
        pytest.skip("this CPU's ISA is already AVX2 or lower: no other ISA to emulate")
    m, t, x = _small()
    compiled = llga.optimize(t, [x])
    compiled.save(tmp_path / "plain.llga")
    compiled(x.numpy())
    compiled.save(tmp_path / "packed.llga")
    np.save(tmp_path / "x.npy", x.numpy())
    out = _run_python(f"""
        import numpy as np, llga
        x = np.load({str(tmp_path / 'x.npy')!r})
        a = llga.load({str(tmp_path / 'packed.llga')!r})
        b = llga.load({str(tmp_path / 'plain.llga')!r})
        assert a.saved.packed > 0 and not a.saved.packed_used and not a.saved.same_cpu, a.saved
        ya, yb = a(x), b(x)
        assert np.array_equal(ya, yb), np.abs(ya - yb).max()
        np.save({str(tmp_path / 'y.npy')!r}, ya)
        print("ok")
    """, {"ONEDNN_MAX_CPU_ISA": "AVX2"})
    assert out.strip() == "ok"
    with torch.no_grad():
        np.testing.assert_allclose(np.load(tmp_path / "y.npy"), m(x).numpy(), rtol=1e-4, atol=1e-4)


# ---- bad files -------------------------------------------------------------

@pytest.fixture(scope="module")
def saved_file(tmp_path_factory):
    compiled, x = _compile("fp32")
    compiled(*x)
    path = tmp_path_factory.mktemp("mf") / "m.llga"
    compiled.save(path)
    return path.read_bytes(), x, compiled(*x)


def _sections(data: bytes):
    count = struct.unpack_from("<I", data, 12)[0]
    out = {}
    for i in range(count):
        e = HEADER + i * ENTRY
        name = data[e:e + 16].rstrip(b"\0").decode()
        off, size = struct.unpack_from("<QQ", data, e + 16)
        out[name] = (off, size)
    return out


def _expect_format_error(tmp_path, data: bytes, match: str, **kw):
    p = tmp_path / "bad.llga"
    p.write_bytes(data)
    with pytest.raises(llga.FormatError, match=match) as e:
        llga.load(p, **kw)
    assert str(p) in str(e.value)


def test_not_a_model_file(tmp_path):
    _expect_format_error(tmp_path, b"", "not an llga model file")
    _expect_format_error(tmp_path, b"PK\x03\x04 a zip archive, perhaps a torch.jit.save file", "not an llga model file")
    with pytest.raises(FileNotFoundError):
        llga.load(tmp_path / "missing.llga")
    with pytest.raises(IsADirectoryError):
        llga.load(tmp_path)


def test_truncated_files(tmp_path, saved_file):
    data, _, _ = saved_file
    for n in (8, 40, HEADER, HEADER + 10, len(data) // 2, len(data) - 1):
        _expect_format_error(tmp_path, data[:n], "truncated")


def test_newer_format_version(tmp_path, saved_file):
    data = bytearray(saved_file[0])
    struct.pack_into("<I", data, 8, 2)
    _expect_format_error(tmp_path, bytes(data), "format version 2 is newer than this llga reads")


@pytest.mark.parametrize("section", ["meta", "ir", "source", "tensors", "names", "passes", "python"])
def test_a_corrupted_section_is_named(tmp_path, saved_file, section):
    data = bytearray(saved_file[0])
    off, size = _sections(bytes(data))[section]
    if size == 0:
        pytest.skip(f"section {section} is empty in this file")
    data[off + size // 2] ^= 0x10
    _expect_format_error(tmp_path, bytes(data), f"section '{section}' is corrupted")


def test_corrupted_header_and_table(tmp_path, saved_file):
    data = bytearray(saved_file[0])
    data[20] ^= 1  # file size
    _expect_format_error(tmp_path, bytes(data), "header's checksum")
    data = bytearray(saved_file[0])
    data[HEADER + 20] ^= 1  # an offset in the table
    _expect_format_error(tmp_path, bytes(data), "section table's checksum")


def test_corrupted_weights_are_found_on_request(tmp_path, saved_file):
    data, x, want = saved_file
    data = bytearray(data)
    off, size = _sections(bytes(data))["weights"]
    data[off + 100] ^= 0x40
    p = tmp_path / "w.llga"
    p.write_bytes(bytes(data))
    # Without verify the weights are mapped as they are (documented): it loads.
    llga.load(p)
    with pytest.raises(llga.FormatError, match=r"tensor \d+ .* corrupted"):
        llga.load(p, verify=True)
    with pytest.raises(llga.FormatError, match="corrupted"):
        llga.model_file.inspect(p)


def test_random_damage_never_crashes(tmp_path, saved_file):
    """Flipped bytes, cut files and spliced garbage: FormatError or (where only
    weight bytes changed) a model that loads; never a crash or another error."""
    data, x, _ = saved_file
    rng = random.Random(1234)
    p = tmp_path / "fuzz.llga"
    weights_at = _sections(data)["weights"][0]
    for i in range(300):
        d = bytearray(data)
        op = i % 3
        if op == 0:
            for _ in range(rng.randint(1, 8)):
                d[rng.randrange(len(d))] ^= 1 << rng.randrange(8)
        elif op == 1:
            d = d[:rng.randrange(len(d))]
        else:
            at = rng.randrange(weights_at)
            d[at:at + 16] = bytes(rng.randrange(256) for _ in range(16))
        p.write_bytes(bytes(d))
        try:
            m = llga.load(p)
        except llga.FormatError:
            continue
        m(*x)  # only the weights can differ here: it runs


def test_save_errors_leave_nothing_behind(tmp_path):
    compiled, x = _compile("fp32", examples=False)
    with pytest.raises(FileNotFoundError):
        compiled.save(tmp_path / "no" / "such" / "dir" / "m.llga")
    target = tmp_path / "m.llga"
    compiled.save(target)
    first = target.read_bytes()
    compiled(*x)
    compiled.save(target)  # replaced whole
    assert target.read_bytes() != first
    assert sorted(os.listdir(tmp_path)) == ["m.llga"]
    assert _same(llga.load(target)(*x), compiled(*x))


def test_inspect_reads_without_building(tmp_path, saved_file):
    data, _, _ = saved_file
    p = tmp_path / "m.llga"
    p.write_bytes(data)
    info = llga.model_file.inspect(p)
    assert info.tensors > 0 and info.weight_bytes > 0 and info.file_bytes == len(data)
    assert "fuse" in info.passes
    assert "llga::FusionGroup" in str(info.graph)


def test_saves_from_threads_to_one_path(tmp_path):
    compiled, x = _compile("fp32")
    target = tmp_path / "m.llga"

    def save(_):
        for _ in range(5):
            compiled.save(target)

    run_concurrently(save, 4)  # re-raises what a thread raised
    assert sorted(os.listdir(tmp_path)) == ["m.llga"]  # no temporary file left
    assert _same(llga.load(target, verify=True)(*x), compiled(*x))  # whole, not interleaved
