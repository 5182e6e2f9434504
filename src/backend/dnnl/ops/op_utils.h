// Helpers shared by the op families.
#pragma once

#include <cmath>
#include <string>
#include <type_traits>

#include "runtime/kernel.h"
#include "runtime/tensor.h"

namespace llga {

// Whether v is a NaN (never, for an integral type).
template <typename T>
bool isNan(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  else return false;
}

template <typename T>
double toDouble(T v) {
  if constexpr (std::is_same_v<T, BFloat16>) return static_cast<float>(v);
  else return static_cast<double>(v);
}

template <typename T>
T fromDouble(double v) {
  if constexpr (std::is_same_v<T, BFloat16>) return BFloat16::from(static_cast<float>(v));
  else if constexpr (std::is_same_v<T, bool>) return v != 0.0;
  else if constexpr (std::is_integral_v<T>) return static_cast<T>(std::isfinite(v) ? v : 0.0);
  else return static_cast<T>(v);
}

// PyTorch's words when an in-place op's input partially overlaps what it
// writes (Tensor::partiallyOverlaps): the op is refused, as PyTorch does.
inline constexpr const char* kPartialOverlap =
    "unsupported operation: some elements of the input tensor and the written-to tensor refer to a single memory "
    "location. Please clone() the tensor before performing the operation.";

// The broadcast shape of a and b (numpy rules); throws naming both shapes.
Shape broadcastShapes(const Shape& a, const Shape& b);

// PyTorch's result dtype for an op between operands that may be tensors of
// rank > 0, 0-dim tensors, or Python scalars (ints, floats, bools).
ScalarType resultType(const std::vector<const RtValue*>& operands);

// A tensor for an operand: tensors as they are, scalars as 0-dim tensors of dtype.
Tensor asTensor(const RtValue& v, ScalarType dtype);

void registerBinaryOps(OpRegistry& r);

// The tensors of a list value (aten::cat's, aten::stack's operand).
std::vector<Tensor> tensorList(const RtValue& v);

// x repeated reps[i] times along each dimension (aten::repeat; reps may be
// longer than x's rank, adding leading dimensions).
Tensor repeatTensor(const Tensor& x, const Shape& reps);
// x[indices] for a list of optional index tensors (aten::index: long or bool,
// broadcast together, numpy's placement rule); the elements as a new tensor.
Tensor indexWithTensors(const Tensor& self, const RtValue& indices);
// A scripted list.sort(reverse=...) in place: ints, bools, floats or strings,
// in Python's order (builtins.cpp; aten::sort's kernel takes lists to it).
void sortScriptList(std::vector<RtValue>& items, bool reverse);
// aten::index_select: whole slices along dim at the (checked) positions in index.
Tensor indexSelectOp(const Tensor& x, int64_t dim, const Tensor& index);

// True if input i of n is a constant or a bound weight (prim::Constant or
// prim::GetAttr): kernels may cache work derived from its contents.
inline bool isConstantInput(const Node& n, size_t i) {
  if (i >= n.inputs().size()) return false;
  Symbol k = n.input(i)->node()->kind();
  return k == prim::Constant || k == prim::GetAttr;
}

// Registers `kind` with a function that also gets a Cache of its own node
// (one per graph node, shared by every call of that node).
template <typename Cache>
void addCached(OpRegistry& r, const std::string& kind, size_t lo, size_t hi,
               std::function<void(const KernelArgs&, Cache&)> fn, bool strided_inputs = false) {
  r.add(OpDef{kind, lo, hi, [fn, strided_inputs](const Node&) {
                auto cache = std::make_shared<Cache>();
                return std::make_unique<FnKernel>([fn, cache](const KernelArgs& a) { fn(a, *cache); }, strided_inputs);
              }});
}

// a / b rounded down (b > 0), as PyTorch sizes windows; C++'s / rounds toward zero.
inline int64_t floorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// A pooling window count along one dim (kernel k, stride s, padding p each
// side, dilation d), rounded as PyTorch does (floor, or ceil with the last
// window starting inside the input or its left padding); may be <= 0.
int64_t poolOutputSize(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode);

}  // namespace llga
