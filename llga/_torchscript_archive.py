"""The archive ``torch.jit.save`` writes, read without PyTorch: its zip,
its pickles (through an unpickler that accepts only what TorchScript
archives hold: module objects, tensors and their storages, OrderedDict and
TorchScript's list helpers; any other global is refused, never called) and
its tensor storages (numpy arrays over the mapped file where the zip stores
them uncompressed). ``llga.torchscript`` turns what it reads into IR."""

from __future__ import annotations

import io
import mmap
import pickle
import zipfile
from collections import OrderedDict
from typing import Any, Dict

import numpy as np

from .errors import FormatError, UnsupportedOpError

_STORAGE_DTYPES = {
    "FloatStorage": np.float32, "DoubleStorage": np.float64, "HalfStorage": np.float16, "LongStorage": np.int64,
    "IntStorage": np.int32, "ShortStorage": np.int16, "CharStorage": np.int8, "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
}


class _ScriptObject:
    """A TorchScript module or object from data.pkl: its class's qualified
    name and its attributes. Each TorchScript class gets a subclass (the
    pickle makes objects with NEWOBJ, which needs a type)."""

    qualname = ""

    def __init__(self, *args):
        self.attrs: Dict[str, Any] = {}

    def __setstate__(self, state):
        if not isinstance(state, dict):
            raise FormatError(f"the state of a {self.qualname} object is a {type(state).__name__}, not a dict")
        self.attrs = state


class _Storage:
    def __init__(self, dtype, data: np.ndarray):
        self.dtype = dtype
        self.data = data


class _Archive:
    def __init__(self, path: str):
        self.path = path
        try:
            self.zip = zipfile.ZipFile(path)
        except zipfile.BadZipFile:
            raise FormatError(f"{path}: not a TorchScript archive (torch.jit.save writes a zip file)") from None
        try:
            self._index()
        except BaseException:
            self.zip.close()
            raise

    def _index(self) -> None:
        path = self.path
        names = self.zip.namelist()
        roots = {n.split("/", 1)[0] for n in names if "/" in n}
        if len(roots) != 1:
            raise FormatError(f"{path}: a TorchScript archive has one top folder; this zip has {len(roots)}")
        self.root = roots.pop()
        self.names = set(names)
        for required in ("data.pkl", "constants.pkl"):
            if f"{self.root}/{required}" not in self.names:
                raise FormatError(f"{path}: not a TorchScript archive (no {required}; a state_dict saved with "
                                  "torch.save is not a model: save the traced module with torch.jit.save)")
        with open(path, "rb") as f:  # the mapping keeps its own handle; arrays over it keep it alive
            try:
                self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            except ValueError:  # an empty file
                self._map = None

    def close(self) -> None:
        self.zip.close()

    def read(self, name: str) -> bytes:
        full = f"{self.root}/{name}"
        if full not in self.names:
            raise FormatError(f"{self.path}: {full} is missing")
        return self.zip.read(full)

    def storage(self, folder: str, key: str, dtype, numel: int) -> np.ndarray:
        """The storage's elements, over the mapped file when stored uncompressed."""
        full = f"{self.root}/{folder}/{key}"
        if full not in self.names:
            raise FormatError(f"{self.path}: tensor storage {full} is missing")
        info = self.zip.getinfo(full)
        itemsize = np.dtype(dtype).itemsize
        if info.file_size < numel * itemsize:
            raise FormatError(f"{self.path}: {full} holds {info.file_size} bytes, {numel * itemsize} needed")
        if info.compress_type == zipfile.ZIP_STORED and self._map is not None:
            # the local header: 30 bytes, then the name and the extra field
            h = info.header_offset
            local = self._map[h:h + 30]
            if len(local) == 30 and local[:4] == b"PK\x03\x04":
                start = h + 30 + int.from_bytes(local[26:28], "little") + int.from_bytes(local[28:30], "little")
                if start + numel * itemsize <= len(self._map) and start % itemsize == 0:
                    return np.frombuffer(self._map, dtype=dtype, count=numel, offset=start)
        return np.frombuffer(self.zip.read(full), dtype=dtype, count=numel)

    def unpickle(self, name: str, folder: str):
        archive = self
        classes: Dict[str, type] = {}

        class Unpickler(pickle.Unpickler):
            def find_class(self, module, cls):
                if module.startswith("__torch__"):
                    qual = f"{module}.{cls}"
                    if qual not in classes:
                        classes[qual] = type(cls, (_ScriptObject,), {"qualname": qual})
                    return classes[qual]
                if module == "torch._utils" and cls in ("_rebuild_tensor_v2", "_rebuild_parameter"):
                    return _rebuild_tensor if cls == "_rebuild_tensor_v2" else _rebuild_parameter
                if module == "torch" and cls in _STORAGE_DTYPES:
                    return _STORAGE_DTYPES[cls]
                if module == "collections" and cls == "OrderedDict":
                    return OrderedDict
                if module == "torch.jit._pickle" and cls in ("build_intlist", "build_doublelist", "build_boollist",
                                                             "build_tensorlist", "build_genericlist"):
                    return list
                if module == "torch.jit._pickle" and cls == "restore_type_tag":
                    return lambda value, _tag: value
                if module == "torch._utils" and cls == "_rebuild_qtensor":
                    raise UnsupportedOpError(f"{archive.path}: a quantized tensor (PyTorch's int8 modules) cannot be "
                                             "read without PyTorch yet; load the model with torch.jit.load", {})
                raise FormatError(f"{archive.path}: {name} refers to {module}.{cls}, which a TorchScript archive "
                                  "does not hold; refusing to unpickle it")

            def persistent_load(self, pid):
                if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
                    raise FormatError(f"{archive.path}: {name} has a persistent id llga does not know: {pid!r}")
                _, dtype, key, _location, numel = pid
                if not isinstance(dtype, type) or not isinstance(numel, int) or numel < 0:
                    raise FormatError(f"{archive.path}: {name} has a malformed storage reference {pid!r}")
                return _Storage(dtype, archive.storage(folder, str(key), dtype, numel))

        try:
            return Unpickler(io.BytesIO(self.read(name))).load()
        except (FormatError, UnsupportedOpError):
            raise
        except Exception as e:  # noqa: BLE001 - a damaged pickle: say so
            raise FormatError(f"{self.path}: {name} does not unpickle: {e}") from None


def _rebuild_tensor(storage, offset, size, stride, *rest):
    if not isinstance(storage, _Storage):
        raise FormatError("a tensor whose storage is not a storage")
    data = storage.data
    itemsize = data.itemsize
    size, stride = tuple(size), tuple(stride)
    if any(s < 0 for s in size) or any(s < 0 for s in stride) or len(size) != len(stride) or offset < 0:
        raise FormatError(f"a tensor with size {size}, stride {stride} and offset {offset}")
    if all(s > 0 for s in size):
        last = offset + sum((n - 1) * s for n, s in zip(size, stride))
        if last >= data.size:
            raise FormatError(f"a tensor of size {size} and stride {stride} runs past its storage")
    return np.lib.stride_tricks.as_strided(data[offset:], shape=size, strides=[s * itemsize for s in stride],
                                           writeable=False)


def _rebuild_parameter(data, requires_grad, backward_hooks):
    return data
