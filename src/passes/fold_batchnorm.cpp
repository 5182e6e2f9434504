// fold-batchnorm: an eval-mode batch_norm whose input is a convolution or
// linear (used by nothing else) with constant, bound weights folds into them:
//   s = gamma / sqrt(var + eps);  W' = W * s (per output channel);  b' = (b - mean) * s + beta
//
//   Given:  %c = aten::_convolution(%x, %W, %b, ...)     Result:  %c = aten::_convolution(%x, %W_fused_bn, %b_fused_bn, ...)
//           %y = aten::batch_norm(%c, %g, %be, %m, %v, False, ...)          (uses of %y read %c)
// Left alone, with a note: weights not constant or not bound, training
// mode, transposed convolutions, a convolution read by others too.
#include <cmath>

#include "passes/pass.h"
#include "passes/pass_utils.h"

namespace llga {
namespace {

class FoldBatchnorm final : public Pass {
 public:
  std::string_view name() const override { return "fold-batchnorm"; }
  std::string_view description() const override { return "fold eval batch_norm into the conv/linear before it"; }

  bool run(Graph& g) override {
    static const Symbol bn = Symbol::fromQualString("aten::batch_norm");
    std::vector<Node*> bns;
    g.forEachNode([&](Node* n) {
      if (n->kind() == bn) bns.push_back(n);
    });
    bool changed = false;
    for (Node* n : bns) changed |= fold(g, n);
    return changed;
  }

 private:
  bool fold(Graph& g, Node* bn) {
    auto fail = [&](const std::string& why) {
      note("aten::batch_norm" + (bn->source().empty() ? "" : " at " + bn->source()) + " (%" + bn->output()->debugName() +
           "): " + why);
      return false;
    };
    if (bn->inputs().size() != 9) return fail("unexpected arity");
    Node* producer = bn->input(0)->node();
    std::string kind = producer->kind().toQualString();
    bool conv = kind == "aten::_convolution" || kind == "aten::conv1d" || kind == "aten::conv2d" || kind == "aten::conv3d";
    if (!conv && kind != "aten::linear") return fail("its input comes from " + kind + ", not a convolution or linear");
    if (bn->input(0)->uses().size() != 1) return fail("the " + kind + " output is read by other nodes too");
    if (kind == "aten::_convolution") {
      auto transposed = constantNumber(producer->input(6));
      if (!transposed || *transposed != 0) return fail("transposed (or unknown) convolution");
    }
    auto training = constantNumber(bn->input(5));
    auto eps = constantNumber(bn->input(7));
    if (!training || *training != 0) return fail("training mode (or unknown)");
    if (!eps) return fail("eps is not a constant");
    const ConstantTensor* w = boundTensor(producer->input(1));
    const ConstantTensor* mean = boundTensor(bn->input(3));
    const ConstantTensor* var = boundTensor(bn->input(4));
    if (!w || !mean || !var) return fail("weights or statistics are not bound constants");
    const ConstantTensor* gamma = isNone(bn->input(1)) ? nullptr : boundTensor(bn->input(1));
    const ConstantTensor* beta = isNone(bn->input(2)) ? nullptr : boundTensor(bn->input(2));
    if ((!isNone(bn->input(1)) && !gamma) || (!isNone(bn->input(2)) && !beta)) return fail("affine parameters are not bound constants");
    bool has_bias = producer->inputs().size() > 2 && !isNone(producer->input(2));
    const ConstantTensor* b = has_bias ? boundTensor(producer->input(2)) : nullptr;
    if (has_bias && !b) return fail("the bias is not a bound constant");
    if (w->dtype != ScalarType::Float || w->sizes.empty()) return fail("float32 weights only");
    const int64_t oc = w->sizes[0];
    for (const ConstantTensor* t : {mean, var, gamma, beta, b})
      if (t && t->numel() != oc) return fail("per-channel tensors do not match the " + std::to_string(oc) + " output channels");

    auto nw = ConstantTensor::owned(ScalarType::Float, w->sizes);
    auto nb = ConstantTensor::owned(ScalarType::Float, {oc});
    const int64_t per = w->numel() / std::max<int64_t>(oc, 1);
    float* wp = static_cast<float*>(nw->data);
    float* bp = static_cast<float*>(nb->data);
    // Contiguous weights (the usual case) are read directly; others element by element.
    bool contiguous = true;
    for (size_t d = w->sizes.size(), expect = 1; d-- > 0;) {
      if (w->sizes[d] != 1 && w->strides[d] != static_cast<int64_t>(expect)) contiguous = false;
      expect *= static_cast<size_t>(w->sizes[d]);
    }
    const float* src = contiguous ? static_cast<const float*>(w->data) : nullptr;
    for (int64_t o = 0; o < oc; ++o) {
      double s = (gamma ? gamma->scalarAsDouble(o) : 1.0) / std::sqrt(var->scalarAsDouble(o) + *eps);
      for (int64_t i = 0; i < per; ++i) {
        size_t k = static_cast<size_t>(o * per + i);
        wp[k] = static_cast<float>((src ? static_cast<double>(src[k]) : w->scalarAsDouble(k)) * s);
      }
      double bias = b ? b->scalarAsDouble(o) : 0.0;
      bp[o] = static_cast<float>((bias - mean->scalarAsDouble(o)) * s + (beta ? beta->scalarAsDouble(o) : 0.0));
    }
    for (const ConstantTensor* t : {w, mean, var, gamma, beta, b})
      if (t && t->approximate) nw->approximate = nb->approximate = true;

    auto constant = [&](std::shared_ptr<ConstantTensor> t, const std::string& base) {
      Node* c = g.create(prim::Constant, 1);
      c->setAttr(attr::value, AttrValue(TensorRef(t)));
      c->output()->setType(constantTensorType(*t));
      c->insertBefore(producer);
      std::string name = base + "_fused_bn";
      if (!g.findValue(name)) c->output()->setDebugName(name);
      return c->output();
    };
    Value* wv = constant(nw, producer->input(1)->debugName());
    Value* bv = constant(nb, has_bias ? producer->input(2)->debugName() : bn->input(2)->debugName());
    producer->replaceInput(1, wv);
    if (producer->inputs().size() > 2) producer->replaceInput(2, bv);
    else producer->addInput(bv);
    bn->output()->replaceAllUsesWith(bn->input(0));
    bn->destroy();
    return true;
  }
};

}  // namespace

LLGA_REGISTER_PASS(FoldBatchnorm);

}  // namespace llga
