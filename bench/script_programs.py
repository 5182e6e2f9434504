"""Scripted programs whose time is the interpreter's, not the kernels': loops
of Python-number work, lists, dicts and ops on tiny tensors. Each takes
(x: Tensor, n: int) and returns a tensor that depends on every trip, so a
wrong trip shows as a parity error. `python -m bench.script_bench` times them
in llga against PyTorch's TorchScript interpreter."""

from __future__ import annotations

import math
from typing import Dict, List

import torch


@torch.jit.script
def int_counters(x: torch.Tensor, n: int):
    s = 0
    acc = 0.0
    xs: List[int] = []
    for i in range(n):
        if i % 3 == 0:
            s = s + i * 2
        else:
            s = s - 1
        acc = acc + float(s) * 0.5
        xs.append(s % 7)
    return x + acc + float(len(xs))


@torch.jit.script
def float_recurrence(x: torch.Tensor, n: int):
    a = 1.0
    b = 0.0
    for i in range(n):
        a = math.sqrt(a * a + 1.0) / (1.0 + float(i))
        b = max(b, a) + min(a, 0.5)
        if b > 100.0:
            b = b - 100.0
    return x + a + b


@torch.jit.script
def list_fibonacci(x: torch.Tensor, n: int):
    xs: List[int] = [0, 1]
    for i in range(n):
        xs.append((xs[i] + xs[i + 1]) % 1000)
    t = 0
    for v in xs:
        t += v
    return x * float(t)


@torch.jit.script
def dict_histogram(x: torch.Tensor, n: int):
    d: Dict[int, int] = {}
    for i in range(n):
        k = i % 17
        if k in d:
            d[k] = d[k] + i
        else:
            d[k] = i
    t = 0
    for k in d.keys():
        t += d[k]
    return x + float(t)


@torch.jit.script
def tiny_tensor_steps(x: torch.Tensor, n: int):
    h = x
    for i in range(n):
        h = torch.tanh(h * 0.5 + float(i) * 0.001)
    return h


PROGRAMS = {
    "int_counters": (int_counters, "ints: %, *, +, branch, list append"),
    "float_recurrence": (float_recurrence, "floats: sqrt, /, max, min, branch"),
    "list_fibonacci": (list_fibonacci, "list indexing and append, for-in over a list"),
    "dict_histogram": (dict_histogram, "dict get/set/contains, for-in over keys"),
    "tiny_tensor_steps": (tiny_tensor_steps, "tanh(h * 0.5 + c) on a 4x4 tensor per trip"),
}
