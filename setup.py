"""setuptools drives CMake to build llga._llga (after pybind11's cmake_example).

    python3 -m venv --system-site-packages .venv
    .venv/bin/pip install --no-build-isolation .
"""

import os
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


class CMakeExtension(Extension):
    def __init__(self, name: str):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        out_dir = Path(self.get_ext_fullpath(ext.name)).resolve().parent
        build_dir = ROOT / "build-pip"
        build_dir.mkdir(exist_ok=True)
        # LLGA_BUILD_TYPE: another CMake build type (`make test-install` asks for
        # RelWithDebInfo, `make build`'s flags, so that the compiler cache serves it)
        cfg = os.environ.get("LLGA_BUILD_TYPE") or ("Debug" if self.debug else "Release")
        subprocess.run(
            ["cmake", "-S", str(ROOT), "-B", str(build_dir), "-G", "Ninja",
             f"-DCMAKE_BUILD_TYPE={cfg}", f"-DPython3_EXECUTABLE={sys.executable}",
             f"-DLLGA_PY_OUTPUT_DIR={out_dir}", "-DLLGA_BUILD_TESTS=OFF"],
            check=True,
        )
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
        subprocess.run(["cmake", "--build", str(build_dir), "--target", "_llga", "-j", jobs], check=True)


setup(ext_modules=[CMakeExtension("llga._llga")], cmdclass={"build_ext": CMakeBuild})
