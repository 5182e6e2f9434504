#!/usr/bin/env bash
# Installs the Debian packages llga needs, if any are missing. Idempotent and
# quick when everything is present (dpkg-query only, no apt).
#
#   scripts/bootstrap.sh            build + test dependencies
#   scripts/bootstrap.sh bench      also what the benchmarks need
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  python3-dev python3-venv python3-pip python3-setuptools python3-wheel
  python3-numpy python3-pytest pybind11-dev
  libdnnl-dev ocl-icd-opencl-dev libfmt-dev libgtest-dev  # libdnnl-dev's CMake config needs OpenCL (only a Recommends)
  python3-torch python3-torchvision
  clang libclang-rt-14-dev
  python3-tqdm python3-matplotlib nodejs  # the bench harness, which the tests run once on a tiny model
  graphviz python3-nbformat python3-nbclient python3-ipykernel chromium  # llga.viz, notebooks, the browser test
)
# Debian's npm, unless an npm is already there (NodeSource's nodejs ships its own and conflicts with it).
command -v npm >/dev/null 2>&1 || packages+=(npm)
if [[ "${1:-}" == "bench" ]]; then
  packages+=(libopenblas0-pthread python3-onnx)
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
