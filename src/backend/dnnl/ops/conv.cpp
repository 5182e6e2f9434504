// Convolutions (1-3 spatial dims, groups, dilation, transposed) on oneDNN.
//   aten::_convolution(input, weight, bias, stride, padding, dilation, transposed,
//                      output_padding, groups, benchmark, deterministic, cudnn_enabled, allow_tf32)
//   aten::conv{1,2,3}d(input, weight, bias, stride, padding, dilation, groups)   padding may be "same"/"valid"
//   aten::conv_transpose{1,2,3}d(input, weight, bias, stride, padding, output_padding, groups, dilation)
// Activations and weights use format_tag::any, except that Winograd reads an
// input arriving blocked in its layout; constant weights are
// reordered into the primitive's layout once per input shape and kept.
// Algorithm: direct, or Winograd where it pays (winogradPays): oneDNN's, or
// where oneDNN has none (AVX2) llga's own (ownWinogradPays). A chain
// ending in silu or gelu over a large output runs llga's own activation after
// the primitive (backend/dnnl/activations.h).
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <limits>
#include <mutex>

#include "backend/dnnl/dnnl_utils.h"
#include "backend/dnnl/microbench.h"
#include "backend/dnnl/ops/fused.h"
#include "backend/dnnl/ops/op_utils.h"
#include "backend/dnnl/post_ops.h"
#include "backend/dnnl/activations.h"
#include "backend/dnnl/depthwise_int8.h"
#include "backend/dnnl/gemv.h"
#include "backend/dnnl/im2col.h"
#include "backend/dnnl/winograd.h"
#include "backend/dnnl/ops/primitive_cache.h"
#include "backend/dnnl/quantize.h"
#include "ir/precision.h"

namespace llga {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

struct ConvParams {
  Shape stride, padding_l, padding_r, dilation, output_padding;
  bool transposed = false;
  int64_t groups = 1;
  bool same = false;
  size_t nsp = 0;  // spatial dims they were expanded to
};

Shape expandParam(Shape v, size_t n, const char* what) {
  if (v.size() == 1 && n > 1) v.assign(n, v[0]);
  if (v.size() != n) throw std::invalid_argument(std::string("convolution: ") + what + " needs " + std::to_string(n) + " values");
  return v;
}

struct ConvEntry {
  dnnl::primitive prim;
  memory::desc src_md, wei_md, dst_md, src_plain, dst_plain, scratch_md;
  memory weights;  // reordered, when the weight is a constant
  Tensor weights_buf;
  Shape w_sizes;  // the weight's PyTorch sizes
  Shape out_shape;
  std::string impl;
  std::shared_ptr<const BlockedLayout> dst_layout;  // of dst_md, for outputs kept blocked
  bool dst_strided = false;  // dst_md has no inner blocks (e.g. nhwc): expressible as strides
  Shape dst_strides;
  bool transposed = false;
  std::vector<PostOp> ops;  // the chain for these shapes (a same-shape add becomes a sum)
  int sum_operand = -1;     // which operand pre-fills dst for the sum, if any
  // The sum's scale and data type: a residual arriving in dst's low
  // precision (bf16, or int8 with its producer's scale and its own dtype)
  // is added as it is; an fp32 one into an fp32 dst with scale 1.
  float sum_scale = 1.0f;
  int32_t sum_zero_point = 0;
  memory::data_type sum_dt = memory::data_type::undef;
  // The entry was made for fp32 stand-ins of low-precision operands (it runs
  // fp32, or adds them as binary operands): each call converts them first.
  bool operands_to_f32 = false;
  OwnActivation act_after = OwnActivation::None;  // the chain's final silu/gelu, run after the primitive (backend/dnnl/activations.h)
  // The chain's final silu into a narrow output, quantized (swish_quantize)
  // or bf16 (swish_bf16): the primitive writes fp32 (dst_md) without it, and
  // llga's swishQuantize or activationToBf16 writes the output (dst_dtype) from that.
  std::optional<ActivationQuant> swish_quantize;
  bool swish_bf16 = false;
  bool narrowSwish() const { return swish_quantize || swish_bf16; }
  bool winograd = false;    // weights in a Winograd format (oneDNN's or llga's): no reorder out of it
  bool height_one = false;  // a 1-D depthwise convolution run as a 2-D one of height 1 (liftsTo2d)
  bool bf16 = false;        // src and weights bf16 (the kernel's precision, where oneDNN had a kernel)
  bool int8 = false;        // src u8/s8 (quantized per call), weights s8 per output channel, output scales
  std::vector<float> int8_scales;  // per output channel: act_scale * weight scale (the bias is divided by it)
  ScalarType dst_dtype = ScalarType::Float;  // of a kept output: bf16 where the partition hands it on so
  // llga's own Winograd (backend/dnnl/winograd.h) runs instead of a primitive.
  std::shared_ptr<const winograd::Weights> own_wino;
  winograd::Geometry wino_geometry;
  std::vector<winograd::Step> wino_steps;
  // llga's own int8 depthwise convolution (backend/dnnl/depthwise_int8.h)
  // runs instead of a primitive: src and dst dense channels-last.
  std::shared_ptr<const dw_int8::Weights> own_dw;
  dw_int8::Geometry dw_geometry;
  std::vector<dw_int8::Step> dw_steps;
  dw_int8::Output dw_out = dw_int8::Output::F32;
  // llga's own one-row product (backend/dnnl/gemv.h) runs instead of a
  // primitive: src and dst dense (one pixel), weights in Oihw16o.
  bool own_gemv = false;
  std::vector<gemv::Step> gemv_steps;
  // A 1-D convolution run as im2col and matrix products (backend/dnnl/im2col.h),
  // chunk_rows rows of the copy at a time: prim is the product of a whole
  // chunk, tail_prim the last one's where it is shorter (the same packed
  // weights); src_md and dst_md are the convolution's channels-last ones.
  std::optional<im2col::Geometry> im2col;
  int64_t chunk_rows = 0;
  memory::desc col_md, mm_dst_md, mm_bias_md, tail_col_md, tail_dst_md, tail_scratch_md;
  dnnl::primitive tail_prim;
  memory::desc bias_md;
  std::vector<memory::desc> operand_mds;  // of the binary post-ops (not the sum), in chain order
  std::vector<bool> operand_reorder;      // per binary operand: given in dst's layout (a reorder per call)
  // Split chains (trySplit): the primitive takes the ops before the first
  // full-size binary operand (e.ops); then each full-size binary op is a
  // oneDNN binary primitive in place on dst, with the ops after it as post-ops.
  struct Tail {
    dnnl::binary prim;
    memory::desc scratch_md;
    std::vector<int> binary_at;  // its post-ops with an operand (broadcast ones), by index
  };
  std::vector<Tail> tails;
  SharedBoundArgs bound;    // the primitive's arguments, re-pointed call after call
  // A variable weight's reorder into wei_md, made on the entry's first call
  // and kept (its plain layout is in the entry's key): making a reorder
  // primitive costs ~40 us, more than reordering a small weight.
  struct WeightReorder {
    std::once_flag once;
    dnnl::reorder prim;
    memory::desc scratch_md;
  };
  std::shared_ptr<WeightReorder> wei_reorder = std::make_shared<WeightReorder>();
};

class ConvKernel final : public Kernel {
 public:
  enum class Form { Internal, Conv, ConvTranspose };
  // `constant_params`: stride, padding, dilation, groups, ... are graph
  // constants, so they are read once rather than on every call.
  // `precision`: bf16 (the node's precision attribute) makes src and weights
  // bf16 (converted by the reorders into the primitive's layout; weights
  // once), with fp32 accumulation, bias, post-ops and dst; where oneDNN has
  // no bf16 kernel for a shape, that shape runs fp32 (the report says so).
  // In bf16 the input may arrive bf16 (a producer's out_dtype="bf16");
  // `bf16_out` (this partition's out_dtype) writes dst in bf16 where the
  // chain has no operand.
  // int8 (with `quant`, the node's act_scale and act_dtype) quantizes the
  // activation per call, the constant weights once (s8, a scale per output
  // channel), and has oneDNN scale its int32 sums back (output scales, the
  // bias divided by them) before fp32 post-ops and dst; a shape without an
  // int8 kernel runs fp32 (the report says so). The activation may arrive
  // quantized already (u8/s8, from a producer's out_dtype); `int8_out` (this
  // partition's out_scale and out_dtype) writes dst quantized so, where the
  // chain has no operand but a residual (an add of the output's shape).
  // A residual may arrive in bf16 (a bf16 partition's) or quantized as
  // `residual_quant` says (its producer's out_scale and out_dtype): where dst
  // is in the same precision it is the sum post-op's dst as it is (in place
  // where it may be); otherwise it is converted to fp32 first.
  ConvKernel(Form form, bool constant_weight, bool constant_params, Precision precision, std::vector<PostOp> post = {},
             size_t anchor_inputs = std::numeric_limits<size_t>::max(), bool bf16_out = false,
             std::optional<int8::OpQuant> quant = std::nullopt, std::optional<ActivationQuant> int8_out = std::nullopt,
             std::optional<ActivationQuant> residual_quant = std::nullopt)
      : form_(form), constant_weight_(constant_weight), constant_params_(constant_params), precision_(precision),
        bf16_out_(bf16_out && precision == Precision::BF16), quant_(precision == Precision::INT8 ? quant : std::nullopt),
        int8_out_(quant_ ? int8_out : std::nullopt), residual_quant_(residual_quant), post_(std::move(post)),
        anchor_inputs_(anchor_inputs) {}

  // The activation and the post-op operands may arrive blocked; weight and bias not.
  bool acceptsBlocked(size_t input) const override {
    return input == 0 || input >= anchor_inputs_ || (input == 1 && constant_weight_);  // 1: a compacted weight
  }
  std::optional<Tensor> compactedWeight(size_t input) const override {
    std::shared_ptr<const ConvEntry> e = last_.load();
    // A Winograd-format copy cannot stand in for the weight: oneDNN reorders
    // into that format only, and another shape may need another layout.
    // Nor can a bf16 copy: it is rounded.
    // Nor can the im2col product's [c * k, oc] matrix.
    if (input != 1 || !constant_weight_ || !e || !e->weights_buf.defined() || e->winograd || e->bf16 || e->int8 ||
        e->im2col)
      return std::nullopt;
    return Tensor::blocked(e->weights_buf.storage(), ScalarType::Float, e->w_sizes, makeLayout(e->wei_md, true));
  }
  void allowBlockedOutput(size_t output) override { blocked_output_ = blocked_output_ || output == 0; }
  void allowStridedOutput(size_t output) override { strided_output_ = strided_output_ || output == 0; }
  const char* primitiveKind() const override {
    std::shared_ptr<const ConvEntry> e = last_.load();  // aten::_convolution says it per call
    bool transposed = e ? e->transposed : form_ == Form::ConvTranspose;
    return transposed ? "deconvolution" : "convolution";
  }
  KernelReport report() const override {
    std::shared_ptr<const ConvEntry> e = last_.load();
    if (!e) return {};
    const bool kept =
        e->dst_md != e->dst_plain && ((blocked_output_ && !e->height_one) || (strided_output_ && e->dst_strided));
    std::string detail;
    if (precision_ == Precision::BF16 && !e->bf16) detail = "fp32: oneDNN has no bf16 kernel for this convolution";
    if (precision_ == Precision::INT8 && !e->int8)
      detail = !quant_ ? "fp32: no calibrated activation scale"
               : !constant_weight_ ? "fp32: int8 needs constant weights"
               : !int8::hasVnni()  ? "fp32: oneDNN's int8 kernels here have no VNNI"
                                   : "fp32: oneDNN has no int8 kernel for this convolution";
    if (e->height_one) detail += (detail.empty() ? "" : "; ") + std::string("1-D depthwise run as 2-D of height 1");
    const std::string impl = e->impl + ownActivationSuffix(e->act_after) + (e->swish_quantize ? "+llga_swish_quantize"
                                                                   : e->swish_bf16 ? "+llga_swish_bf16"
                                                                                   : "");
    return {impl, layoutName(e->src_md), layoutName(e->wei_md, true), layoutName(e->dst_md), kept ? "kept" : "plain",
            detail};
  }

  void run(const KernelArgs& a) override {
    const Tensor& x_in = a.tensor(0);
    const Tensor& w = a.tensor(1);
    const Tensor* b = a.isNone(2) ? nullptr : &a.tensor(2);
    const bool x_ok = x_in.dtype() == ScalarType::Float || (precision_ == Precision::BF16 && x_in.dtype() == ScalarType::BFloat16) ||
                      (quant_ && x_in.dtype() == int8::storageType(quant_->act));
    if (!x_ok || w.dtype() != ScalarType::Float)
      throw std::invalid_argument("convolution supports float32, got " + x_in.describe() + " and " + w.describe());
    const int64_t nsp = w.dim() - 2;
    if (nsp < 1 || nsp > 3) throw std::invalid_argument("convolution weight must have 3 to 5 dims");
    const bool batched = x_in.dim() == nsp + 2;
    Tensor x_unbatched;  // an unbatched input as a batch of one
    if (!batched && x_in.dim() == nsp + 1) x_unbatched = toPlain(a.ctx, x_in).unsqueeze(0);
    else if (!batched) throw std::invalid_argument("convolution input " + x_in.describe() + " does not match weight " + w.describe());
    const Tensor& x = batched ? x_in : x_unbatched;
    std::shared_ptr<const ConvParams> params_now = constant_params_ ? fixed_params_.load() : nullptr;
    if (params_now && params_now->nsp == static_cast<size_t>(nsp)) {
      checkChannels(*params_now, x, w);
    } else {
      params_now = std::make_shared<const ConvParams>(params(a, static_cast<size_t>(nsp), x, w));
      if (constant_params_ && !params_now->same) fixed_params_.store(params_now);  // "same" padding depends on w
    }
    if (liftsTo2d(x, w, *params_now)) {
      // views of height 1 (no copy); operands and the output likewise
      return runConv(a, x.unsqueeze(2), w.unsqueeze(2), b, heightOne(*params_now), batched, true);
    }
    runConv(a, x, w, b, *params_now, batched, false);
  }

 private:
  // oneDNN 2.6 has no jit kernel for a 1-D depthwise convolution: it runs
  // its gemm one (im2col, then a product per channel). As a 2-D convolution
  // of height 1 in channels-last it takes brdgmm_dw. Measured (2 threads,
  // AVX-512): conformer's 80 channels x 50 frames, kernel 31: 67-105 us ->
  // 4.9; 256 x 200: 600 -> 15. Other 1-D convolutions run the same kernels
  // either way (brgconv, brgconv_1x1: within 3%), so only depthwise ones
  // are lifted. A blocked input or weight (another partition's layout)
  // stays 1-D.
  static bool liftsTo2d(const Tensor& x, const Tensor& w, const ConvParams& p) {
    return p.nsp == 1 && !p.transposed && p.groups > 1 && x.dim() == 3 && p.groups == x.size(1) && !x.isBlocked() &&
           !w.isBlocked();
  }
  static ConvParams heightOne(const ConvParams& p) {
    ConvParams q = p;
    auto lift = [](Shape& v, int64_t first) { v.insert(v.begin(), first); };
    lift(q.stride, 1);
    lift(q.padding_l, 0);
    lift(q.padding_r, 0);
    lift(q.dilation, 1);
    lift(q.output_padding, 0);
    q.nsp = 2;
    return q;
  }
  // A chain operand of a lifted convolution: [.., C, W] -> [.., C, 1, W] (a [W] one broadcasts either way).
  static Tensor heightOne(ExecContext& ctx, const Tensor& t) {
    if (t.dim() == 0) return t;
    return (t.isBlocked() ? toPlain(ctx, t) : t).unsqueeze(-2);
  }

  // The convolution on batched x (a 2-D one of height 1 where `lifted`: its
  // operands get that dim too, and the output loses it).
  void runConv(const KernelArgs& a, const Tensor& x, const Tensor& w, const Tensor* b, const ConvParams& p, bool batched,
               bool lifted) {
    auto result = [&](const Tensor& out) {
      const Tensor r = lifted ? out.squeeze(2) : out;
      a.set(0, batched ? r : r.squeeze(0));
    };
    if (x.numel() == 0) {  // nothing for oneDNN to do (its kernels divide by the empty sizes)
      if (x.size(0) != 0)  // PyTorch rejects empty spatial dims too (and llga empty channels, which it takes)
        throw std::invalid_argument("convolution: an empty input is supported only with an empty batch, got input " +
                                    x.describe());
      Tensor out = Tensor::empty(ScalarType::Float, outShape(x, w, p));
      for (size_t i = anchor_inputs_; i < a.num_in; ++i)
        checkOperandFits(lifted ? heightOne(a.ctx, a.tensor(i)) : a.tensor(i), out.sizes());
      return result(out);
    }

    thread_local std::vector<int64_t> key;  // reused: no allocation per call
    key.clear();
    addToKey(key, x);
    if (constant_weight_) addConstantToKey(key, w);
    else addToKey(key, w);
    key.push_back(b ? 1 : 0);
    for (const Shape* s : {&p.stride, &p.padding_l, &p.padding_r, &p.dilation, &p.output_padding})
      key.insert(key.end(), s->begin(), s->end());
    key.push_back(p.groups);
    key.push_back(p.transposed);
    std::vector<Tensor> operands;  // of the Binary post-ops, in chain order
    int64_t out_numel = 1;
    for (int64_t d : outShape(x, w, p)) out_numel *= d;
    for (size_t i = anchor_inputs_; i < a.num_in; ++i) {
      Tensor t = lifted ? heightOne(a.ctx, a.tensor(i)) : a.tensor(i);
      if (t.dtype() != ScalarType::Float && !lowPrecisionResidual(t)) t = t.to(ScalarType::Float);
      t = postOpOperand(t, out_numel);
      addToKey(key, t);
      operands.push_back(std::move(t));
    }
    auto e = cache_.get(key, [&] {
      ConvEntry made = prepareAny(x, w, b, p, operands);
      made.height_one = lifted;
      return made;
    });
    Tensor x_deq;  // a quantized activation, for a convolution that runs fp32 after all
    if (!e->int8 && int8::isInt8(x.dtype()))
      x_deq = int8::dequantize(a.ctx, x, static_cast<float>(quant_->act.scale), quant_->act.zero_point);
    else if (!e->int8 && quant_ && quant_->fromGraph())  // fp32 after all, on the values the graph's int8 op reads
      x_deq = int8::fakeQuantize(a.ctx, x, quant_->act);
    const Tensor& xr = x_deq.defined() ? x_deq : x;

    if (e->operands_to_f32)
      for (Tensor& t : operands) {
        if (t.dtype() == ScalarType::BFloat16) t = toPlain(a.ctx, t).to(ScalarType::Float);  // a blocked one too
        else if (int8::isInt8(t.dtype()))
          t = int8::dequantize(a.ctx, t, static_cast<float>(residual_quant_->scale), residual_quant_->zero_point);
      }
    for (const Tensor& t : operands) checkOperandFits(t, e->out_shape);
    ExecContext& ctx = a.ctx;
    SharedBoundArgs::Lease args = e->bound.lease();
    Tensor src_buf, wei_buf, dst_buf;  // this call's blocked copies
    const void* src_data = nullptr;
    if (e->int8 && !int8::isInt8(xr.dtype())) {  // quantized into the primitive's layout
      memory tmp = temporary(e->src_md, src_buf);
      int8::quantizeActivation(ctx, xr.isBlocked() ? memoryOf(xr) : wrap(xr, e->src_plain), tmp,
                               static_cast<float>(quant_->act.scale), quant_->act.zero_point);
      src_data = src_buf.data();
      args->bind(DNNL_ARG_SRC, e->src_md, src_buf.data());
    } else if (xr.isBlocked() && blockedDesc(xr) == e->src_md) {  // from a producer that kept its layout
      src_data = xr.data();
      args->bind(DNNL_ARG_SRC, blockedDesc(xr), xr.data(), xr.blockedLayout());
    } else if (!xr.isBlocked() && e->src_md == e->src_plain) {
      src_data = xr.data();
      args->bind(DNNL_ARG_SRC, e->src_plain, xr.data());
    } else {  // into the primitive's layout first
      memory tmp = temporary(e->src_md, src_buf);
      reorder(ctx, xr.isBlocked() ? memoryOf(xr) : wrap(xr, e->src_plain), tmp);
      src_data = src_buf.data();
      args->bind(DNNL_ARG_SRC, e->src_md, src_buf.data());
    }
    if (e->own_wino || e->own_dw || e->own_gemv) {  // transformed or packed once, in the entry
    } else if (constant_weight_) {
      args->bind(DNNL_ARG_WEIGHTS, e->weights);
    } else {
      memory plain = w.isBlocked() ? memoryOf(w) : wrap(w, weightsPlainDesc(w, p));
      memory into = temporary(e->wei_md, wei_buf);
      if (w.isBlocked()) {
        reorder(ctx, plain, into);
      } else {
        ConvEntry::WeightReorder& r = *e->wei_reorder;
        std::call_once(r.once, [&] {
          dnnl::reorder::primitive_desc pd(plain, into, scratchpadAttr());
          r.prim = dnnl::reorder(pd);
          r.scratch_md = pd.scratchpad_desc();
        });
        execute(ctx, r.prim, r.scratch_md, {{DNNL_ARG_FROM, plain}, {DNNL_ARG_TO, into}});
      }
      args->bind(DNNL_ARG_WEIGHTS, e->wei_md, wei_buf.data());
    }
    // The output stays in the primitive's layout when every reader takes it
    // so: a dense one (channels-last: brgconv's nhwc on AVX-512) as strides
    // where every reader takes strided tensors (they see its real order:
    // pooling splits channels-last rows, concat copies rows), else as a
    // blocked tensor.
    const bool keep_strided = strided_output_ && batched && e->dst_strided && e->dst_md != e->dst_plain;
    const bool keep_blocked =
        !keep_strided && !e->narrowSwish() && blocked_output_ && batched && !lifted && e->dst_md != e->dst_plain;
    // dst is written in the primitive's layout: into `out` itself, or into a
    // temporary reordered (or, narrowSwish, swished) into `out` afterwards.
    const bool direct = !e->narrowSwish() && (keep_blocked || keep_strided || e->dst_md == e->dst_plain);
    Tensor out;
    // The residual (sum) operand's buffer becomes the output when nobody else
    // holds it and this is its last reader: no copy of it into dst.
    const bool in_place =
        e->sum_operand >= 0 && canWriteInto(a, xr, e->sum_operand, operands, *e, keep_blocked, keep_strided);
    if (in_place) {
      out = operands[static_cast<size_t>(e->sum_operand)];
    } else if (keep_strided) {  // (narrowSwish: dst_dtype's bytes an element of dst_md's fp32)
      const size_t bytes =
          e->narrowSwish() ? e->dst_md.get_size() / sizeof(float) * scalarTypeSize(e->dst_dtype) : e->dst_md.get_size();
      out = Tensor::fromStorage(Storage::allocate(bytes), e->dst_dtype, e->out_shape, e->dst_strides, 0);
    } else if (keep_blocked) {
      out = Tensor::blocked(Storage::allocate(e->dst_md.get_size()), e->dst_dtype, e->out_shape, e->dst_layout);
    } else {  // plain: fp32 (a bf16 dst goes back to fp32 by the reorder), but a quantized or swished narrow output
      const bool narrow = int8::isInt8(e->dst_dtype) || e->swish_bf16;
      out = Tensor::empty(narrow ? e->dst_dtype : ScalarType::Float, e->out_shape);
    }
    if (!direct) dst_buf = allocateFor(e->dst_md, AllocPurpose::Activation);
    const memory dst = args->bind(DNNL_ARG_DST, e->dst_md, direct ? out.data() : dst_buf.data());
    std::vector<Tensor> plain_operands;  // blocked binary operands, made plain for their broadcast descriptor
    plain_operands.reserve(2 * operands.size());  // (and their copies in dst's layout): references stay valid
    // Operand o as the k-th binary descriptor wants it: its own buffer, or a copy.
    auto operandData = [&](size_t o, size_t k) -> void* {
      const bool moved = k < e->operand_reorder.size() && e->operand_reorder[k];
      if (moved && operands[o].isBlocked() && blockedDesc(operands[o]) == e->operand_mds[k])
        return operands[o].data();  // already in dst's layout (a blocked residual)
      // plain now has the strides the descriptor was made from (a blocked one's: contiguous)
      const Tensor& t = plain_operands.emplace_back(toPlain(ctx, operands[o]));
      if (!moved) return t.data();
      Tensor& copy = plain_operands.emplace_back();  // into dst's layout first
      // at the descriptor's rank: a [16, 1, 1] divisor of a [1, 16, 1, 1] dst is the same bytes
      // (a tail binary op's descriptor has dst's rank)
      const memory::desc& want = e->operand_mds[k];
      const Shape dims = want.dims();
      const Tensor same_rank = dims == t.sizes() ? t : t.contiguous();
      int64_t n = 1;
      for (int64_t d : dims) n *= d;
      if (n != same_rank.numel()) throw std::logic_error("conv post-op operand " + t.describe() + " does not fit its descriptor");
      reorder(ctx, wrap(same_rank, plainDesc(same_rank, dims)), temporary(want, copy));
      return copy.data();
    };
    size_t o = 0, k = 0;  // the next operand, the next binary descriptor
    for (size_t i = 0; i < e->ops.size(); ++i) {
      if (e->ops[i].kind == PostOp::Kind::Eltwise) continue;
      if (e->ops[i].kind == PostOp::Kind::Sum) {  // dst starts as the operand; the primitive adds into it
        if (!in_place) {  // into dst as the sum reads it (int8 of the other signedness: its bytes as they are)
          memory::desc as = e->dst_md;
          if (e->sum_dt != memory::data_type::undef) as.data.data_type = static_cast<dnnl_data_type_t>(e->sum_dt);
          reorder(ctx, memoryOf(operands[o]), as == e->dst_md ? dst : memory(as, cpuEngine(), dst.get_data_handle()));
        }
      } else {
        args->bind(DNNL_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(i)) | DNNL_ARG_SRC_1, e->operand_mds[k], operandData(o, k));
        ++k;
      }
      ++o;
    }
    Tensor bias_copy;
    if (b && e->int8 && !e->own_dw) {  // oneDNN adds the bias to the int32 sums before scaling them
      bias_copy = int8::biasForInt8(*b, e->int8_scales);
    } else if (b && !b->isContiguous()) {
      bias_copy = b->contiguous();
    }
    const Tensor* bias = b ? (bias_copy.defined() ? &bias_copy : b) : nullptr;
    if (e->own_wino) {  // the chain is sums (dst pre-filled above) and relus: winograd::Step
      float* scratch = static_cast<float*>(ctx.scratchpadData(winograd::scratchBytes(e->wino_geometry)));
      winograd::run(*e->own_wino, e->wino_geometry, static_cast<const float*>(src_data),
                    static_cast<float*>(dst.get_data_handle()), bias ? static_cast<const float*>(bias->data()) : nullptr,
                    e->wino_steps, scratch);
    } else if (e->own_gemv) {  // the chain is its steps
      gemv::run(static_cast<const float*>(src_data), static_cast<const float*>(e->weights_buf.data()), x.size(1),
                e->out_shape[1], bias ? static_cast<const float*>(bias->data()) : nullptr,
                static_cast<float*>(dst.get_data_handle()), e->gemv_steps);
    } else if (e->im2col) {  // per chunk of rows: the windows into rows, then the product with the convolution's chain
      // (SRC and DST bound again with the product's descriptors: a new
      // memory object each, a few us against milliseconds of product)
      Tensor col_buf;
      float* col = static_cast<float*>(temporary(e->col_md, col_buf).get_data_handle());
      float* out_rows = static_cast<float*>(dst.get_data_handle());
      const int64_t rows = e->im2col->rows(), oc = e->out_shape[1];
      for (int64_t r = 0; r < rows; r += e->chunk_rows) {
        const bool tail = rows - r < e->chunk_rows;
        im2col::copy(*e->im2col, static_cast<const float*>(src_data), col, r, std::min(rows, r + e->chunk_rows));
        args->bind(DNNL_ARG_SRC, tail ? e->tail_col_md : e->col_md, col);
        args->bind(DNNL_ARG_WEIGHTS, e->weights);
        args->bind(DNNL_ARG_DST, tail ? e->tail_dst_md : e->mm_dst_md, out_rows + r * oc);
        if (bias) args->bind(DNNL_ARG_BIAS, e->mm_bias_md, bias->data());
        args->execute(ctx, tail ? e->tail_prim : e->prim, tail ? e->tail_scratch_md : e->scratch_md);
      }
    } else if (e->own_dw) {  // the chain is its steps; the bias as given (real values)
      void* scratch = ctx.scratchpadData(dw_int8::scratchBytes(e->dw_geometry, omp_get_max_threads()));
      dw_int8::run(*e->own_dw, e->dw_geometry, src_data, dst.get_data_handle(), e->dw_out,
                   bias ? static_cast<const float*>(bias->data()) : nullptr, e->dw_steps, scratch);
    } else {
      if (bias) args->bind(DNNL_ARG_BIAS, e->bias_md, bias->data());
      if (e->int8 && quant_->act.zero_point != 0)  // the activation's zero point, as oneDNN takes it at run time
        args->bind(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, memory::desc({1}, memory::data_type::s32, tag::x),
                   const_cast<int32_t*>(&quant_->act.zero_point));
      args->execute(ctx, e->prim, e->scratch_md);
    }
    for (const ConvEntry::Tail& t : e->tails) {  // dst <- dst (op) operand, then its post-ops, in place
      std::unordered_map<int, memory> targs{{DNNL_ARG_SRC_0, dst}, {DNNL_ARG_DST, dst}};
      targs[DNNL_ARG_SRC_1] = memory(e->operand_mds[k], cpuEngine(), operandData(o, k));
      ++o, ++k;
      for (int i : t.binary_at) {
        targs[DNNL_ARG_ATTR_MULTIPLE_POST_OP(i) | DNNL_ARG_SRC_1] = memory(e->operand_mds[k], cpuEngine(), operandData(o, k));
        ++o, ++k;
      }
      execute(ctx, t.prim, t.scratch_md, std::move(targs));
    }
    if (e->act_after != OwnActivation::None)  // over dst's whole dense buffer (a blocked layout's padding is 0 and stays 0)
      runOwnActivation(e->act_after, static_cast<float*>(dst.get_data_handle()),
                       static_cast<int64_t>(e->dst_md.get_size() / sizeof(float)));
    if (e->narrowSwish()) {  // dst (fp32, channels-last) -> out, at dst's strides (or, unbatched, through a copy at them)
      const int64_t n = static_cast<int64_t>(e->dst_md.get_size() / sizeof(float));
      const float* from = static_cast<const float*>(dst.get_data_handle());
      auto swishInto = [&](void* to) {
        if (e->swish_bf16) return activationToBf16(OwnActivation::Swish, from, static_cast<uint16_t*>(to), n);
        const ActivationQuant& q = *e->swish_quantize;
        swishQuantize(from, to, n, static_cast<float>(1.0 / q.scale), q.zero_point, q.is_unsigned);
      };
      if (keep_strided) {
        swishInto(out.data());
      } else {
        const Tensor at_dst = Tensor::fromStorage(Storage::allocate(static_cast<size_t>(n) * scalarTypeSize(e->dst_dtype)),
                                                  e->dst_dtype, e->out_shape, e->dst_strides, 0);
        swishInto(at_dst.data());
        reorder(ctx, wrap(at_dst, memory::desc(e->out_shape, e->dst_plain.data_type(), e->dst_strides)),
                wrap(out, e->dst_plain));
      }
    } else if (!direct) {
      reorder(ctx, dst, wrap(out, e->dst_plain));
    }
    last_.store(e);
    result(out);
  }

  // The entry for this call's shapes: in the requested precision where oneDNN has a kernel, else fp32.
  ConvEntry prepareAny(const Tensor& x, const Tensor& w, const Tensor* b, const ConvParams& p,
                       const std::vector<Tensor>& operands) const {
    if (precision_ == Precision::BF16) {
      try {
        return prepare(x, w, b != nullptr, p, operands, Precision::BF16);
      } catch (const dnnl::error&) {  // no bf16 kernel for this shape or chain: fp32
      }
    }
    if (quant_ && constant_weight_ && !p.transposed && int8::hasVnni()) {
      try {
        return prepare(x, w, b != nullptr, p, operands, Precision::INT8);
      } catch (const dnnl::error&) {  // no int8 kernel for this shape or chain: fp32
      }
    }
    // fp32 after all: from the activation dequantized or fake-quantized (as run does)
    if (int8::isInt8(x.dtype()) || (quant_ && quant_->fromGraph()))
      return prepare(Tensor::empty(ScalarType::Float, x.sizes()), w, b != nullptr, p, operands, Precision::F32);
    return prepare(x, w, b != nullptr, p, operands, Precision::F32);
  }

  // A chain whose full-size binary operands leave oneDNN only its gemm or
  // reference convolution (on AVX2, its jit kernels take none: RAFT's GRU
  // gates, conv -> sigmoid -> mul(h), ran at a third of the jit kernel's
  // speed) runs split: the convolution with the ops before the first
  // full-size operand, then each full-size binary op as a binary primitive in
  // place on dst with the ops up to the next one as its post-ops, when all
  // have jit kernels. (Post-ops of a binary primitive come out wrong in
  // oneDNN 2.6 on a channel-padded blocked dst, 2 or 10 channels in nChw8c,
  // binary and eltwise ones (tanh at batch 2): there a chain is split only
  // where no tail needs any.)
  template <class MakePd, class Take>
  static void trySplit(ConvEntry& e, const std::vector<Tensor>& operands, const Shape& out, MakePd make_pd, Take take) {
    std::vector<PostOp> ops = e.ops;
    for (PostOp& op : ops)
      if (op.kind == PostOp::Kind::Sum) op.kind = PostOp::Kind::Binary;
    int64_t out_elems = 1;
    for (int64_t d : out) out_elems *= d;
    const OwnActivation act = e.act_after != OwnActivation::None ? e.act_after : takeFinalActivation(ops, out_elems);
    // each op's operand (or none), and whether it is full-size
    std::vector<int> operand_of(ops.size(), -1);
    std::vector<bool> full(ops.size(), false);
    for (size_t i = 0, o = 0; i < ops.size(); ++i)
      if (ops[i].kind != PostOp::Kind::Eltwise) {
        operand_of[i] = static_cast<int>(o);
        full[i] = binaryOperandDesc(operands.at(o++), out.size()).dims() == memory::dims(out.begin(), out.end());
      }
    const size_t first = static_cast<size_t>(std::find(full.begin(), full.end(), true) - full.begin());
    if (first == ops.size()) return;
    std::vector<memory::desc> head_mds;  // the head's (broadcast) operands
    for (size_t i = 0; i < first; ++i)
      if (operand_of[i] >= 0) head_mds.push_back(binaryOperandDesc(operands[static_cast<size_t>(operand_of[i])], out.size()));
    try {
      const std::vector<PostOp> head(ops.begin(), ops.begin() + static_cast<std::ptrdiff_t>(first));
      auto pd = make_pd(head, head_mds);
      std::string impl = pd.impl_info_str();
      if (isReference(impl) || impl.find("gemm") != std::string::npos) return;
      const memory::desc dst_md = pd.dst_desc();
      bool padded = false;
      for (int d = 0; d < dst_md.data.ndims; ++d) padded = padded || dst_md.data.padded_dims[d] != dst_md.data.dims[d];
      // Nor on a dst blocked by other than 8 or 16 channels: oneDNN 2.6's jit
      // binary with an eltwise post-op on nChw4c (a grouped 1x1 convolution
      // with 4 channels a group, on AVX-512) wrote past its dst and corrupted
      // the heap (found by scripts/fuzz_graphs.py, seed 1795823769).
      const auto& blk = dst_md.data.format_desc.blocking;
      for (int i = 0; i < blk.inner_nblks; ++i) padded = padded || (blk.inner_blks[i] != 8 && blk.inner_blks[i] != 16);
      std::vector<memory::desc> mds;  // in chain order; full-size ones in dst's layout
      std::vector<bool> moved;
      for (size_t i = 0; i < ops.size(); ++i) {
        if (operand_of[i] < 0) continue;
        const memory::desc md = binaryOperandDesc(operands[static_cast<size_t>(operand_of[i])], out.size());
        mds.push_back(full[i] ? dst_md : md);
        moved.push_back(full[i] && md != dst_md);
      }
      std::vector<ConvEntry::Tail> tails;
      for (size_t i = first; i < ops.size();) {
        ConvEntry::Tail t;
        const size_t start = i;
        std::vector<PostOp> after;
        std::vector<memory::desc> after_mds;
        for (++i; i < ops.size() && !full[i]; ++i) {
          if (padded) return;  // no post-ops on a binary primitive there (above), not even eltwise ones
          if (operand_of[i] >= 0) {
            t.binary_at.push_back(static_cast<int>(after.size()));
            after_mds.push_back(mds[static_cast<size_t>(operand_of[i])]);
          }
          after.push_back(ops[i]);
        }
        dnnl::binary::desc bd(dnnlAlgorithm(ops[start].alg), dst_md, mds[static_cast<size_t>(operand_of[start])], dst_md);
        dnnl::binary::primitive_desc bpd(bd, postOpAttr(after, after_mds), cpuEngine());
        if (isReference(bpd)) return;
        if (tails.empty()) impl += " + binary " + implName(bpd);
        t.prim = dnnl::binary(bpd);
        t.scratch_md = bpd.scratchpad_desc();
        tails.push_back(std::move(t));
      }
      if (tails.size() > 1) impl += " x" + std::to_string(tails.size());
      take(pd, dnnl::convolution_forward(pd));
      e.impl = impl;
      e.ops = head;
      e.act_after = act;
      e.sum_operand = -1;
      e.operand_mds = std::move(mds);
      e.operand_reorder = std::move(moved);
      e.tails = std::move(tails);
    } catch (const dnnl::error&) {  // no kernel for the split form: the primitive chosen before
    }
  }

  // Whether the sum operand `o` may serve as dst: its register dies here, llga
  // owns its buffer and only the register and `operands` hold it, no other
  // input of this call reads the same buffer (conv(y) + y: the primitive would
  // read y while overwriting it), and it is already in dst's layout.
  bool canWriteInto(const KernelArgs& a, const Tensor& x, int o, const std::vector<Tensor>& operands,
                    const ConvEntry& e, bool keep_blocked, bool keep_strided) const {
    const Tensor& t = operands[static_cast<size_t>(o)];
    if (!a.inputDies(anchor_inputs_ + static_cast<size_t>(o)) || !t.storage() || !t.storage()->owned ||
        t.storage().use_count() > 2 || t.dtype() != e.dst_dtype || t.sizes() != e.out_shape)
      return false;
    if (x.storage() == t.storage()) return false;
    for (size_t j = 0; j < operands.size(); ++j)
      if (j != static_cast<size_t>(o) && operands[j].storage() == t.storage()) return false;
    if (keep_blocked) return t.isBlocked() && blockedDesc(t) == e.dst_md;
    if (t.isBlocked() || t.offset() != 0) return false;
    if (keep_strided) return t.strides() == e.dst_strides;
    return e.dst_md == e.dst_plain && t.isContiguous();
  }

  ConvParams params(const KernelArgs& a, size_t nsp, const Tensor& x, const Tensor& w) const {
    ConvParams p;
    Shape padding;
    if (form_ == Form::Internal) {
      p.stride = a.intList(3);
      padding = a.intList(4);
      p.dilation = a.intList(5);
      p.transposed = a.toBool(6);
      p.output_padding = a.intList(7);
      p.groups = a.toInt(8);
    } else if (form_ == Form::Conv) {
      p.stride = a.num_in > 3 ? a.intList(3) : Shape{1};
      p.dilation = a.num_in > 5 ? a.intList(5) : Shape{1};
      p.groups = a.num_in > 6 ? a.toInt(6) : 1;
      if (a.num_in > 4 && a.input(4).isDouble()) throw std::invalid_argument("bad padding");
      if (a.num_in > 4 && std::holds_alternative<std::string>(a.input(4).v)) {
        const std::string& mode = a.input(4).str();
        if (mode == "valid") padding = Shape(nsp, 0);
        else if (mode == "same") p.same = true;
        else throw std::invalid_argument("convolution padding must be 'same' or 'valid', got '" + mode + "'");
      } else {
        padding = a.num_in > 4 ? a.intList(4) : Shape{0};
      }
      p.output_padding = Shape(nsp, 0);
    } else {  // conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation)
      p.transposed = true;
      p.stride = a.num_in > 3 ? a.intList(3) : Shape{1};
      padding = a.num_in > 4 ? a.intList(4) : Shape{0};
      p.output_padding = a.num_in > 5 ? a.intList(5) : Shape{0};
      p.groups = a.num_in > 6 ? a.toInt(6) : 1;
      p.dilation = a.num_in > 7 ? a.intList(7) : Shape{1};
    }
    p.stride = expandParam(p.stride, nsp, "stride");
    p.dilation = expandParam(p.dilation, nsp, "dilation");
    p.output_padding = expandParam(p.output_padding, nsp, "output_padding");
    if (p.groups < 1) throw std::invalid_argument("convolution: groups must be positive");
    if (p.same) {  // PyTorch pads the extra element on the right
      p.padding_l.resize(nsp);
      p.padding_r.resize(nsp);
      for (size_t i = 0; i < nsp; ++i) {
        int64_t total = p.dilation[i] * (w.size(static_cast<int64_t>(i) + 2) - 1);
        p.padding_l[i] = total / 2;
        p.padding_r[i] = total - total / 2;
      }
    } else {
      p.padding_l = expandParam(padding, nsp, "padding");
      p.padding_r = p.padding_l;
    }
    p.nsp = nsp;
    checkChannels(p, x, w);
    return p;
  }

  static void checkChannels(const ConvParams& p, const Tensor& x, const Tensor& w) {
    int64_t in_c = x.size(1);
    int64_t w_in = p.transposed ? w.size(0) : w.size(1) * p.groups;
    if (in_c != w_in)
      throw std::invalid_argument("convolution: input " + x.describe() + " has " + std::to_string(in_c) +
                                  " channels, weight " + w.describe() + " with groups=" + std::to_string(p.groups) +
                                  " expects " + std::to_string(w_in));
  }

  // The weight as oneDNN sees it ({g,} oc, ic, k...) over PyTorch's buffer.
  static memory::desc weightsPlainDesc(const Tensor& w, const ConvParams& p) {
    const int64_t g = p.groups;
    Shape dims, strides;
    if (!p.transposed) {  // PyTorch [OC, IC/g, k...]
      if (g == 1) return plainDesc(w);
      dims = {g, w.size(0) / g};
      strides = {w.stride(0) * (w.size(0) / g), w.stride(0)};
      for (int64_t d = 1; d < w.dim(); ++d) {
        dims.push_back(w.size(d));
        strides.push_back(w.stride(d));
      }
    } else {  // PyTorch [IC, OC/g, k...] -> oneDNN ({g}, OC/g, IC/g, k...)
      int64_t icg = w.size(0) / g;
      if (g > 1) {
        dims.push_back(g);
        strides.push_back(w.stride(0) * icg);
      }
      dims.push_back(w.size(1));
      strides.push_back(w.stride(1));
      dims.push_back(icg);
      strides.push_back(w.stride(0));
      for (int64_t d = 2; d < w.dim(); ++d) {
        dims.push_back(w.size(d));
        strides.push_back(w.stride(d));
      }
    }
    return memory::desc(dims, memory::data_type::f32, strides);
  }

  // Winograd F(2x2, 3x3) (oneDNN's jit_fp32_wino_2x3; jit_wino_4x3 for
  // larger batches) does a 3x3 stride-1 convolution with 16 products per 2x2
  // output tile instead of 36. Measured here against the direct brgconv, batch
  // 1, 2 threads: 1.5-1.7x faster for 56x56x64, 28x28x128, 14x14x256 (resnet's
  // stages), 1.25-1.5x for densenet's 128->32 at 56..14, even at 7x7x512, and
  // slower for the 3-channel stem (0.33x) and 7x7 with few channels (0.61x).
  // Results differ from direct by ~2e-6 of the output's scale. Constant
  // weights only (they are transformed once); LLGA_WINOGRAD=0 turns it off.
  bool winogradPays(const Tensor& x, const Tensor& w, const ConvParams& p, int64_t oc, const Shape& out) const {
    // Its src and dst are blocked (nChw16c): only where the output may stay so
    // (a reader wanting plain or channels-last data would pay a reorder and
    // pull the next ops out of their layout: densenet's concats, 1.85x slower).
    if (!constant_weight_ || !blocked_output_ || w.dim() != 4 || w.size(2) != 3 || w.size(3) != 3 || p.groups != 1)
      return false;
    for (size_t i = 0; i < 2; ++i)
      if (p.stride[i] != 1 || p.dilation[i] != 1) return false;
    if (x.size(1) < 16 || oc < 16 || out[0] * out[2] * out[3] < 196) return false;
    const char* env = std::getenv("LLGA_WINOGRAD");
    return !(env && std::string(env) == "0");
  }

  // llga's own Winograd F(2x2,3x3) (backend/dnnl/winograd.h), where oneDNN
  // has none (AVX2-only CPUs, or ONEDNN_MAX_CPU_ISA=AVX2): a 3x3 stride-1
  // convolution with constant weights, 64+ channels in and 32+ out
  // (multiples of 8: nChw8c), an output that may stay blocked, and a chain
  // of sums and relus only. Measured against oneDNN's direct jit:avx2 (with
  // sum and relu), batch 1, 2 threads, on an AVX2 EPYC: 1.4-1.5x faster for
  // 64x56x56, 1.6-1.8x for 128x28x28 and 256x14x14, 1.2-1.8x for 512x7x7,
  // 1.2-1.4x at batch 8, 1.15-1.3x for densenet's 128 -> 32 at 56..7; 0.9-1.2x
  // for 32 channels in (hence the limits).
  bool ownWinogradPays(const Tensor& x, const Tensor& w, const ConvParams& p, int64_t oc, const Shape& out,
                       const ConvEntry& e) const {
    if (!constant_weight_ || !blocked_output_ || PlainWeightsScope::active() || x.dim() != 4 || w.dim() != 4 ||
        w.size(2) != 3 || w.size(3) != 3 || p.groups != 1 || w.dtype() != ScalarType::Float)
      return false;
    for (size_t i = 0; i < 2; ++i)
      if (p.stride[i] != 1 || p.dilation[i] != 1) return false;
    if (x.size(1) < 64 || oc < 32 || x.size(1) % 8 != 0 || oc % 8 != 0) return false;
    if (!e.operand_mds.empty() || e.act_after != OwnActivation::None) return false;
    for (const PostOp& op : e.ops)
      if (op.kind != PostOp::Kind::Sum && !(op.kind == PostOp::Kind::Eltwise && op.alg == PostOpAlg::Relu && op.beta == 0.0f))
        return false;
    if (!winograd::supports({x.size(0), x.size(1), x.size(2), x.size(3), oc, out[2], out[3], p.padding_l[0], p.padding_l[1]}))
      return false;
    return !dnnlHasWinograd() && winograd::available();
  }

  // llga's own int8 depthwise convolution (backend/dnnl/depthwise_int8.h),
  // where oneDNN's runs no faster than its fp32 one (on AVX512-VNNI CPUs): a
  // 2-D one with one filter per channel, dilation 1, a u8 activation (with a
  // zero point) or an s8 one, no operand, and a chain
  // of relu, clip, linear (the quantizing one too) and a final silu, where
  // it measured faster than oneDNN's brdgmm_dw: stride 1, 32+ channels, an
  // int8 output (docs/fusion-and-layouts.md). Fills e's geometry, steps and
  // output type.
  bool ownDepthwiseInt8(const Tensor& x, const Tensor& w, const ConvParams& p, int64_t oc, const Shape& out,
                        memory::data_type src_dt, memory::data_type dst_dt, ConvEntry& e) const {
    if (!dw_int8::available() || x.dim() != 4 || w.dim() != 4 || p.transposed || p.groups != x.size(1) || oc != p.groups ||
        w.size(1) != 1 || (src_dt != memory::data_type::u8 && src_dt != memory::data_type::s8) ||
        !e.operand_mds.empty() || e.sum_operand >= 0 ||
        e.act_after != OwnActivation::None)
      return false;
    for (size_t i = 0; i < 2; ++i)
      if (p.dilation[i] != 1 || p.stride[i] != 1) return false;
    if (x.size(1) < 32 || (dst_dt != memory::data_type::u8 && dst_dt != memory::data_type::s8)) return false;
    std::optional<std::vector<dw_int8::Step>> steps = eltwiseSteps(e.ops);
    if (!steps) return false;
    for (size_t i = 0; i < steps->size(); ++i) {  // no sigmoid; a swish of alpha 1, last
      const dw_int8::Step& st = (*steps)[i];
      if (st.kind == dw_int8::Step::Kind::Sigmoid ||
          (st.kind == dw_int8::Step::Kind::Swish && (st.alpha != 1.0f || i + 1 != steps->size())))
        return false;
    }
    dw_int8::Geometry g;
    g.n = x.size(0), g.c = x.size(1), g.h = x.size(2), g.w = x.size(3), g.oh = out[2], g.ow = out[3];
    g.kh = w.size(2), g.kw = w.size(3), g.stride_h = p.stride[0], g.stride_w = p.stride[1];
    g.pad_t = p.padding_l[0], g.pad_l = p.padding_l[1];
    const int64_t src[3] = {g.h * g.w * g.c, g.w * g.c, g.c}, dst[3] = {g.oh * g.ow * g.c, g.ow * g.c, g.c};
    std::copy(src, src + 3, g.src_strides);
    std::copy(dst, dst + 3, g.dst_strides);
    if (!dw_int8::supports(g)) return false;
    e.own_dw = std::make_shared<const dw_int8::Weights>();  // packed with the weights below
    e.dw_geometry = g;
    e.dw_steps = std::move(*steps);
    e.dw_out = dst_dt == memory::data_type::u8 ? dw_int8::Output::U8 : dw_int8::Output::S8;
    return true;
  }

  // llga's own one-row product (backend/dnnl/gemv.h) for a 1x1 convolution
  // on one pixel of one image (a squeeze-excite block's, at batch 1): fp32
  // with constant weights, no groups, no padding, no operand, and a chain of
  // relu, clip, linear, sigmoid and swish. oneDNN's brgconv_1x1 took 4.2-6.6
  // us for efficientnet's and regnet's shapes alone, 6-17 in the models, a
  // primitive and a thread team for a few thousand multiply-adds
  // (docs/fusion-and-layouts.md). Fills e's steps.
  bool ownGemv(const Tensor& x, const Tensor& w, const ConvParams& p, ConvEntry& e) const {
    if (!constant_weight_ || PlainWeightsScope::active() || !gemv::available() || p.transposed || p.groups != 1 ||
        x.dim() != 4 || w.dim() != 4 || x.size(0) != 1 || x.size(2) != 1 || x.size(3) != 1 || w.size(2) != 1 ||
        w.size(3) != 1 || w.dtype() != ScalarType::Float || x.dtype() != ScalarType::Float ||
        (x.isBlocked() && !channelBlocking(x)) || !e.operand_mds.empty() || e.sum_operand >= 0 ||
        e.act_after != OwnActivation::None || e.narrowSwish())
      return false;
    for (size_t i = 0; i < 2; ++i)
      if (p.padding_l[i] != 0 || p.padding_r[i] != 0) return false;
    std::optional<std::vector<gemv::Step>> steps = eltwiseSteps(e.ops);
    if (!steps) return false;
    e.gemv_steps = std::move(*steps);
    return true;
  }

  // A 1-D convolution as im2col and one brg matmul, where that pays
  // (backend/dnnl/im2col.h): fp32, constant weights, no groups, an input
  // that is not blocked, and a chain without binary operands (eltwise ops
  // and a sum: the matmul takes them as they are). Fills e's geometry.
  bool im2colPays(const Tensor& x, const Tensor& w, const ConvParams& p, int64_t oc, const Shape& out,
                  ConvEntry& e) const {
    if (!constant_weight_ || PlainWeightsScope::active() || !im2col::available() || p.transposed || p.nsp != 1 ||
        p.groups != 1 || x.dim() != 3 || w.dim() != 3 || x.isBlocked() || w.dtype() != ScalarType::Float ||
        x.dtype() != ScalarType::Float || !e.operand_mds.empty() || e.narrowSwish())
      return false;
    im2col::Geometry g;
    g.n = x.size(0), g.c = x.size(1), g.w = x.size(2), g.oc = oc, g.ow = out[2], g.k = w.size(2);
    g.stride = p.stride[0], g.dilation = p.dilation[0], g.pad_l = p.padding_l[0];
    if (!im2col::pays(g)) return false;
    e.im2col = g;
    return true;
  }

  static Shape outShape(const Tensor& x, const Tensor& w, const ConvParams& p) {
    Shape out = {x.size(0), p.transposed ? w.size(1) * p.groups : w.size(0)};
    for (size_t i = 0; i + 2 < static_cast<size_t>(w.dim()); ++i) {
      int64_t in = x.size(static_cast<int64_t>(i) + 2), k = w.size(static_cast<int64_t>(i) + 2);
      int64_t o = p.transposed
                      ? (in - 1) * p.stride[i] - p.padding_l[i] - p.padding_r[i] + p.dilation[i] * (k - 1) + p.output_padding[i] + 1
                      : floorDiv(in + p.padding_l[i] + p.padding_r[i] - p.dilation[i] * (k - 1) - 1, p.stride[i]) + 1;
      if (o <= 0) throw std::invalid_argument("convolution: input " + x.describe() + " is too small for kernel " + w.describe());
      out.push_back(o);
    }
    return out;
  }

  ConvEntry prepare(const Tensor& x, const Tensor& w, bool has_bias, const ConvParams& p,
                    const std::vector<Tensor>& given_operands, Precision mode) const {
    const bool bf16 = mode == Precision::BF16, int8 = mode == Precision::INT8;
    const size_t nsp = static_cast<size_t>(w.dim() - 2);
    const int64_t oc = p.transposed ? w.size(1) * p.groups : w.size(0);
    const Shape out = outShape(x, w, p);
    // oneDNN's right padding is whatever makes the output size come out.
    memory::dims pad_r(nsp), dil(nsp);
    for (size_t i = 0; i < nsp; ++i) {
      int64_t in = x.size(static_cast<int64_t>(i) + 2), k = w.size(static_cast<int64_t>(i) + 2), o = out[i + 2];
      dil[i] = p.dilation[i] - 1;
      pad_r[i] = p.transposed ? (in - 1) * p.stride[i] - p.padding_l[i] + (k - 1) * p.dilation[i] + 1 - o
                              : (o - 1) * p.stride[i] + (k - 1) * p.dilation[i] + 1 - in - p.padding_l[i];
    }
    ConvEntry e;
    e.out_shape = out;
    e.transposed = p.transposed;
    e.bf16 = bf16;
    e.int8 = int8;
    auto any = [](const Shape& dims, memory::data_type dt = memory::data_type::f32) { return memory::desc(dims, dt, tag::any); };
    const memory::data_type in_dt = bf16 ? memory::data_type::bf16 : memory::data_type::f32;
    const memory::data_type src_dt = !int8 ? in_dt : quant_->act.is_unsigned ? memory::data_type::u8 : memory::data_type::s8;
    // int8 dst: this partition hands its output on quantized (out_scale, out_dtype), and
    // nothing but the chain's own eltwise ops touches dst
    bool dst_int8 = int8 && int8_out_ && (given_operands.empty() || residualChain(given_operands, out));
    // oneDNN 2.6 gives every linear post-op of a chain the first one's
    // parameters: where the chain has a linear (a fake quantization's last
    // step), the quantizing 1 / out_scale joins the last one when only relus
    // follow it (they commute with a positive scale), else dst stays fp32
    // (its readers quantize it themselves).
    size_t scale_into = post_.size();
    if (dst_int8) {
      for (size_t i = post_.size(); i-- > 0;) {
        const PostOp& op = post_[i];
        if (op.kind == PostOp::Kind::Eltwise && op.alg == PostOpAlg::Linear) {
          scale_into = i;
          break;
        }
        if (op.kind != PostOp::Kind::Eltwise || op.alg != PostOpAlg::Relu || op.alpha != 0) break;
      }
      const bool has_linear = std::any_of(post_.begin(), post_.end(), [](const PostOp& op) {
        return op.kind == PostOp::Kind::Eltwise && op.alg == PostOpAlg::Linear;
      });
      if (has_linear && scale_into == post_.size()) dst_int8 = false;
      // a zero point (out + zp) joins only a linear that ends the chain: a relu after it would see the shift
      if (int8_out_->zero_point != 0 && scale_into < post_.size() && scale_into + 1 != post_.size()) dst_int8 = false;
    }
    // A chain that ends in silu (and has no operand or linear) into a
    // quantized or bf16 2-D output its readers take channels-last: oneDNN's
    // int8 and bf16 kernels apply the swish post-op at a fraction of their
    // speed (activations.h), so the primitive writes fp32 channels-last
    // without it and llga's swish writes the output from there.
    int64_t out_elems = 1;
    for (int64_t d : out) out_elems *= d;
    const bool narrow_swish = strided_output_ && given_operands.empty() && out.size() == 4 && !post_.empty() &&
                              post_.back().kind == PostOp::Kind::Eltwise && post_.back().alg == PostOpAlg::Swish &&
                              post_.back().alpha == 1.0f && out_elems >= kOwnActivationMinElements && swishNarrowEnabled();
    const bool swish_quantize = dst_int8 && narrow_swish && scale_into == post_.size();
    if (swish_quantize) {
      e.swish_quantize = *int8_out_;
      dst_int8 = false;  // the primitive's dst
    }
    const memory::data_type wei_dt = int8 ? memory::data_type::s8 : in_dt;
    Tensor w_q;  // int8: the weight quantized (plain, s8), and its scales
    std::vector<float> w_scales;
    if (int8) {
      ExecContext qctx;
      const Tensor plain = (w.isBlocked() ? toPlain(qctx, w) : w).contiguous();
      w_q = Tensor::empty(ScalarType::Char, plain.sizes());
      w_scales = int8::quantizeWeights(static_cast<const float*>(plain.data()), oc, plain.numel() / oc, *quant_,
                                       static_cast<int8_t*>(w_q.data()));
      e.int8_scales.resize(static_cast<size_t>(oc));
      for (int64_t c = 0; c < oc; ++c)
        e.int8_scales[static_cast<size_t>(c)] = static_cast<float>(quant_->act.scale) * w_scales[static_cast<size_t>(c)];
    }
    memory::desc wplain = weightsPlainDesc(w, p);
    // bf16 dst: this partition hands its output on in bf16 (out_dtype), and
    // nothing but the chain's own ops touches dst
    bool dst_bf16 = bf16 && bf16_out_ && (given_operands.empty() || residualChain(given_operands, out));
    if (dst_bf16 && narrow_swish) {
      e.swish_bf16 = true;
      dst_bf16 = false;  // the primitive's dst
    }
    // A low-precision residual stays so where dst is in its precision;
    // elsewhere the entry is made for an fp32 stand-in, and each call
    // converts it (run).
    std::vector<Tensor> operands = given_operands;
    for (Tensor& t : operands) {
      const bool keep = (t.dtype() == ScalarType::BFloat16 && dst_bf16) || (int8::isInt8(t.dtype()) && dst_int8);
      if (t.dtype() == ScalarType::Float || keep) continue;
      t = Tensor::empty(ScalarType::Float, t.sizes());
      e.operands_to_f32 = true;
    }
    const memory::data_type dst_dt = dst_bf16   ? memory::data_type::bf16
                                     : dst_int8 ? (int8_out_->is_unsigned ? memory::data_type::u8 : memory::data_type::s8)
                                                : memory::data_type::f32;
    memory::desc src_any = any(x.sizes(), src_dt), dst_any = any(out, dst_dt),
                 wei_any = PlainWeightsScope::active() && constant_weight_ && mode == Precision::F32
                               ? wplain
                               : any(wplain.dims(), wei_dt);
    if (e.narrowSwish()) dst_any = memory::desc(out, dst_dt, tag::nhwc);  // llga's swish reads it as a dense buffer
    e.bias_md = has_bias ? memory::desc({oc}, memory::data_type::f32, tag::a) : memory::desc();
    const memory::desc& bias_md = e.bias_md;
    auto prop = dnnl::prop_kind::forward_inference;
    // The chain: the first add whose operand has the output's exact shape is
    // a sum (dst pre-filled with it); other operands are binary post-ops.
    e.ops = post_;
    for (size_t i = 0, o = 0; i < e.ops.size(); ++i) {
      if (e.ops[i].kind == PostOp::Kind::Eltwise) continue;
      const Tensor& t = operands.at(o);
      // a sum adds in dst's precision: an fp32 residual into an fp32 dst, a
      // bf16 or int8 one (kept above) into its own; else a binary add
      const bool sum_fits = t.dtype() != ScalarType::Float || dst_dt == memory::data_type::f32;
      if (e.sum_operand < 0 && e.ops[i].alg == PostOpAlg::Add && t.sizes() == out && sum_fits) {
        e.ops[i].kind = PostOp::Kind::Sum;
        e.sum_operand = static_cast<int>(o);
        if (t.dtype() != ScalarType::Float) {
          e.sum_dt = dnnlType(t.dtype());
          if (int8::isInt8(t.dtype())) {
            e.sum_scale = static_cast<float>(residual_quant_->scale);
            e.sum_zero_point = residual_quant_->zero_point;
          }
        }
      } else {
        e.operand_mds.push_back(binaryOperandDesc(t, out.size()));
      }
      ++o;
    }
    // A final silu or gelu over a large output: llga's own after the primitive
    // is cheaper than oneDNN's post-op (backend/dnnl/activations.h measures why).
    e.act_after = !dst_bf16 && !dst_int8 ? takeFinalActivation(e.ops, out_elems) : OwnActivation::None;  // llga's are fp32
    if (e.narrowSwish()) e.act_after = OwnActivation::None;  // taken off e.ops above: run by swishQuantize or activationToBf16
    // A quantized dst: the chain's result (real values) times 1 / out_scale, then rounded and saturated.
    // (a fake quantization's last linear gives whole numbers here, so adding
    // the zero point before the dst's rounding is exact; an appended one
    // rounds y / scale + zp, PyTorch round(y / scale) + zp: they differ only
    // where y / scale is exactly a half)
    const float out_zp = dst_int8 ? static_cast<float>(int8_out_->zero_point) : 0.0f;
    if (dst_int8 && scale_into < post_.size()) {
      e.ops[scale_into].alpha = static_cast<float>(e.ops[scale_into].alpha / int8_out_->scale);
      e.ops[scale_into].beta = static_cast<float>(e.ops[scale_into].beta / int8_out_->scale) + out_zp;
    } else if (dst_int8) {
      e.ops.push_back({.kind = PostOp::Kind::Eltwise, .alg = PostOpAlg::Linear,
                       .alpha = static_cast<float>(1.0 / int8_out_->scale), .beta = out_zp, .name = "quantize"});
    }
    // The primitive's chain: into a quantized dst, the quantizing scale folded
    // into the output scales where it can be (int8::foldQuantizingScale).
    // e.ops keeps the chain as written (llga's own kernels read it), and
    // e.int8_scales the scales the bias is divided by.
    std::vector<PostOp> prim_ops = e.ops;
    std::vector<float> out_scales = e.int8_scales;
    float sum_scale = e.sum_scale;
    if (dst_int8) int8::foldQuantizingScale(prim_ops, out_scales, sum_scale, int8_out_->is_unsigned);
    dnnl::primitive_attr attr = postOpAttr(prim_ops, e.operand_mds, {sum_scale, e.sum_zero_point, e.sum_dt});
    if (int8) attr.set_output_scales(1 << 1, out_scales);  // per output channel (dst dim 1)
    if (int8 && quant_->act.zero_point != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    auto take = [&e](const auto& pd, dnnl::primitive prim) {
      e.prim = std::move(prim);
      e.scratch_md = pd.scratchpad_desc();
      e.src_md = pd.src_desc();
      e.wei_md = pd.weights_desc();
      e.dst_md = pd.dst_desc();
      e.impl = pd.impl_info_str();
    };
    // Winograd reads an input that arrives blocked (another Winograd conv's
    // nChw16c) as it is. Direct convolutions let oneDNN pick and reorder such
    // an input: on nChw16c oneDNN 2.6 has only its older jit kernels, measured
    // 5-45% slower than brgconv on nhwc for resnet's stride-2 and 7x7x512
    // convs, far more than the reorder of their input costs.
    auto conv = [&](dnnl::algorithm a, const memory::desc& wei) {
      auto build = [&](const memory::desc& src, const memory::desc& dst = memory::desc()) {
        dnnl::convolution_forward::desc d(prop, a, src, wei, bias_md, dst ? dst : dst_any, p.stride, dil, p.padding_l, pad_r);
        const dnnl::convolution_forward::primitive_desc pd =
            int8 && quant_->act.zero_point != 0 ? int8::convolutionWithZeroPoint(d, attr)
                                                : dnnl::convolution_forward::primitive_desc(d, attr, cpuEngine());
        take(pd, dnnl::convolution_forward(pd));
      };
      const bool follow = a == dnnl::algorithm::convolution_winograd && x.isBlocked() &&
                          blockedDesc(x).dims() == x.sizes();
      if (follow) {
        try {
          build(blockedDesc(x));
          return;
        } catch (const dnnl::error&) {  // no kernel for that layout: let oneDNN pick
        }
      }
      // A grouped (not depthwise) 2-D convolution whose input arrives
      // channels-last runs channels-last in and out. Left to pick, oneDNN
      // takes nChw16c, so the input was reordered into it and the output out
      // of it again (regnet_y_800mf's group convs: 43 reorders, 1.9 ms a
      // call on a Sapphire Rapids); its jit kernel on nhwc measured 0-22%
      // faster than on nChw16c for regnet's seven shapes as well.
      const bool x_channels_last = !x.isBlocked() && x.dim() == 4 && x.stride(1) == 1 && x.stride(3) == x.size(1) &&
                                   x.stride(2) == x.size(3) * x.size(1) && x.stride(0) == x.size(2) * x.stride(2);
      if (a == dnnl::algorithm::convolution_direct && x_channels_last && p.groups > 1 && p.groups < x.size(1)) {
        try {
          build(memory::desc(x.sizes(), src_dt, tag::nhwc), memory::desc(out, dst_dt, tag::nhwc));
          if (!isReference(e.impl) && e.impl.find("gemm") == std::string::npos) return;
        } catch (const dnnl::error&) {  // no kernel for it: let oneDNN pick
        }
      }
      build(src_any);
    };
    auto creating = convolutionCreationLock();  // (released once the primitive is chosen)
    if (int8 && ownDepthwiseInt8(x, w, p, oc, out, src_dt, dst_dt, e)) {
      e.src_md = memory::desc(x.sizes(), src_dt, tag::nhwc);
      e.dst_md = memory::desc(out, dst_dt, tag::nhwc);
      e.wei_md = wplain;
      e.impl = "llga_dw_int8:avx512_vnni";
    } else if (mode == Precision::F32 && !p.transposed && ownWinogradPays(x, w, p, oc, out, e)) {
      e.own_wino = std::make_shared<const winograd::Weights>();  // filled with the weights below
      e.winograd = true;
      e.wino_geometry = {x.size(0), x.size(1), x.size(2), x.size(3), oc, out[2], out[3], p.padding_l[0], p.padding_l[1]};
      for (const PostOp& op : e.ops)
        e.wino_steps.push_back(op.kind == PostOp::Kind::Sum ? winograd::Step{winograd::Step::Kind::Sum, 0.0f}
                                                            : winograd::Step{winograd::Step::Kind::Relu, op.alpha});
      e.src_md = memory::desc(x.sizes(), memory::data_type::f32, tag::nChw8c);
      e.dst_md = memory::desc(out, memory::data_type::f32, tag::nChw8c);
      e.wei_md = wplain;
      e.impl = "llga_wino_2x3:avx2";
    } else if (mode == Precision::F32 && !int8 && ownGemv(x, w, p, e)) {
      e.own_gemv = true;
      // the channels as they lie, where they are dense (one pixel: nchw, nhwc, and nChw8c or nChw16c with
      // the channels a multiple of the block, as AVX2's pooling writes it, alike); else a dense copy
      e.src_md = x.isBlocked()       ? blockedDesc(x)
                 : x.stride(1) == 1 ? plainDesc(x)
                                    : memory::desc(x.sizes(), memory::data_type::f32, Tensor::contiguousStrides(x.sizes()));
      // Written as nChw8c on AVX2, where its readers take blocked tensors and the channels are a multiple of 8
      // (one pixel: the same bytes): the network around lies in oneDNN's nChw8c there, and a plain gate made
      // the squeeze-excite multiply and the 1x1 after it read a plain feature map (regnet_y_800mf 0.5 ms a
      // call slower, more than the product saved). AVX-512 keeps the plain output it was measured with.
      const bool as_blocked = blocked_output_ && !cpuRunsAvx512Kernels() && out[1] % 8 == 0;
      e.dst_md = as_blocked ? memory::desc(out, memory::data_type::f32, tag::nChw8c)
                            : memory::desc(out, memory::data_type::f32, Tensor::contiguousStrides(out));
      e.wei_md = memory::desc(w.sizes(), memory::data_type::f32, tag::Oihw16o);  // gemv::panelDesc's layout of b = w^T
      e.impl = gemv::implName();
    } else if (mode == Precision::F32 && !int8 && im2colPays(x, w, p, oc, out, e)) {
      const im2col::Geometry& g = *e.im2col;
      e.chunk_rows = im2col::chunkRows(g);
      const int64_t tail = g.rows() % e.chunk_rows;
      auto rowsDesc = [](int64_t rows, int64_t cols) { return memory::desc({rows, cols}, memory::data_type::f32, tag::ab); };
      e.col_md = rowsDesc(e.chunk_rows, g.cols());
      e.mm_dst_md = rowsDesc(e.chunk_rows, oc);
      e.mm_bias_md = has_bias ? rowsDesc(1, oc) : memory::desc();
      try {
        dnnl::matmul::desc d(e.col_md, any({g.cols(), oc}), e.mm_bias_md, e.mm_dst_md);
        dnnl::matmul::primitive_desc pd(d, attr, cpuEngine());
        if (tail) {  // the last chunk's product, on the same packed weights
          e.tail_col_md = rowsDesc(tail, g.cols());
          e.tail_dst_md = rowsDesc(tail, oc);
          dnnl::matmul::desc td(e.tail_col_md, pd.weights_desc(), e.mm_bias_md, e.tail_dst_md);
          dnnl::matmul::primitive_desc tpd(td, attr, cpuEngine());
          e.tail_prim = dnnl::matmul(tpd);
          e.tail_scratch_md = tpd.scratchpad_desc();
        }
        e.prim = dnnl::matmul(pd);
        e.scratch_md = pd.scratchpad_desc();
        e.wei_md = pd.weights_desc();
        e.impl = std::string("im2col+") + pd.impl_info_str();
        e.src_md = memory::desc(x.sizes(), memory::data_type::f32, tag::nwc);
        e.dst_md = memory::desc(out, memory::data_type::f32, tag::nwc);
      } catch (const dnnl::error&) {  // no product for this chain: the convolution
        e.im2col.reset();
      }
    } else if (mode == Precision::F32 && !p.transposed && winogradPays(x, w, p, oc, out) && !PlainWeightsScope::active()) {
      // Other shapes first try the Winograd weight layouts earlier ones made,
      // so that specializations share the transformed weights; oneDNN's
      // formats differ between its kernels (2x3 at batch 1, 4x3 above) and
      // between 4x3's batch sizes, so there may be a few.
      std::shared_ptr<const std::vector<memory::desc>> seen = wino_weights_.load();
      std::vector<memory::desc> tries = seen ? *seen : std::vector<memory::desc>{};
      tries.push_back(wei_any);
      for (const memory::desc& wei : tries) {
        try {  // oneDNN declines some post-op chains (binary operands): then direct
          conv(dnnl::algorithm::convolution_winograd, wei);
          e.winograd = true;
          break;
        } catch (const dnnl::error&) {
        }
      }
      if (e.winograd && (!seen || std::find(seen->begin(), seen->end(), e.wei_md) == seen->end())) {
        auto more = std::make_shared<std::vector<memory::desc>>(seen ? *seen : std::vector<memory::desc>{});
        more->push_back(e.wei_md);
        wino_weights_.store(std::move(more));  // a race loses an entry at worst: one more copy
      }
    }
    if (p.transposed) {
      dnnl::deconvolution_forward::desc d(prop, dnnl::algorithm::deconvolution_direct, src_any, wei_any, bias_md, dst_any,
                                          p.stride, dil, p.padding_l, pad_r);
      dnnl::deconvolution_forward::primitive_desc pd(d, attr, cpuEngine());
      take(pd, dnnl::deconvolution_forward(pd));
    } else if (!e.winograd && !e.own_dw && !e.own_gemv && !e.im2col) {
      conv(dnnl::algorithm::convolution_direct, wei_any);
      // int8 takes what oneDNN picked, unless that is its reference kernel:
      // then fp32 (the fallbacks below build without output scales)
      if (int8 && isReference(e.impl)) throw dnnl::error(dnnl_unimplemented, "int8: only oneDNN's reference kernel");
      // Every operand becomes a binary post-op given in the layout dst takes
      // without them (a reorder per call unless it arrives so), when:
      // - the chain leaves just the reference kernel: oneDNN's jit kernels
      //   take a full-size binary operand only in dst's own layout, and a sum
      //   only first (RAFT's GRU gates, conv -> tanh -> mul z -> add: 100x
      //   slower);
      // - the kernel is one of oneDNN's direct jit convolutions (jit:,
      //   jit_1x1:, jit_dw:, any ISA) and the chain has a sum: these start
      //   their accumulators from dst, so the residual is added first and
      //   every product is rounded at the residual's magnitude (a conv of 256
      //   channels onto a residual near 100: 50 ulp off, PyTorch 1; RAFT's
      //   coords + delta_flow went 25x further from float64 than PyTorch).
      //   A binary add comes after the whole reduction, as in PyTorch.
      const bool sum_first = !int8 && e.sum_operand >= 0 && e.impl.rfind("jit", 0) == 0;
      if ((!int8 && isReference(e.impl) && (!e.operand_mds.empty() || e.sum_operand >= 0)) || sum_first) {
        std::vector<PostOp> eltwise_only, ops = post_;
        for (const PostOp& op : ops)
          if (op.kind == PostOp::Kind::Eltwise) eltwise_only.push_back(op);
        std::vector<memory::desc> dsts;  // dst as oneDNN lays it out without binary operands, then plain
        try {
          dnnl::convolution_forward::desc probe_d(prop, dnnl::algorithm::convolution_direct, src_any, wei_any, bias_md,
                                                  dst_any, p.stride, dil, p.padding_l, pad_r);
          dsts.push_back(dnnl::convolution_forward::primitive_desc(probe_d, postOpAttr(eltwise_only, {}), cpuEngine())
                             .dst_desc());
        } catch (const dnnl::error&) {
        }
        dsts.push_back(memory::desc(out, memory::data_type::f32, Tensor::contiguousStrides(out)));
        const OwnActivation act = takeFinalActivation(ops, out_elems);
        for (const memory::desc& dst_fmt : dsts) {
          std::vector<memory::desc> mds;
          std::vector<bool> moved;
          for (size_t o = 0; o < operands.size(); ++o) {
            memory::desc md = binaryOperandDesc(operands[o], out.size());
            const bool full = md.dims() == dst_fmt.dims() && md != dst_fmt;
            mds.push_back(full ? dst_fmt : md);
            moved.push_back(full);
          }
          try {
            dnnl::convolution_forward::desc d(prop, dnnl::algorithm::convolution_direct, src_any, wei_any, bias_md,
                                              dst_fmt, p.stride, dil, p.padding_l, pad_r);
            dnnl::convolution_forward::primitive_desc pd(d, postOpAttr(ops, mds), cpuEngine());
            if (isReference(pd)) continue;
            take(pd, dnnl::convolution_forward(pd));
            e.ops = ops;
            e.act_after = act;
            e.sum_operand = -1;
            e.operand_mds = std::move(mds);
            e.operand_reorder = std::move(moved);
            break;
          } catch (const dnnl::error&) {  // this layout has no kernel: the next, or the one chosen before
          }
        }
      }
    }
    if (int8 && !operands.empty() && e.impl.find("gemm") != std::string::npos)  // the split below has no output scales
      throw dnnl::error(dnnl_unimplemented, "int8: only oneDNN's gemm kernel, which would split the chain");
    if (!p.transposed && !e.winograd && !operands.empty() && (isReference(e.impl) || e.impl.find("gemm") != std::string::npos))
      trySplit(e, operands, out, [&](const std::vector<PostOp>& head, const std::vector<memory::desc>& head_mds) {
        dnnl::convolution_forward::desc d(prop, dnnl::algorithm::convolution_direct, src_any, wei_any, bias_md, dst_any,
                                          p.stride, dil, p.padding_l, pad_r);
        return dnnl::convolution_forward::primitive_desc(d, postOpAttr(head, head_mds), cpuEngine());
      }, take);
    creating.unlock();
    e.src_plain = plainDesc(x);
    // a quantized dst stays quantized when it goes plain (its readers take it so)
    e.dst_plain = memory::desc(out, dst_int8 ? dst_dt : memory::data_type::f32, Tensor::contiguousStrides(out));
    e.dst_layout = makeLayout(e.dst_md);
    e.dst_dtype = e.dst_md.data_type() == memory::data_type::bf16 ? ScalarType::BFloat16
                  : e.dst_md.data_type() == memory::data_type::u8 ? ScalarType::Byte
                  : e.dst_md.data_type() == memory::data_type::s8 ? ScalarType::Char
                                                                    : ScalarType::Float;
    if (e.dst_md.data.format_kind == dnnl_blocked && e.dst_md.data.format_desc.blocking.inner_nblks == 0) {
      e.dst_strided = true;
      e.dst_strides.assign(e.dst_md.data.format_desc.blocking.strides,
                           e.dst_md.data.format_desc.blocking.strides + e.dst_md.data.ndims);
    }
    if (e.narrowSwish()) {  // the output is written from the primitive's fp32 dst, at its element strides
      if (!e.dst_strided) throw dnnl::error(dnnl_unimplemented, "swish into a narrow output after a blocked dst");
      e.dst_dtype = e.swish_bf16                    ? ScalarType::BFloat16
                    : e.swish_quantize->is_unsigned ? ScalarType::Byte
                                                    : ScalarType::Char;
      e.dst_plain = memory::desc(out, dnnlType(e.dst_dtype), Tensor::contiguousStrides(out));
    }
    e.w_sizes = w.sizes();
    if (e.own_wino) {  // transformed once per kernel: they do not depend on the input's shape
      e.own_wino = own_wino_weights_.load();
      if (!e.own_wino) {
        ExecContext ctx;
        const Tensor plain = w.isBlocked() ? toPlain(ctx, w) : w;
        const int64_t strides[4] = {plain.stride(0), plain.stride(1), plain.stride(2), plain.stride(3)};
        e.own_wino = winograd::transformWeights(static_cast<const float*>(plain.data()), strides, oc, x.size(1));
        own_wino_weights_.store(e.own_wino);  // a race transforms twice at worst
      }
    } else if (e.own_dw) {
      e.own_dw = dw_int8::pack(static_cast<const int8_t*>(w_q.data()), e.int8_scales.data(), oc, w.size(2), w.size(3),
                               quant_->act.zero_point, src_dt == memory::data_type::s8);
    } else if (e.im2col) {  // the [oc, c, k] weights as the [c * k, oc] matrix they are (strides 1, c * k), packed
      ExecContext ctx;
      const Tensor plain = (w.isBlocked() ? toPlain(ctx, w) : w).contiguous();
      const int64_t ck = e.im2col->cols();
      e.weights_buf = reorderedWeight(plain, memory::desc({ck, oc}, memory::data_type::f32, memory::dims{1, ck}), e.wei_md);
      e.weights = memory(e.wei_md, cpuEngine(), e.weights_buf.data());
    } else if (int8) {  // the quantized weight into the primitive's layout (and its compensation, where it has one)
      e.weights_buf = allocateFor(e.wei_md, AllocPurpose::WeightCache);
      ExecContext rctx;
      memory::desc q_plain = wplain;
      q_plain.data.data_type = dnnl_s8;
      reorder(rctx, memory(q_plain, cpuEngine(), w_q.data()), memory(e.wei_md, cpuEngine(), e.weights_buf.data()));
      e.weights = memory(e.wei_md, cpuEngine(), e.weights_buf.data());
    } else if (constant_weight_) {  // from the original, or from a compacted copy in another layout
      Tensor from = w;
      // oneDNN reorders into Winograd only from plain contiguous OIHW: a
      // blocked (compacted) or strided weight (a channels-last model's
      // OHWI buffer) is made contiguous first.
      if (e.winograd && w.isBlocked()) {
        ExecContext ctx;
        from = toPlain(ctx, w);
      } else if (e.winograd && !w.isContiguous()) {
        from = w.contiguous();
      }
      e.weights_buf = reorderedWeight(from, from.isBlocked() ? blockedDesc(from) : weightsPlainDesc(from, p), e.wei_md);
      e.weights = memory(e.wei_md, cpuEngine(), e.weights_buf.data());
    }
    return e;
  }

  Form form_;
  bool constant_weight_;
  bool constant_params_;
  Precision precision_;
  bool bf16_out_;
  std::optional<int8::OpQuant> quant_;
  std::optional<ActivationQuant> int8_out_;
  std::optional<ActivationQuant> residual_quant_;

  // An operand that stays as it arrives (the residual in a low-precision
  // partition: bf16, or quantized as residual_quant says).
  bool lowPrecisionResidual(const Tensor& t) const {
    return (precision_ == Precision::BF16 && t.dtype() == ScalarType::BFloat16) ||
           (quant_ && residual_quant_ && t.dtype() == int8::storageType(*residual_quant_));
  }
  // The chain's one operand is an add of the output's shape: a residual.
  bool residualChain(const std::vector<Tensor>& operands, const Shape& out) const {
    const PostOp* only = nullptr;
    for (const PostOp& op : post_) {
      if (op.kind == PostOp::Kind::Eltwise) continue;
      if (only) return false;
      only = &op;
    }
    return only && only->alg == PostOpAlg::Add && operands.size() == 1 && operands[0].sizes() == out;
  }
  SharedSlot<const ConvParams> fixed_params_;  // read once, when constant_params_
  std::vector<PostOp> post_;
  size_t anchor_inputs_;
  bool blocked_output_ = false;
  bool strided_output_ = false;  // readers take any dense strides: a channels-last dst goes out as is
  PrimitiveCache<ConvEntry> cache_;
  SharedSlot<const ConvEntry> last_;  // the entry of the latest call, for report()
  mutable SharedSlot<const std::vector<memory::desc>> wino_weights_;  // Winograd weight layouts made
  mutable SharedSlot<const winograd::Weights> own_wino_weights_;      // llga's Winograd weights, once made
};

ConvKernel::Form convForm(const std::string& kind) {
  if (kind == "aten::_convolution") return ConvKernel::Form::Internal;
  if (kind.rfind("aten::conv_transpose", 0) == 0) return ConvKernel::Form::ConvTranspose;
  return ConvKernel::Form::Conv;
}


// Whether every input after the bias (stride, padding, ...) is a graph constant.
bool constantParams(const Node& n) {
  for (size_t i = 3; i < n.inputs().size(); ++i)
    if (n.input(i)->node()->kind() != prim::Constant) return false;
  return true;
}

}  // namespace

std::unique_ptr<Kernel> makeFusedConv(const Node& anchor, std::vector<PostOp> post, bool constant_weight, bool bf16_out,
                                      std::optional<ActivationQuant> int8_out,
                                      std::optional<ActivationQuant> residual_quant) {
  return std::make_unique<ConvKernel>(convForm(anchor.kind().toQualString()), constant_weight, constantParams(anchor),
                                      precisionOf(anchor), std::move(post), anchor.inputs().size(), bf16_out,
                                      int8::opQuantOf(anchor), int8_out, residual_quant);
}

void registerConvOps(OpRegistry& r) {
  auto add = [&](const char* name, ConvKernel::Form form, size_t lo, size_t hi) {
    r.add(OpDef{name, lo, hi, [form](const Node& n) {
                  return std::make_unique<ConvKernel>(form, isConstantInput(n, 1), constantParams(n), precisionOf(n),
                                                      std::vector<PostOp>{}, std::numeric_limits<size_t>::max(), false,
                                                      int8::opQuantOf(n));
                }});
  };
  add("aten::_convolution", ConvKernel::Form::Internal, 12, 13);
  for (const char* n : {"aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::_convolution_mode"})
    add(n, ConvKernel::Form::Conv, 2, 7);
  for (const char* n : {"aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d"})
    add(n, ConvKernel::Form::ConvTranspose, 2, 8);
}
LLGA_REGISTER_OPS(registerConvOps);

}  // namespace llga
