#!/usr/bin/env bash
# `pip install .` works offline, without build isolation, in a venv made from
# Debian's Python that sees Debian's packages; the installed llga imports and parses.
set -euo pipefail
py=${1:-/usr/bin/python3}
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/build-pip/venv"
rm -rf "$venv"
mkdir -p "$root/build-pip"
"$py" -m venv --system-site-packages "$venv"
(cd "$root" && "$venv/bin/pip" install --no-build-isolation --no-index -q .)
cd /tmp
"$venv/bin/python" - <<'PY'
import llga, pathlib
where = pathlib.Path(llga.__file__).resolve()
assert "site-packages" in str(where), f"imported llga from {where}, not the venv"
g = llga.parse("graph(%x : Float(2, 3)):\n  %y : Tensor = aten::relu(%x)\n  return (%y)\n")
assert [n.kind for n in g.nodes()] == ["aten::relu"]
from llga import torchscript
assert "aten::conv2d" in torchscript._schemas()  # package data: load_torchscript's operator signatures
print(f"check_install: llga {llga.__version__} installed at {where.parent} and parses")
PY
