"""scripts/zoo_precision.py, the low-precision sweep over torchvision's
classifiers (make test-zoo-bf16, make test-zoo-int8), on one model: its row
passes where this CPU has the kernels, it refuses to run where it has none,
and its verdict fails a row below the cosine bar or with too many fp32
fallbacks."""

import os
import subprocess
import sys

import pytest

import llga

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "zoo_precision.py")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import zoo_precision as sweep  # noqa: E402


def run(precision, *extra, env=None):
    return subprocess.run([sys.executable, SCRIPT, "--precision", precision, *extra], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=600,
                          env=dict(os.environ, PYTHONPATH=ROOT, **(env or {})))


@pytest.mark.parametrize("precision", ["bf16", "int8"])
def test_resnet18_row(precision):
    why = sweep.unsupported(precision)
    if why:
        pytest.skip(why)
    r = run(precision, "--models", "resnet18")
    assert r.returncode == 0, r.stdout
    row = next(line for line in r.stdout.splitlines() if line.startswith("| resnet18 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    partitions, ran, cosine, status = int(cells[2]), int(cells[3]), float(cells[5]), cells[8]
    assert partitions >= 15 and ran == partitions and status == "ok", row
    assert cosine >= sweep.MIN_COSINE[precision], row
    assert "1 of 1 models pass" in r.stdout


def test_refuses_where_oneDNN_has_no_kernels():
    # AVX2: no bf16 and no VNNI kernels; the sweep says so and runs nothing (exit 2), rather than
    # fail every model or pass fp32 runs as low-precision ones.
    for precision, says in (("bf16", "has no bf16 kernels"), ("int8", "has no VNNI int8 kernels")):
        r = run(precision, "--models", "resnet18", env={"ONEDNN_MAX_CPU_ISA": "AVX2"})
        assert r.returncode == 2 and says in r.stdout and "| resnet18 |" not in r.stdout, r.stdout


def test_verdict():
    good = {"model": "m", "input": "1x3x8x8", "partitions": 20, "ran_low": 19, "fallbacks": ["fp32: no kernel"],
            "llga_kernels": [], "cosine": 0.9995, "max_rel_err": 0.01, "top5": 5}
    assert sweep.passed(good, "bf16") and sweep.passed(good, "int8")
    assert not sweep.passed(dict(good, cosine=0.998), "bf16") and sweep.passed(dict(good, cosine=0.998), "int8")
    assert not sweep.passed(dict(good, cosine=0.98), "int8")
    assert not sweep.passed(dict(good, ran_low=17), "bf16")  # 3 of 20 on fp32: more than a tenth
    assert not sweep.passed(dict(good, partitions=0, ran_low=0), "bf16")  # nothing in low precision
    assert not sweep.passed({"model": "m", "error": "RuntimeError: x"}, "bf16")
    table = sweep.markdown([good, dict(good, model="n", cosine=0.99), {"model": "e", "error": "E"}], "bf16", "abc", "cmd")
    assert "| m | 1x3x8x8 | 20 | 19 | - | 0.99950 | 0.010 | 5/5 | ok |" in table
    assert "| n |" in table and "FAIL: fp32: no kernel" in table and "| e | | | | | | | | FAIL: E |" in table
    assert "1 of 3 models pass" in table and "lowest cosine 0.99000 (n)" in table
    assert llga.cpu_capabilities()["isa"] in table
