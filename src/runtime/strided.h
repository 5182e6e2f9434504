// Iteration over N tensors of one shape with their own strides: the inner
// dimension is handed to a callback as (pointers, count, strides) so kernels
// write tight loops. Adjacent dimensions that are contiguous for every
// operand are merged first.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "runtime/shape.h"

namespace llga {

template <size_t N>
struct StridedLoop {
  Shape sizes;                    // outer..inner, after merging
  std::array<Shape, N> strides;   // in bytes
};

template <size_t N>
StridedLoop<N> makeLoop(const Shape& sizes, const std::array<Shape, N>& byte_strides) {
  StridedLoop<N> loop;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;  // size-1 dims do not move
    if (!loop.sizes.empty()) {
      bool mergeable = true;
      for (size_t k = 0; k < N; ++k)
        mergeable &= loop.strides[k].back() == byte_strides[k][d] * sizes[d];
      if (mergeable) {
        loop.sizes.back() *= sizes[d];
        for (size_t k = 0; k < N; ++k) loop.strides[k].back() = byte_strides[k][d];
        continue;
      }
    }
    loop.sizes.push_back(sizes[d]);
    for (size_t k = 0; k < N; ++k) loop.strides[k].push_back(byte_strides[k][d]);
  }
  if (loop.sizes.empty()) {  // a single element
    loop.sizes.push_back(1);
    for (size_t k = 0; k < N; ++k) loop.strides[k].push_back(0);
  }
  return loop;
}

// fn(std::array<char*, N> ptrs, int64_t count, std::array<int64_t, N> inner_strides)
template <size_t N, typename Fn>
void forEachInner(const StridedLoop<N>& loop, std::array<char*, N> base, Fn&& fn) {
  const size_t nd = loop.sizes.size();
  std::array<int64_t, N> inner;
  for (size_t k = 0; k < N; ++k) inner[k] = loop.strides[k][nd - 1];
  const int64_t count = loop.sizes[nd - 1];
  if (nd == 1) {
    fn(base, count, inner);
    return;
  }
  Shape idx(nd - 1, 0);
  int64_t outer = 1;
  for (size_t d = 0; d + 1 < nd; ++d) outer *= loop.sizes[d];
  std::array<char*, N> p = base;
  for (int64_t it = 0; it < outer; ++it) {
    fn(p, count, inner);
    // advance the odometer over the outer dims
    for (size_t d = nd - 1; d-- > 0;) {
      for (size_t k = 0; k < N; ++k) p[k] += loop.strides[k][d];
      if (++idx[d] < loop.sizes[d]) break;
      for (size_t k = 0; k < N; ++k) p[k] -= loop.strides[k][d] * loop.sizes[d];
      idx[d] = 0;
    }
  }
}

}  // namespace llga
