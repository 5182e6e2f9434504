"""The notebooks in notebooks/ run from top to bottom without errors
(nbclient + ipykernel from Debian), as a reader would run them."""

import glob
import os

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NOTEBOOKS = sorted(glob.glob(os.path.join(ROOT, "notebooks", "*.ipynb")))


def test_there_are_notebooks():
    names = [os.path.basename(p) for p in NOTEBOOKS]
    assert {"01_quickstart.ipynb", "02_pass_pipeline.ipynb", "03_partitions_and_layouts.ipynb",
            "04_profiling.ipynb"} <= set(names)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_notebook_is_stored_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in nb.cells if c.cell_type == "code")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_notebook_runs(path, monkeypatch):
    # As a user opens it: from its own directory, with no PYTHONPATH; llga is
    # found as `make notebook` / `make install` make it findable (make test
    # runs dev-path first: a .pth in the system site naming this checkout).
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # ipykernel's debugger chatter
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": os.path.dirname(path)}})
    client.execute()  # raises CellExecutionError naming the cell on any error
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    # the kernel imported this checkout's llga (not some other installed copy)
    where = [str(o.get("text", "")) for o in outputs if "llga" in str(o.get("text", "")) and " from " in str(o.get("text", ""))]
    assert where and os.path.join(ROOT, "llga") in where[0], f"the kernel imported another llga: {where}"
    assert not [o for o in outputs if o.output_type == "error"]
    # the rich displays rendered (HTML tables / SVG graphs), not just text
    rich = [o for o in outputs if o.output_type in ("display_data", "execute_result")
            and ("text/html" in o.get("data", {}) or "image/svg+xml" in o.get("data", {}))]
    assert rich, "no rich output"
