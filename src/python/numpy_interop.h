// numpy <-> llga conversions shared by the binding files.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

#include "ir/attributes.h"

namespace llga::python {

namespace py = pybind11;

inline ScalarType dtypeFromNumpy(const py::dtype& dt, const std::string& what) {
  char kind = dt.kind();
  auto size = dt.itemsize();
  if (kind == 'f' && size == 4) return ScalarType::Float;
  if (kind == 'f' && size == 8) return ScalarType::Double;
  if (kind == 'i' && size == 8) return ScalarType::Long;
  if (kind == 'i' && size == 4) return ScalarType::Int;
  if (kind == 'i' && size == 2) return ScalarType::Short;
  if (kind == 'i' && size == 1) return ScalarType::Char;
  if (kind == 'u' && size == 1) return ScalarType::Byte;
  if (kind == 'b') return ScalarType::Bool;
  throw py::type_error(what + ": numpy dtype " + std::string(py::str(static_cast<py::handle>(dt))) + " is not one llga takes (float32, float64, int64, int32, int16, int8, uint8, bool)");
}

// C++ text as a Python str; bytes that are not UTF-8 (IR string constants) become U+FFFD.
inline py::str lossyStr(const std::string& s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<py::ssize_t>(s.size()), "replace");
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

// Keeps a Python object alive from C++; its release takes the GIL.
inline std::shared_ptr<void> keepAlive(py::object o) {
  auto* keep = new py::object(std::move(o));
  return std::shared_ptr<void>(keep, [](void* p) {
    py::gil_scoped_acquire gil;
    delete static_cast<py::object*>(p);
  });
}

// Element strides of arr, or false when they are negative or not whole elements.
template <typename Dims>  // Shape or std::vector<int64_t>
bool elementStrides(const py::array& arr, Dims& sizes, Dims& strides) {
  auto item = static_cast<int64_t>(arr.itemsize());
  bool ok = true;
  for (py::ssize_t d = 0; d < arr.ndim(); ++d) {
    sizes.push_back(arr.shape(d));
    int64_t s = arr.strides(d);
    ok &= s >= 0 && s % item == 0;
    strides.push_back(s / item);
  }
  return ok;
}

// Bytes past the last multiple of the element size at which arr's data starts
// (a view at an odd byte offset into a buffer); kernels load whole elements.
inline int64_t misalignment(const py::array& arr) {
  return static_cast<int64_t>(reinterpret_cast<uintptr_t>(arr.data()) % static_cast<uintptr_t>(arr.itemsize()));
}

// Non-native byte order ('>' on little-endian x86-64; '<', '=' and '|' are native).
inline bool byteSwapped(const py::array& arr) { return arr.dtype().byteorder() == '>'; }

// A C-contiguous, aligned copy in native byte order (always a copy: numpy's
// ascontiguousarray hands back a misaligned contiguous array as it is).
inline py::array nativeCopy(const py::array& arr) {
  py::object native = arr.dtype().attr("newbyteorder")("=");
  return py::module_::import("numpy").attr("array")(arr, native, py::arg("copy") = true, py::arg("order") = "C");
}

// A constant over the array's memory (no copy), or over a native copy when
// llga cannot read the array as it is.
inline TensorRef constantFromNumpy(py::array arr, const std::string& what) {
  auto t = std::make_shared<ConstantTensor>();
  t->dtype = dtypeFromNumpy(arr.dtype(), what);
  if (!elementStrides(arr, t->sizes, t->strides) || byteSwapped(arr) || misalignment(arr))
    return constantFromNumpy(nativeCopy(arr), what);
  t->data = const_cast<void*>(arr.data());
  t->owner = keepAlive(arr);
  return t;
}

}  // namespace llga::python
