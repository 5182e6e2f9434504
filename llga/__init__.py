"""llga: a graph compiler for TorchScript graphs, on oneDNN.

    import llga
    g = llga.parse(traced.inlined_graph.str())     # llga.Graph
    g, weights = llga.import_torch(traced)          # graph + {name: numpy array}
    compiled = llga.optimize(traced)                # run it: compiled(numpy_array)

The torch adapter is optional: parsing needs no PyTorch.
"""

from __future__ import annotations

from typing import Union

import os as _os

if _os.environ.get("LLGA_EXTENSION"):
    # Another build of the extension in place of the in-tree one: the sanitizer builds
    # (make test-asan, make test-tsan) run the Python tests through it.
    import importlib.util as _ilu
    import sys as _sys

    _spec = _ilu.spec_from_file_location(__name__ + "._llga", _os.environ["LLGA_EXTENSION"])
    if _spec is None:
        raise ImportError(f"LLGA_EXTENSION={_os.environ['LLGA_EXTENSION']!r} is not a Python extension module")
    _ext = _ilu.module_from_spec(_spec)
    _sys.modules[_spec.name] = _ext
    _spec.loader.exec_module(_ext)

from . import _llga
from ._llga import Block, Graph, Node, TensorConstant, Type, Value
from .accuracy import AccuracyReport, accuracy_report
from .compiler import CompiledGraph, Partition, optimize
from .quantization import quantization_sensitivity, quantize
from .errors import (CompileError, ExecutionError, FormatError, InputError, LlgaError, OutOfMemoryError, ParseError,
                     PassError, UnsupportedOpError, VerifyError, PrecisionError)
from .model_file import load
from .torchscript import TorchScriptModel, load_torchscript
from .passes import PassRecord, list_passes
from .ops import OpSupport, supported_ops
from . import flops, precision, profiler, viz  # noqa: E402  (profiler reads LLGA_VERBOSE once, here)


def _graph_html(self) -> str:
    return viz.html_figure(self)


Graph._repr_html_ = _graph_html  # Jupyter draws graphs; repr() stays the short text form

__version__ = "0.1.0"

__all__ = [
    "Block", "Graph", "Node", "TensorConstant", "Type", "Value",
    "CompiledGraph", "CompileError", "PrecisionError", "ExecutionError", "InputError", "PassError", "PassRecord", "list_passes",
    "LlgaError", "OutOfMemoryError", "FormatError", "load", "load_torchscript", "TorchScriptModel", "ParseError", "UnsupportedOpError", "VerifyError",
    "accuracy_report", "AccuracyReport", "quantize", "quantization_sensitivity", "parse", "parse_type", "import_torch", "optimize", "cpu_capabilities", "set_num_threads", "get_num_threads",
    "set_memory_planning", "memory_planning", "Partition",
    "fusion_patterns", "precision", "profiler", "flops", "viz", "OpSupport", "supported_ops",
]


def fusion_patterns():
    """The fusion pattern table (name, tier, anchors, max_post_ops, lone_ok, then,
    closing, may_close, fp32_only (not formed under precision="bf16" or
    llga.quantize), kernel,
    diagram), highest tier first."""
    return list(_llga.fusion_patterns())


def cpu_capabilities() -> dict:
    """What oneDNN offers on this CPU, asked of oneDNN itself (so
    ``ONEDNN_MAX_CPU_ISA=AVX2`` shows here): ``isa`` (its effective ISA,
    e.g. "avx512_core_amx"), ``winograd`` (oneDNN has fp32 Winograd
    convolutions), ``llga_winograd`` (llga's own AVX2 Winograd F(2x2,3x3)
    can run, used for 3x3 convolutions where oneDNN has none: the CPU has
    AVX2 and FMA, oneDNN's ISA is at least AVX2 and ``LLGA_WINOGRAD`` is not
    "0"), ``llga_dw_int8`` (llga's own int8 depthwise convolution can run:
    oneDNN's ISA is AVX512-VNNI or later and ``LLGA_DW_INT8`` is not "0"; it
    runs int8 3x3-and-similar depthwise convolutions of stride 1 and 32+
    channels whose output stays int8), ``llga_gemv`` (llga's own one-row
    fp32 product can run: oneDNN's ISA is avx512_core or later, or AVX2,
    and ``LLGA_GEMV`` is not "0"; it runs a linear or matmul with a constant
    weight and one row of input, such as a classifier at batch 1, and a
    squeeze-excite block's 1x1 convolutions on one pixel, with a chain of
    relu, clip, linear, sigmoid or swish), ``llga_gemv_bf16`` (the same under ``precision="bf16"``:
    oneDNN's ISA is avx512_core_bf16 or later), ``llga_softmax`` (llga's own
    softmax over the last dim of a float tensor can run, for softmaxes outside
    attention partitions: oneDNN's ISA is avx512_core or later and
    ``LLGA_OWN_SOFTMAX`` is not "0"), ``im2col_conv`` (a 1-D fp32 convolution
    whose windows overlap at stride 2 or more, with 2 MiB of weights or more,
    runs as a copy of its windows and one matmul, as wav2vec2's feature
    extractor: oneDNN's ISA is avx512_core or later and ``LLGA_IM2COL`` is
    not "0"), ``int8_signed`` (how llga.quantize writes a
    convolution's signed activation: "u8+128", the s8 grid shifted into u8 with
    zero point 128, where oneDNN runs that on the kernel it runs s8 on; "s8"
    where a zero point would cost it that kernel (AMX); None without VNNI;
    ``LLGA_INT8_SIGNED=u8|s8`` chooses), ``bf16`` (bf16 convolutions run on a jit kernel: native with
    AVX512-BF16 or AMX, emulated on plain AVX-512; see ``isa``), and
    ``fast_swish`` (llga's own swish runs a final silu on large outputs: the
    CPU has AVX-512F, or AVX2 and FMA, and ``LLGA_FAST_SWISH`` is not "0"),
    ``fast_gelu`` (the same for a final gelu: AVX-512F and ``LLGA_FAST_GELU``
    is not "0"), ``llga_attention`` (the attention pattern runs as llga's fused
    kernel: the CPU has AVX-512 F, BW and VL; otherwise its ops run one by
    one), and ``llga_attention_bf16`` (that kernel's products under
    ``precision="bf16"``: "amx" where oneDNN runs AMX, "avx512_bf16" where it
    runs AVX512-BF16 without AMX, None where it emulates bf16 and the ops run
    one by one), and ``llga_recurrence`` (LSTM, GRU and RNN layers at small
    batches run llga's own recurrence: the CPU has AVX-512F and
    ``LLGA_OWN_RNN`` is not "0"; otherwise oneDNN's RNN primitives)."""
    return dict(_llga.dnnl_capabilities())


def set_num_threads(n: int) -> None:
    """Threads oneDNN may use inside one op (applies to every later call)."""
    _llga.set_num_threads(int(n))


def get_num_threads() -> int:
    return _llga.get_num_threads()


def set_memory_planning(on: bool) -> None:
    """The memory planner (on by default; ``LLGA_MEMORY_PLAN=0`` at start-up
    turns it off): from the third call with an input signature, a call's
    intermediate buffers come from one arena at offsets planned from the
    second call's buffer lifetimes (``compiled.memory["arena"]``)."""
    _llga.set_memory_planning(bool(on))


def memory_planning() -> bool:
    return _llga.memory_planning()


def parse(text: Union[str, bytes], filename: str = "<string>") -> Graph:
    """Parses TorchScript IR text (what ``torch._C.Graph.str()`` prints).

    Raises :class:`llga.ParseError` with ``line``, ``column`` and ``excerpt``.
    """
    if not isinstance(text, (str, bytes)):
        raise TypeError(f"llga.parse takes IR text (str or bytes), got {type(text).__name__}")
    return _llga.parse(text, filename)


def parse_type(text: str) -> Type:
    """Parses one TorchScript type, e.g. ``"Float(1, 3, strides=[3, 1])"``."""
    return _llga.parse_type(text)


def import_torch(obj, *, inline: bool = True):
    """Imports a ``torch.jit.ScriptModule``, ``ScriptFunction`` or ``torch._C.Graph``.

    Returns ``(graph, weights)``: the llga Graph and ``{name: numpy array}``
    sharing memory with the torch tensors. Attribute chains
    (``prim::GetAttr``) are named by their qualified path
    (``layer1.0.conv1.weight``); frozen tensor constants by their value name.
    """
    from ._torch import import_torch as _import

    return _import(obj, inline=inline)
