"""Writes llga/data/torch_schemas.json: the signatures (argument names,
types, defaults, keyword-only marks, return types) of every overload PyTorch
registers for the op kinds llga runs, read from the installed PyTorch's
operator registry. llga.load_torchscript needs them to turn the source code
a torch.jit.save archive holds (keyword arguments, omitted defaults) into IR
without importing torch.

    /usr/bin/python3 scripts/gen_torch_schemas.py

Run it again when llga gains op kinds or PyTorch changes.
"""

from __future__ import annotations

import json
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def _default(v):
    """A default value as JSON: numbers, bools, None, strings, lists; the
    rest (devices, dtypes, layouts, memory formats) by their text."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else {"float": repr(v)}
    if isinstance(v, (list, tuple)):
        return [_default(x) for x in v]
    return {"repr": str(v)}


def main() -> int:
    import torch

    import llga

    kinds = {o.kind for o in llga.supported_ops()}
    out = {}
    for s in torch._C._jit_get_all_schemas():
        if s.name not in kinds or s.overload_name.endswith("out"):
            continue
        if any(a.alias_info is not None and a.alias_info.is_write and a.kwarg_only for a in s.arguments):
            continue  # out= variants
        args = []
        for a in s.arguments:
            entry = {"name": a.name, "type": str(a.type), "kwarg_only": bool(a.kwarg_only)}
            if a.has_default_value():
                entry["default"] = _default(a.default_value)
            args.append(entry)
        out.setdefault(s.name, []).append({"overload": s.overload_name, "args": args,
                                           "returns": [str(r.type) for r in s.returns]})
    path = os.path.join(ROOT, "llga", "data", "torch_schemas.json")
    with open(path, "w") as f:
        json.dump({"torch": torch.__version__, "schemas": dict(sorted(out.items()))}, f, indent=0, sort_keys=False)
        f.write("\n")
    print(f"wrote {path}: {sum(len(v) for v in out.values())} overloads of {len(out)} op kinds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
