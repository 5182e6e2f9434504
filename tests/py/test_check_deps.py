"""scripts/check_deps.py on the real build: it passes, and it fails when bootstrap.sh would lack a
package that the build uses (ocl-icd-opencl-dev, which libdnnl-dev only Recommends; libgtest-dev)."""

import importlib.util
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "check_deps.py")
BUILD = os.path.join(ROOT, "build")

pytestmark = pytest.mark.skipif(not os.path.exists(os.path.join(BUILD, "build.ninja")),
                                reason="no Ninja build in build/ (make build)")


@pytest.fixture(scope="module")
def check_deps():
    # One module for every run: dpkg's file index and the evidence are read once (cached in it).
    spec = importlib.util.spec_from_file_location("check_deps", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run(check_deps, capsys, *args):
    code = check_deps.main(["--build", BUILD, *args])
    return code, capsys.readouterr().out


def test_build_and_tests_use_only_bootstrapped_packages(check_deps, capsys):
    code, out = run(check_deps, capsys)
    assert code == 0, out
    assert "headers" in out and "ldd" in out and "cmake" in out


def test_fails_without_opencl_dev(check_deps, capsys):
    code, out = run(check_deps, capsys, "--without", "ocl-icd-opencl-dev")
    assert code == 1, out
    assert "/usr/lib/x86_64-linux-gnu/libOpenCL.so: ocl-icd-opencl-dev" in out
    assert "cmake:OpenCL_LIBRARY" in out
    assert "hint: add ocl-icd-opencl-dev to scripts/bootstrap.sh" in out


def test_fails_without_gtest(check_deps, capsys):
    code, out = run(check_deps, capsys, "--without", "libgtest-dev")
    assert code == 1, out
    assert "/usr/include/gtest/gtest.h: libgtest-dev  [headers]" in out
    assert "hint: add libgtest-dev to scripts/bootstrap.sh" in out


def test_missing_build_dir_is_a_usage_error(tmp_path):
    r = subprocess.run([sys.executable, SCRIPT, "--build", str(tmp_path / "nope")], capture_output=True, text=True)
    assert r.returncode == 2 and "make build" in r.stderr
