#include "backend/dnnl/post_ops.h"

#include <cmath>

#include "backend/dnnl/dnnl_utils.h"
#include "backend/dnnl/activations.h"

namespace llga {

std::optional<std::vector<vec::Step>> eltwiseSteps(const std::vector<PostOp>& ops) {
  std::vector<vec::Step> steps;
  using K = vec::Step::Kind;
  for (const PostOp& op : ops) {
    if (op.kind != PostOp::Kind::Eltwise) return std::nullopt;
    switch (op.alg) {
      case PostOpAlg::Relu: steps.push_back({K::Relu, op.alpha, 0}); break;
      case PostOpAlg::Clip: steps.push_back({K::Clip, op.alpha, op.beta}); break;
      case PostOpAlg::Linear: steps.push_back({K::Linear, op.alpha, op.beta}); break;
      case PostOpAlg::Logistic: steps.push_back({K::Sigmoid, 0, 0}); break;
      case PostOpAlg::Swish: steps.push_back({K::Swish, op.alpha, 0}); break;
      default: return std::nullopt;
    }
  }
  return steps;
}

dnnl::algorithm dnnlAlgorithm(PostOpAlg a) {
  using alg = dnnl::algorithm;
  switch (a) {
    case PostOpAlg::Relu: return alg::eltwise_relu;
    case PostOpAlg::Logistic: return alg::eltwise_logistic;
    case PostOpAlg::Tanh: return alg::eltwise_tanh;
    case PostOpAlg::Abs: return alg::eltwise_abs;
    case PostOpAlg::Exp: return alg::eltwise_exp;
    case PostOpAlg::Square: return alg::eltwise_square;
    case PostOpAlg::Sqrt: return alg::eltwise_sqrt;
    case PostOpAlg::Log: return alg::eltwise_log;
    case PostOpAlg::Round: return alg::eltwise_round;
    case PostOpAlg::Mish: return alg::eltwise_mish;
    case PostOpAlg::Swish: return alg::eltwise_swish;
    case PostOpAlg::Hardswish: return alg::eltwise_hardswish;
    case PostOpAlg::Linear: return alg::eltwise_linear;
    case PostOpAlg::Pow: return alg::eltwise_pow;
    case PostOpAlg::Clip: return alg::eltwise_clip_v2;
    case PostOpAlg::GeluErf: return alg::eltwise_gelu_erf;
    case PostOpAlg::GeluTanh: return alg::eltwise_gelu_tanh;
    case PostOpAlg::Elu: return alg::eltwise_elu;
    case PostOpAlg::Add: return alg::binary_add;
    case PostOpAlg::Sub: return alg::binary_sub;
    case PostOpAlg::Mul: return alg::binary_mul;
    case PostOpAlg::Div: return alg::binary_div;
    case PostOpAlg::Max: return alg::binary_max;
    case PostOpAlg::Min: return alg::binary_min;
  }
  throw std::logic_error("unknown post-op algorithm");
}

dnnl::primitive_attr postOpAttr(const std::vector<PostOp>& ops, const std::vector<dnnl::memory::desc>& operand_mds,
                                const SumParams& sum) {
  dnnl::primitive_attr attr = scratchpadAttr();
  dnnl::post_ops po;
  size_t b = 0;
  for (const PostOp& p : ops) {
    switch (p.kind) {
      case PostOp::Kind::Eltwise: po.append_eltwise(1.0f, dnnlAlgorithm(p.alg), p.alpha, p.beta); break;
      case PostOp::Kind::Sum: po.append_sum(sum.scale, sum.zero_point, sum.dt); break;
      case PostOp::Kind::Binary: po.append_binary(dnnlAlgorithm(p.alg), operand_mds.at(b++)); break;
      case PostOp::Kind::Select:  // the fuser gives it only to patterns whose kernels apply it
        throw std::logic_error("post-ops: oneDNN applies no " + p.name);
    }
  }
  attr.set_post_ops(po);
  return attr;
}

OwnActivation takeFinalActivation(std::vector<PostOp>& ops, int64_t out_elements) {
  if (ops.empty() || ops.back().kind != PostOp::Kind::Eltwise || out_elements < kOwnActivationMinElements)
    return OwnActivation::None;
  const PostOp& last = ops.back();
  OwnActivation a = OwnActivation::None;
  if (last.alg == PostOpAlg::Swish && last.alpha == 1.0f && fastSwishEnabled()) a = OwnActivation::Swish;
  else if (last.alg == PostOpAlg::GeluErf && fastGeluEnabled()) a = OwnActivation::GeluErf;
  if (a != OwnActivation::None) ops.pop_back();
  return a;
}

void checkOperandFits(const Tensor& t, const Shape& out) {
  bool ok = static_cast<size_t>(t.dim()) <= out.size();
  for (int64_t i = 0; ok && i < t.dim(); ++i) {
    int64_t od = t.size(t.dim() - 1 - i), d = out[out.size() - 1 - static_cast<size_t>(i)];
    ok = od == 1 || od == d;
  }
  if (!ok) {
    std::string shape;
    for (int64_t d : out) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    throw OperandGrowsOutput("fused post-op: operand " + t.describe() + " does not broadcast to the output [" + shape + "]");
  }
}

Tensor postOpOperand(const Tensor& t, int64_t out_numel) {
  if (t.isBlocked() || t.numel() >= out_numel || t.isContiguous()) return t;
  return t.contiguous();
}

dnnl::memory::desc binaryOperandDesc(const Tensor& t, size_t dst_rank) {
  Shape dims(dst_rank - std::min<size_t>(dst_rank, static_cast<size_t>(t.dim())), 1), strides(dims.size(), 1);
  dims.insert(dims.end(), t.sizes().begin(), t.sizes().end());
  strides.insert(strides.end(), t.strides().begin(), t.strides().end());
  // Size-1 dims (leading or broadcast) get a row-major stride: with stride 1
  // there, swin's 1x3x49x49 position bias read as a permuted layout and its
  // add after the attention matmul ran in oneDNN's reference kernel.
  return dnnl::memory::desc(dims, dnnlType(t.dtype()), unitDimStrides(dims, strides));
}

}  // namespace llga
