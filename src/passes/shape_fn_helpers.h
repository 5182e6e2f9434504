// What the shape functions (shape_fns_*.cpp) share: their result type, dtype
// groups, dimension arguments, and the broadcasting and type-promotion rules
// of elementwise ops. Not part of the passes' interface (shape_functions.h).
#pragma once

#include <optional>
#include <vector>

#include "passes/shape_functions.h"

namespace llga::shape_fn {

using Out = std::optional<std::vector<Known>>;

inline Out one(Known k) { return std::vector<Known>{std::move(k)}; }
inline Out oneTensor(TensorInfo t) { return one(Known::ofTensor(std::move(t))); }

inline bool isFloating(ScalarType t) {
  return t == ScalarType::Float || t == ScalarType::Double || t == ScalarType::Half || t == ScalarType::BFloat16;
}
inline bool isIntegral(ScalarType t) {
  return t == ScalarType::Byte || t == ScalarType::Char || t == ScalarType::Short || t == ScalarType::Int ||
         t == ScalarType::Long;
}

inline std::vector<int64_t> sizesOf(const TensorInfo& t) { return *t.concreteSizes(); }

// A dimension argument, wrapped into [0, rank).
inline std::optional<size_t> wrapDim(std::optional<int64_t> d, size_t rank) {
  if (!d) return std::nullopt;
  int64_t r = static_cast<int64_t>(rank);
  int64_t v = *d < 0 ? *d + r : *d;
  if (v < 0 || v >= r) return std::nullopt;
  return static_cast<size_t>(v);
}

// Defined with the elementwise ops (shape_fns_elementwise.cpp):
// numpy-style broadcasting of two shapes (nullopt: they do not broadcast);
std::optional<std::vector<int64_t>> broadcast(const std::vector<int64_t>& x, const std::vector<int64_t>& y);
// PyTorch's promoteTypes for the dtypes modelled (nullopt for the rest);
std::optional<ScalarType> promote(std::optional<ScalarType> a, std::optional<ScalarType> b);
// the SameShape/Eltwise trait's function: a floating input gives a fresh contiguous output;
Out sameShape(const ShapeArgs& a);
// the input itself (eval-mode dropout, detach, fill_).
Out identity(const ShapeArgs& a);

}  // namespace llga::shape_fn
