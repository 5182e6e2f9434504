import os
import sys

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
