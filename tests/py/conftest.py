import os
import sys

import pytest

# Tests import the in-tree package (built by `make build`), not an installed one.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def pytest_sessionfinish(session):
    # LLGA_RECORD_MODULES=FILE: the file of every module the tests imported, for scripts/check_deps.py.
    out = os.environ.get("LLGA_RECORD_MODULES")
    if out:
        files = {getattr(m, "__file__", None) for m in list(sys.modules.values())}
        files = {os.path.abspath(f) for f in files if isinstance(f, str) and os.path.exists(f)}
        with open(out, "w") as fh:
            fh.writelines(f + "\n" for f in sorted(files))


@pytest.fixture(autouse=True)
def _llga_threads_restored():
    """Each test starts with the thread count the one before it found: a test
    that set llga's threads and did not restore them made a later one's
    results depend on the order the suite ran in (on an AVX2-only CPU, a BERT
    encoder's outputs differ in the last bits between 1 and 2 threads). Only
    where the test imported llga (some run without it)."""
    llga = sys.modules.get("llga")
    before = llga.get_num_threads() if llga else None
    yield
    if before is not None and llga.get_num_threads() != before:
        llga.set_num_threads(before)
