// Op groups, defined once (ir/ops.def): which kinds are elementwise, binary,
// fusion anchors, views, or keep their input's shape. A kind not in the
// table has no traits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/symbol.h"

namespace llga {

namespace op_trait {
enum : uint32_t {
  Eltwise = 1u << 0,
  Binary = 1u << 1,
  Conv = 1u << 2,
  Matmul = 1u << 3,
  Pool = 1u << 4,
  SameShape = 1u << 5,
  View = 1u << 6,
  // Computed elementwise over its tensor operands as one PyTorch
  // TensorIterator (so the result takes their memory order), besides the
  // Eltwise and Binary groups, which are too.
  Pointwise = 1u << 7,
  // PyTorch lays the result out in the input's suggested memory format:
  // channels-last where a 4-d/5-d input is, else row-major.
  SuggestedFormat = 1u << 8,
  // The result is a fresh row-major tensor whatever the inputs' order.
  RowMajorResult = 1u << 9,
};
}  // namespace op_trait

// The traits of an op kind (0 when it is not in ops.def).
uint32_t opTraits(Symbol kind);
inline bool hasTrait(Symbol kind, uint32_t traits) { return (opTraits(kind) & traits) != 0; }
// Every kind with any of `traits`, in the table's order.
std::vector<std::string> opsWith(uint32_t traits);

}  // namespace llga
