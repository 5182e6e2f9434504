// Stride arithmetic shared by the runtime's tensors and the compiler's shape
// functions, so that what the passes predict and what the kernels do follow
// one rule: row-major strides, and when a reshape can be a view.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace llga {

// Row-major strides of `sizes` (an extent of 0 counts as 1).
std::vector<int64_t> contiguousStrides(const std::vector<int64_t>& sizes);

// The strides of `shape` as a view of a tensor with `sizes` and `strides`,
// or nullopt when no view can have that shape (reshape then copies). Same
// element count assumed.
std::optional<std::vector<int64_t>> viewStrides(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                                                const std::vector<int64_t>& shape);

}  // namespace llga
