"""The folders' dependency rules (docs/architecture.md), checked on the sources' #include lines:
passes and the fuser never reach the runtime or the backend (execution only through
passes/evaluator.h), the runtime core never reaches a kernel, and oneDNN's headers appear only
in the backend and the runtime's execution context."""
import pathlib
import re

import pytest

SRC = pathlib.Path(__file__).resolve().parents[2] / "src"
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]', re.M)

# folder -> folders (or single headers) it may include from
ALLOWED = {
    "ir": {"ir"},
    "frontend": {"ir", "frontend"},
    "passes": {"ir", "passes"},
    "fuser": {"ir", "passes", "fuser"},
    # the runtime implements the passes' Evaluator and reads their PassContext: interfaces only
    "runtime": {"ir", "runtime", "passes/evaluator.h", "passes/pass.h"},
    "backend": {"ir", "runtime", "backend", "fuser", "passes/pass_utils.h"},
    "driver": {"ir", "frontend", "passes", "fuser", "runtime", "driver"},
}
DNNL_OK = {"backend", "runtime/exec_context.h", "runtime/exec_context.cpp"}


def includes(path):
    return [m.group(1) for m in INCLUDE.finditer(path.read_text())]


def project_sources():
    return sorted(p for p in SRC.rglob("*") if p.suffix in (".h", ".cpp"))


def allowed(target, rules):
    return any(target == r or target.startswith(r + "/") for r in rules)


@pytest.mark.parametrize("folder", sorted(ALLOWED))
def test_folder_includes_only_what_it_may(folder):
    bad = []
    for path in sorted((SRC / folder).rglob("*")):
        if path.suffix not in (".h", ".cpp"):
            continue
        for inc in includes(path):
            if (SRC / inc).exists() and not allowed(inc, ALLOWED[folder]):
                bad.append(f"{path.relative_to(SRC)} includes {inc}")
    assert not bad, "\n".join(bad)


def test_onednn_only_in_the_backend_and_the_execution_context():
    bad = []
    for path in project_sources():
        rel = str(path.relative_to(SRC))
        if allowed(rel, DNNL_OK) or rel.startswith(("python/", "tools/", "testing/")):
            continue
        bad += [f"{rel} includes {inc}" for inc in includes(path) if inc.startswith("oneapi/dnnl")]
    assert not bad, "\n".join(bad)


def test_the_rules_can_fail(tmp_path):
    # The checker sees an include that breaks a rule (a pass reaching into the backend).
    f = tmp_path / "x.cpp"
    f.write_text('#include "passes/pass.h"\n#include "backend/dnnl/post_ops.h"\n')
    assert [i for i in includes(f) if not allowed(i, ALLOWED["passes"])] == ["backend/dnnl/post_ops.h"]
