// Per-op shape functions: what an op's outputs are (dtype, sizes, strides, and
// the value of an integer where one is known) from what is known of its
// inputs, without running anything. propagate-shapes applies them in program
// order; where no function can say (no function for the kind, an input it
// does not know, a case it does not model), the pass asks the context's
// Evaluator to run the graph instead. A function never guesses: it returns
// nullopt rather than an answer the kernels might not produce, and the
// differential test (tests/py/test_shape_functions.py) holds every answer
// against what execution observes on the whole model corpus.
//
// Registering one is a line next to its definition:
//   LLGA_SHAPE_FN("aten::linear", linearShape);
// Kinds with the SameShape or Eltwise trait in ir/ops.def need none: a
// floating contiguous input gives a contiguous output of its dtype and sizes.
#pragma once

#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "ir/ir.h"

namespace llga {

// What is known of one value. A tensor is known completely or not at all:
// dtype, every extent and strides.
struct Known {
  std::optional<TensorInfo> tensor;
  std::optional<int64_t> i;       // an int or bool, or the value of a 0-dim integer tensor
  std::optional<double> f;        // a float
  std::optional<std::vector<Known>> items;  // a list or tuple whose length is known
  bool none = false;

  static Known ofTensor(TensorInfo t) { Known k; k.tensor = std::move(t); return k; }
  static Known ofInt(int64_t v) { Known k; k.i = v; return k; }
  // The items as ints, when every item is a known int.
  std::optional<std::vector<int64_t>> ints() const;
};

// The inputs of one node, as the shape function sees them.
class ShapeArgs {
 public:
  ShapeArgs(const Node& n, std::vector<const Known*> in) : node_(n), in_(std::move(in)) {}
  const Node& node() const { return node_; }
  size_t size() const { return in_.size(); }
  const Known& operator[](size_t i) const { return *in_.at(i); }
  // The input's complete tensor info, or null.
  const TensorInfo* tensor(size_t i) const;
  // A known int (a 0-dim integer tensor with a known value counts).
  std::optional<int64_t> i(size_t i) const;
  // A known int list (an int broadcast to `repeat` items when repeat > 0).
  std::optional<std::vector<int64_t>> ints(size_t i, size_t repeat = 0) const;
  bool none(size_t i) const { return i < in_.size() && in_[i]->none; }

 private:
  const Node& node_;
  std::vector<const Known*> in_;
};

// Known per output, or nullopt when the function cannot say.
using ShapeFn = std::function<std::optional<std::vector<Known>>(const ShapeArgs&)>;

void registerShapeFn(std::string_view kind, ShapeFn fn);
// The same function for every kind with one of `traits` (ir/ops.def), so an
// op group is listed once.
void registerShapeFnForTraits(uint32_t traits, ShapeFn fn);
// The kind's shape function, or its trait's (SameShape / Eltwise), or null.
const ShapeFn* findShapeFn(Symbol kind);

// Tensor infos as the kernels report them (requires_grad=0, device=cpu).
TensorInfo contiguousInfo(ScalarType dtype, const std::vector<int64_t>& sizes);
TensorInfo stridedInfo(ScalarType dtype, const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides);
bool isContiguous(const TensorInfo& t);

}  // namespace llga

#define LLGA_SHAPE_FN_CAT2(a, b) a##b
#define LLGA_SHAPE_FN_CAT(a, b) LLGA_SHAPE_FN_CAT2(a, b)
#define LLGA_SHAPE_FN(kind, fn)                                                        \
  static const bool LLGA_SHAPE_FN_CAT(llga_shape_fn_registered_, __COUNTER__) = [] { \
    ::llga::registerShapeFn(kind, fn);                                                 \
    return true;                                                                       \
  }()
#define LLGA_SHAPE_FN_FOR_TRAITS(traits, fn)                                           \
  static const bool LLGA_SHAPE_FN_CAT(llga_shape_fn_registered_, __COUNTER__) = [] { \
    ::llga::registerShapeFnForTraits(traits, fn);                                      \
    return true;                                                                       \
  }()
