// An eltwise post-op as llga's own kernels apply it after their sums (the
// one-row product, the int8 depthwise convolution): on 16 lanes by
// vec::applyStep16, from a PostOp chain by eltwiseSteps
// (backend/dnnl/post_ops.h).
#pragma once

#include <cstdint>

namespace llga::vec {

struct Step {
  enum class Kind : uint8_t { Relu, Clip, Linear, Sigmoid, Swish } kind;
  // Relu: slope below 0; Clip: [alpha, beta]; Linear: alpha x + beta; Swish: x sigmoid(alpha x)
  float alpha = 0, beta = 0;
};

}  // namespace llga::vec
