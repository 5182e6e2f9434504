"""Every dump PyTorch prints for torchvision's models parses, prints back
byte for byte and round-trips (tv_corpus.LEAN here; every model of
torchvision.models.list_models() with LLGA_ZOO=all, as make test-zoo runs it).
A form PyTorch itself cannot produce is skipped with PyTorch's reason."""

import pytest

import tv_corpus
from test_corpus import check_roundtrip


@pytest.mark.parametrize("model,form", [(m, f) for m in tv_corpus.models() for f in tv_corpus.FORMS])
def test_torchvision_dump_roundtrips(model, form):
    dump = tv_corpus.dumps(model)[form]
    if isinstance(dump, str):
        pytest.skip(dump)
    text, torch_nodes = dump
    check_roundtrip(text, torch_nodes)
