// Post-op chains on oneDNN: the PostOp records the fuser's rules produce
// (fuser/post_ops.h, the one place that decides which op becomes which
// post-op) as a oneDNN primitive attribute, plus the checks and operand
// descriptors the fused kernels need at run time.
#pragma once

#include <stdexcept>

#include <optional>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "backend/dnnl/activations.h"
#include "backend/dnnl/eltwise_step.h"
#include "fuser/post_ops.h"
#include "ir/ir.h"
#include "runtime/tensor.h"

namespace llga {

// A chain as the steps llga's own kernels apply (backend/dnnl/eltwise_step.h),
// where each op is an eltwise relu, clip, linear, logistic or swish; else
// nullopt (the kernel's caller takes oneDNN's primitive).
std::optional<std::vector<vec::Step>> eltwiseSteps(const std::vector<PostOp>& ops);

// The oneDNN algorithm of a post-op.
dnnl::algorithm dnnlAlgorithm(PostOpAlg a);

// A Sum op's parameters: dst += scale * (dst's previous value - zero_point),
// that value read as `dt` (undef: dst's own data type).
struct SumParams {
  float scale = 1.0f;
  int32_t zero_point = 0;
  dnnl::memory::data_type dt = dnnl::memory::data_type::undef;
};

// Builds the attribute (user scratchpad plus post-ops); `operand_mds` gives
// the memory descriptor of each Binary op's operand, in chain order.
dnnl::primitive_attr postOpAttr(const std::vector<PostOp>& ops, const std::vector<dnnl::memory::desc>& operand_mds,
                                const SumParams& sum = {});

// When the chain ends in silu or gelu (erf) and the output has enough
// elements for llga's own pass (backend/dnnl/activations.h) to beat oneDNN's
// post-op, removes it from `ops` and returns which: the caller runs
// runOwnActivation after the primitive. Otherwise None, `ops` untouched.
OwnActivation takeFinalActivation(std::vector<PostOp>& ops, int64_t out_elements);

// A fused chain's operand that would broadcast the output up (a shape the
// fuser did not see): the chain must run op by op instead.
struct OperandGrowsOutput : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// Throws OperandGrowsOutput unless `t` broadcasts to `out` without growing it.
void checkOperandFits(const Tensor& t, const Shape& out);

// The operand as a binary post-op reads it: its own strides, with leading
// 1-dims so its rank is the destination's.
dnnl::memory::desc binaryOperandDesc(const Tensor& t, size_t dst_rank);

// `t` as a binary post-op (or a binary primitive's second source) may read
// it when the destination has `out_numel` elements: a full-size operand as
// it is (a channels-last residual keeps its strides), a broadcast one (fewer
// elements) dense row-major. oneDNN 2.6's jit kernels take the per-channel
// and per-row broadcast strategies from the operand's dims and read its
// values as if dense: a strided per-channel slice (x[:, ::2] of a pooled
// map, split(..)[1] of one) gave wrong results (found by
// scripts/fuzz_graphs.py, seed 311762). A copy of a broadcast operand is small.
Tensor postOpOperand(const Tensor& t, int64_t out_numel);

}  // namespace llga
