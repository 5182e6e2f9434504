// PyTorch's fused transformer ops, composed from oneDNN matmul/softmax/layer_norm.
//   aten::_native_multi_head_attention(q, k, v, embed_dim, num_head, qkv_weight, qkv_bias,
//       proj_weight, proj_bias, mask=None, need_weights=True, average_attn_weights=True, mask_type=None)
//   aten::_transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight,
//       proj_bias, use_gelu, norm_first, eps, norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2,
//       ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2, mask=None, mask_type=None)
// Inputs are batch-first [B, L, E] (or unbatched [L, E]).
#include <cmath>

#include "backend/dnnl/ops/functional.h"
#include "backend/dnnl/ops/op_utils.h"

namespace llga {
namespace {

void addInto(Tensor& dst, const Tensor& src) {  // dst += src (same shape, float32)
  Tensor s = src.contiguous();
  float* d = dst.data<float>();
  const float* p = s.data<float>();
  for (int64_t i = 0, n = dst.numel(); i < n; ++i) d[i] += p[i];
}

struct Attention {
  std::shared_ptr<MatmulCache> proj = makeMatmulCache(), bmm = makeMatmulCache();
  std::shared_ptr<SoftmaxCache> softmax = makeSoftmaxCache();

  // Returns (output [B, L, E], attention weights [B, H, L, S]).
  std::pair<Tensor, Tensor> run(ExecContext& ctx, Tensor q_in, Tensor k_in, Tensor v_in, int64_t heads,
                                const Tensor& qkv_w, const Tensor& qkv_b, const Tensor& proj_w, const Tensor& proj_b,
                                const std::optional<Tensor>& mask, std::optional<int64_t> mask_type, bool constant,
                                Precision precision, const Tensor* residual = nullptr) {
    const int64_t e = qkv_w.size(1);
    if (qkv_w.size(0) != 3 * e || e % heads != 0)
      throw std::invalid_argument("attention: qkv_weight " + qkv_w.describe() + " does not fit " + std::to_string(heads) + " heads");
    const bool self_attn = q_in.sharesStorageWith(k_in) && k_in.sharesStorageWith(v_in) && q_in.offset() == k_in.offset() &&
                           q_in.sizes() == k_in.sizes() && k_in.sizes() == v_in.sizes() && q_in.strides() == k_in.strides();
    Tensor q, k, v;
    if (self_attn) {
      Tensor qkv = linearOp(ctx, q_in, qkv_w, qkv_b, *proj, constant, precision);
      q = qkv.narrow(-1, 0, e);
      k = qkv.narrow(-1, e, e);
      v = qkv.narrow(-1, 2 * e, e);
    } else {
      q = linearOp(ctx, q_in, qkv_w.narrow(0, 0, e), qkv_b.narrow(0, 0, e), *proj, constant, precision);
      k = linearOp(ctx, k_in, qkv_w.narrow(0, e, e), qkv_b.narrow(0, e, e), *proj, constant, precision);
      v = linearOp(ctx, v_in, qkv_w.narrow(0, 2 * e, e), qkv_b.narrow(0, 2 * e, e), *proj, constant, precision);
    }
    const int64_t b = q.size(0), l = q.size(1), s = k.size(1), d = e / heads;
    auto split = [&](const Tensor& t, int64_t len) { return t.reshape({b, len, heads, d}).permute({0, 2, 1, 3}); };
    Tensor qh = split(q, l).contiguous();
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    for (float *p = qh.data<float>(), *end = p + qh.numel(); p != end; ++p) *p *= scale;
    Tensor scores = matmulOp(ctx, qh, split(k, s).transpose(-1, -2), *bmm, precision);  // [B, H, L, S]
    if (mask) applyMask(scores, *mask, mask_type, b, heads, l, s);
    Tensor attn = softmaxOp(ctx, scores, -1, *softmax);
    Tensor ctxv = matmulOp(ctx, attn, split(v, s), *bmm, precision);  // [B, H, L, D]
    Tensor merged = ctxv.permute({0, 2, 1, 3}).reshape({b, l, e});
    if (residual)  // the output projection with the residual added in the same primitive
      return {linearChainOp(ctx, merged, proj_w, proj_b, *proj, constant, precision,
                            {{.kind = PostOp::Kind::Binary, .alg = PostOpAlg::Add, .name = "add"}}, {*residual}),
              attn};
    return {linearOp(ctx, merged, proj_w, proj_b, *proj, constant, precision), attn};
  }

  // Boolean masks hide positions where they are true; float masks are added.
  static void applyMask(Tensor& scores, const Tensor& mask, std::optional<int64_t> type, int64_t b, int64_t h,
                        int64_t l, int64_t s) {
    Tensor m = mask;
    if (type && *type == 1) m = m.reshape({b, 1, 1, s});          // key padding mask [B, S]
    else if (m.dim() == 2) m = m.reshape({1, 1, m.size(0), m.size(1)});  // attention mask [L, S]
    else if (m.dim() == 3) m = m.reshape({b, h, l, s});
    Tensor full = m.expand({b, h, l, s}).contiguous();
    float* p = scores.data<float>();
    if (full.dtype() == ScalarType::Bool) {
      const bool* q = full.data<bool>();
      for (int64_t i = 0, n = scores.numel(); i < n; ++i)
        if (q[i]) p[i] = -INFINITY;
    } else {
      Tensor f = full.to(ScalarType::Float);
      const float* q = f.data<float>();
      for (int64_t i = 0, n = scores.numel(); i < n; ++i) p[i] += q[i];
    }
  }
};

bool constantInputs(const Node& n, std::initializer_list<size_t> idx) {
  for (size_t i : idx)
    if (!isConstantInput(n, i)) return false;
  return true;
}

class MhaKernel final : public Kernel {
 public:
  MhaKernel(bool constant, Precision precision) : constant_(constant), precision_(precision) {}
  void run(const KernelArgs& a) override {
    Tensor q = a.tensor(0), k = a.tensor(1), v = a.tensor(2);
    bool unbatched = q.dim() == 2;
    if (unbatched) {
      q = q.unsqueeze(0);
      k = k.unsqueeze(0);
      v = v.unsqueeze(0);
    }
    if (q.dim() != 3) throw std::invalid_argument("multi-head attention expects [B, L, E] inputs, got " + q.describe());
    int64_t heads = a.toInt(4);
    std::optional<int64_t> mask_type;
    if (!a.isNone(12)) mask_type = a.toInt(12);
    auto [out, attn] = impl_.run(a.ctx, q, k, v, heads, a.tensor(5), a.tensor(6), a.tensor(7), a.tensor(8),
                                 a.optTensor(9), mask_type, constant_, precision_);
    bool need_weights = a.num_in > 10 ? a.toBool(10) : true;
    bool average = a.num_in > 11 ? a.toBool(11) : true;
    Tensor weights = Tensor::empty(ScalarType::Float, {0});
    if (need_weights) {
      if (average) {  // mean over heads
        Tensor avg = Tensor::zeros(ScalarType::Float, {attn.size(0), attn.size(2), attn.size(3)});
        for (int64_t h = 0; h < attn.size(1); ++h) addInto(avg, attn.select(1, h));
        float inv = 1.0f / static_cast<float>(attn.size(1));
        for (float *p = avg.data<float>(), *end = p + avg.numel(); p != end; ++p) *p *= inv;
        weights = avg;
      } else {
        weights = attn;
      }
      if (unbatched) weights = weights.squeeze(0);
    }
    a.set(0, unbatched ? out.squeeze(0) : out);
    a.set(1, weights);
  }

 private:
  bool constant_;
  Precision precision_;  // of the products (bf16: precision="bf16"); softmax fp32
  Attention impl_;
};

class EncoderLayerKernel final : public Kernel {
 public:
  EncoderLayerKernel(bool constant, Precision precision) : constant_(constant), precision_(precision) {}
  void run(const KernelArgs& a) override {
    Tensor src = a.tensor(0);
    bool unbatched = src.dim() == 2;
    if (unbatched) src = src.unsqueeze(0);
    int64_t heads = a.toInt(2);
    bool use_gelu = a.toBool(7), norm_first = a.toBool(8);
    double eps = a.toDouble(9);
    const int64_t e = src.size(-1);
    std::optional<int64_t> mask_type;
    if (!a.isNone(19)) mask_type = a.toInt(19);
    auto norm = [&](const Tensor& x, size_t w) { return layerNormOp(a.ctx, x, e, a.tensor(w), a.tensor(w + 1), eps, *ln_); };
    auto attentionPlus = [&](const Tensor& x, const Tensor& residual) {  // attention(x) + residual
      return attn_.run(a.ctx, x, x, x, heads, a.tensor(3), a.tensor(4), a.tensor(5), a.tensor(6), a.optTensor(18),
                       mask_type, constant_, precision_, &residual).first;
    };
    // FFN: linear -> gelu (erf) or relu as one primitive, then linear -> + residual as another
    const std::vector<PostOp> act{{.kind = PostOp::Kind::Eltwise, .alg = use_gelu ? PostOpAlg::GeluErf : PostOpAlg::Relu,
                                    .name = use_gelu ? "gelu" : "relu"}};
    const std::vector<PostOp> plus{{.kind = PostOp::Kind::Binary, .alg = PostOpAlg::Add, .name = "add"}};
    auto ffnPlus = [&](const Tensor& x, const Tensor& residual) {
      Tensor h = linearChainOp(a.ctx, x, a.tensor(14), a.tensor(15), *mm_, constant_, precision_, act, {});
      return linearChainOp(a.ctx, h, a.tensor(16), a.tensor(17), *mm_, constant_, precision_, plus, {residual});
    };
    Tensor x = src.contiguous();
    Tensor out;
    if (norm_first) {
      Tensor h = attentionPlus(norm(x, 10), x);
      out = ffnPlus(norm(h, 12), h);
    } else {
      Tensor h = norm(attentionPlus(x, x), 10);
      out = norm(ffnPlus(h, h), 12);
    }
    a.set(0, unbatched ? out.squeeze(0) : out);
  }

 private:
  bool constant_;
  Precision precision_;  // of the products (bf16: precision="bf16"); norms and softmax fp32
  Attention attn_;
  std::shared_ptr<MatmulCache> mm_ = makeMatmulCache();
  std::shared_ptr<LayerNormCache> ln_ = makeLayerNormCache();
};

}  // namespace

void registerAttentionOps(OpRegistry& r) {
  r.add(OpDef{"aten::_native_multi_head_attention", 9, 13,
              [](const Node& n) { return std::make_unique<MhaKernel>(constantInputs(n, {5, 6, 7, 8}), precisionOf(n)); }});
  r.add(OpDef{"aten::_transformer_encoder_layer_fwd", 18, 20, [](const Node& n) {
                return std::make_unique<EncoderLayerKernel>(constantInputs(n, {3, 4, 5, 6, 14, 15, 16, 17}),
                                                            precisionOf(n));
              }});
}
LLGA_REGISTER_OPS(registerAttentionOps);

}  // namespace llga
