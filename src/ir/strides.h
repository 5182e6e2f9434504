// Stride arithmetic shared by the runtime's tensors and the compiler's shape
// functions, so that what the passes predict and what the kernels do follow
// one rule: row-major strides, and when a reshape can be a view. Templates over
// the dims' container: std::vector<int64_t> in the IR, Shape in the runtime.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

namespace llga {

// Row-major strides of `sizes` (an extent of 0 counts as 1).
template <typename Dims>
Dims contiguousStrides(const Dims& sizes) {
  Dims st(sizes.size(), 1);
  for (size_t i = sizes.size(); i-- > 1;) st[i - 1] = st[i] * std::max<int64_t>(sizes[i], 1);
  return st;
}

// The strides of `shape` as a view of a tensor with `sizes` and `strides`,
// or nullopt when no view can have that shape (reshape then copies). Same
// element count assumed.
template <typename Dims>
std::optional<Dims> viewStrides(const Dims& old_sizes, const Dims& old_strides, const Dims& shape) {
  Dims out(shape.size());
  if (old_sizes.empty()) {
    std::fill(out.begin(), out.end(), 1);
    return out;
  }
  int64_t numel = 1;
  for (int64_t s : old_sizes) numel *= s;
  if (numel == 0) return contiguousStrides(shape);
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old_sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= old_sizes[d];
    if (d == 0 || (old_sizes[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = old_strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

}  // namespace llga
