"""The benchmark harness runs end to end on the tiny model (times not judged:
the bench is run by hand; this only keeps the harness from rotting)."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    r = subprocess.run([sys.executable, "-m", "bench", "--models", "tiny", "--runs", "2", "--max-seconds", "2",
                        "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return out, json.loads((out / "latest.json").read_text()), r.stdout


def test_writes_json_markdown_and_chart(tiny_run):
    out, run, stdout = tiny_run
    assert {"latest.json", "latest.md", "latest.png"} <= set(os.listdir(out))
    assert (out / "latest.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "latest.md").read_text()
    assert "| tiny | 1 |" in md and "geometric mean" in md
    assert md.strip() in stdout  # the table is also printed


def test_every_system_checked_and_timed(tiny_run):
    _, run, _ = tiny_run
    (res,) = run["results"]
    llga = res["systems"]["llga"]
    assert llga["ok"] and llga["rel_err"] <= 1e-4
    assert llga["calls"] >= 2 and 0 < llga["min_ms"] <= llga["median_ms"]
    for s in ("eager", "ofi"):
        assert res["systems"][s]["ok"], res["systems"][s]
    ort = res["systems"]["ort"]
    if shutil.which("node") is None:
        assert not ort["ok"] and "node" in ort["error"]
    else:
        assert ort["ok"], ort
    # FLOPs counted by llga from the graph: 32 x 28 x 64 multiply-adds.
    assert res["flops"] == 2 * 32 * 28 * 64
    assert res["llga_memory"]["peak_activations"]
    assert run["limit"]["f32"]["gflops"] > 1 and run["limit"]["f32"]["impl"]
    # Each runner reports its own peak RSS (not the driver's).
    assert llga["maxrss_mib"] < res["systems"]["ofi"]["maxrss_mib"]
    # and the CPU it used while the others were timed (threads left spinning would show here)
    for s in ("llga", "eager", "ofi"):
        assert res["systems"][s]["idle_cpu_share"] >= 0


def test_rejects_unknown_model():
    r = subprocess.run([sys.executable, "-m", "bench", "--models", "nope"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2 and "unknown model 'nope'" in r.stderr



def test_ratios_are_paired_by_round(tiny_run):
    _, run, stdout = tiny_run
    (res,) = run["results"]
    assert len(res["systems"]["llga"]["round_ms"]) >= 2
    assert set(res["paired"]) >= {"ofi", "eager"}
    assert f"{res['paired']['ofi']:.2f}x" in stdout  # the table's llga/OFI column

    from bench.suite import paired_ratios

    # The machine turns slow in round 3, after llga's block and before ORT's:
    # llga's median lands on a slow round, ORT's on a fast one (1.8x unpaired);
    # paired by round, every round but that one says 0.9x.
    systems = {"llga": {"ok": True, "round_ms": [9, 9, 18, 18, 18]},
               "ort": {"ok": True, "round_ms": [10, 10, 10, 20, 20]},
               "ofi": {"ok": False}}
    assert paired_ratios(systems) == {"ort": 0.9}


def test_several_thread_counts_and_batches_report_scaling_and_per_image_times(tmp_path):
    r = subprocess.run([sys.executable, "-m", "bench", "--models", "tiny", "--runs", "2", "--max-seconds", "2",
                        "--threads", "1,2", "--batch", "1,4", "--systems", "llga,eager", "--out", str(tmp_path)],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    run = json.loads((tmp_path / "latest.json").read_text())
    assert run["threads"] == [1, 2]
    assert sorted((x["batch"], x["threads"]) for x in run["results"]) == [(1, 1), (1, 2), (4, 1), (4, 2)]
    md = (tmp_path / "latest.md").read_text()
    assert "| tiny | 4 | 2 |" in md and "geometric mean, batch 4, 1 threads" in md
    assert "Thread scaling, 1 -> 2 threads" in md
    (row,) = [line for line in md.splitlines() if line.startswith("| tiny | 4 | 1 |")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    llga_ms, per_image = float(cells[4]), float(cells[10])
    assert per_image == pytest.approx(llga_ms / 4, rel=0.02, abs=0.001)
    assert sum(line.startswith("| tiny |") for line in md.split("Thread scaling")[1].splitlines()) == 2


def test_rejects_bad_thread_counts():
    r = subprocess.run([sys.executable, "-m", "bench", "--models", "tiny", "--threads", "two"], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 2 and "--threads takes comma-separated counts" in r.stderr


def test_scripted_loop_bench_checks_parity_and_writes_its_table(tmp_path):
    # Few trips and rounds: only that every program matches PyTorch and a row comes out.
    from bench.script_programs import PROGRAMS

    table = tmp_path / "script.md"
    r = subprocess.run([sys.executable, "-m", "bench.script_bench", "--trips", "30", "--runs", "2", "--write", str(table)],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    text = table.read_text()
    for name in PROGRAMS:
        assert f"| {name} |" in text
    assert "geometric mean llga / PyTorch" in text


def test_op_compare_pairs_convolutions_by_shape_then_order():
    """bench.op_compare pairs llga's convolutions with ONNX Runtime's by
    output and weight shape: a residual block's shortcut that ORT runs first
    still meets its own; one without a twin stays unpaired."""
    from bench.op_compare import pair

    def conv(out, weight, us):
        return {"out": out, "weight": weight, "us": us}

    main1, main2 = conv((1, 64, 56, 56), (64, 64, 1, 1), 10.0), conv((1, 64, 56, 56), (64, 64, 1, 1), 11.0)
    short = conv((1, 256, 56, 56), (256, 64, 1, 1), 20.0)
    only_llga = conv((1, 8, 7, 7), (8, 8, 3, 3), 1.0)
    ort_main1, ort_main2 = conv((1, 64, 56, 56), (64, 64, 1, 1), 9.0), conv((1, 64, 56, 56), (64, 64, 1, 1), 12.0)
    ort_short = conv((1, 256, 56, 56), (256, 64, 1, 1), 19.0)
    rows = pair([main1, short, main2, only_llga], [ort_short, ort_main1, ort_main2])
    assert [(i, a["us"], b["us"]) for i, a, b in rows] == [(0, 10.0, 9.0), (1, 20.0, 19.0), (2, 11.0, 12.0)]


def test_ab_times_two_builds_paired_by_round(tmp_path):
    """bench.ab: side A from another directory's llga package (here a link to
    this one), side B this checkout under an environment variable; both
    checked against PyTorch, the rounds paired, the import verified."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "llga").symlink_to(os.path.join(ROOT, "llga"))
    out = tmp_path / "ab.json"
    r = subprocess.run([sys.executable, "-m", "bench.ab", "--model", "tiny", "--runs", "6", "--a", str(other),
                        "--b-env", "LLGA_MEMORY_PLAN=0", "--json", str(out)], cwd=ROOT, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "B / A, paired by round:" in r.stdout and "95% interval of the median" in r.stdout
    (res,) = json.loads(out.read_text())["results"]
    a, b = res["sides"]["A"], res["sides"]["B"]
    assert a["llga_file"] == str(other / "llga" / "__init__.py")
    assert b["llga_file"] == os.path.join(ROOT, "llga", "__init__.py") and b["env"] == {"LLGA_MEMORY_PLAN": "0"}
    assert len(a["round_ms"]) == len(b["round_ms"]) == 6
    assert res["ratio_low"] <= res["ratio"] <= res["ratio_high"]
    assert res["verdict"] in ("B faster", "B slower", "no difference beyond the noise")


def test_ab_rejects_a_directory_without_a_built_llga(tmp_path):
    r = subprocess.run([sys.executable, "-m", "bench.ab", "--model", "tiny", "--a", str(tmp_path)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "no llga package there" in r.stderr
    (tmp_path / "llga").mkdir()
    (tmp_path / "llga" / "__init__.py").write_text("")
    r = subprocess.run([sys.executable, "-m", "bench.ab", "--model", "tiny", "--a", str(tmp_path)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "llga is not built there" in r.stderr
    # a package that does not import: the side's worker fails, and the error names the side and the cause
    (tmp_path / "llga" / "__init__.py").write_text("raise ImportError('a broken build')\n")
    (tmp_path / "llga" / "_llga.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    r = subprocess.run([sys.executable, "-m", "bench.ab", "--model", "tiny", "--runs", "3", "--a", str(tmp_path)],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode != 0 and "side A" in r.stderr and "a broken build" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr.split("bench.ab:")[-1]


def test_ab_interval_of_the_median_is_the_sign_tests():
    from bench.report import median_interval

    # Order statistics 2 and 9 of 10 (1-based), 6 and 15 of 20: the sign test's 95% interval.
    assert median_interval([float(i) for i in range(10)]) == (1.0, 8.0)
    assert median_interval([float(i) for i in range(20)]) == (5.0, 14.0)
    assert median_interval([1.0, 2.0, 3.0]) == (1.0, 3.0)  # too few rounds: the whole range


def test_ab_refuses_to_compare_with_a_side_that_spins_while_waiting():
    """OMP_WAIT_POLICY=active leaves B's threads spinning while A runs: the
    ratio would measure that, so the verdict says the sides are not comparable."""
    r = subprocess.run([sys.executable, "-m", "bench.ab", "--model", "tiny", "--runs", "3", "--b-env",
                        "OMP_WAIT_POLICY=active"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "not comparable: B used" in r.stdout, r.stdout


def test_ab_over_several_models_ends_with_a_table(tmp_path):
    out = tmp_path / "ab.json"
    r = subprocess.run([sys.executable, "-m", "bench.ab", "--models", "tiny,tiny", "--runs", "3", "--json", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "| model | B / A | 95% interval | verdict |" in r.stdout and "| geometric mean |" in r.stdout
    res = json.loads(out.read_text())
    assert [x["model"] for x in res["results"]] == ["tiny", "tiny"] and res["geomean_ratio"] > 0
    r = subprocess.run([sys.executable, "-m", "bench.ab", "--models", "tiny,nope"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2 and "unknown model 'nope'" in r.stderr


def test_report_prints_each_ratios_interval_from_the_rounds():
    """A committed run (20 rounds): the lines under the fp32 and int8 tables
    are the sign test's intervals of the rounds' paired ratios."""
    from bench import report

    with open(os.path.join(ROOT, "bench", "results", "zen4-int8-intervals.json")) as f:
        run = json.load(f)
    md = report.markdown(run)
    res = {r["model"]: r["systems"] for r in run["results"]}
    sy = res["mobilenet_v2"]
    lo, hi = report.median_interval(sorted(a / b for a, b in zip(sy["llga-int8"]["round_ms"], sy["llga"]["round_ms"])))
    assert lo <= run["results"][2]["paired_int8"]["llga"] <= hi
    line = next(l for l in md.splitlines() if l.startswith("llga int8 / llga fp32, 95% interval"))
    assert f"mobilenet_v2 {lo:.2f}-{hi:.2f}" in line
    assert any(l.startswith("llga / ONNX Runtime, 95% interval") for l in md.splitlines())
