"""Scale-out figures: a saved resnet18 through llga.dask on LocalClusters.

    /usr/bin/python3 bench/dask_bench.py [--images 2000] [--batch 16] [--model resnet18]

The model (random weights) is compiled and saved once. Images are random
float32 3x224x224, generated on the workers block by block (dask.array's
random), so the figures are inference and scheduling, not the client's
upload. For each cluster shape (workers x threads per worker; oneDNN threads
per call = cores / (workers x threads)) it prints: wall time for all images,
images/s, time to the first finished block, and the scheduler's overhead per
task (a round trip of 200 empty tasks). The baseline row makes the same
images and calls the same model in this process without Dask, at the same
batch, with all cores.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def _save_model(name: str, path: str) -> None:
    import torch

    import llga
    from llga import zoo

    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(zoo.torchvision_model(name), x)
    llga.optimize(traced, [x]).save(path)


def _images(block_info=None):
    """One block of random images, made on the worker (seeded by its position)."""
    info = block_info[None]
    n = info["chunk-shape"][0]
    return np.random.default_rng(info["chunk-location"][0]).standard_normal((n, 3, 224, 224), dtype=np.float32)


def _cluster_row(path: str, images: int, batch: int, workers: int, threads: int, cores: int):
    import dask.array as da
    from distributed import Client, LocalCluster, wait

    import llga.dask as lldask

    per_call = max(1, cores // (workers * threads))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = LocalCluster(n_workers=workers, threads_per_worker=threads, processes=True, dashboard_address=None,
                               silence_logs=50)
        client = Client(cluster)
    try:
        t0 = time.perf_counter()
        client.register_worker_plugin(lldask.LlgaPlugin(path, threads=per_call))
        setup = time.perf_counter() - t0
        # scheduler overhead: empty tasks, one round trip each batch of 200
        t0 = time.perf_counter()
        wait(client.map(lambda i: i, range(200), pure=False))
        overhead = (time.perf_counter() - t0) / 200
        x = da.map_blocks(_images, dtype=np.float32, chunks=((batch,) * (images // batch) + ((images % batch,) if
                                                                   images % batch else ()), (3,), (224,), (224,)))
        y = lldask.predict_array(path, x, batch=batch)
        parts = client.compute(y.to_delayed().ravel().tolist())
        t0 = time.perf_counter()
        from distributed import as_completed

        first = None
        for _ in as_completed(parts):
            if first is None:
                first = time.perf_counter() - t0
        wall = time.perf_counter() - t0
        out = np.concatenate(client.gather(parts))
        assert out.shape == (images, 1000) and np.isfinite(out).all()
    finally:
        client.close()
        cluster.close()
    return {"workers": workers, "threads": threads, "per_call": per_call, "wall": wall, "first": first,
            "overhead": overhead, "setup": setup, "tasks": len(parts)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--shapes", default="1x1,1x2,2x1,2x2", help="workers x threads per worker, comma-separated")
    args = ap.parse_args()
    import llga

    cores = len(os.sched_getaffinity(0))
    path = os.path.join(tempfile.mkdtemp(prefix="llga-dask-bench-"), f"{args.model}.llga")
    print(f"compiling and saving {args.model} ...", file=sys.stderr, flush=True)
    _save_model(args.model, path)

    # baseline: the same model and batch in this process, all cores, no Dask
    llga.set_num_threads(cores)
    m = llga.load(path)
    info = {None: {"chunk-shape": (args.batch, 3, 224, 224), "chunk-location": (0, 0, 0, 0)}}
    m(_images(info))
    n_calls = max(3, min(20, args.images // args.batch // 5))
    t0 = time.perf_counter()
    for _ in range(n_calls):
        m(_images(info))
    per_image = (time.perf_counter() - t0) / (n_calls * args.batch)  # making the images and inference, as a task does

    rows = []
    for shape in args.shapes.split(","):
        w, t = (int(v) for v in shape.lower().split("x"))
        print(f"cluster {w} worker(s) x {t} thread(s) ...", file=sys.stderr, flush=True)
        rows.append(_cluster_row(path, args.images, args.batch, w, t, cores))

    print(f"\n{args.model}, {args.images} images 3x224x224, batch {args.batch} per task, {cores} cores; "
          f"llga {llga.__version__}")
    print(f"{'cluster':<22} {'oneDNN thr/call':>15} {'wall s':>7} {'images/s':>9} {'vs no Dask':>10} "
          f"{'first block s':>13} {'task overhead ms':>16} {'plugin setup s':>14}")
    print(f"{'no Dask (this process)':<22} {cores:>15} {per_image * args.images:>7.1f} {1 / per_image:>9.1f} "
          f"{1.0:>10.2f} {per_image * args.batch:>13.3f} {'-':>16} {'-':>14}")
    for r in rows:
        ips = args.images / r["wall"]
        print(f"{str(r['workers']) + ' worker(s) x ' + str(r['threads']) + ' thr':<22} {r['per_call']:>15} "
              f"{r['wall']:>7.1f} {ips:>9.1f} {ips * per_image:>10.2f} {r['first']:>13.3f} "
              f"{r['overhead'] * 1e3:>16.2f} {r['setup']:>14.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
