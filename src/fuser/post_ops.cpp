#include "fuser/post_ops.h"

#include <cmath>
#include <limits>
#include <optional>

#include "ir/ops.h"
#include "passes/pass_utils.h"

namespace llga {
namespace {

std::optional<double> number(const Value* v) { return isNone(v) ? std::nullopt : constantNumber(v); }

PostOpMatch fail(std::string why) { return {{}, std::move(why)}; }

PostOp eltwise(const char* name, PostOpAlg a, float alpha = 0, float beta = 0) {
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
  if (k == "aten::relu") return {{eltwise("relu", PostOpAlg::Relu)}, ""};
  if (k == "aten::sigmoid") return {{eltwise("sigmoid", PostOpAlg::Logistic)}, ""};
  if (k == "aten::tanh") return {{eltwise("tanh", PostOpAlg::Tanh)}, ""};
  if (k == "aten::abs") return {{eltwise("abs", PostOpAlg::Abs)}, ""};
  if (k == "aten::exp") return {{eltwise("exp", PostOpAlg::Exp)}, ""};
  if (k == "aten::square") return {{eltwise("square", PostOpAlg::Square)}, ""};
  if (k == "aten::sqrt") return {{eltwise("sqrt", PostOpAlg::Sqrt)}, ""};
  if (k == "aten::log") return {{eltwise("log", PostOpAlg::Log)}, ""};
  if (k == "aten::round") {
    if (n.inputs().size() > 1) return fail("round with decimals");
    return {{eltwise("round", PostOpAlg::Round)}, ""};
  }
  if (k == "aten::mish") return {{eltwise("mish", PostOpAlg::Mish)}, ""};
  if (k == "aten::silu") return {{eltwise("silu", PostOpAlg::Swish, 1.0f)}, ""};
  if (k == "aten::hardswish") return {{eltwise("hardswish", PostOpAlg::Hardswish)}, ""};
  if (k == "aten::hardsigmoid")  // relu6(x + 3) / 6 = clip(x / 6 + 0.5, 0, 1)
    return {{eltwise("hardsigmoid", PostOpAlg::Linear, 1.0f / 6, 0.5f), eltwise("hardsigmoid", PostOpAlg::Clip, 0, 1)}, ""};
  if (k == "aten::relu6") return {{eltwise("relu6", PostOpAlg::Clip, 0, 6)}, ""};
  if (k == "aten::gelu") {
    std::string approx = "none";
    if (n.inputs().size() > 1) {
      const AttrValue* c = n.input(1)->node()->kind() == prim::Constant ? n.input(1)->node()->attributes().find(attr::value) : nullptr;
      if (!c || !c->is<std::string>()) return fail("gelu's approximate is not a constant");
      approx = c->get<std::string>();
    }
    if (approx == "none") return {{eltwise("gelu", PostOpAlg::GeluErf)}, ""};
    if (approx == "tanh") return {{eltwise("gelu", PostOpAlg::GeluTanh)}, ""};
    return fail("gelu approximate='" + approx + "'");
  }
  if (k == "aten::leaky_relu") {
    float slope = 0.01f;
    if (n.inputs().size() > 1 && !bound(n, 1, 0.01, slope)) return fail("negative_slope is not a constant");
    return {{eltwise("leaky_relu", PostOpAlg::Relu, slope)}, ""};
  }
  if (k == "aten::elu") {
    float a = 1, scale = 1, in_scale = 1;
    if (!bound(n, 1, 1, a) || !bound(n, 2, 1, scale) || !bound(n, 3, 1, in_scale)) return fail("elu parameters are not constants");
    if (scale != 1 || in_scale != 1) return fail("elu with scale");
    return {{eltwise("elu", PostOpAlg::Elu, a)}, ""};
  }
  if (k == "aten::clamp" || k == "aten::hardtanh") {
    float lo, hi;
    double dlo = k == "aten::hardtanh" ? -1.0 : -inf, dhi = k == "aten::hardtanh" ? 1.0 : inf;
    if (!bound(n, 1, dlo, lo) || !bound(n, 2, dhi, hi)) return fail("bounds are not constant numbers");
    return {{eltwise(k == "aten::clamp" ? "clamp" : "hardtanh", PostOpAlg::Clip, lo, hi)}, ""};
  }
  if (k == "aten::fake_quantize_per_tensor_affine") {
    // (clamp(zp + round(x * (1 / s)), qmin, qmax) - zp) * s as four eltwise
    // post-ops: x * (1 / s) (as pow(x, 1) times 1 / s: a second linear in
    // the chain would take the first's parameters in oneDNN 2.6), round half
    // to even, clip to [qmin - zp, qmax - zp], times s. The same float
    // arithmetic as PyTorch's for finite x; a NaN stays NaN here, where
    // PyTorch writes qmin's value.
    // numbers only (import-quantization makes one-element tensors numbers):
    // a tensor constant reaches a partition as an input, where this cannot read it
    if (n.inputs().size() != 5) return fail("fake quantization with parameters that are not constants");
    const auto s = number(n.input(1)), zp = number(n.input(2)), qmin = number(n.input(3)), qmax = number(n.input(4));
    if (!s || !zp || !qmin || !qmax) return fail("fake quantization with parameters that are not constants");
    const float scale = static_cast<float>(*s);
    if (!(scale > 0) || !std::isfinite(scale) || *zp != std::nearbyint(*zp) || *zp < *qmin || *zp > *qmax)
      return fail("fake quantization with parameters its kernel rejects");
    return {{eltwise("fake_quant", PostOpAlg::Pow, 1.0f / scale, 1), eltwise("fake_quant", PostOpAlg::Round),
             eltwise("fake_quant", PostOpAlg::Clip, static_cast<float>(*qmin - *zp), static_cast<float>(*qmax - *zp)),
             eltwise("fake_quant", PostOpAlg::Linear, scale, 0)},
            ""};
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
    if (k == "aten::add") return {{eltwise(name, PostOpAlg::Linear, 1, v)}, ""};
    if (k == "aten::sub") return {{eltwise(name, PostOpAlg::Linear, 1, -v)}, ""};
    if (k == "aten::mul") return {{eltwise(name, PostOpAlg::Linear, v, 0)}, ""};
    if (k == "aten::div") return {{eltwise(name, PostOpAlg::Linear, 1 / v, 0)}, ""};
    return fail(k + " with a scalar");
  }
  PostOp p;
  p.kind = PostOp::Kind::Binary;
  p.alg = k == "aten::add" ? PostOpAlg::Add : k == "aten::sub" ? PostOpAlg::Sub : k == "aten::mul" ? PostOpAlg::Mul
        : k == "aten::div" ? PostOpAlg::Div : k == "aten::maximum" ? PostOpAlg::Max : PostOpAlg::Min;
  p.operand = other;
  p.name = name;
  return {{p}, ""};
}

// masked_fill(chain, mask, value), where(mask, value, chain) and
// where(mask, chain, value): value a constant number (canonicalize makes one
// of a 0-dim constant tensor), mask a tensor that is not known to be other
// than bool.
PostOpMatch select(const Node& n, const Value* chain) {
  const bool where = n.kind().toQualString() == "aten::where";
  if (n.inputs().size() != 3) return fail("unexpected arity");
  const Value* mask = where ? n.input(0) : n.input(1);
  const Value* value = where ? (n.input(1) == chain ? n.input(2) : n.input(1)) : n.input(2);
  if ((where ? n.input(1) != chain && n.input(2) != chain : n.input(0) != chain) || mask == chain || value == chain)
    return fail("the chain value is not the selected-from input");
  if (!mask->type()->isTensor()) return fail("the mask is not a tensor");
  if (auto dt = mask->type()->tensorInfo().dtype; dt && *dt != ScalarType::Bool) return fail("the mask is not bool");
  auto v = number(value);
  if (!v) return fail("the fill value is not a constant number");
  PostOp p;
  p.kind = PostOp::Kind::Select;
  p.alpha = static_cast<float>(*v);
  p.operand = mask;
  p.invert = where && n.input(1) == chain;
  p.name = where ? "where" : "masked_fill";
  return {{p}, ""};
}

}  // namespace

PostOpMatch translateChain(const std::vector<const Node*>& ops, size_t first, size_t end) {
  PostOpMatch all;
  for (size_t i = first; i < end; ++i) {
    PostOpMatch m = translatePostOp(*ops[i], ops[i - 1]->output());
    if (!m.ok()) return fail(ops[i]->kind().toQualString() + " is no post-op: " + m.why_not);
    all.ops.insert(all.ops.end(), m.ops.begin(), m.ops.end());
  }
  return all;
}

PostOpMatch translatePostOp(const Node& n, const Value* chain) {
  if (n.outputs().size() != 1 || n.inputs().empty()) return fail("not a single-output op");
  if (n.kind().toQualString() == "aten::masked_fill" || n.kind().toQualString() == "aten::where")
    return select(n, chain);
  if (hasTrait(n.kind(), op_trait::Binary)) {
    if (n.inputs().size() < 2) return fail("unexpected arity");
    return binary(n, chain);
  }
  if (n.input(0) != chain) return fail("the chain value is not the op's input");
  return unary(n);
}

}  // namespace llga
