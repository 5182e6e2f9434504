"""What a caller hands in is never written where it must not be: an input the
graph changes in place must be writeable and free of overlapping elements,
else InputError naming the input and the op; every numpy dtype llga does not
take is an InputError naming the expected one; arrays llga cannot address in
place (byte-swapped, negative strides) are copied for reading only."""

import numpy as np
import pytest
import torch

import llga


class AddInPlace(torch.nn.Module):
    def forward(self, x):
        x.add_(1.0)
        return x * 2


class ViewInPlace(torch.nn.Module):
    """Writes through a view of the input: the input is written too."""

    def forward(self, x):
        x[0].mul_(3.0)
        return x + 1


class Pure(torch.nn.Module):
    def forward(self, x):
        return x * 2


def compiled(module, example):
    return llga.optimize(torch.jit.trace(module, example))


def test_in_place_on_an_input_writes_where_pytorch_writes():
    c = compiled(AddInPlace(), torch.zeros(3))
    x = np.zeros(3, np.float32)
    np.testing.assert_array_equal(c(x), [2, 2, 2])
    np.testing.assert_array_equal(x, [1, 1, 1])  # as PyTorch: the caller's array is written


def read_only_memmap(tmp_path):
    path = tmp_path / "x.bin"
    np.zeros(3, np.float32).tofile(path)
    return np.memmap(path, np.float32, mode="r", shape=(3,))


@pytest.mark.parametrize("make,why", [
    (lambda tmp: read_only_memmap(tmp), "read-only"),  # was a segfault
    (lambda tmp: np.frombuffer(bytes(12), np.float32), "read-only"),  # was a write into an immutable bytes
    (lambda tmp: np.broadcast_to(np.zeros(1, np.float32), (3,)), "read-only"),  # was [6, 6, 6], base written
    (lambda tmp: np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), (3,), (0,)), "overlap"),
    (lambda tmp: np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), (3,), (0,), writeable=True), "overlap"),
    (lambda tmp: np.zeros(3, ">f4"), "byte order"),
    (lambda tmp: np.zeros(6, np.float32)[::-2], "negative"),
], ids=["memmap-r", "bytes", "broadcast_to", "stride-0", "stride-0-writeable", "byteswapped", "negative-strides"])
@pytest.mark.parametrize("model", [AddInPlace, ViewInPlace])
def test_inputs_that_must_not_be_written_are_refused(tmp_path, make, why, model):
    c = compiled(model(), torch.zeros(3))
    x = make(tmp_path)
    before = np.array(x, copy=True)
    base = x.base if isinstance(x.base, np.ndarray) else None
    base_before = None if base is None else base.copy()
    with pytest.raises(llga.InputError, match=r"input 0 \('x(\.\d+)?'.*writes into this input in place \(aten::") as e:
        c(x)
    assert why.split()[0] in str(e.value)
    np.testing.assert_array_equal(np.asarray(x), before)
    if base is not None:
        np.testing.assert_array_equal(base, base_before)


def test_overlapping_two_dimensional_view_is_refused():
    c = compiled(ViewInPlace(), torch.zeros(2, 3))
    base = np.zeros(4, np.float32)
    x = np.lib.stride_tricks.as_strided(base, (2, 3), (4, 4), writeable=True)  # rows overlap
    with pytest.raises(llga.InputError, match=r"elements overlap \(element strides \[1, 1\]\)"):
        c(x)
    np.testing.assert_array_equal(base, 0)
    # the same values as a proper array are fine, and match PyTorch
    y = np.array(x)
    ref = ViewInPlace()(torch.from_numpy(y.copy()))
    np.testing.assert_allclose(c(y), ref.numpy())


@pytest.mark.parametrize("make", [
    lambda tmp: read_only_memmap(tmp),
    lambda tmp: np.frombuffer(np.ones(3, np.float32).tobytes(), np.float32),
    lambda tmp: np.broadcast_to(np.ones(1, np.float32), (3,)),
    lambda tmp: np.ones(3, ">f4"),
    lambda tmp: np.ones(6, np.float32)[::-2],
], ids=["memmap-r", "bytes", "broadcast_to", "byteswapped", "negative-strides"])
def test_read_only_and_odd_inputs_are_fine_when_only_read(tmp_path, make):
    c = compiled(Pure(), torch.zeros(3))
    x = make(tmp_path)
    np.testing.assert_array_equal(c(x), np.asarray(x, np.float32) * 2)


@pytest.mark.parametrize("dtype", [np.float16, np.complex64, np.uint16, np.uint32, np.uint64, object,
                                   "datetime64[s]", "U3"])
def test_unsupported_dtypes_name_the_expected_one(dtype):
    c = compiled(Pure(), torch.zeros(3))
    x = np.zeros(3, dtype)
    with pytest.raises(llga.InputError, match=r"input 0 \('x'\).*expected dtype Float \(numpy float32\)"):
        c(x)


def test_wrong_but_supported_dtype_names_the_expected_one():
    c = compiled(Pure(), torch.zeros(3))
    with pytest.raises(llga.InputError, match=r"expected dtype Float, got Double"):
        c(np.zeros(3, np.float64))
