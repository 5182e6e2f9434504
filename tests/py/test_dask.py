"""llga.dask: a saved model on a 2-worker LocalCluster, results in input
order and equal to the model called here, and a worker killed mid-job
losing nothing."""

from __future__ import annotations

import os
import signal
import time
import warnings

import numpy as np
import pytest
import torch

import llga

dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")
import dask.array as da  # noqa: E402
import dask.bag as db  # noqa: E402

import llga.dask as lldask  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.fc = torch.nn.Linear(16, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).mean((2, 3)))


class TwoOut(Net):
    def forward(self, x):
        y = super().forward(x)
        return y, y.softmax(-1)


def _save(tmp, cls, name):
    torch.manual_seed(0)
    x = torch.randn(4, 3, 16, 16)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(cls().eval(), x)
    compiled = llga.optimize(traced, [x])
    path = str(tmp / f"{name}.llga")
    compiled.save(path)
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dask")
    return {"net": _save(tmp, Net, "net"), "two": _save(tmp, TwoOut, "two"), "dir": tmp}


@pytest.fixture(scope="module")
def client(files):
    from distributed import Client, LocalCluster

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                               silence_logs=50)
        c = Client(cluster)
    c.register_worker_plugin(lldask.LlgaPlugin(files["net"], threads=1))
    yield c
    c.close()
    cluster.close()


def _reference(path, x):
    return llga.load(path)(x)


def test_predict_array_in_input_order(client, files):
    x = np.random.default_rng(0).standard_normal((70, 3, 16, 16), dtype=np.float32)
    y = lldask.predict_array(files["net"], da.from_array(x, chunks=(9, 3, 16, 16)), batch=16)
    assert y.shape == (70, 10) and y.dtype == np.float32
    got = y.compute()
    want = np.concatenate([_reference(files["net"], x[i:i + 16]) for i in range(0, 70, 16)])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # every block went through a worker, and both workers loaded the model once
    loaded = client.run(lambda: sorted(lldask._models))
    assert len(loaded) == 2 and all(v == [os.path.abspath(files["net"])] for v in loaded.values())


def test_plugin_sets_the_threads_despite_omp_num_threads(client, files):
    threads = client.run(lambda: (os.environ.get("OMP_NUM_THREADS"), llga.get_num_threads()))
    assert all(n == 1 for _, n in threads.values())  # as the plugin was told (threads=1), not by chance
    client.register_worker_plugin(lldask.LlgaPlugin(files["net"], threads=2), name="llga-two-threads")
    assert all(v == 2 for v in client.run(llga.get_num_threads).values())
    client.register_worker_plugin(lldask.LlgaPlugin(files["net"], threads=1), name="llga-two-threads")


def test_predict_files_keeps_every_output_in_order(client, files):
    rng = np.random.default_rng(1)
    paths = []
    for i in range(23):
        p = files["dir"] / f"s{i}.npy"
        np.save(p, rng.standard_normal((3, 16, 16), dtype=np.float32))
        paths.append(str(p))
    out = lldask.predict_files(files["two"], paths, batch=5).compute()
    assert len(out) == 23
    for p, (logits, probs) in zip(paths, out):
        want = _reference(files["two"], np.load(p)[None])
        np.testing.assert_allclose(logits, want[0][0], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(probs, want[1][0], rtol=1e-5, atol=1e-5)


def test_bad_uses_are_clear_errors(files):
    with pytest.raises(ValueError, match="one tensor output"):
        lldask.predict_array(files["two"], np.zeros((4, 3, 16, 16), np.float32))
    with pytest.raises(ValueError, match="batch must be positive"):
        lldask.predict_array(files["net"], np.zeros((4, 3, 16, 16), np.float32), batch=0)
    with pytest.raises(FileNotFoundError):
        lldask.predict_array(str(files["dir"] / "missing.llga"), np.zeros((4, 3, 16, 16), np.float32))


def test_a_killed_worker_loses_nothing(client, files):
    from distributed import as_completed

    x = np.random.default_rng(2).standard_normal((400, 3, 16, 16), dtype=np.float32)
    y = lldask.predict_array(files["net"], x, batch=4)  # 100 tasks
    parts = client.compute(y.to_delayed().ravel().tolist())
    pids = client.run(os.getpid)
    victim_addr, victim = next(iter(pids.items()))
    done = 0
    killed = False
    for _ in as_completed(parts):
        done += 1
        if not killed and done == 3:
            os.kill(victim, signal.SIGKILL)  # the worker process, not its nanny
            killed = True
    assert killed and done == len(parts)
    got = np.concatenate(client.gather(parts))
    want = np.concatenate([_reference(files["net"], x[i:i + 4]) for i in range(0, 400, 4)])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # the nanny restarted the worker, and the plugin loaded the model there again
    deadline = time.time() + 30
    while time.time() < deadline and len(client.scheduler_info()["workers"]) < 2:
        time.sleep(0.2)
    after = client.run(os.getpid)
    assert victim not in after.values() and len(after) == 2
    assert all(os.path.abspath(files["net"]) in v for v in client.run(lambda: sorted(lldask._models)).values())
