// The `scaled_conv` pattern's kernel (fuser/patterns.cpp): mul(x, s) with s
// one number per channel of one image x [1, C, H, W] (squeeze-excite's
// scale), then a 1x1 convolution with constant weights W and its post-ops:
//   conv(x * s, W) = conv(x, W * s)   (s scales W's input channels)
// so each call scales the OC x C weights instead of the map and runs the
// convolution primitive on x as it is (its weights reordered per call, as a
// variable weight is). The map is read once by the convolution instead of
// read, scaled, written and read again. Calls whose tensors do not fit (more
// than one image, a blocked map, another dtype) and groups in another
// precision run the ops one by one (makeChainKernel), which the report says.
#include <array>
#include <atomic>

#include "backend/dnnl/fusion_group.h"
#include "backend/dnnl/ops/fused.h"
#include "backend/dnnl/ops/op_utils.h"
#include "fuser/post_ops.h"

namespace llga {
namespace {

class ScaledConvKernel final : public Kernel {
 public:
  // `sources`: the convolution's arguments (input, weight, ... then its
  // post-op operands) as the group has them; the input and weight slots are
  // filled per call.
  ScaledConvKernel(std::unique_ptr<Kernel> conv, std::vector<Source> sources, int mul_a, int mul_b, int weight,
                   std::unique_ptr<Kernel> fallback)
      : conv_(std::move(conv)), sources_(std::move(sources)), mul_a_(mul_a), mul_b_(mul_b), weight_(weight),
        fallback_(std::move(fallback)) {}

  void run(const KernelArgs& a) override {
    const RtValue& va = a.input(static_cast<size_t>(mul_a_));
    const RtValue& vb = a.input(static_cast<size_t>(mul_b_));
    const RtValue& vw = a.input(static_cast<size_t>(weight_));
    auto fits = [](const RtValue& v) {
      return v.isTensor() && v.tensor().dtype() == ScalarType::Float && !v.tensor().isBlocked() && v.tensor().dim() == 4;
    };
    bool ok = fits(va) && fits(vb) && fits(vw);
    const Tensor* map = nullptr;
    const Tensor* scale = nullptr;
    if (ok) {
      const bool a_map = va.tensor().size(2) * va.tensor().size(3) > 1;
      map = a_map ? &va.tensor() : &vb.tensor();
      scale = a_map ? &vb.tensor() : &va.tensor();
      const Tensor& w = vw.tensor();
      ok = map->size(0) == 1 && scale->size(0) == 1 && scale->size(1) == map->size(1) && scale->size(2) == 1 &&
           scale->size(3) == 1 && w.size(1) == map->size(1) && w.size(2) == 1 && w.size(3) == 1;
    }
    if (!ok) {
      fallback_ran_.store(true, std::memory_order_relaxed);
      return fallback_->run(a);
    }
    fallback_ran_.store(false, std::memory_order_relaxed);
    const Tensor& w = vw.tensor();
    const int64_t oc = w.size(0), c = w.size(1);
    Tensor scaled = Tensor::empty(ScalarType::Float, w.sizes());
    float* dst = scaled.data<float>();
    const float* wp = w.data<float>();
    const float* sp = scale->data<float>();
    const int64_t ws0 = w.stride(0), ws1 = w.stride(1), ss = scale->stride(1);
    if (ws1 == 1 && ss == 1) {  // the usual case: rows of W times s, vectorised
      for (int64_t o = 0; o < oc; ++o) {
        const float* __restrict row = wp + o * ws0;
        float* __restrict out = dst + o * c;
        for (int64_t i = 0; i < c; ++i) out[i] = row[i] * sp[i];
      }
    } else {
      for (int64_t o = 0; o < oc; ++o)
        for (int64_t i = 0; i < c; ++i) dst[o * c + i] = wp[o * ws0 + i * ws1] * sp[i * ss];
    }
    RtValue x(*map), wv(std::move(scaled));
    std::array<RtValue*, 32> in_small;
    std::vector<RtValue*> in_big;
    RtValue** in = in_small.data();
    if (sources_.size() > in_small.size()) {
      in_big.resize(sources_.size());
      in = in_big.data();
    }
    uint64_t dying = 0;
    for (size_t k = 0; k < sources_.size(); ++k) {
      in[k] = k == 0 ? &x : k == 1 ? &wv : sources_[k].input >= 0 ? a.in[sources_[k].input] : &sources_[k].constant;
      if (k >= 2 && k < 64 && sources_[k].input >= 0 && a.inputDies(static_cast<size_t>(sources_[k].input)))
        dying |= uint64_t{1} << k;
    }
    conv_->run(KernelArgs{in, sources_.size(), a.out, a.num_out, a.ctx, dying, a.strided_out});
  }

  // The map as the convolution takes it: strided (channels-last) where it
  // does and the op-by-op path does too; never blocked (the scale is
  // applied per call to the weights, which are plain).
  bool acceptsStrided(size_t input) const override {
    return fallback_->acceptsStrided(input) &&
           (static_cast<int>(input) == mul_a_ || static_cast<int>(input) == mul_b_ ? conv_->acceptsStrided(0) : true);
  }
  void allowStridedOutput(size_t output) override {
    conv_->allowStridedOutput(output);
    fallback_->allowStridedOutput(output);
  }
  KernelReport report() const override {
    if (fallback_ran_.load(std::memory_order_relaxed)) {
      KernelReport r = fallback_->report();
      r.detail = "mul and convolution one by one: the call's tensors do not fit" + (r.detail.empty() ? "" : "; " + r.detail);
      return r;
    }
    KernelReport r = conv_->report();
    r.detail = "the per-channel scale folded into the weights" + (r.detail.empty() ? "" : "; " + r.detail);
    return r;
  }
  const char* primitiveKind() const override { return conv_->primitiveKind(); }

 private:
  std::unique_ptr<Kernel> conv_;
  std::vector<Source> sources_;
  int mul_a_, mul_b_, weight_;
  std::unique_ptr<Kernel> fallback_;
  std::atomic<bool> fallback_ran_{false};
};

std::unique_ptr<Kernel> makeScaledConvKernel(const Node& group) {
  std::unique_ptr<Kernel> fallback = makeChainKernel(group);
  const std::optional<std::vector<const Node*>> fp32 = fp32OpsOf(group);
  if (!fp32) return fallback;
  const std::vector<const Node*>& ops = *fp32;
  const Graph* sub = group.subgraph().get();
  // The fuser's shape of the group (checkScaledConv in fuser/patterns.cpp).
  if (ops.size() < 2 || ops[1]->input(0) != ops[0]->output()) return fallback;
  const Node* mul = ops[0];
  const Node* conv = ops[1];
  PostOpMatch tail = translateChain(ops, 2, ops.size());
  if (!tail.ok()) return fallback;
  std::vector<PostOp>& chain = tail.ops;
  const Source sa = sourceOf(*sub, mul->input(0)), sb = sourceOf(*sub, mul->input(1)), sw = sourceOf(*sub, conv->input(1));
  if (sa.input < 0 || sb.input < 0 || sw.input < 0) return fallback;
  std::vector<Source> sources;
  for (const Value* in : conv->inputs()) sources.push_back(in == conv->input(0) ? Source{} : sourceOf(*sub, in));
  for (const PostOp& p : chain)
    if (p.operand) sources.push_back(sourceOf(*sub, p.operand));
  auto inner = makeFusedConv(*conv, chain, /*constant_weight=*/false);
  return std::make_unique<ScaledConvKernel>(std::move(inner), std::move(sources), sa.input, sb.input, sw.input,
                                            std::move(fallback));
}

}  // namespace

LLGA_REGISTER_PATTERN_KERNEL(scaled_conv,
                             "dnnl convolution + post-ops with the per-channel scale folded into its weights per "
                             "call (one primitive); otherwise the mul and its chain one by one",
                             makeScaledConvKernel);

}  // namespace llga
