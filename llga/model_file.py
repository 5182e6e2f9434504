"""Saving a compiled model to one ``.llga`` file and loading it without PyTorch.

    compiled = llga.optimize(traced, [x])
    compiled.save("model.llga")
    m = llga.load("model.llga")          # numpy and llga only; no pass runs
    y = m(x)

The file (format in docs/deploy.md and src/driver/model_file.h) holds the
graph the passes left, with its partitions, precision and layouts as the IR
records them, the weights it binds (mapped, not read: processes loading one
file share its pages), the graph before the passes and every pass record, so
``m.partitions``, ``m.passes`` and the pass viewer show what the compiler did.

Anything wrong with a file (not an llga file, a newer format, truncated,
corrupted) raises :class:`llga.FormatError` naming what and where.
"""

from __future__ import annotations

import datetime
import json
import os
from typing import Any, Dict, Union

from . import _llga
from .errors import FormatError

PathLike = Union[str, "os.PathLike[str]"]

_MANIFEST_VERSION = 1


def _jsonable(value: Any, what: str):
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        raise ValueError(f"cannot save {what} ({value!r}): a model file holds JSON values only") from None
    return value


def save(compiled, path: PathLike) -> None:
    """Writes ``compiled`` (a :class:`llga.CompiledGraph`) to ``path``.

    The file replaces ``path`` whole (it is written beside it, then renamed).
    A model saved after calls is saved whole: weights llga let go after its
    first call (kept only in a primitive's layout) are written back plain.
    Other input ranks or dtypes than the compiled ones (which in memory
    compile another specialization from the original model) are not in the
    file: the loaded model raises :class:`llga.InputError` for them."""
    from . import __version__

    path = os.fspath(path)
    manifest: Dict[str, Any] = {
        "manifest_version": _MANIFEST_VERSION,
        "llga_version": __version__,
        "saved_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "inputs": [{"name": v.name, "type": str(v.type)} for v in compiled.graph.inputs if v.type.kind != "Class"],
        "outputs": [str(v.type) for v in compiled.graph.outputs],
        "precision": compiled.precision,
        "precision_note": compiled.precision_note,
        "defaults": [_jsonable(d, f"the default value of input {i}") for i, d in enumerate(compiled._defaults)],
        "example_inputs": compiled.example_inputs_spec,
    }
    _llga.save_model(compiled._impl, path, compiled.passes.initial_ir, list(compiled.passes),
                     json.dumps(manifest, indent=1))


def load(path: PathLike, *, verify: bool = False):
    """Loads a model saved with ``compiled.save(path)``: a
    :class:`llga.CompiledGraph` that runs as the saved one did, bit for bit.

    ``verify=True`` also checks every weight's checksum (it reads every weight
    page; without it, the header, the graph, the tables and the pass records
    are checked, and weights are mapped as they are).

    Raises :class:`llga.FormatError` for a file llga cannot read, OSError when
    it cannot be opened."""
    from .compiler import CompiledGraph
    from .passes import PassList

    path = os.fspath(path)
    graph, impl, records, source_ir, python, info = _llga.load_model(path, bool(verify), True)
    try:
        manifest = json.loads(python.decode("utf-8"))
        if not isinstance(manifest, dict):
            raise ValueError("not an object")
    except (UnicodeDecodeError, ValueError) as e:
        raise FormatError(f"{path}: section 'python' is not a JSON manifest ({e})") from None
    compiled = CompiledGraph(graph, impl, PassList(records, source_ir))
    compiled._defaults = list(manifest.get("defaults", []))
    compiled.precision = str(manifest.get("precision", "fp32"))
    compiled.precision_note = str(manifest.get("precision_note", ""))
    compiled.example_inputs_spec = manifest.get("example_inputs")
    compiled.saved = SavedInfo(path, manifest, info)
    return compiled


def inspect(path: PathLike) -> "SavedInfo":
    """What a file holds, read and checked (every checksum, weights too)
    without building the model: versions, the CPU it was written on,
    signature, sizes."""
    path = os.fspath(path)
    graph, _, records, source_ir, python, info = _llga.load_model(path, True, False)
    try:
        manifest = json.loads(python.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise FormatError(f"{path}: section 'python' is not a JSON manifest ({e})") from None
    s = SavedInfo(path, manifest, info)
    s.graph = graph
    s.passes = [r.name for r in records]
    return s


class SavedInfo:
    """Where a loaded model came from: ``path``, ``manifest`` (signature,
    precision, versions, when it was saved), ``meta`` (format, llga and
    oneDNN versions and the oneDNN ISA of the machine that wrote it),
    ``file_bytes``, ``weight_bytes``, ``tensors`` and ``same_cpu`` (this
    machine's oneDNN ISA is the writer's)."""

    def __init__(self, path: str, manifest: Dict[str, Any], info: Dict[str, Any]):
        self.path = path
        self.manifest = manifest
        self.meta = dict(info["meta"])
        self.format_version = info["format_version"]
        self.file_bytes = info["file_bytes"]
        self.weight_bytes = info["weight_bytes"]
        self.tensors = info["tensors"]
        # Weights stored pre-packed (in the primitive layouts the writer's
        # kernels chose: saved after a call), and whether they are used as
        # stored (same oneDNN and ISA here: zero copy, pages shared between
        # processes) or re-packed by the kernels from a plain copy.
        self.packed = info["packed"]
        self.packed_used = bool(info["packed_used"]) and self.packed > 0
        self.cpu_isa = _llga.cpu_fingerprint()
        self.same_cpu = self.meta.get("cpu_isa") == self.cpu_isa

    def __repr__(self) -> str:
        sig = ", ".join(f"{i['name']}: {i['type']}" for i in self.manifest.get("inputs", []))
        return (f"<llga model file {self.path}: format {self.format_version}, llga {self.meta.get('llga_version')}, "
                f"oneDNN {self.meta.get('onednn_version')}, written on {self.meta.get('cpu_isa')}"
                f"{'' if self.same_cpu else ' (this CPU: ' + self.cpu_isa + ')'}; ({sig}); "
                f"{self.tensors} tensors ({self.packed} pre-packed{', used as stored' if self.packed_used else ''}), "
                f"{self.weight_bytes / 2**20:.1f} MiB of weights>")
