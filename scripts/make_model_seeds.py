"""Writes the seed files of the model-file fuzzer (src/fuzz/model_file_fuzzer.cpp)
to tests/fuzz/model_seeds/: small .llga files of a few kinds (weights plain
and pre-packed, a fusion group, control flow). Needs llga and numpy only.

    /usr/bin/python3 scripts/make_model_seeds.py

Run it again when the file format changes (kModelFormatVersion).
"""

from __future__ import annotations

import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import llga  # noqa: E402

CONV = """graph(%x : Float(1, 2, 6, 6, strides=[72, 36, 6, 1], requires_grad=0, device=cpu)):
  %w : Float(4, 2, 3, 3, strides=[18, 9, 3, 1], requires_grad=0, device=cpu) = prim::Constant[value=<Tensor>]()
  %b : Float(4, strides=[1], requires_grad=0, device=cpu) = prim::Constant[value=<Tensor>]()
  %fw : Float(4, 4, strides=[4, 1], requires_grad=0, device=cpu) = prim::Constant[value=<Tensor>]()
  %s : int[] = prim::Constant[value=[1, 1]]()
  %p : int[] = prim::Constant[value=[1, 1]]()
  %g : int = prim::Constant[value=1]()
  %y : Float(1, 4, 6, 6, strides=[144, 36, 6, 1], requires_grad=0, device=cpu) = aten::conv2d(%x, %w, %b, %s, %p, %s, %g)
  %r : Float(1, 4, 6, 6, strides=[144, 36, 6, 1], requires_grad=0, device=cpu) = aten::relu(%y)
  %dims : int[] = prim::Constant[value=[2, 3]]()
  %keep : bool = prim::Constant[value=0]()
  %none : NoneType = prim::Constant()
  %m : Float(1, 4, strides=[4, 1], requires_grad=0, device=cpu) = aten::mean(%r, %dims, %keep, %none)
  %o : Float(1, 4, strides=[4, 1], requires_grad=0, device=cpu) = aten::linear(%m, %fw, %none)
  return (%o)
"""

LOOP = """graph(%x : Tensor, %n : int):
  %one : int = prim::Constant[value=1]()
  %true : bool = prim::Constant[value=1]()
  %y : Tensor = prim::Loop(%n, %true, %x)
    block0(%i : int, %acc : Tensor):
      %z : Tensor = aten::mul(%acc, %acc)
      %c : bool = aten::lt(%i, %n)
      %t : Tensor = prim::If(%c)
        block0():
          -> (%z)
        block1():
          %s : Tensor = aten::add(%z, %acc, %one)
          -> (%s)
      -> (%true, %t)
  return (%y)
"""


def main() -> int:
    out = os.path.join(ROOT, "tests", "fuzz", "model_seeds")
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(0)
    params = {"w": rng.standard_normal((4, 2, 3, 3), dtype=np.float32),
              "b": rng.standard_normal(4, dtype=np.float32),
              "fw": rng.standard_normal((4, 4), dtype=np.float32)}
    x = rng.standard_normal((1, 2, 6, 6), dtype=np.float32)
    conv = llga.optimize(CONV, params=params)
    conv.save(os.path.join(out, "conv_plain.llga"))
    conv(x)
    conv.save(os.path.join(out, "conv_packed.llga"))
    loop = llga.optimize(LOOP)
    loop.save(os.path.join(out, "loop.llga"))
    for f in sorted(os.listdir(out)):
        print(f, os.path.getsize(os.path.join(out, f)), "bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
