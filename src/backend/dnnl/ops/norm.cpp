// Normalizations and softmax on oneDNN.
//   aten::batch_norm(x, weight?, bias?, running_mean?, running_var?, training, momentum, eps, cudnn_enabled)
//   aten::layer_norm(x, normalized_shape, weight?, bias?, eps, cudnn_enable)
//   aten::softmax(x, dim, dtype?), aten::log_softmax(x, dim, dtype?)
//   aten::group_norm(x, groups, weight?, bias?, eps, cudnn_enabled): oneDNN's
//     layer normalization over [N * G, C / G * spatial], then the per-channel
//     affine, or llga's own for channels-last x (instance_norm arrives here
//     with G = C, see decompose)
#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>

#include "backend/dnnl/channel_affine.h"
#include "backend/dnnl/dnnl_utils.h"
#include "backend/dnnl/ops/op_utils.h"
#include "backend/dnnl/ops/functional.h"
#include "backend/dnnl/ops/primitive_cache.h"
#include "backend/dnnl/quantize.h"
#include "backend/dnnl/layer_norm_rows.h"
#include "backend/dnnl/row_softmax.h"
#include "runtime/threads.h"

namespace llga {
namespace {

using dnnl::memory;
using flags = dnnl::normalization_flags;

Tensor f32Contiguous(const Tensor& t) { return t.to(ScalarType::Float).contiguous(); }

struct NormEntry {
  dnnl::primitive prim;
  memory::desc md, scratch_md;
  // batch_norm: md is a blocked layout (the input's, or one x is reordered into
  // from plain x_md) and the output comes out in it
  memory::desc x_md;
  bool reorder_src = false;
  std::shared_ptr<const BlockedLayout> layout;
  memory::desc param_md;  // layer_norm's scale and shift: n floats; softmax's axis-innermost layout
  std::string impl;
  SharedBoundArgs bound;  // layer_norm's and softmax's arguments from call to call
};

// a: batch_norm's arguments (x, weight?, bias?, running_mean?, running_var?,
// training, momentum, eps, cudnn_enabled); x itself is not read.
void checkEvalMode(const KernelArgs& a) {
  if (a.toBool(5)) throw std::invalid_argument("batch_norm in training mode; call model.eval() before tracing");
  if (a.isNone(3) || a.isNone(4)) throw std::invalid_argument("batch_norm in eval mode needs running_mean and running_var");
}

struct BatchNormParams {
  Tensor mean, var;  // float32, contiguous
  std::optional<Tensor> w, b;
};

// The statistics and affine parameters, checked against c channels.
BatchNormParams batchNormParams(const KernelArgs& a, int64_t c) {
  BatchNormParams p{f32Contiguous(a.tensor(3)), f32Contiguous(a.tensor(4)), a.optTensor(1), a.optTensor(2)};
  for (const Tensor* t : {&p.mean, &p.var})
    if (t->numel() != c) throw std::invalid_argument("batch_norm: statistics have " + std::to_string(t->numel()) +
                                                     " entries for " + std::to_string(c) + " channels");
  for (const auto& [t, name] : {std::pair{&p.w, "weight"}, {&p.b, "bias"}})
    if (*t && (*t)->numel() != c)
      throw std::invalid_argument(std::string("batch_norm: ") + name + " should contain " + std::to_string(c) +
                                  " elements not " + std::to_string((*t)->numel()));
  return p;
}

// Takes x in any dense order (channels-last from convolutions) or in a
// convolution's blocked layout and, when its readers allow, gives the result
// in that order or layout. A plain NCHW x, for which oneDNN has only its
// non-jit ncsp kernel (AVX2: 335 us for 1x256x28x28 where its jit kernel on
// nChw8c took 38; densenet's batch_norms after its concats were a third of
// that model's time), is reordered into a blocked copy first, and the result
// stays blocked when the readers take it (densenet's next 1x1 convolution
// reads that layout). `fuse_relu`: relu applied by the same primitive (a
// batch_norm -> relu partition).
class BatchNormKernel final : public Kernel {
 public:
  explicit BatchNormKernel(bool fuse_relu = false) : fuse_relu_(fuse_relu) {}
  bool acceptsStrided(size_t input) const override { return input == 0; }
  void allowStridedOutput(size_t output) override { follow_ = follow_ || output == 0; }
  bool acceptsBlocked(size_t input) const override { return input == 0; }
  void allowBlockedOutput(size_t output) override { keep_blocked_ = keep_blocked_ || output == 0; }
  const char* primitiveKind() const override { return "batch_normalization"; }
  KernelReport report() const override {
    std::shared_ptr<const NormEntry> e = last_.load();
    if (!e) return {};
    return {e->impl, layoutName(e->md), "", e->layout ? layoutName(e->md) : "",
            e->layout ? (keep_blocked_ ? "kept" : "plain") : "", fuse_relu_ ? "relu fused" : ""};
  }

  void run(const KernelArgs& a) override {
    Tensor x = a.tensor(0);
    checkEvalMode(a);
    if (x.dtype() != ScalarType::Float) throw std::invalid_argument("batch_norm supports float32, got " + x.describe());
    if (x.dim() < 2) throw std::invalid_argument("batch_norm expects at least 2 dims, got " + x.describe());
    const int64_t c = x.size(1);
    const float eps = static_cast<float>(a.toDouble(7));
    BatchNormParams params = batchNormParams(a, c);
    const Tensor &mean = params.mean, &var = params.var;
    const std::optional<Tensor>&w = params.w, &b = params.b;
    Tensor xin = x.dim() == 2 ? x.view({x.size(0), c, 1}) : x;  // oneDNN wants spatial dims
    if (!xin.isBlocked()) xin = xin.isContiguous() || xin.isPermutedDense() ? xin : xin.contiguous();
    auto fl = flags::use_global_stats | (w ? flags::use_scale : flags::none) | (b ? flags::use_shift : flags::none) |
              (fuse_relu_ ? flags::fuse_norm_relu : flags::none);
    std::vector<int64_t> key;
    addToKey(key, xin);
    if (xin.isBlocked()) addBlockedToKey(key, blockedDesc(xin));
    key.push_back(static_cast<int64_t>(fl));
    key.push_back(static_cast<int64_t>(eps * 1e9));
    auto e = cache_.get(key, [&] {
      NormEntry ne;
      auto build = [&](const memory::desc& md) {
        dnnl::batch_normalization_forward::desc d(dnnl::prop_kind::forward_inference, md, eps, fl);
        ne.prim = makePrimitive<dnnl::batch_normalization_forward>(d, ne.scratch_md, &ne.impl);
        ne.md = md;
      };
      build(xin.isBlocked() ? blockedDesc(xin) : plainDesc(xin));
      if (!xin.isBlocked() && ne.impl.find("jit") == std::string::npos) {
        const memory::desc plain = ne.md;
        for (memory::format_tag t : blockedTags(xin.dim())) {
          build(memory::desc(xin.sizes(), memory::data_type::f32, t));
          if (ne.impl.find("jit") != std::string::npos) {
            ne.x_md = plain;
            ne.reorder_src = true;
            break;
          }
          build(plain);  // no jit kernel for this layout either: the plain one
        }
      }
      if (xin.isBlocked() || ne.reorder_src) ne.layout = makeLayout(ne.md);
      return ne;
    });
    last_.store(e);
    Tensor src_buf;  // x in the blocked layout, for this call
    if (e->reorder_src) reorder(a.ctx, wrap(xin, e->x_md), temporary(e->md, src_buf));
    const Tensor& src = e->reorder_src ? src_buf : xin;
    Tensor out = e->layout ? Tensor::blocked(Storage::allocate(e->md.get_size()), ScalarType::Float, xin.sizes(), e->layout)
                           : Tensor::emptyLike(ScalarType::Float, xin.sizes(), xin);  // same order: oneDNN's fast kernels
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(e->md, cpuEngine(), src.data())},
                                         {DNNL_ARG_DST, memory(e->md, cpuEngine(), out.data())},
                                         {DNNL_ARG_MEAN, wrap(mean)}, {DNNL_ARG_VARIANCE, wrap(var)}};
    Tensor wc, bc;
    if (w) { wc = f32Contiguous(*w); args[DNNL_ARG_SCALE] = wrap(wc); }
    if (b) { bc = f32Contiguous(*b); args[DNNL_ARG_SHIFT] = wrap(bc); }
    execute(a.ctx, e->prim, e->scratch_md, std::move(args));
    if (out.isBlocked() && !(keep_blocked_ && x.dim() > 2)) out = toPlain(a.ctx, out);
    if (!out.isBlocked() && !follow_) out = out.contiguous();
    a.set(0, x.dim() == 2 ? out.view(x.sizes()) : out);
  }

 private:
  bool fuse_relu_;
  bool follow_ = false;  // every reader takes strided tensors
  bool keep_blocked_ = false;  // every reader takes blocked tensors
  PrimitiveCache<NormEntry> cache_;
  SharedSlot<const NormEntry> last_;
};

// concat -> batch_norm [-> relu] (the concat_batchnorm pattern). Arguments:
// the concat's (parts, dim), then the batch_norm's from weight on (8).
//
// A batch_norm in eval mode is y = x * scale[c] + shift[c] per channel, so a
// concat along channels followed by it is the batch_norm of each part
// written into its slice of the result (llga's channel affine, AVX2): one
// read and one write per element, where the two ops read and wrote each
// twice. It takes parts all in one channel-blocked layout (convolutions'
// nChw8c/nChw16c; the result stays in it, for readers that take it), all
// plain NCHW, or all channels-last (for readers that take strided tensors);
// scale and shift are computed as PyTorch's CPU kernel does
// (1 / sqrt(var + eps) * weight; bias - mean * that), relu keeps a NaN.
// Anything else (other layouts, another dim, 2-D parts, an older CPU) runs
// the concat's and the batch_norm's own kernels one after the other.
//
// `int8_out` (the partition's out_scale and out_dtype: its readers are int8
// convolutions) writes the result quantized as they read it, plain or
// channels-last (parts in a channel-blocked layout are read so, into a
// channels-last result); the op-by-op path quantizes its fp32 result.
// `bf16_out` (out_dtype="bf16": its readers are bf16 convolutions) writes it
// in bf16 the same way.
class ConcatBatchNormKernel final : public Kernel {
 public:
  ConcatBatchNormKernel(std::unique_ptr<Kernel> cat, bool relu, std::optional<ActivationQuant> int8_out, bool bf16_out)
      : cat_(std::move(cat)), bn_(relu), relu_(relu), int8_out_(int8_out), bf16_out_(bf16_out && !int8_out) {
    cat_->allowBlockedOutput(0);  // the batch_norm takes both
    cat_->allowStridedOutput(0);
  }
  bool acceptsBlocked(size_t input) const override { return input == 0; }
  bool acceptsStrided(size_t input) const override { return input == 0; }
  void allowBlockedOutput(size_t output) override {
    keep_blocked_ = keep_blocked_ || output == 0;
    bn_.allowBlockedOutput(output);
  }
  void allowStridedOutput(size_t output) override {
    follow_ = follow_ || output == 0;
    bn_.allowStridedOutput(output);
  }
  const char* primitiveKind() const override { return "batch_normalization"; }
  KernelReport report() const override {
    std::shared_ptr<const KernelReport> r = last_report_.load();
    if (r) return *r;
    KernelReport op_by_op = bn_.report();  // the op-by-op path: the batch_norm's primitive
    if (int8_out_ || bf16_out_) {
      op_by_op.output = bf16_out_ ? "plain" : "";  // quantized in the batch_norm's dense order, or plain
      op_by_op.detail += std::string(op_by_op.detail.empty() ? "" : ", ") +
                         (bf16_out_ ? "then converted to bf16"
                                    : std::string("then quantized to ") + (int8_out_->is_unsigned ? "u8" : "s8"));
    }
    return op_by_op;
  }

  void run(const KernelArgs& a) override {
    std::array<RtValue*, 9> bn_in{};  // the batch_norm's arguments; x (its 0) is the concat's result
    for (size_t i = 1; i < bn_in.size(); ++i) bn_in[i] = a.in[i + 1];
    if (runDirect(a, KernelArgs{bn_in.data(), bn_in.size(), a.out, a.num_out, a.ctx})) return;
    if (last_key_.exchange(-1, std::memory_order_relaxed) != -1) last_report_.store(nullptr);
    RtValue cat;
    RtValue* cat_out[] = {&cat};
    cat_->run(KernelArgs{a.in, 2, cat_out, 1, a.ctx});
    bn_in[0] = &cat;
    bn_.run(KernelArgs{bn_in.data(), bn_in.size(), a.out, a.num_out, a.ctx, /*dying=*/1});
    if (int8_out_) {  // quantized as the readers read it
      a.set(0, int8::quantizeTensor(a.ctx, a.out[0]->tensor(), *int8_out_));
    } else if (bf16_out_) {  // converted by oneDNN's reorder, as a bf16 reader converts
      const Tensor y = a.out[0]->tensor();
      Tensor h = Tensor::empty(ScalarType::BFloat16, y.sizes());
      reorder(a.ctx, memoryOf(y), wrap(h));
      a.set(0, std::move(h));
    }
  }

 private:
  // The concat's parts normalised into the result, when their layouts allow; false otherwise.
  bool runDirect(const KernelArgs& a, const KernelArgs& bn) {
    if (!affine::available() || a.num_in != 10) return false;
    const std::vector<Tensor> parts = tensorList(a.input(0));
    if (parts.empty()) return false;
    const Tensor& ref = parts[0];
    const int64_t dim = a.toInt(1);
    if (ref.dim() < 3 || ref.dtype() != ScalarType::Float || dim < -ref.dim() || dim >= ref.dim() ||
        ref.wrapDim(dim) != 1)
      return false;
    Shape shape = ref.sizes();
    shape[1] = 0;
    for (const Tensor& t : parts) {
      if (t.dtype() != ScalarType::Float || t.dim() != ref.dim()) return false;
      for (int64_t d = 0; d < t.dim(); ++d)
        if (d != 1 && t.size(d) != ref.size(d)) return false;
      shape[1] += t.size(1);
    }
    const int64_t n = shape[0], c = shape[1];
    int64_t spatial = 1;
    for (int64_t d = 2; d < ref.dim(); ++d) spatial *= ref.size(d);
    if (n * c * spatial == 0) return false;
    // The result's layout. Parts in one channel-blocked layout, all plain or
    // all channels-last give theirs. Mixed channel-blocked and channels-last
    // parts (on AVX-512 a pool's or brgconv's nhwc among Winograd's nChw16c
    // outputs: densenet's init features and new maps) give channels-last
    // where the readers take strides (brgconv reads nhwc; readers that take
    // blocked tensors but not strided ones are left to the two kernels);
    // each part is read in its own layout, no copy first.
    auto channelsLast = [](const Tensor& t) {
      std::vector<size_t> order = t.dimOrder();
      return !t.isBlocked() && t.isPermutedDense() && order.back() == 1 && order.front() == 0;
    };
    const Tensor* cl_ref = nullptr;  // a channels-last part: the result takes its dimension order
    std::optional<ChannelBlocking> blocking;  // the first channel-blocked part's
    bool mixed_ok = true;  // every part is channel-blocked (one tag) or channels-last (one order)
    for (const Tensor& t : parts) {
      if (std::optional<ChannelBlocking> b = channelBlocking(t)) {
        if (blocking && b->tag != blocking->tag) mixed_ok = false;
        if (!blocking) blocking = b;
      } else if (channelsLast(t)) {
        if (cl_ref && t.dimOrder() != cl_ref->dimOrder()) mixed_ok = false;
        if (!cl_ref) cl_ref = &t;
      } else {
        mixed_ok = false;
      }
    }
    int64_t period;  // the result's, as affine::Strip's; 0 here for channels-last
    const bool narrow_out = int8_out_ || bf16_out_;  // written as u8/s8 or bf16: channels-last or plain
    if (blocking && !cl_ref && mixed_ok && narrow_out && follow_) {
      period = 0;  // into channels-last
    } else if (blocking && !cl_ref && mixed_ok) {
      if (!keep_blocked_ || narrow_out) return false;
      period = blocking->block;
    } else if (std::all_of(parts.begin(), parts.end(), [](const Tensor& t) { return !t.isBlocked() && t.isContiguous(); })) {
      period = 1;
    } else if (cl_ref && mixed_ok && follow_) {
      period = 0;
    } else {
      return false;
    }
    checkEvalMode(bn);
    const BatchNormParams p = batchNormParams(bn, c);
    const float eps = static_cast<float>(bn.toDouble(7));
    std::vector<float> scale(static_cast<size_t>(c)), shift(static_cast<size_t>(c));
    {
      Tensor w = p.w ? f32Contiguous(*p.w) : Tensor(), b = p.b ? f32Contiguous(*p.b) : Tensor();
      const float *mean = p.mean.data<float>(), *var = p.var.data<float>();
      for (int64_t k = 0; k < c; ++k) {
        const float s = 1.0f / std::sqrt(var[k] + eps) * (p.w ? w.data<float>()[k] : 1.0f);
        scale[static_cast<size_t>(k)] = s;
        shift[static_cast<size_t>(k)] = (p.b ? b.data<float>()[k] : 0.0f) - mean[k] * s;
      }
    }
    Tensor out;
    const ScalarType out_dtype = int8_out_ ? int8::storageType(*int8_out_) : bf16_out_ ? ScalarType::BFloat16 : ScalarType::Float;
    if (period > 1) {
      const memory::desc md(shape, memory::data_type::f32, blocking->tag);
      out = Tensor::blocked(Storage::allocate(md.get_size()), ScalarType::Float, shape, makeLayout(md));
    } else if (period == 0 && cl_ref) {
      out = Tensor::emptyLike(out_dtype, shape, *cl_ref);
    } else if (period == 0) {  // blocked parts, quantized into channels-last: dims 0, 2, .., 1 outermost first
      Shape strides(shape.size());
      int64_t step = 1;
      strides[1] = step;
      step *= shape[1];
      for (size_t d = shape.size(); d-- > 2;) {
        strides[d] = step;
        step *= shape[d];
      }
      strides[0] = step;
      out = Tensor::fromStorage(Storage::allocate(static_cast<size_t>(step * shape[0]) * scalarTypeSize(out_dtype)),
                                out_dtype, shape, strides, 0);
    } else {
      out = Tensor::empty(out_dtype, shape);
    }
    affine::Job job{{}, scale.data(), shift.data(), relu_, std::nullopt};
    if (int8_out_)
      job.quantized = affine::Job::Quantized{static_cast<float>(int8_out_->scale), int8_out_->zero_point,
                                             int8_out_->is_unsigned};
    job.bf16 = bf16_out_;
    // element offsets into the result, whatever its element type
    char* const base = static_cast<char*>(out.data());
    const int64_t esize = static_cast<int64_t>(scalarTypeSize(out_dtype));
    auto dst = [base, esize](int64_t at) { return static_cast<void*>(base + at * esize); };
    int64_t at = 0;  // the part's first channel in the result
    for (const Tensor& t : parts) {
      const int64_t cp = t.size(1);
      const float* src = t.data<float>();
      const std::optional<ChannelBlocking> pb = period == 0 ? channelBlocking(t) : std::nullopt;
      for (int64_t i = 0; i < n; ++i) {
        if (period > 1) {  // per image, the part's blocks are one run of the result's
          job.strips.push_back({src + i * cp * spatial, dst((i * c + at) * spatial), cp / period, spatial * period,
                                spatial * period, spatial * period, at, period, period});
        } else if (period == 1) {
          job.strips.push_back({src + i * cp * spatial, dst((i * c + at) * spatial), cp, spatial, spatial, spatial, at, 1, 1});
        } else if (pb) {  // a blocked part into channels-last: per block, its pixels' rows into their slices
          const int64_t b = pb->block;
          for (int64_t j = 0; j < cp / b; ++j)
            job.strips.push_back({src + (i * cp + j * b) * spatial, dst(i * c * spatial + at + j * b), spatial, b, b, c,
                                  at + j * b, 0, b});
        } else {  // a row per pixel: the part's channels into the pixel's slice of the result
          job.strips.push_back({src + i * cp * spatial, dst(i * c * spatial + at), spatial, cp, cp, c, at, 0, cp});
        }
      }
      at += cp;
    }
    affine::run(job);
    const int64_t key = (period * 8 + ref.dim()) * 2 + (blocking && cl_ref ? 1 : 0);
    if (last_key_.exchange(key, std::memory_order_relaxed) != key) {
      const std::string layout = layoutName(period > 1 ? memory::desc(shape, memory::data_type::f32, blocking->tag)
                                                       : plainDesc(out));
      last_report_.store(std::make_shared<const KernelReport>(KernelReport{
          "llga_cat_bnorm:avx2", layout, "", layout, period == 1 ? "" : "kept",  // plain NCHW is nothing kept
          std::string("parts normalised into the result") + (blocking && cl_ref ? " (mixed layouts)" : "") +
              (relu_ ? ", relu fused" : "") +
              (int8_out_ ? (int8_out_->is_unsigned ? ", written as u8" : ", written as s8") : "") +
              (bf16_out_ ? ", written as bf16" : "")}));
    }
    a.set(0, std::move(out));
    return true;
  }

  std::unique_ptr<Kernel> cat_;
  BatchNormKernel bn_;
  bool relu_;
  std::optional<ActivationQuant> int8_out_;
  bool bf16_out_;
  bool keep_blocked_ = false, follow_ = false;
  std::atomic<int64_t> last_key_{-1};  // the latest call's layout (period, rank), or -1
  SharedSlot<const KernelReport> last_report_;  // its report, or null after the op-by-op path
};

Tensor layerNormImpl(ExecContext& ctx, const Tensor& x, int64_t n, const std::optional<Tensor>& w,
                     const std::optional<Tensor>& b, double eps_d, PrimitiveCache<NormEntry>& cache) {
  if (x.dtype() != ScalarType::Float) throw std::invalid_argument("layer_norm supports float32, got " + x.describe());
  int64_t m = x.numel() / std::max<int64_t>(n, 1);
  Tensor x2 = x.contiguous().view({m, n});
  Tensor out = Tensor::empty(ScalarType::Float, {m, n});
  float eps = static_cast<float>(eps_d);
  auto fl = (w ? flags::use_scale : flags::none) | (b ? flags::use_shift : flags::none);
  std::vector<int64_t> key{m, n, static_cast<int64_t>(fl), static_cast<int64_t>(eps_d * 1e12)};
  auto e = cache.get(key, [&] {
    NormEntry ne;
    ne.md = plainDesc(x2);
    ne.param_md = memory::desc({n}, memory::data_type::f32, memory::format_tag::a);
    dnnl::layer_normalization_forward::desc d(dnnl::prop_kind::forward_inference, ne.md, eps, fl);
    ne.prim = makePrimitive<dnnl::layer_normalization_forward>(d, ne.scratch_md);
    return ne;
  });
  Tensor wc = w ? f32Contiguous(*w).view({n}) : Tensor(), bc = b ? f32Contiguous(*b).view({n}) : Tensor();
  SharedBoundArgs::Lease args = e->bound.lease();
  args->bind(DNNL_ARG_SRC, e->md, x2.data());
  args->bind(DNNL_ARG_DST, e->md, out.data());
  if (w) args->bind(DNNL_ARG_SCALE, e->param_md, wc.data());
  if (b) args->bind(DNNL_ARG_SHIFT, e->param_md, bc.data());
  SerialScope serial(out.numel() < kParallelGrain);
  args->execute(ctx, e->prim, e->scratch_md);
  return out.view(x.sizes());
}

// `own` (may be null): set to whether llga's row softmax ran.
Tensor softmaxImpl(ExecContext& ctx, Tensor x, int64_t dim, bool log, PrimitiveCache<NormEntry>& cache,
                   bool* own = nullptr) {
  if (x.dtype() != ScalarType::Float) throw std::invalid_argument("softmax supports float32, got " + x.describe());
  bool scalar = x.dim() == 0;
  if (scalar) x = x.view({1});
  int axis = static_cast<int>(x.wrapDim(dim));
  x = x.contiguous();
  Tensor out = Tensor::empty(ScalarType::Float, x.sizes());
  // Over the innermost dim: llga's rows (backend/dnnl/row_softmax.h).
  // (Rows share the threads: a single long row stays on oneDNN, which splits it.)
  const bool rows = !log && axis + 1 == x.dim() && x.numel() > 0 &&
                    (x.numel() / x.size(axis) > 1 || x.numel() < kParallelGrain) && rowsoftmax::available();
  if (own) *own = rows;
  if (rows) {
    const int64_t n = x.size(axis);
    rowsoftmax::run(x.data<float>(), out.data<float>(), x.numel() / n, n);
  } else if (x.numel() > 0) {
    std::vector<int64_t> key;
    addToKey(key, x);
    key.push_back(axis);
    auto e = cache.get(key, [&] {
      NormEntry ne;
      ne.md = plainDesc(x);
      auto build = [&](const memory::desc& md) {
        if (log) {
          dnnl::logsoftmax_forward::desc d(dnnl::prop_kind::forward_inference, md, axis);
          ne.prim = makePrimitive<dnnl::logsoftmax_forward>(d, ne.scratch_md, &ne.impl);
        } else {
          dnnl::softmax_forward::desc d(dnnl::prop_kind::forward_inference, md, axis);
          ne.prim = makePrimitive<dnnl::softmax_forward>(d, ne.scratch_md, &ne.impl);
        }
      };
      build(ne.md);
      // oneDNN 2.6's jit softmax wants the axis innermost; elsewhere it runs
      // its scalar reference kernel (RAFT's convex upsampling, a softmax over
      // 9 of [1, 1, 9, 8, 8, h, w]: 24 ms a call). Then the softmax runs on a
      // copy laid out with the axis innermost, reordered there and back.
      if (isReference(ne.impl) && axis + 1 < x.dim() && x.size(axis) > 1) {
        memory::dims strides(static_cast<size_t>(x.dim()));
        int64_t step = x.size(axis);
        strides[static_cast<size_t>(axis)] = 1;
        for (int64_t d = x.dim() - 1; d >= 0; --d)
          if (d != axis) strides[static_cast<size_t>(d)] = step, step *= x.size(d);
        const memory::desc perm(ne.md.dims(), memory::data_type::f32, strides);
        dnnl::primitive prim = ne.prim;
        memory::desc scratch = ne.scratch_md;
        std::string impl = ne.impl;
        try {
          build(perm);
          if (!isReference(ne.impl)) ne.param_md = perm;  // the axis-innermost layout the primitive runs in
        } catch (const dnnl::error&) {
        }
        if (!ne.param_md) ne.prim = prim, ne.scratch_md = scratch, ne.impl = impl;
      }
      return ne;
    });
    SharedBoundArgs::Lease args = e->bound.lease();
    if (e->param_md) {
      Tensor src_buf, dst_buf;
      memory src = temporary(e->param_md, src_buf), dst = temporary(e->param_md, dst_buf);
      reorder(ctx, wrap(x, e->md), src);
      args->bind(DNNL_ARG_SRC, e->param_md, src_buf.data());
      args->bind(DNNL_ARG_DST, e->param_md, dst_buf.data());
      args->execute(ctx, e->prim, e->scratch_md);
      reorder(ctx, dst, wrap(out, e->md));
    } else {
      args->bind(DNNL_ARG_SRC, e->md, x.data());
      args->bind(DNNL_ARG_DST, e->md, out.data());
      SerialScope serial(out.numel() < kParallelGrain);
      args->execute(ctx, e->prim, e->scratch_md);
    }
  }
  return scalar ? out.view({}) : out;
}

// `bf16_out` (its partition's out_dtype="bf16": bf16 linears read it):
// llga's rows (backend/dnnl/layer_norm_rows.h) write the result in bf16,
// where oneDNN 2.6's layer normalization writes only its source's type and
// the reader would convert it in a pass of its own.
class LayerNormKernel final : public Kernel {
 public:
  explicit LayerNormKernel(bool bf16_out = false) : bf16_out_(bf16_out) {}
  // Any dense order: a row-major one (convnext's channels-last map seen
  // through permute(0, 2, 3, 1)) is normalised where it is, another one is
  // copied row-major first, as a plain view of it would be. The output is
  // row-major either way.
  bool acceptsStrided(size_t input) const override { return input == 0; }
  void run(const KernelArgs& a) override {
    const Tensor& x = a.tensor(0);
    Shape norm = a.intList(1);
    if (norm.empty() || static_cast<int64_t>(norm.size()) > x.dim() ||
        !std::equal(norm.begin(), norm.end(), x.sizes().end() - static_cast<int64_t>(norm.size())))
      throw std::invalid_argument("layer_norm: normalized_shape does not match the input " + x.describe());
    int64_t n = 1;
    for (int64_t s : norm) n *= s;
    const std::optional<Tensor> w = a.optTensor(2), b = a.optTensor(3);
    for (const auto& t : {w, b})
      if (t && t->numel() != n)
        throw std::invalid_argument("layer_norm: weight and bias need " + std::to_string(n) + " values, got " + t->describe());
    const bool own = bf16_out_ && x.dtype() == ScalarType::Float && lnrows::available();
    own_rank_.store(own ? static_cast<int>(x.dim()) : 0, std::memory_order_relaxed);
    if (!own) return a.set(0, layerNormImpl(a.ctx, x, n, w, b, a.toDouble(4), cache_));
    const Tensor x2 = x.contiguous();
    Tensor out = Tensor::empty(ScalarType::BFloat16, x.sizes());
    const Tensor wc = w ? f32Contiguous(*w) : Tensor(), bc = b ? f32Contiguous(*b) : Tensor();
    lnrows::toBf16(x2.data<float>(), static_cast<uint16_t*>(out.data()), n == 0 ? 0 : x.numel() / n, n,
                   w ? wc.data<float>() : nullptr, b ? bc.data<float>() : nullptr, static_cast<float>(a.toDouble(4)));
    a.set(0, out);
  }
  KernelReport report() const override {
    const int rank = own_rank_.load(std::memory_order_relaxed);
    if (rank == 0) return {};
    const dnnl::memory::desc row_major(dnnl::memory::dims(static_cast<size_t>(rank), 2), dnnl::memory::data_type::bf16,
                                       Tensor::contiguousStrides(Shape(static_cast<size_t>(rank), 2)));
    return {"llga_layer_norm_bf16", "", "", layoutName(row_major), "", "written as bf16 for its bf16 readers"};
  }

 private:
  bool bf16_out_;
  std::atomic<int> own_rank_{0};  // the rank of the input llga's rows last normalised (0: oneDNN's primitive ran)
  PrimitiveCache<NormEntry> cache_;
};

// Whether x is [N, C, *] laid out channels-last: each position's C values
// contiguous, positions in row-major order, images one after the other
// (dims of size 1 may have any stride).
bool channelsLastDense(const Tensor& x) {
  if (x.isBlocked() || x.dim() < 3) return false;
  int64_t expect = x.size(1);
  for (int64_t d = x.dim() - 1; d >= 2; --d) {
    if (x.size(d) != 1 && x.stride(d) != expect) return false;
    expect *= x.size(d);
  }
  return (x.size(1) == 1 || x.stride(1) == 1) && (x.size(0) == 1 || x.stride(0) == expect);
}

// Plain x: oneDNN's layer normalization over [N * G, C / G * spatial], then
// the per-channel affine. Channels-last x (a convolution's output, which its
// readers let stay so: wav2vec2's feature extractor, conv1d -> GroupNorm(512,
// 512) -> gelu -> conv1d) is normalised where it is by llga's own kernel
// (backend/dnnl/channel_affine.h): statistics per image and group, then one
// affine pass, and the result keeps the order when every reader takes
// strided tensors; before, the convolution's output went to plain and the
// next one's back to channels-last.
class GroupNormKernel final : public Kernel {
 public:
  bool acceptsStrided(size_t input) const override { return input == 0; }
  void allowStridedOutput(size_t output) override { follow_ = follow_ || output == 0; }
  KernelReport report() const override {
    const int dims = last_channels_last_.load(std::memory_order_relaxed);  // 0: the plain path
    if (dims == 0) return {};
    const std::string tag = dims == 3 ? "nwc" : dims == 4 ? "nhwc" : dims == 5 ? "ndhwc" : "channels-last";
    return {"llga_group_norm", tag, "", tag, follow_ ? "kept" : "plain", ""};
  }

  void run(const KernelArgs& a) override {
    const Tensor& x = a.tensor(0);
    const int64_t groups = a.toInt(1);
    if (x.dim() < 2) throw std::invalid_argument("group_norm expects [N, C, *], got " + x.describe());
    const int64_t n = x.size(0), c = x.size(1);
    if (groups <= 0 || c % groups != 0)
      throw std::invalid_argument("group_norm: " + std::to_string(c) + " channels do not split into " +
                                  std::to_string(groups) + " groups");
    std::optional<Tensor> w = a.optTensor(2), b = a.optTensor(3);
    for (const auto& t : {w, b})
      if (t && t->numel() != c)
        throw std::invalid_argument("group_norm: weight and bias need " + std::to_string(c) + " values, got " + t->describe());
    const int64_t spatial = c == 0 ? 0 : x.numel() / std::max<int64_t>(n * c, 1);
    if (x.numel() == 0) return a.set(0, Tensor::empty(x.dtype(), x.sizes()));
    Tensor wc = w ? f32Contiguous(*w) : Tensor(), bc = b ? f32Contiguous(*b) : Tensor();
    const float* wp = w ? wc.data<float>() : nullptr;
    const float* bp = b ? bc.data<float>() : nullptr;
    const bool channels_last = x.dtype() == ScalarType::Float && channelsLastDense(x) && affine::available();
    last_channels_last_.store(channels_last ? static_cast<int>(x.dim()) : 0, std::memory_order_relaxed);
    if (channels_last) {
      std::vector<float> scale(static_cast<size_t>(n * c)), shift(static_cast<size_t>(n * c));
      affine::groupNormParams(x.data<float>(), n, spatial, c, groups, a.toDouble(4), wp, bp, scale.data(),
                              shift.data());
      Tensor y = Tensor::emptyLike(ScalarType::Float, x.sizes(), x);
      affine::Job job;
      for (int64_t i = 0; i < n; ++i)
        job.strips.push_back({x.data<float>() + i * spatial * c, y.data<float>() + i * spatial * c, spatial, c, c, c,
                              i * c, 0, c});
      job.scale = scale.data();
      job.shift = shift.data();
      affine::run(job);
      if (follow_) return a.set(0, y);
      Tensor plain = Tensor::empty(ScalarType::Float, x.sizes());  // a oneDNN reorder: 20x a strided copy's speed
      reorder(a.ctx, wrap(y), wrap(plain));
      return a.set(0, plain);
    }
    const int64_t per_group = c / groups * spatial;
    Tensor y = layerNormImpl(a.ctx, x.contiguous().view({n * groups, per_group}), per_group, std::nullopt, std::nullopt,
                             a.toDouble(4), cache_)
                   .view({n, c, spatial});
    if (w || b) {
      float* yp = y.data<float>();
#pragma omp parallel for schedule(static)
      for (int64_t row = 0; row < n * c; ++row) {
        const float scale = wp ? wp[row % c] : 1.0f, shift = bp ? bp[row % c] : 0.0f;
        float* r = yp + row * spatial;
        for (int64_t i = 0; i < spatial; ++i) r[i] = r[i] * scale + shift;
      }
    }
    a.set(0, y.view(x.sizes()));
  }

 private:
  bool follow_ = false;  // every reader takes strided tensors
  std::atomic<int> last_channels_last_{0};  // the rank of the latest call's x when it was channels-last
  PrimitiveCache<NormEntry> cache_;
};

class SoftmaxKernel final : public Kernel {
 public:
  explicit SoftmaxKernel(bool log) : log_(log) {}
  KernelReport report() const override {
    if (!own_.load(std::memory_order_relaxed)) return {};
    return {"llga_softmax:avx512", "", "", "", "", "rows over the last dim"};
  }
  void run(const KernelArgs& a) override {
    Tensor x = a.tensor(0);
    if (!a.isNone(2)) {
      auto dt = scalarTypeFromCode(a.toInt(2));
      if (!dt) throw std::invalid_argument("softmax: unknown dtype");
      x = x.to(*dt);
    }
    bool own = false;
    a.set(0, softmaxImpl(a.ctx, x, a.toInt(1), log_, cache_, &own));
    own_.store(own, std::memory_order_relaxed);
  }

 private:
  bool log_;
  PrimitiveCache<NormEntry> cache_;
  std::atomic<bool> own_{false};
};

}  // namespace

std::unique_ptr<Kernel> makeBatchNormRelu() { return std::make_unique<BatchNormKernel>(/*fuse_relu=*/true); }
std::unique_ptr<Kernel> makeLayerNormBf16() { return std::make_unique<LayerNormKernel>(/*bf16_out=*/true); }
std::unique_ptr<Kernel> makeConcatBatchNorm(const Node& cat, bool relu, std::optional<ActivationQuant> int8_out,
                                            bool bf16_out) {
  const OpDef* def = OpRegistry::global().find(cat.kind());
  if (!def) throw std::logic_error("concat_batchnorm: no kernel for " + cat.kind().toQualString());
  return std::make_unique<ConcatBatchNormKernel>(def->make(cat), relu, int8_out, bf16_out);
}

struct SoftmaxCache {
  PrimitiveCache<NormEntry> c;
};
struct LayerNormCache {
  PrimitiveCache<NormEntry> c;
};
std::shared_ptr<SoftmaxCache> makeSoftmaxCache() { return std::make_shared<SoftmaxCache>(); }
std::shared_ptr<LayerNormCache> makeLayerNormCache() { return std::make_shared<LayerNormCache>(); }
Tensor softmaxOp(ExecContext& ctx, const Tensor& x, int64_t dim, SoftmaxCache& cache) {
  return softmaxImpl(ctx, x, dim, false, cache.c);
}
Tensor layerNormOp(ExecContext& ctx, const Tensor& x, int64_t n, const std::optional<Tensor>& w,
                   const std::optional<Tensor>& b, double eps, LayerNormCache& cache) {
  return layerNormImpl(ctx, x, n, w, b, eps, cache.c);
}

void registerNormOps(OpRegistry& r) {
  r.add(OpDef{"aten::batch_norm", 9, 9, [](const Node&) { return std::make_unique<BatchNormKernel>(); }});
  r.add(OpDef{"aten::layer_norm", 2, 6, [](const Node&) { return std::make_unique<LayerNormKernel>(); }});
  r.add(OpDef{"aten::group_norm", 2, 6, [](const Node&) { return std::make_unique<GroupNormKernel>(); }});
  r.add(OpDef{"aten::softmax", 2, 3, [](const Node&) { return std::make_unique<SoftmaxKernel>(false); }});
  r.add(OpDef{"aten::log_softmax", 2, 3, [](const Node&) { return std::make_unique<SoftmaxKernel>(true); }});
}
LLGA_REGISTER_OPS(registerNormOps);

}  // namespace llga
