// fold-batchnorm: an eval-mode batch_norm whose input is a convolution or
// linear (used by nothing else) with constant, bound weights folds into them:
//   s = gamma / sqrt(var + eps);  W' = W * s (per output channel);  b' = (b - mean) * s + beta
//
//   Given:  %c = aten::_convolution(%x, %W, %b, ...)     Result:  %c = aten::_convolution(%x, %W_fused_bn, %b_fused_bn, ...)
//           %y = aten::batch_norm(%c, %g, %be, %m, %v, False, ...)          (uses of %y read %c)
// A batch_norm whose only reader is an unpadded, ungrouped convolution
// (maxvit's pre-norm before a 1x1 conv) folds into that one when it cannot
// fold into its producer (no conv/linear, or one read by others too): with
// t = beta - mean * s,  W'[o, i] = W[o, i] * s[i];  b'[o] = b[o] + sum_i,k W[o, i, k] * t[i]
// (exact only without padding: a padded border would see t where x is 0).
// Left alone, with a note: weights not constant or not bound, training
// mode, transposed convolutions, a convolution read by others too, a linear
// whose output is not 2-d (batch_norm's dim 1 is then not its features), and
// a convolution or linear the graph quantized (import-quantization's
// precision="int8": its weights are on the grid w_scale gives, its
// activation quantized at act_scale; folding would move the weights off that
// grid, or, into a reader, quantize batch_norm's input at the scale of its
// output: 12 output steps off on a quantized cat -> batch_norm -> conv).
// Under llga.quantize (the context's int8) a batch_norm does not fold into
// its reader either: that conv, calibrated and quantized later, would read
// batch_norm's input on one per-tensor grid, and a channel batch_norm
// scales up by g would carry g times the step (fuzzer seed 132318, signals:
// 27x the error of an emulation quantizing batch_norm's output).
#include <cmath>

#include "ir/effects.h"
#include "ir/precision.h"
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
  // bn -> conv (its only reader, no padding, one group): bn's per-channel
  // affine map folds into the conv's input channels.
  bool foldIntoReader(Graph& g, Node* bn) {
    if (bn->output()->uses().size() != 1) return false;
    Node* conv = bn->output()->uses()[0].user;
    const std::string kind = conv->kind().toQualString();
    const bool internal = kind == "aten::_convolution";
    if (!internal && kind != "aten::conv1d" && kind != "aten::conv2d" && kind != "aten::conv3d") return false;
    if (conv->input(0) != bn->output() || conv->inputs().size() < (internal ? 9u : 7u)) return false;
    if (precisionOf(*conv) == Precision::INT8) {
      note("aten::batch_norm (%" + bn->output()->debugName() + "): its reader %" + conv->output()->debugName() +
           " is int8 as the graph quantized it: it reads batch_norm's output at its scale");
      return false;
    }
    if (context().int8) {
      note("aten::batch_norm (%" + bn->output()->debugName() + "): its reader %" + conv->output()->debugName() +
           " may run int8 (llga.quantize): it quantizes batch_norm's output per tensor, as PyTorch's and ONNX "
           "Runtime's quantizers do; folded in, it would quantize batch_norm's input, whose channels batch_norm "
           "then scales apart");
      return false;
    }
    // The conv would read bn's input where it stands, not where bn did: not
    // when something may write into that memory (fuzzer seed 180104).
    if (writerOf(*aliasRoot(*bn->input(0)))) return false;
    if (internal) {
      auto transposed = constantNumber(conv->input(6));
      if (!transposed || *transposed != 0) return false;
    }
    auto padding = constantInts(conv->input(4));
    auto groups = constantInt(conv->input(internal ? 8 : 6));
    if (!padding || !groups || *groups != 1) return false;
    for (int64_t p : *padding)
      if (p != 0) return false;
    auto training = constantNumber(bn->input(5));
    auto eps = constantNumber(bn->input(7));
    if (!training || *training != 0 || !eps) return false;
    const ConstantTensor* w = boundTensor(conv->input(1));
    const ConstantTensor* mean = boundTensor(bn->input(3));
    const ConstantTensor* var = boundTensor(bn->input(4));
    const ConstantTensor* gamma = isNone(bn->input(1)) ? nullptr : boundTensor(bn->input(1));
    const ConstantTensor* beta = isNone(bn->input(2)) ? nullptr : boundTensor(bn->input(2));
    if (!w || !mean || !var || (!isNone(bn->input(1)) && !gamma) || (!isNone(bn->input(2)) && !beta)) return false;
    const bool has_bias = !isNone(conv->input(2));
    const ConstantTensor* b = has_bias ? boundTensor(conv->input(2)) : nullptr;
    if ((has_bias && !b) || w->dtype != ScalarType::Float || w->sizes.size() < 3) return false;
    const int64_t oc = w->sizes[0], ic = w->sizes[1], k = w->numel() / std::max<int64_t>(oc * ic, 1);
    for (const ConstantTensor* t : {mean, var, gamma, beta})
      if (t && t->numel() != ic) return false;
    if (b && b->numel() != oc) return false;
    auto nw = ConstantTensor::owned(ScalarType::Float, w->sizes);
    auto nb = ConstantTensor::owned(ScalarType::Float, {oc});
    float* wp = static_cast<float*>(nw->data);
    float* bp = static_cast<float*>(nb->data);
    std::vector<double> s(static_cast<size_t>(ic)), t(static_cast<size_t>(ic));
    for (int64_t i = 0; i < ic; ++i) {
      s[i] = (gamma ? gamma->scalarAsDouble(i) : 1.0) / std::sqrt(var->scalarAsDouble(i) + *eps);
      t[i] = (beta ? beta->scalarAsDouble(i) : 0.0) - mean->scalarAsDouble(i) * s[i];
    }
    for (int64_t o = 0; o < oc; ++o) {
      double acc = b ? b->scalarAsDouble(o) : 0.0;
      for (int64_t i = 0; i < ic; ++i)
        for (int64_t j = 0; j < k; ++j) {
          const size_t at = static_cast<size_t>((o * ic + i) * k + j);
          const double v = w->scalarAsDouble(static_cast<int64_t>(at));
          wp[at] = static_cast<float>(v * s[i]);
          acc += v * t[i];
        }
      bp[o] = static_cast<float>(acc);
    }
    for (const ConstantTensor* c : {w, mean, var, gamma, beta, b})
      if (c && c->approximate) nw->approximate = nb->approximate = true;
    auto constant = [&](std::shared_ptr<ConstantTensor> c, const std::string& base) {
      Node* n = g.create(prim::Constant, 1);
      n->setAttr(attr::value, AttrValue(TensorRef(c)));
      n->output()->setType(constantTensorType(*c));
      n->insertBefore(conv);
      std::string name = base + "_fused_bn";
      if (!g.findValue(name)) n->output()->setDebugName(name);
      return n->output();
    };
    conv->replaceInput(1, constant(nw, conv->input(1)->debugName()));
    conv->replaceInput(2, constant(nb, has_bias ? conv->input(2)->debugName() : bn->input(2)->debugName()));
    conv->replaceInput(0, bn->input(0));
    bn->destroy();
    return true;
  }

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
    if (!conv && kind != "aten::linear") {
      if (foldIntoReader(g, bn)) return true;
      return fail("its input comes from " + kind + ", not a convolution or linear (nor is its reader an unpadded conv)");
    }
    if (precisionOf(*producer) == Precision::INT8)
      return fail("the " + kind + " is int8 as the graph quantized it: folding would move its weights off their grid");
    if (bn->input(0)->uses().size() != 1) {  // maxvit's stem conv, read by the block's pre-norm and its shortcut
      if (foldIntoReader(g, bn)) return true;
      return fail("the " + kind + " output is read by other nodes too (nor is its reader an unpadded conv)");
    }
    if (kind == "aten::linear") {
      // batch_norm scales dim 1, the linear's features are its last dim: the same only at rank 2
      // (a linear over the last dim of [N, C, H, W] then batch_norm over C: found by the graph fuzzer).
      const TypePtr& t = bn->input(0)->type();
      const std::optional<size_t> rank = t->isTensor() ? t->tensorInfo().rank() : std::nullopt;
      if (rank != 2u)
        return fail(rank ? "the linear's output has rank " + std::to_string(*rank) +
                               ": batch_norm's channels (dim 1) are not its features (the last dim)"
                         : "the linear's output rank is unknown");
    }
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
