// Post-op chains: the elementwise and binary ops that follow a convolution
// or a matrix product, executed by the same oneDNN primitive as attributes.
//
// translatePostOp() is the one place that decides which aten op becomes
// which oneDNN post-op; the fuser asks it whether a node can join a chain,
// the backend asks it for the attribute. They cannot disagree.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "ir/ir.h"
#include "runtime/tensor.h"

namespace llga {

struct PostOp {
  enum class Kind { Eltwise, Binary, Sum } kind = Kind::Eltwise;
  dnnl::algorithm alg = dnnl::algorithm::eltwise_relu;
  float alpha = 0, beta = 0;
  // Binary and Sum: which node input is the other operand, and the Value.
  const Value* operand = nullptr;
  std::string name;  // "relu", "add", ... for partition tables and logs
};

// The post-ops that `n` contributes when `chain` (one of n's inputs) is the
// value flowing down the chain; or the reason it cannot. `x * sigmoid(x)`
// is recognised at the mul (its sigmoid is then part of the chain too).
struct PostOpMatch {
  std::vector<PostOp> ops;
  std::string why_not;  // empty on success
  bool ok() const { return why_not.empty(); }
};
PostOpMatch translatePostOp(const Node& n, const Value* chain);

// Builds the attribute (user scratchpad plus post-ops); `operand_mds` gives
// the memory descriptor of each Binary op's operand, in chain order.
dnnl::primitive_attr postOpAttr(const std::vector<PostOp>& ops, const std::vector<dnnl::memory::desc>& operand_mds);

// When the chain ends in silu and the output has enough elements for llga's
// swish pass (runtime/swish.h) to beat oneDNN's post-op, removes it from
// `ops` and returns true: the caller runs swishInPlace after the primitive.
bool takeFinalSwish(std::vector<PostOp>& ops, int64_t out_elements);

// Throws unless `t` broadcasts to `out` without growing it.
void checkOperandFits(const Tensor& t, const Shape& out);

// The operand as a binary post-op reads it: its own strides, with leading
// 1-dims so its rank is the destination's.
dnnl::memory::desc binaryOperandDesc(const Tensor& t, size_t dst_rank);

}  // namespace llga
