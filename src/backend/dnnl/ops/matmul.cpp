// Matrix products on oneDNN's matmul primitive.
//   aten::linear(x, W, b?)        x[..., K] . W[N, K]^T + b
//   aten::matmul(a, b)            numpy semantics: 1-D promotion, batch broadcasting
//   aten::mm, aten::bmm, aten::addmm(bias, a, b, beta, alpha), aten::addmm_
// Strided inputs (transposed views) are read in place. A constant linear
// weight is reordered once into the layout the primitive prefers.
#include <algorithm>
#include <atomic>
#include <unordered_map>

#include "backend/dnnl/dnnl_utils.h"
#include "backend/dnnl/gemv.h"
#include "backend/dnnl/ops/op_utils.h"
#include "backend/dnnl/ops/functional.h"
#include "backend/dnnl/ops/fused.h"
#include "backend/dnnl/ops/primitive_cache.h"
#include "backend/dnnl/quantize.h"
#include "backend/dnnl/activations.h"
#include "ir/precision.h"
#include "runtime/threads.h"

namespace llga {
namespace {

using dnnl::memory;

struct MatmulEntry {
  dnnl::matmul prim;
  memory::desc src_md, wei_md, dst_md, wei_plain, scratch_md, bias_md;
  std::vector<memory::desc> operand_mds;  // of the chain's binary post-ops, in order
  memory weights;  // reordered constant weights
  Tensor weights_buf;
  std::string impl;
  bool gemv = false;  // llga's own one-row product (backend/dnnl/gemv.h) on weights_buf, no primitive
  std::vector<gemv::Step> gemv_steps;  // the chain, as its steps
  bool bf16 = false;  // src and weights bf16 (converted per call unless src arrives bf16; constant weights once), fp32 dst
  bool bf16_out = false;  // bf16: the result handed on in bf16 (a bf16 dst, or llga's activation or conversion into bf16)
  bool int8 = false;  // src u8/s8 (quantized per call), constant weights s8 per column of b, fp32 dst
  std::vector<float> int8_scales;  // per column of b: act_scale * weight scale (the bias is divided by it)
  bool dynamic = false;  // int8 with the activation's scale taken per call: int8_scales holds the weights' alone
  size_t pre_ops = 0;    // dynamic: post-ops before the chain's (times this call's scale, plus the bias)
  OwnActivation act_after = OwnActivation::None;  // the chain's final silu/gelu, run after the primitive (backend/dnnl/activations.h)
  SharedBoundArgs bound;  // the primitive's arguments, re-pointed call after call
  // When oneDNN has only its reference kernel for the product with the whole
  // chain (a batched product with a mask shared across the batch, for one),
  // the chain from its first binary op on runs as a second primitive: a binary
  // (dst op operand, in place) with the rest of the chain as its post-ops.
  size_t split_at = SIZE_MAX;  // index of that first binary op in the chain
  dnnl::binary tail;
  memory::desc tail_scratch_md;
};

bool stridesOk(const Tensor& t) {
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.stride(d) <= 0 && t.size(d) > 1) return false;
  return true;
}

// A post-op chain and its operands, each already of the output's rank.
struct Chain {
  const std::vector<PostOp>* ops = nullptr;
  std::vector<Tensor> operands;
  mutable std::shared_ptr<const MatmulEntry> used;  // set by matmulCore: the primitive that ran
};

// t as a dense row-major bf16 tensor (round to nearest even, oneDNN's reorder).
Tensor toBf16(ExecContext& ctx, const Tensor& t) {
  Tensor out = Tensor::empty(ScalarType::BFloat16, t.sizes());
  reorder(ctx, wrap(t), wrap(out));
  return out;
}

// a @ b for a[..., M, K], b[..., K, N] whose batch dims already broadcast
// (equal or 1), plus an optional bias broadcast to [..., M, N], then the chain.
// In bf16 (`precision`), a and b are rounded to bf16 (a constant b once, into
// the weight cache; an `a` that arrives bf16, written so by its producer, as
// it is) and multiplied with fp32 accumulation into an fp32 dst, or with
// `bf16_out` (the partition's out_dtype="bf16": its readers take bf16) into a
// bf16 one: the chain's post-ops in fp32, then rounded; a final gelu or silu
// that llga runs after the primitive (takeFinalActivation) reads the fp32
// dst and writes the bf16 (activationToBf16). Where oneDNN has no bf16
// kernel for the product, it runs fp32 (a bf16 `a` converted) and writes fp32.
// In int8 (`precision`, with `quant`: a 2-D product with a constant b), a is
// quantized per call with quant's scale, b once to s8 with a scale per
// column (per output feature of a linear), and oneDNN scales the int32 sums
// back to fp32 (output scales; the bias divided by them) before the chain;
// where it has no int8 kernel, the product runs fp32.
Tensor matmulCore(ExecContext& ctx, Tensor a, Tensor b, const std::optional<Tensor>& bias,
                  PrimitiveCache<MatmulEntry>* cache, bool constant_b, const Chain* chain = nullptr,
                  Precision precision = Precision::F32, const std::optional<int8::OpQuant>& quant = std::nullopt,
                  bool dynamic_act = false, bool bf16_out = false) {
  if ((a.dtype() != ScalarType::Float && a.dtype() != ScalarType::BFloat16) || b.dtype() != ScalarType::Float)
    throw std::invalid_argument("matmul supports float32, got " + a.describe() + " and " + b.describe());
  if (a.dtype() == ScalarType::BFloat16 && precision != Precision::BF16) a = a.to(ScalarType::Float);
  if (a.size(-1) != b.size(-2))
    throw std::invalid_argument("matmul: shapes " + a.describe() + " and " + b.describe() + " cannot be multiplied");
  if (!stridesOk(a)) a = a.contiguous();
  if (!stridesOk(b)) b = b.contiguous();
  if (precision == Precision::INT8 && quant && quant->fromGraph()) a = a.contiguous();  // as fakeQuantize gives it
  const int64_t nd = a.dim();
  Shape out_shape(a.sizes().begin(), a.sizes().end() - 2);
  for (int64_t d = 0; d + 2 < nd; ++d) out_shape[d] = a.size(d) == 1 ? b.size(d) : a.size(d);  // 1 broadcasts, 0 stays
  out_shape.push_back(a.size(-2));
  out_shape.push_back(b.size(-1));
  if (chain)
    for (const Tensor& t : chain->operands) checkOperandFits(t, out_shape);
  int64_t out_numel = 1;
  for (int64_t d : out_shape) out_numel *= d;
  if (out_numel == 0) return Tensor::empty(ScalarType::Float, out_shape);
  std::vector<Tensor> operands;  // the chain's, as its post-ops read them (postOpOperand: broadcast ones dense)
  if (chain)
    for (const Tensor& t : chain->operands) operands.push_back(postOpOperand(t, out_numel));
  // dst as a fresh row-major tensor of out_shape (size-1 dims as unitDimStrides: an einsum's (1, 4, 1) view failed to execute)
  auto outDesc = [&out_shape](memory::data_type dt) {
    return memory::desc(out_shape, dt, unitDimStrides(out_shape, Tensor::contiguousStrides(out_shape)));
  };
  if (a.size(-1) == 0) {  // an empty sum is 0: as a product over one zero, so the bias and the chain still apply
    Shape sa = a.sizes(), sb = b.sizes();
    sa.back() = 1;
    sb[sb.size() - 2] = 1;
    a = Tensor::zeros(ScalarType::Float, sa);
    b = Tensor::zeros(ScalarType::Float, sb);
    constant_b = false;
  }
  std::optional<Tensor> bb;
  if (bias) {
    Tensor t = bias->to(ScalarType::Float);
    Shape bs(static_cast<size_t>(nd) - std::min<size_t>(t.dim(), nd), 1);
    bs.insert(bs.end(), t.sizes().begin(), t.sizes().end());
    bb = (t.dim() == nd ? t : t.reshape(bs)).contiguous();
  }
  thread_local std::vector<int64_t> key;  // reused: no allocation per call
  key.clear();
  addToKey(key, a);
  if (constant_b) addConstantToKey(key, b);
  else addToKey(key, b);
  if (bb) addToKey(key, *bb);
  if (chain)
    for (const Tensor& t : operands) addToKey(key, t);
  auto make = [&](Precision mode) {
    MatmulEntry e;
    const bool bf16 = mode == Precision::BF16, int8 = mode == Precision::INT8;
    e.bf16 = bf16;
    e.int8 = int8;
    const memory::data_type in_dt = bf16 ? memory::data_type::bf16 : memory::data_type::f32;
    auto dense = [](const Tensor& t, memory::data_type dt = memory::data_type::bf16) {  // the copy toBf16 makes of t
      return memory::desc(t.sizes(), dt, Tensor::contiguousStrides(t.sizes()));
    };
    // size-1 dims as unitDimStrides: an einsum's (1, 4, 1) view failed to execute
    e.dynamic = int8 && (!quant || quant->dynamic);
    e.src_md = bf16 ? dense(a)
               : int8 ? dense(a, quant && quant->act.is_unsigned ? memory::data_type::u8 : memory::data_type::s8)
               : a.dtype() == ScalarType::BFloat16 ? dense(a, memory::data_type::f32)  // converted per call
                                                    : plainDesc(a);
    // blocked: a compacted constant; the bf16 copy of a variable b is dense
    e.wei_plain = b.isBlocked() ? blockedDesc(b) : bf16 && !constant_b ? dense(b) : plainDesc(b);
    memory::desc wei_md = constant_b && (!PlainWeightsScope::active() || mode != Precision::F32)
                              ? memory::desc(b.sizes(), int8 ? memory::data_type::s8 : in_dt, memory::format_tag::any)
                              : e.wei_plain;
    e.bias_md = bb ? plainDesc(*bb) : memory::desc();
    if (chain)
      for (const Tensor& t : operands) e.operand_mds.push_back(binaryOperandDesc(t, static_cast<size_t>(nd)));
    std::vector<PostOp> ops = chain ? *chain->ops : std::vector<PostOp>{};
    e.act_after = takeFinalActivation(ops, out_numel);  // then llga's own runs after the primitive
    e.bf16_out = bf16 && bf16_out && activationToBf16Available(e.act_after);
    // bf16 straight from the primitive unless llga's activation writes it
    e.dst_md = outDesc(e.bf16_out && e.act_after == OwnActivation::None ? memory::data_type::bf16 : memory::data_type::f32);
    if (e.dynamic) {
      // The activation's scale changes every call: runtime output scales
      // would leave oneDNN only its gemm kernel (no AMX), so the weights'
      // scales are the output scales and this call's activation scale is a
      // binary post-op operand (a 1x1 tensor), with the bias added after it.
      std::vector<PostOp> front{{.kind = PostOp::Kind::Binary, .alg = PostOpAlg::Mul, .name = "act_scale"}};
      std::vector<memory::desc> front_mds{memory::desc(memory::dims(static_cast<size_t>(nd), 1), memory::data_type::f32,
                                                       memory::dims(static_cast<size_t>(nd), 1))};
      if (bb) {
        front.push_back({.kind = PostOp::Kind::Binary, .alg = PostOpAlg::Add, .name = "bias"});
        front_mds.push_back(e.bias_md);
        e.bias_md = memory::desc();
      }
      e.pre_ops = front.size();
      ops.insert(ops.begin(), front.begin(), front.end());
      e.operand_mds.insert(e.operand_mds.begin(), front_mds.begin(), front_mds.end());
    }
    // llga's own one-row product (backend/dnnl/gemv.h): fp32 or bf16, a
    // constant b packed into its panels, a bias of N values or none, an
    // eltwise chain of its steps or none
    std::optional<std::vector<gemv::Step>> steps;
    if ((mode == Precision::F32 ? gemv::available() : bf16 && gemv::availableBf16()) && constant_b && nd == 2 &&
        a.size(0) == 1 && e.act_after == OwnActivation::None && (!bb || bb->numel() == b.size(1)) &&
        !PlainWeightsScope::active() && (steps = eltwiseSteps(ops))) {
      e.gemv = true;
      e.gemv_steps = std::move(*steps);
      e.wei_md = bf16 ? gemv::panelDescBf16(b.size(0), b.size(1)) : gemv::panelDesc(b.size(0), b.size(1));
      e.weights_buf = reorderedWeight(b, e.wei_plain, e.wei_md);
      e.weights = memory(e.wei_md, cpuEngine(), e.weights_buf.data());
      e.impl = bf16 ? "llga_gemv:avx512_bf16" : gemv::implName();
      return e;
    }
    dnnl::matmul::desc d(e.src_md, wei_md, e.bias_md, e.dst_md);
    dnnl::primitive_attr attr = chain || e.dynamic ? postOpAttr(ops, e.operand_mds) : scratchpadAttr();
    Tensor w_q;  // int8: w = b^T quantized, rows of K (s8), and its scales
    if (int8) {
      ExecContext qctx;
      const Tensor w = (b.isBlocked() ? toPlain(qctx, b) : b).transpose(0, 1).contiguous();
      w_q = Tensor::empty(ScalarType::Char, w.sizes());
      const std::vector<float> w_scales =
          quant ? int8::quantizeWeights(static_cast<const float*>(w.data()), w.size(0), w.size(1), *quant,
                                        static_cast<int8_t*>(w_q.data()))
                : int8::quantizeRows(static_cast<const float*>(w.data()), w.size(0), w.size(1), static_cast<int8_t*>(w_q.data()));
      for (float ws : w_scales) e.int8_scales.push_back(e.dynamic ? ws : static_cast<float>(quant->act.scale) * ws);
      attr.set_output_scales(1 << 1, e.int8_scales);  // per column of dst
      // a zero point: the graph's, or PyTorch's dynamic u8 one (chosen per call)
      if (quant && (quant->act.zero_point != 0 || (quant->dynamic && quant->act.is_unsigned)))
        attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    }
    dnnl::matmul::primitive_desc pd(d, attr, cpuEngine());
    if (int8 && isReference(pd)) throw dnnl::error(dnnl_unimplemented, "int8: only oneDNN's reference kernel");
    // oneDNN's gemm kernel (where it has no brgemm: AVX2 CPUs) packs the
    // weights on every call, and faster from the transposed layout (N x K,
    // PyTorch's own) than from the K x N it picks: vit's 768 -> 3072 linear
    // 82 -> 130 GFLOP/s on an AVX2 EPYC, the others the same or better.
    if (mode == Precision::F32 && constant_b && !PlainWeightsScope::active() && implName(pd).rfind("gemm:jit", 0) == 0) {
      Shape ts = Tensor::contiguousStrides(b.sizes());
      ts[static_cast<size_t>(nd) - 2] = 1;
      ts[static_cast<size_t>(nd) - 1] = b.size(nd - 2);
      const memory::desc wei_t(b.sizes(), memory::data_type::f32, ts);
      dnnl::matmul::desc dt(e.src_md, wei_t, e.bias_md, e.dst_md);
      dnnl::matmul::primitive_desc pdt(dt, attr, cpuEngine());
      if (implName(pdt).rfind("gemm:jit", 0) == 0) d = dt, pd = pdt;
    }
    const auto first_binary = std::find_if(ops.begin(), ops.end(), [](const PostOp& p) { return p.kind == PostOp::Kind::Binary; });
    const bool has_sum = std::any_of(ops.begin(), ops.end(), [](const PostOp& p) { return p.kind == PostOp::Kind::Sum; });
    if (isReference(pd) && first_binary != ops.end() && !has_sum && !e.dynamic) {
      e.split_at = static_cast<size_t>(first_binary - ops.begin());
      std::vector<PostOp> head(ops.begin(), first_binary), rest(first_binary + 1, ops.end());
      std::vector<memory::desc> rest_mds(e.operand_mds.begin() + 1, e.operand_mds.end());
      dnnl::matmul::primitive_desc head_pd(d, postOpAttr(head, {}), cpuEngine());
      dnnl::binary::desc bd(dnnlAlgorithm(first_binary->alg), e.dst_md, e.operand_mds[0], e.dst_md);
      dnnl::binary::primitive_desc bpd(bd, postOpAttr(rest, rest_mds), cpuEngine());
      e.tail = dnnl::binary(bpd);
      e.tail_scratch_md = bpd.scratchpad_desc();
      pd = head_pd;
      e.impl = std::string(pd.impl_info_str()) + " + binary " + bpd.impl_info_str();
    }
    e.prim = dnnl::matmul(pd);
    e.scratch_md = pd.scratchpad_desc();
    e.wei_md = pd.weights_desc();
    if (e.split_at == SIZE_MAX) e.impl = pd.impl_info_str();
    if (int8) {  // w_q as b ([K, N], column-major) into the primitive's layout
      e.weights_buf = allocateFor(e.wei_md, AllocPurpose::WeightCache);
      const memory::desc q_plain({b.size(0), b.size(1)}, memory::data_type::s8, memory::dims{1, b.size(0)});
      ExecContext rctx;
      reorder(rctx, memory(q_plain, cpuEngine(), w_q.data()), memory(e.wei_md, cpuEngine(), e.weights_buf.data()));
      e.weights = memory(e.wei_md, cpuEngine(), e.weights_buf.data());
    } else if (constant_b) {
      e.weights_buf = reorderedWeight(b, e.wei_plain, e.wei_md);
      e.weights = memory(e.wei_md, cpuEngine(), e.weights_buf.data());
    }
    return e;
  };
  std::shared_ptr<MatmulEntry> e;
  PrimitiveCache<MatmulEntry> local;
  e = (cache ? cache : &local)->get(key, [&] {
    if (precision == Precision::BF16) {
      try {
        return make(Precision::BF16);
      } catch (const dnnl::error&) {  // no bf16 kernel for this product: fp32
      }
    }
    if (precision == Precision::INT8 && (quant || dynamic_act) && constant_b && nd == 2 && int8::hasVnni()) {
      try {
        return make(Precision::INT8);
      } catch (const dnnl::error&) {  // no int8 kernel for this product: fp32
      }
    }
    return make(Precision::F32);
  });
  // a bf16 `a` where the entry reads fp32 (oneDNN had no bf16 kernel; the one-row product reads floats)
  if (a.dtype() == ScalarType::BFloat16 && (!e->bf16 || e->gemv)) a = a.to(ScalarType::Float);
  // The result: bf16 where the entry hands it on so, written by the primitive
  // or by llga's activation or conversion from the fp32 `out`.
  Tensor out = e->bf16_out && e->act_after == OwnActivation::None && !e->gemv ? Tensor() : Tensor::empty(ScalarType::Float, out_shape);
  Tensor out16 = e->bf16_out ? Tensor::empty(ScalarType::BFloat16, out_shape) : Tensor();
  // fp32 after all, on the values the graph's own int8 op reads
  if (!e->int8 && precision == Precision::INT8 && quant && quant->fromGraph())
    a = int8::fakeQuantize(ctx, a, quant->dynamic ? int8::pytorchDynamicParams(static_cast<const float*>(a.data()), a.numel(),
                                                                               quant->qmax)
                                                  : quant->act);
  if (e->gemv) {
    const Tensor row = a.stride(1) == 1 ? a : a.contiguous();
    if (e->bf16)
      gemv::runBf16(row.data<float>(), static_cast<const uint16_t*>(e->weights_buf.data()), b.size(0), b.size(1),
                    bb ? bb->data<float>() : nullptr, out.data<float>(), e->gemv_steps);
    else
      gemv::run(row.data<float>(), static_cast<const float*>(e->weights_buf.data()), b.size(0), b.size(1),
                bb ? bb->data<float>() : nullptr, out.data<float>(), e->gemv_steps);
    if (chain) chain->used = e;
    if (!e->bf16_out) return out;
    activationToBf16(OwnActivation::None, out.data<float>(), static_cast<uint16_t*>(out16.data()), out_numel);
    return out16;
  }
  // The entry's descriptors fit this call's tensors: the key holds their sizes and strides.
  SharedBoundArgs::Lease args = e->bound.lease();
  Tensor a16, b16;  // this call's bf16 (or int8) copies
  if (e->bf16) a16 = a.dtype() != ScalarType::BFloat16 ? toBf16(ctx, a) : a.isContiguous() ? a : a.contiguous();
  float call_scale = 1.0f;  // dynamic int8: this call's activation scale (post-op 0's operand)
  int32_t call_zero_point = 0;  // and PyTorch's dynamic u8 zero point
  if (e->int8 && e->dynamic && quant && quant->act.is_unsigned) {  // PyTorch's dynamic quantization
    const Tensor dense_a = a.contiguous();
    const ActivationQuant p =
        int8::pytorchDynamicParams(static_cast<const float*>(dense_a.data()), dense_a.numel(), quant->qmax);
    call_scale = static_cast<float>(p.scale);
    call_zero_point = p.zero_point;
    a16 = Tensor::empty(ScalarType::Byte, a.sizes());
    // oneDNN's reorder (rounding x / scale + zero point), as PyTorch's oneDNN engine quantizes it
    int8::quantizeActivationShifted(ctx, wrap(dense_a), memory(e->src_md, cpuEngine(), a16.data()), call_scale,
                                    call_zero_point);
    args->bind(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, memory::desc({1}, memory::data_type::s32, memory::format_tag::x),
               &call_zero_point);
    args->bind(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, e->operand_mds[0], &call_scale);
    if (bb) args->bind(DNNL_ARG_ATTR_MULTIPLE_POST_OP(1) | DNNL_ARG_SRC_1, e->operand_mds[1], bb->data());
  } else if (e->int8 && e->dynamic) {
    const Tensor dense_a = a.contiguous();
    call_scale = int8::dynamicScale(static_cast<const float*>(dense_a.data()), dense_a.numel());
    a16 = Tensor::empty(ScalarType::Char, a.sizes());
    int8::quantizeS8(static_cast<const float*>(dense_a.data()), dense_a.numel(), call_scale,
                     static_cast<int8_t*>(a16.data()));
    args->bind(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, e->operand_mds[0], &call_scale);
    if (bb) args->bind(DNNL_ARG_ATTR_MULTIPLE_POST_OP(1) | DNNL_ARG_SRC_1, e->operand_mds[1], bb->data());
  } else if (e->int8) {
    a16 = Tensor::empty(int8::storageType(quant->act), a.sizes());
    int8::quantizeActivation(ctx, wrap(a), memory(e->src_md, cpuEngine(), a16.data()), static_cast<float>(quant->act.scale),
                             quant->act.zero_point);
    if (quant->act.zero_point != 0)  // the activation's zero point, as oneDNN takes it at run time
      args->bind(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, memory::desc({1}, memory::data_type::s32, memory::format_tag::x),
                 const_cast<int32_t*>(&quant->act.zero_point));
  }
  args->bind(DNNL_ARG_SRC, e->src_md, e->bf16 || e->int8 ? a16.data() : a.data());
  if (constant_b) {
    args->bind(DNNL_ARG_WEIGHTS, e->weights);
  } else {
    if (e->bf16) b16 = toBf16(ctx, b);
    args->bind(DNNL_ARG_WEIGHTS, e->wei_plain, e->bf16 ? b16.data() : b.data());
  }
  Tensor& dst = out.defined() ? out : out16;  // the primitive's: fp32, or bf16 when nothing runs after it
  args->bind(DNNL_ARG_DST, e->dst_md, dst.data());
  if (bb && e->int8 && !e->dynamic) {  // oneDNN adds the bias to the int32 sums before scaling them
    bb = int8::biasForInt8(*bb, e->int8_scales);
  }
  if (bb && !e->dynamic) args->bind(DNNL_ARG_BIAS, e->bias_md, bb->data());
  if (chain && e->split_at == SIZE_MAX)
    for (size_t i = 0, o = 0; i < chain->ops->size(); ++i)
      if ((*chain->ops)[i].kind != PostOp::Kind::Eltwise) {
        const size_t k = o++;
        args->bind(DNNL_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(i + e->pre_ops)) | DNNL_ARG_SRC_1,
                   e->operand_mds[k + e->pre_ops], operands[k].data());
      }
  {
    SerialScope serial(out_numel * a.size(-1) < kSerialMacs);
    args->execute(ctx, e->prim, e->scratch_md);
  }
  if (e->split_at != SIZE_MAX) {  // the rest of the chain: dst op operand 0, in place, then its post-ops
    std::unordered_map<int, memory> targs{{DNNL_ARG_SRC_0, memory(e->dst_md, cpuEngine(), dst.data())},
                                          {DNNL_ARG_SRC_1, memory(e->operand_mds[0], cpuEngine(), operands[0].data())},
                                          {DNNL_ARG_DST, memory(e->dst_md, cpuEngine(), dst.data())}};
    for (size_t i = e->split_at + 1, o = 1; i < chain->ops->size(); ++i)
      if ((*chain->ops)[i].kind == PostOp::Kind::Binary) {
        targs[DNNL_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(i - e->split_at - 1)) | DNNL_ARG_SRC_1] =
            memory(e->operand_mds[o], cpuEngine(), operands[o].data());
        ++o;
      }
    execute(ctx, e->tail, e->tail_scratch_md, std::move(targs));
  }
  if (chain) chain->used = e;
  if (e->bf16_out) {
    if (e->act_after != OwnActivation::None)
      activationToBf16(e->act_after, out.data<float>(), static_cast<uint16_t*>(out16.data()), out_numel);
    return out16;
  }
  if (e->act_after != OwnActivation::None) runOwnActivation(e->act_after, out.data<float>(), out_numel);
  return out;
}

// numpy matmul: promote 1-D operands, broadcast batch dims (as size-1 dims, not copies).
Tensor matmul(ExecContext& ctx, Tensor a, Tensor b, PrimitiveCache<MatmulEntry>* cache, bool constant_b,
              Chain* chain = nullptr, Precision precision = Precision::F32) {
  if (a.dim() == 0 || b.dim() == 0) throw std::invalid_argument("matmul: both arguments need at least 1 dimension");
  bool a1 = a.dim() == 1, b1 = b.dim() == 1;
  if (a1) a = a.unsqueeze(0);
  if (b1) b = b.unsqueeze(1);
  int64_t nd = std::max(a.dim(), b.dim());
  while (a.dim() < nd) a = a.unsqueeze(0);
  while (b.dim() < nd) b = b.unsqueeze(0);
  for (int64_t d = 0; d + 2 < nd; ++d)
    if (a.size(d) != b.size(d) && a.size(d) != 1 && b.size(d) != 1)
      throw std::invalid_argument("matmul: batch dimensions " + a.describe() + " and " + b.describe() + " do not broadcast");
  if (chain && (a1 || b1)) throw std::invalid_argument("fused matmul: 1-D operands are not fused");
  if (chain)
    for (Tensor& t : chain->operands) {
      if (t.dim() > nd) throw std::invalid_argument("fused matmul: operand " + t.describe() + " has more dims than the product");
      // oneDNN 2.6's gemm-based matmul reads a binary post-op operand that
      // is not row-major at dense row-major offsets: with gaps between rows
      // (x[:, :1] of [b, 3, h, w], b > 1) or transposed and broadcast, wrong
      // values (graph fuzzer seed 120632). Such operands go row-major; a
      // broadcast (stride 0) dim becomes the size-1 dim it stands for first.
      for (int64_t d = 0; d < t.dim(); ++d)
        if (t.stride(d) == 0 && t.size(d) > 1) t = t.narrow(d, 0, 1);
      if (!t.isContiguous()) t = t.contiguous();
    }
  Tensor out = matmulCore(ctx, a, b, std::nullopt, cache, constant_b, chain, precision);
  if (a1) out = out.squeeze(-2);
  if (b1) out = out.squeeze(-1);
  return out;
}

// The product kinds that run as matmul but take no broadcasting: mm (2-D), bmm (3-D, equal batches).
enum class Form { Matmul, Mm, Bmm };

Form formOf(const Node& n) {
  const std::string k = n.kind().toQualString();
  return k == "aten::mm" ? Form::Mm : k == "aten::bmm" ? Form::Bmm : Form::Matmul;
}

void checkForm(Form f, const Tensor& x, const Tensor& y) {
  if (f == Form::Mm && (x.dim() != 2 || y.dim() != 2))
    throw std::invalid_argument("mm expects 2-D tensors, got " + x.describe() + " and " + y.describe());
  if (f == Form::Bmm && (x.dim() != 3 || y.dim() != 3 || x.size(0) != y.size(0)))
    throw std::invalid_argument("bmm expects 3-D tensors with equal batch sizes, got " + x.describe() + " and " + y.describe());
}

class MatmulKernel final : public Kernel {
 public:
  MatmulKernel(Form f, bool constant_b, Precision precision) : form_(f), constant_(constant_b), precision_(precision) {}
  void run(const KernelArgs& a) override {
    checkForm(form_, a.tensor(0), a.tensor(1));
    a.set(0, matmul(a.ctx, a.tensor(0), a.tensor(1), &cache_, constant_, nullptr, precision_));
  }

 private:
  Form form_;
  bool constant_;
  Precision precision_;
  PrimitiveCache<MatmulEntry> cache_;
};

// x[..., K] . w[N, K]^T as the 2-D product it runs as: x's leading dims
// flattened into m rows, and the output's shape [..., N].
struct LinearRows {
  int64_t m = 1;
  Shape full;
};
LinearRows linearRows(const Tensor& x, const Tensor& w) {
  if (w.dim() != 2 || x.dim() < 1 || x.size(-1) != w.size(1))
    throw std::invalid_argument("linear: input " + x.describe() + " does not match weight " + w.describe());
  LinearRows r;
  r.full.assign(x.sizes().begin(), x.sizes().end() - 1);
  for (int64_t s : r.full) r.m *= s;
  r.full.push_back(w.size(0));
  return r;
}

}  // namespace

struct MatmulCache {
  PrimitiveCache<MatmulEntry> constant_b, variable_b;
};
std::shared_ptr<MatmulCache> makeMatmulCache() { return std::make_shared<MatmulCache>(); }

Tensor linearOp(ExecContext& ctx, const Tensor& x, const Tensor& w, const std::optional<Tensor>& b, MatmulCache& cache,
                bool constant_w, Precision precision, const std::optional<int8::OpQuant>& quant, bool dynamic_act) {
  const LinearRows r = linearRows(x, w);
  Tensor out = matmulCore(ctx, x.reshape({r.m, x.size(-1)}), w.transpose(0, 1), b,
                          constant_w ? &cache.constant_b : &cache.variable_b, constant_w, nullptr, precision, quant,
                          dynamic_act);
  return out.view(r.full);
}

Tensor linearChainOp(ExecContext& ctx, const Tensor& x, const Tensor& w, const std::optional<Tensor>& b,
                     MatmulCache& cache, bool constant_w, Precision precision, const std::vector<PostOp>& post,
                     const std::vector<Tensor>& operands) {
  const auto [m, full] = linearRows(x, w);
  Chain chain{&post, {}, nullptr};
  for (const Tensor& t : operands) {
    if (t.sizes() != full) throw std::invalid_argument("linear chain: operand " + t.describe() + " is not the output's shape");
    chain.operands.push_back(t.contiguous().reshape({m, w.size(0)}));
  }
  Tensor out = matmulCore(ctx, x.reshape({m, x.size(-1)}), w.transpose(0, 1), b,
                          constant_w ? &cache.constant_b : &cache.variable_b, constant_w, &chain, precision);
  return out.view(full);
}

Tensor matmulOp(ExecContext& ctx, const Tensor& a, const Tensor& b, MatmulCache& cache, Precision precision) {
  return matmul(ctx, a, b, &cache.variable_b, false, nullptr, precision);
}

class LinearKernel final : public Kernel {
 public:
  LinearKernel(bool constant_weight, Precision precision, std::optional<int8::OpQuant> quant, bool dynamic_act)
      : constant_(constant_weight), precision_(precision), quant_(quant), dynamic_(dynamic_act) {}
  void run(const KernelArgs& a) override {
    a.set(0, linearOp(a.ctx, a.tensor(0), a.tensor(1), a.optTensor(2), cache_, constant_, precision_, quant_, dynamic_));
  }

 private:
  bool constant_;
  Precision precision_;
  std::optional<int8::OpQuant> quant_;
  bool dynamic_;
  MatmulCache cache_;
};

namespace {

// The operands of a chain, float32.
std::vector<Tensor> chainOperands(const KernelArgs& a, size_t first) {
  std::vector<Tensor> out;
  for (size_t i = first; i < a.num_in; ++i) {
    Tensor t = a.tensor(i);
    out.push_back(t.dtype() == ScalarType::Float ? t : t.to(ScalarType::Float));
  }
  return out;
}

// linear / matmul / mm / bmm followed by a post-op chain, in one primitive.
class FusedMatmulKernel final : public Kernel {
 public:
  FusedMatmulKernel(bool linear, Form form, bool constant_b, Precision precision, std::vector<PostOp> post,
                    size_t anchor_inputs, std::optional<int8::OpQuant> quant, bool dynamic_act, bool bf16_out)
      : linear_(linear), form_(form), constant_(constant_b), precision_(precision), quant_(quant), dynamic_(dynamic_act),
        bf16_out_(bf16_out && linear && precision == Precision::BF16), post_(std::move(post)), anchor_inputs_(anchor_inputs) {}

  void run(const KernelArgs& a) override {
    Chain chain{&post_, chainOperands(a, anchor_inputs_), nullptr};
    if (!linear_) {
      checkForm(form_, a.tensor(0), a.tensor(1));
      a.set(0, matmul(a.ctx, a.tensor(0), a.tensor(1), &cache_.variable_b, false, post_.empty() ? nullptr : &chain,
                      precision_));
      if (chain.used) last_.store(chain.used);
      return;
    }
    const Tensor& x = a.tensor(0);
    const Tensor& w = a.tensor(1);
    const auto [m, full] = linearRows(x, w);
    // The 2-D product sees each operand as [m, N] (or [1, N] when it only varies along N).
    for (const Tensor& t : chain.operands) checkOperandFits(t, full);  // else the group runs op by op
    for (Tensor& t : chain.operands) {
      bool row = true;
      for (int64_t d = 0; d + 1 < t.dim(); ++d) row &= t.size(d) == 1;
      if (row) t = t.reshape({1, t.dim() ? t.size(-1) : 1});
      else t = t.expand(full).contiguous().reshape({m, w.size(0)});
    }
    // b = w^T; a compacted w is already b in the primitive's layout
    Tensor b = w.isBlocked() ? Tensor::blocked(w.storage(), ScalarType::Float, {w.size(1), w.size(0)}, w.blockedLayout())
                             : w.transpose(0, 1);
    Tensor out = matmulCore(a.ctx, x.reshape({m, x.size(-1)}), b, a.optTensor(2),
                            constant_ ? &cache_.constant_b : &cache_.variable_b, constant_, &chain, precision_, quant_,
                            dynamic_, bf16_out_);
    if (chain.used) last_.store(chain.used);
    a.set(0, out.view(full));
  }
  const char* primitiveKind() const override { return "matmul"; }
  bool acceptsBlocked(size_t input) const override { return linear_ && constant_ && input == 1; }  // a compacted weight
  std::optional<Tensor> compactedWeight(size_t input) const override {
    std::shared_ptr<const MatmulEntry> e = last_.load();
    if (input != 1 || !linear_ || !constant_ || !e || !e->weights_buf.defined() || e->wei_md.data.ndims != 2 || e->bf16 ||
        e->int8)
      return std::nullopt;  // a bf16 or int8 copy is rounded: it cannot stand in for the weight
    const auto* d = e->wei_md.data.dims;  // [K, N] of b = w^T
    return Tensor::blocked(e->weights_buf.storage(), ScalarType::Float, {d[1], d[0]},
                           makeLayout(e->wei_md, true, /*transposed=*/true));
  }
  KernelReport report() const override {
    std::shared_ptr<const MatmulEntry> e = last_.load();
    if (!e) return {};
    std::string detail;
    if (precision_ == Precision::BF16 && !e->bf16) detail = "fp32: oneDNN has no bf16 kernel for this product";
    if (precision_ == Precision::INT8 && !e->int8)
      detail = !quant_ && !dynamic_ ? "fp32: no calibrated activation scale"
               : !int8::hasVnni()     ? "fp32: oneDNN's int8 kernels here have no VNNI"
                                      : "fp32: oneDNN has no int8 kernel for this product";
    // "+llga_gelu_bf16": llga's gelu wrote the bf16 result; "+llga_to_bf16": the one-row product's, converted
    const std::string to_bf16 = !e->bf16_out ? "" : e->act_after != OwnActivation::None ? "_bf16" : e->gemv ? "+llga_to_bf16" : "";
    return {e->impl + ownActivationSuffix(e->act_after) + to_bf16, layoutName(e->src_md), layoutName(e->wei_md, true),
            layoutName(e->dst_md), "", detail};
  }

 private:
  bool linear_;
  Form form_;
  bool constant_;
  Precision precision_;
  std::optional<int8::OpQuant> quant_;
  bool dynamic_;
  bool bf16_out_;  // the partition's out_dtype="bf16" (linear only)
  std::vector<PostOp> post_;
  size_t anchor_inputs_;
  MatmulCache cache_;
  SharedSlot<const MatmulEntry> last_;  // the entry of the latest call, for report()
};

}  // namespace

std::unique_ptr<Kernel> makeFusedMatmul(const Node& anchor, std::vector<PostOp> post, bool constant_weight,
                                        bool bf16_out) {
  bool linear = anchor.kind().toQualString() == "aten::linear";
  return std::make_unique<FusedMatmulKernel>(linear, formOf(anchor), linear && constant_weight, precisionOf(anchor),
                                             std::move(post), anchor.inputs().size(), int8::opQuantOf(anchor),
                                             dynamicActivation(anchor), bf16_out);
}

void registerMatmulOps(OpRegistry& r) {
  r.add(OpDef{"aten::linear", 2, 3, [](const Node& n) {
                return std::make_unique<LinearKernel>(isConstantInput(n, 1), precisionOf(n), int8::opQuantOf(n),
                                                      dynamicActivation(n));
              }});
  for (const char* kind : {"aten::matmul", "aten::mm", "aten::bmm"})
    r.add(OpDef{kind, 2, 2, [](const Node& n) {
                  return std::make_unique<MatmulKernel>(formOf(n), isConstantInput(n, 1), precisionOf(n));
                }});
  // addmm(bias, a, b, beta=1, alpha=1) = beta * bias + alpha * (a @ b)
  // addmm / baddbmm / addbmm / addmv with alpha and beta known only at run time
  // (decompose rewrites the constant ones into the product and its post-ops):
  // alpha * product + beta * bias, the bias ignored when beta is 0 (its NaNs
  // too), as PyTorch.
  enum class Scaled { Mm, Bmm, AddBmm, Mv };
  for (auto [name, form] : {std::pair{"aten::addmm", Scaled::Mm}, {"aten::baddbmm", Scaled::Bmm},
                            {"aten::addbmm", Scaled::AddBmm}, {"aten::addmv", Scaled::Mv}}) {
    const Scaled f = form;
    const std::string op = name;
    r.add(name, 3, 5, [f, op](const KernelArgs& a) {
      const double beta = a.num_in > 3 ? a.toDouble(3) : 1.0, alpha = a.num_in > 4 ? a.toDouble(4) : 1.0;
      const Tensor& m1 = a.tensor(1);
      const Tensor& m2 = a.tensor(2);
      const int64_t want1 = f == Scaled::Mm || f == Scaled::Mv ? 2 : 3, want2 = f == Scaled::Mv ? 1 : f == Scaled::Mm ? 2 : 3;
      if (m1.dim() != want1 || m2.dim() != want2 || (want1 == 3 && m1.size(0) != m2.size(0)))
        throw std::invalid_argument(op + " expects " + std::to_string(want1) + "-D and " + std::to_string(want2) +
                                    "-D operands" + (want1 == 3 ? " with equal batch sizes" : "") + ", got " +
                                    m1.describe() + " and " + m2.describe());
      if (f == Scaled::Mm && beta == 1.0 && alpha == 1.0) return a.set(0, matmulCore(a.ctx, m1, m2, a.tensor(0), nullptr, false));
      Tensor prod = f == Scaled::Mv ? matmul(a.ctx, m1, m2, nullptr, false) : matmulCore(a.ctx, m1, m2, std::nullopt, nullptr, false);
      if (f == Scaled::AddBmm) prod = sumOp(a.ctx, prod, {0}, false);
      Tensor bias = a.tensor(0).to(ScalarType::Float);
      if (broadcastShapes(bias.sizes(), prod.sizes()) != prod.sizes())
        throw std::invalid_argument(op + ": the bias " + bias.describe() + " does not broadcast to the product's shape " +
                                    Tensor::empty(ScalarType::Float, prod.sizes()).describe());
      Tensor bc = bias.expand(prod.sizes()).contiguous();
      prod = prod.contiguous();
      float* p = prod.data<float>();
      const float* q = bc.data<float>();
      const float fa = static_cast<float>(alpha), fb = static_cast<float>(beta);
      const int64_t n = prod.numel();
      parallelFor(n, n >= kParallelGrain, [&](int64_t i) { p[i] = fa * p[i] + (fb == 0.f ? 0.f : fb * q[i]); });
      a.set(0, prod);
    });
  }
}
LLGA_REGISTER_OPS(registerMatmulOps);

}  // namespace llga
