// A weight kept in a primitive's blocked layout (a compacted weight,
// runtime/weight_compaction.cpp), as a model file stores it: the fields of
// oneDNN's blocked memory descriptor, written out one by one (not the C
// struct's bytes), so that a file is read by any oneDNN 2.x; and back.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/tensor.h"

namespace llga {

struct LayoutRecord {
  std::vector<int64_t> dims, padded_dims, strides;  // per dim of the descriptor
  std::vector<int64_t> inner_blks, inner_idxs;      // the innermost blocks, e.g. 16i16o
  bool transposed = false;                          // the descriptor is of w^T (a linear's matmul b)
};

// The record of a blocked fp32 tensor whose layout is plain blocking (no
// padding offsets, no extra data such as int8 compensation); nullopt otherwise.
std::optional<LayoutRecord> layoutRecordOf(const Tensor& t);
// Bytes such a tensor occupies (the descriptor's size, padding included).
uint64_t layoutBytes(const Tensor& t);
// A blocked tensor of `sizes` over `storage` in the recorded layout. Throws
// std::invalid_argument when the record is not a consistent blocked fp32
// layout of `sizes` that fits in `nbytes`.
Tensor blockedFromRecord(const LayoutRecord& r, const Shape& sizes, std::shared_ptr<Storage> storage, uint64_t nbytes);

}  // namespace llga
