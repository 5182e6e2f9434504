"""Batch inference with a saved llga model on a Dask cluster.

    import llga.dask
    from distributed import Client, LocalCluster

    client = Client(LocalCluster(n_workers=2, threads_per_worker=1))
    client.register_worker_plugin(llga.dask.LlgaPlugin("/shared/resnet18.llga", threads=1))
    y = llga.dask.predict_array("/shared/resnet18.llga", x, batch=32)   # x: a dask or numpy array
    y.compute()                                                           # in input order

    paths = dask.bag.from_sequence(files, partition_size=64)
    preds = llga.dask.predict_files("/shared/resnet18.llga", paths, batch=32)

The model file (``compiled.save(path)``) must be readable at the same path on
every worker (a shared or copied file). Each worker process loads it once
(mapped, not read: workers on one machine share its weight pages) and keeps
it; tasks only call it. Calls release the GIL, so a worker's threads run
calls at once. Results come back in input order. A worker that dies loses
nothing: Dask runs its tasks again elsewhere (a task is a pure function of
its block).

Threads: Debian's ``distributed`` starts nanny workers with
``OMP_NUM_THREADS=1``, which would leave oneDNN one thread per call whatever
the machine. :class:`LlgaPlugin` sets llga's threads per call deliberately:
``threads`` if given, else the worker's CPUs divided by its task threads.
With several workers on one machine, pass ``threads`` (cores / (workers x
threads per worker)) so that they do not oversubscribe the cores.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, Dict, Iterable, List, Optional

import numpy as np
from distributed import WorkerPlugin

_models: Dict[str, Any] = {}  # path -> CompiledGraph, in this (worker) process
_lock = threading.Lock()


def model(path: str):
    """The model at ``path``, loaded once per process (thread-safe)."""
    path = os.path.abspath(path)
    with _lock:
        m = _models.get(path)
        if m is None:
            import llga

            m = _models[path] = llga.load(path)
        return m


def _set_threads(threads: Optional[int]) -> None:
    if threads is not None:
        import llga

        llga.set_num_threads(int(threads))


class LlgaPlugin(WorkerPlugin):
    """Loads a saved model on each worker as it starts (and on workers that
    join later or are restarted) and sets the threads each call may use."""

    def __init__(self, model_path: str, threads: Optional[int] = None):
        self.model_path = os.path.abspath(model_path)
        self.threads = threads
        self.name = f"llga:{self.model_path}"  # one plugin per model file

    def setup(self, worker) -> None:
        threads = self.threads
        if threads is None:
            cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
            threads = max(1, cpus // max(1, int(getattr(worker, "nthreads", 1) or 1)))
        _set_threads(threads)
        model(self.model_path)


def _predict_block(block: np.ndarray, model_path: str, threads: Optional[int]) -> np.ndarray:
    _set_threads(threads)
    out = model(model_path)(np.ascontiguousarray(block))
    if isinstance(out, (tuple, list)):
        raise ValueError(f"{model_path}: predict_array takes models with one tensor output; this one returns "
                         f"{len(out)} (use predict_files, which keeps every output)")
    return out


def predict_array(model_path: str, x, *, batch: Optional[int] = None, threads: Optional[int] = None):
    """The model applied to ``x`` (a dask or numpy array; axis 0 indexes the
    samples) in blocks of ``batch`` samples (default: x's chunks on axis 0):
    a dask array of the model's output, block for block in input order.

    The output's shape per sample and dtype come from one call on a single
    sample here (the file is loaded on the client too: it is mapped, so this
    costs milliseconds). ``threads``: oneDNN threads per call (default: what
    :class:`LlgaPlugin` set, or llga's default)."""
    import dask.array as da

    x = da.asarray(x)
    if x.ndim < 1:
        raise ValueError("predict_array needs an array whose first axis indexes samples")
    if batch is not None and batch <= 0:
        raise ValueError(f"batch must be positive, got {batch}")
    x = x.rechunk({0: batch if batch else x.chunks[0], **{i: -1 for i in range(1, x.ndim)}})
    probe = model(model_path)(np.zeros((1,) + tuple(x.shape[1:]), dtype=x.dtype))
    if isinstance(probe, (tuple, list)):
        raise ValueError(f"{model_path}: predict_array takes models with one tensor output; this one returns "
                         f"{len(probe)} (use predict_files, which keeps every output)")
    if probe.ndim < 1 or probe.shape[0] != 1:
        raise ValueError(f"{model_path}: the output's first axis is not the batch (one sample gave shape "
                         f"{probe.shape})")
    chunks = (x.chunks[0],) + tuple((d,) for d in probe.shape[1:])
    return da.map_blocks(_predict_block, x, model_path=os.path.abspath(model_path), threads=threads,
                         dtype=probe.dtype, chunks=chunks, drop_axis=list(range(1, x.ndim)),
                         new_axis=list(range(1, probe.ndim)), meta=np.empty((0,) * probe.ndim, probe.dtype))


def _split(out, n: int) -> List[Any]:
    """Per-sample outputs of a batched call (tuples and lists kept per sample)."""
    if isinstance(out, (tuple, list)):
        parts = [_split(o, n) for o in out]
        return [type(out)(p[i] for p in parts) if isinstance(out, tuple) else [p[i] for p in parts] for i in range(n)]
    return [np.array(out[i]) for i in range(n)]


def _predict_partition(paths: Iterable[str], model_path: str, batch: int, load: Callable[[str], np.ndarray],
                       threads: Optional[int]) -> List[Any]:
    _set_threads(threads)
    m = model(model_path)
    paths = list(paths)
    results: List[Any] = []
    for start in range(0, len(paths), batch):
        samples = [np.asarray(load(p)) for p in paths[start:start + batch]]
        shapes = {s.shape for s in samples}
        if len(shapes) > 1:
            raise ValueError(f"files {paths[start]!r}..{paths[start + len(samples) - 1]!r} hold samples of different "
                             f"shapes {sorted(shapes)}: predict_files stacks a batch's samples")
        results.extend(_split(m(np.stack(samples)), len(samples)))
    return results


def predict_files(model_path: str, paths, *, batch: int = 32, load: Optional[Callable[[str], np.ndarray]] = None,
                  threads: Optional[int] = None):
    """The model applied to each file of ``paths`` (a dask bag or a list of
    paths): a dask bag of per-file outputs (an array, or a tuple of arrays
    for a model with several), in the order of ``paths``.

    ``load(path)`` reads one sample (default ``numpy.load``: a .npy without
    its batch axis); a partition's samples are stacked in batches of
    ``batch`` and each output is split back per file."""
    import dask.bag as db

    if batch <= 0:
        raise ValueError(f"batch must be positive, got {batch}")
    if not isinstance(paths, db.Bag):
        paths = list(paths)
        paths = db.from_sequence(paths, partition_size=max(1, batch))
    return paths.map_partitions(_predict_partition, os.path.abspath(model_path), batch, load or np.load, threads)
