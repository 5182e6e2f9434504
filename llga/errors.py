"""Exceptions raised by llga. Each names what went wrong and where."""

from __future__ import annotations


class LlgaError(Exception):
    """Base class of llga's errors."""


class ParseError(LlgaError, ValueError):
    """TorchScript IR text that llga cannot read.

    Attributes: ``message`` (without position), ``line`` and ``column``
    (1-based), ``excerpt`` (the offending line).
    """

    def __init__(self, message: str, line: int, column: int, excerpt: str = "", detail: str | None = None):
        super().__init__(detail or f"{line}:{column}: {message}")
        self.message = message
        self.line = line
        self.column = column
        self.excerpt = excerpt

    def __reduce__(self):
        return (type(self), (self.message, self.line, self.column, self.excerpt, str(self)))


class VerifyError(LlgaError, RuntimeError):
    """A graph that breaks the IR's invariants (see src/ir/ir.h)."""


class UnsupportedOpError(LlgaError, NotImplementedError):
    """Op kinds llga cannot run, each with the source lines it came from.

    ``ops`` maps each op kind to the list of places (``file.py:12:8``) it occurs.
    """

    def __init__(self, message: str, ops=None):
        super().__init__(message)
        self.ops = dict(ops or {})


class PassError(LlgaError, RuntimeError):
    """A pass threw or left an invalid graph. ``records`` holds the pass records up to it."""

    def __init__(self, message: str, records=None):
        super().__init__(message)
        self.records = list(records or [])


class CompileError(LlgaError, ValueError):
    """A graph llga cannot compile: a missing weight, a malformed op, ..."""


class PrecisionError(CompileError):
    """A precision the CPU cannot run (``precision="bf16"`` where oneDNN has
    no bf16 kernels), or a malformed precision request."""


class FormatError(LlgaError, ValueError):
    """A file that is not a model file llga can read (llga.load): not an
    .llga file, a newer format version, truncated, corrupted (a checksum that
    does not match), or contents that do not parse or bind. The message names
    the file and what is wrong where."""


class InputError(LlgaError, ValueError):
    """Inputs that do not fit the compiled graph (count, dtype, rank), naming the input."""


class SpecializationMismatch(InputError):
    """A call's inputs differ in rank or dtype from those the graph was
    specialized for (its llga::Guard); CompiledGraph compiles another
    specialization for them, so callers see this only from the low-level run."""


class ExecutionError(LlgaError, RuntimeError):
    """An op failed while running, naming the op and where it came from."""


class OutOfMemoryError(ExecutionError, MemoryError):
    """An allocation failed while an op ran (llga's buffers or oneDNN's),
    naming the op. The compiled model stays usable: the call's buffers are
    freed and its memory plan kept."""
