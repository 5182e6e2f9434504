#include "runtime/post_ops.h"

#include <cmath>
#include <limits>
#include <set>

#include "runtime/constant_eval.h"
#include "runtime/dnnl_utils.h"
#include "runtime/swish.h"

namespace llga {
namespace {

using alg = dnnl::algorithm;

std::optional<double> number(const Value* v) {
  if (v->type()->isSimple("NoneType")) return std::nullopt;
  auto c = constantValue(*v->node());
  if (!c || !(c->isInt() || c->isDouble() || c->isBool())) return std::nullopt;
  return c->toDouble();
}

PostOpMatch fail(std::string why) { return {{}, std::move(why)}; }

PostOp eltwise(const char* name, alg a, float alpha = 0, float beta = 0) {
  PostOp p;
  p.kind = PostOp::Kind::Eltwise;
  p.alg = a;
  p.alpha = alpha;
  p.beta = beta;
  p.name = name;
  return p;
}

// clamp-like bounds: a constant number, or None for no bound.
bool bound(const Node& n, size_t i, double dflt, float& out) {
  if (i >= n.inputs().size() || n.input(i)->type()->isSimple("NoneType")) {
    out = static_cast<float>(dflt);
    return true;
  }
  auto v = number(n.input(i));
  if (!v) return false;
  out = static_cast<float>(*v);
  return true;
}

PostOpMatch unary(const Node& n) {
  const std::string k = n.kind().toQualString();
  const float inf = std::numeric_limits<float>::infinity();
  if (k == "aten::relu") return {{eltwise("relu", alg::eltwise_relu)}, ""};
  if (k == "aten::sigmoid") return {{eltwise("sigmoid", alg::eltwise_logistic)}, ""};
  if (k == "aten::tanh") return {{eltwise("tanh", alg::eltwise_tanh)}, ""};
  if (k == "aten::abs") return {{eltwise("abs", alg::eltwise_abs)}, ""};
  if (k == "aten::exp") return {{eltwise("exp", alg::eltwise_exp)}, ""};
  if (k == "aten::square") return {{eltwise("square", alg::eltwise_square)}, ""};
  if (k == "aten::sqrt") return {{eltwise("sqrt", alg::eltwise_sqrt)}, ""};
  if (k == "aten::log") return {{eltwise("log", alg::eltwise_log)}, ""};
  if (k == "aten::round") {
    if (n.inputs().size() > 1) return fail("round with decimals");
    return {{eltwise("round", alg::eltwise_round)}, ""};
  }
  if (k == "aten::mish") return {{eltwise("mish", alg::eltwise_mish)}, ""};
  if (k == "aten::silu") return {{eltwise("silu", alg::eltwise_swish, 1.0f)}, ""};
  if (k == "aten::hardswish") return {{eltwise("hardswish", alg::eltwise_hardswish)}, ""};
  if (k == "aten::hardsigmoid")  // relu6(x + 3) / 6 = clip(x / 6 + 0.5, 0, 1)
    return {{eltwise("hardsigmoid", alg::eltwise_linear, 1.0f / 6, 0.5f), eltwise("hardsigmoid", alg::eltwise_clip_v2, 0, 1)}, ""};
  if (k == "aten::relu6") return {{eltwise("relu6", alg::eltwise_clip_v2, 0, 6)}, ""};
  if (k == "aten::gelu") {
    std::string approx = "none";
    if (n.inputs().size() > 1) {
      auto c = constantValue(*n.input(1)->node());
      if (!c || !std::holds_alternative<std::string>(c->v)) return fail("gelu's approximate is not a constant");
      approx = c->str();
    }
    if (approx == "none") return {{eltwise("gelu", alg::eltwise_gelu_erf)}, ""};
    if (approx == "tanh") return {{eltwise("gelu", alg::eltwise_gelu_tanh)}, ""};
    return fail("gelu approximate='" + approx + "'");
  }
  if (k == "aten::leaky_relu") {
    float slope = 0.01f;
    if (n.inputs().size() > 1 && !bound(n, 1, 0.01, slope)) return fail("negative_slope is not a constant");
    return {{eltwise("leaky_relu", alg::eltwise_relu, slope)}, ""};
  }
  if (k == "aten::elu") {
    float a = 1, scale = 1, in_scale = 1;
    if (!bound(n, 1, 1, a) || !bound(n, 2, 1, scale) || !bound(n, 3, 1, in_scale)) return fail("elu parameters are not constants");
    if (scale != 1 || in_scale != 1) return fail("elu with scale");
    return {{eltwise("elu", alg::eltwise_elu, a)}, ""};
  }
  if (k == "aten::clamp" || k == "aten::hardtanh") {
    float lo, hi;
    double dlo = k == "aten::hardtanh" ? -1.0 : -inf, dhi = k == "aten::hardtanh" ? 1.0 : inf;
    if (!bound(n, 1, dlo, lo) || !bound(n, 2, dhi, hi)) return fail("bounds are not constant numbers");
    return {{eltwise(k == "aten::clamp" ? "clamp" : "hardtanh", alg::eltwise_clip_v2, lo, hi)}, ""};
  }
  return fail("no post-op for " + k);
}

PostOpMatch binary(const Node& n, const Value* chain) {
  const std::string k = n.kind().toQualString();
  const bool first = n.input(0) == chain;
  const Value* other = first ? n.input(1) : n.input(0);
  if (n.input(0) == n.input(1)) return fail("both operands are the chain value");
  if (k == "aten::add" || k == "aten::sub") {
    if (n.inputs().size() > 2) {
      auto a = number(n.input(2));
      if (!a || *a != 1) return fail("alpha != 1 (prepare-binary splits it)");
    }
  }
  if (!first && (k == "aten::sub" || k == "aten::div")) return fail("the chain value is the second operand of " + k);
  const char* name = k == "aten::add" ? "add" : k == "aten::sub" ? "sub" : k == "aten::mul" ? "mul" : k == "aten::div" ? "div"
                   : k == "aten::maximum" ? "max" : "min";
  if (!other->type()->isTensor()) {  // a scalar: alpha * x + beta
    auto c = number(other);
    if (!c) return fail("the scalar operand is not a constant");
    float v = static_cast<float>(*c);
    if (k == "aten::add") return {{eltwise(name, alg::eltwise_linear, 1, v)}, ""};
    if (k == "aten::sub") return {{eltwise(name, alg::eltwise_linear, 1, -v)}, ""};
    if (k == "aten::mul") return {{eltwise(name, alg::eltwise_linear, v, 0)}, ""};
    if (k == "aten::div") return {{eltwise(name, alg::eltwise_linear, 1 / v, 0)}, ""};
    return fail(k + " with a scalar");
  }
  PostOp p;
  p.kind = PostOp::Kind::Binary;
  p.alg = k == "aten::add" ? alg::binary_add : k == "aten::sub" ? alg::binary_sub : k == "aten::mul" ? alg::binary_mul
        : k == "aten::div" ? alg::binary_div : k == "aten::maximum" ? alg::binary_max : alg::binary_min;
  p.operand = other;
  p.name = name;
  return {{p}, ""};
}

}  // namespace

PostOpMatch translatePostOp(const Node& n, const Value* chain) {
  if (n.outputs().size() != 1 || n.inputs().empty()) return fail("not a single-output op");
  static const std::set<std::string> binaries = {"aten::add", "aten::sub", "aten::mul", "aten::div", "aten::maximum",
                                                 "aten::minimum"};
  const std::string k = n.kind().toQualString();
  if (binaries.count(k)) {
    if (n.inputs().size() < 2) return fail("unexpected arity");
    // x * sigmoid(x): swish.
    if (k == "aten::mul") {
      const Value* other = n.input(0) == chain ? n.input(1) : n.input(0);
      const Node* s = other->node();
      if (s->kind().toQualString() == "aten::sigmoid" && s->input(0) == chain && other->uses().size() == 1)
        return {{eltwise("silu", alg::eltwise_swish, 1.0f)}, ""};
    }
    return binary(n, chain);
  }
  if (n.input(0) != chain) return fail("the chain value is not the op's input");
  return unary(n);
}

dnnl::primitive_attr postOpAttr(const std::vector<PostOp>& ops, const std::vector<dnnl::memory::desc>& operand_mds) {
  dnnl::primitive_attr attr = scratchpadAttr();
  dnnl::post_ops po;
  size_t b = 0;
  for (const PostOp& p : ops) {
    switch (p.kind) {
      case PostOp::Kind::Eltwise: po.append_eltwise(1.0f, p.alg, p.alpha, p.beta); break;
      case PostOp::Kind::Sum: po.append_sum(1.0f); break;
      case PostOp::Kind::Binary: po.append_binary(p.alg, operand_mds.at(b++)); break;
    }
  }
  attr.set_post_ops(po);
  return attr;
}

bool takeFinalSwish(std::vector<PostOp>& ops, int64_t out_elements) {
  if (ops.empty() || ops.back().kind != PostOp::Kind::Eltwise || ops.back().alg != alg::eltwise_swish ||
      ops.back().alpha != 1.0f || out_elements < kFastSwishMinElements || !fastSwishEnabled())
    return false;
  ops.pop_back();
  return true;
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
    throw std::invalid_argument("fused post-op: operand " + t.describe() + " does not broadcast to the output [" + shape + "]");
  }
}

dnnl::memory::desc binaryOperandDesc(const Tensor& t, size_t dst_rank) {
  Shape dims(dst_rank - std::min<size_t>(dst_rank, static_cast<size_t>(t.dim())), 1), strides(dims.size(), 1);
  for (int64_t d = 0; d < t.dim(); ++d) {
    dims.push_back(t.size(d));
    strides.push_back(t.size(d) == 1 ? 1 : t.stride(d));
  }
  // Leading 1-dims get the stride of a whole tensor (any value is legal for extent 1).
  return dnnl::memory::desc(dims, dnnlType(t.dtype()), strides);
}

}  // namespace llga
