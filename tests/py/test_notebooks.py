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
def test_notebook_runs(path, monkeypatch, tmp_path):
    monkeypatch.setenv("PYTHONPATH", ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # ipykernel's debugger chatter
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError naming the cell on any error
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    # the rich displays rendered (HTML tables / SVG graphs), not just text
    rich = [o for o in outputs if o.output_type in ("display_data", "execute_result")
            and ("text/html" in o.get("data", {}) or "image/svg+xml" in o.get("data", {}))]
    assert rich, "no rich output"
