#!/usr/bin/env bash
# Installs the Debian packages llga needs, if any are missing. Idempotent and
# quick when everything is present (dpkg-query only, no apt).
#
#   scripts/bootstrap.sh                 build + test dependencies
#   scripts/bootstrap.sh bench           also what the benchmarks need
#   scripts/bootstrap.sh notebook        also Jupyter (make notebook)
#   scripts/bootstrap.sh fresh           also what make test-fresh needs (mmdebstrap)
#   scripts/bootstrap.sh --list [GROUP]  prints the packages, one a line, installs nothing
#
# Every system file the build and the tests use must come from a package
# listed here, one of their dependencies or Debian's base system:
# scripts/check_deps.py (run by make test) proves it on the files actually used.
set -euo pipefail

base=(
  build-essential cmake ninja-build ccache pkg-config git
  python3-dev python3-venv python3-pip python3-setuptools python3-wheel
  python3-numpy python3-pytest pybind11-dev
  python3-defusedxml  # Pillow (under torchvision, matplotlib) imports it when present: present everywhere, machines agree
  libdnnl-dev ocl-icd-opencl-dev  # libdnnl-dev's CMake config needs OpenCL, which it only Recommends
  libfmt-dev libgtest-dev
  python3-torch python3-torchvision python3-torchaudio  # torchaudio: the audio models the op tests run
  python3-hypothesis  # the differential op test generates its cases
  python3-sklearn  # its bundled digits dataset: real accuracy of bf16 (tests/py/test_digits.py)
  python3-dask python3-distributed  # llga.dask: batch inference on a Dask cluster (tests/py/test_dask.py)
  clang libclang-rt-14-dev libomp-14-dev  # the fuzz build (clang, with the runtime's OpenMP)
  python3-tqdm python3-matplotlib nodejs  # the bench harness, which the tests run once on a tiny model
  graphviz python3-nbformat python3-nbclient python3-ipykernel chromium  # llga.viz, notebooks, the browser test
)
bench=(libopenblas0-pthread python3-onnx)
notebook=(jupyter-notebook)
fresh=(mmdebstrap)

list=0
if [[ "${1:-}" == "--list" ]]; then
  list=1
  shift
fi
packages=("${base[@]}")
# Debian's npm, unless an npm is already there (NodeSource's nodejs ships its own and conflicts with it).
if ((list)) || ! command -v npm >/dev/null 2>&1; then packages+=(npm); fi
for group in "$@"; do
  case "$group" in
    bench) packages+=("${bench[@]}") ;;
    notebook) packages+=("${notebook[@]}") ;;
    fresh) packages+=("${fresh[@]}") ;;
    *) echo "bootstrap: unknown group '$group' (bench, notebook, fresh)" >&2; exit 2 ;;
  esac
done

if ((list)); then
  printf '%s\n' "${packages[@]}"
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -q '^installed$' || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  exit 0
fi
echo "bootstrap: installing ${missing[*]}" >&2
sudo=""
if [[ "$(id -u)" -ne 0 ]]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "bootstrap: done" >&2
