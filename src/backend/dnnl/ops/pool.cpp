// Pooling on oneDNN (pooling_v2: dilation, ceil_mode via right padding).
//   aten::max_pool{1,2,3}d(x, kernel, stride=[], padding=0, dilation=1, ceil_mode=False)
//   aten::avg_pool{1,2,3}d(x, kernel, stride=[], padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None)
//   aten::adaptive_avg_pool{1,2,3}d(x, output_size), aten::adaptive_max_pool2d
// Averages whose divisor oneDNN cannot express (ceil_mode windows that run
// past the padding with count_include_pad, divisor_override, uneven adaptive
// bins) run a reference loop.
#include <algorithm>
#include <atomic>
#include <cmath>

#include "backend/dnnl/dnnl_utils.h"
#include "backend/dnnl/ops/op_utils.h"
#include "backend/dnnl/ops/primitive_cache.h"
#include "backend/dnnl/global_pool.h"
#include "backend/dnnl/max_pool.h"
#include "backend/dnnl/quantize.h"
#include "runtime/threads.h"

namespace llga {
namespace {

using dnnl::memory;

struct PoolGeom {
  Shape kernel, stride, pad_l, pad_r, dilation, out;
};


Shape param(Shape v, size_t n, const Shape& dflt, const char* what) {
  if (v.empty()) v = dflt;
  if (v.size() == 1 && n > 1) v.assign(n, v[0]);
  if (v.size() != n) throw std::invalid_argument(std::string("pooling: ") + what + " needs " + std::to_string(n) + " values");
  return v;
}

struct PoolEntry {
  dnnl::pooling_v2_forward prim;
  memory::desc src_md, dst_md, scratch_md;
  memory::desc x_md;          // x's own plain descriptor, when src_md is a blocked copy of it
  bool reorder_src = false;   // x is reordered into src_md first
  bool blocked_dst = false;   // dst_md is a blocked layout (dst_layout)
  Shape dst_strides;          // else dst_md's strides: x's order, or the order oneDNN picked for a blocked x
                              // without inner blocks (a convolution's kept nhwc on AVX-512)
  std::shared_ptr<const BlockedLayout> dst_layout;
  std::string impl;  // "jit:avx512_core"
  bool own_max = false;  // llga's max pooling (backend/dnnl/max_pool.h) runs instead of the primitive
  pool8c::Geometry own_geometry;
  bool own_global = false;  // llga's global pooling (backend/dnnl/global_pool.h) instead of the primitive
  SharedBoundArgs bound;
};

// oneDNN has only a scalar kernel for this pooling: its reference or simple_nchw one.
bool scalarKernel(const std::string& impl) { return isReference(impl) || impl.rfind("simple", 0) == 0; }


// What a pooling kernel ran on its latest call, for report().
struct PoolTrace {
  SharedSlot<const PoolEntry> last;
  std::atomic<int64_t> chunks{0};  // chunks of rows a global pool split each plane into, or 0
  KernelReport report() const {
    std::shared_ptr<const PoolEntry> e = last.load();
    if (!e) return {};
    int64_t t = chunks.load(std::memory_order_relaxed);
    return {e->impl, layoutName(e->src_md), "", layoutName(e->dst_md), "",
            t ? "global pool in " + std::to_string(t) + " row chunks" : ""};
  }
};

// x as llga's global pooling reads it, where the pooling is over the whole
// plane of a channels-last or nChw{8,16}c x (channels a multiple of the block).
std::optional<global_pool::Geometry> globalPoolGeometry(const Tensor& x, const PoolGeom& g) {
  if (x.dim() != 4) return std::nullopt;
  for (size_t i = 0; i < 2; ++i)
    if (g.out[i] != 1 || g.kernel[i] != x.size(static_cast<int64_t>(i) + 2) || g.pad_l[i] != 0 || g.pad_r[i] != 0 ||
        g.dilation[i] != 1)
      return std::nullopt;
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  if (x.isBlocked()) {
    const memory::desc md = blockedDesc(x);
    for (auto [tag, b] : {std::pair{memory::format_tag::nChw16c, int64_t{16}}, std::pair{memory::format_tag::nChw8c, int64_t{8}}})
      if (c % b == 0 && md == memory::desc(x.sizes(), memory::data_type::f32, tag))
        return global_pool::Geometry{n, c * h * w, c / b, h * w * b, h * w, b};
    return std::nullopt;
  }
  // channels-last: every position's channels contiguous, positions C apart in (h, w) order
  if ((c == 1 || x.stride(1) == 1) && (w == 1 || x.stride(3) == c) && (h == 1 || x.stride(2) == w * c))
    return global_pool::Geometry{n, x.stride(0), 1, 0, h * w, c};
  return std::nullopt;
}

// `follow`: the output may take x's dimension order (channels-last in, channels-last out);
// `keep_blocked`: it may stay in a blocked layout.
//
// A blocked x (from a convolution that kept its layout) is pooled blocked:
// oneDNN's jit kernels take it. A plain NCHW x, where oneDNN has only its
// scalar simple_nchw or reference kernel (every AVX2 CPU: googlenet's
// max-pools after its concats, 4-9 ms each), is reordered into a blocked
// copy first: one pass over x instead of a scalar loop over every window.
// A pooling over the whole plane of a channels-last or nChw{8,16}c x is
// llga's own (global_pool.h), one pass over x split across the threads.
// A u8/s8 x (max pooling between int8 convolutions: assign-precision's int8
// edge through it) is pooled in its own type by oneDNN's int8 kernels: the
// maximum of quantized values is the quantized maximum, at the same scale.
Tensor runPool(ExecContext& ctx, PrimitiveCache<PoolEntry>& cache, const Tensor& x, const PoolGeom& g,
               dnnl::algorithm alg, bool follow, bool keep_blocked, PoolTrace& trace) {
  Shape out_shape(x.sizes().begin(), x.sizes().begin() + 2);
  out_shape.insert(out_shape.end(), g.out.begin(), g.out.end());
  thread_local std::vector<int64_t> key;  // reused: no allocation per call
  key.clear();
  addToKey(key, x);  // (its dtype too: u8/s8 max pooling has entries of its own)
  const ScalarType dtype = x.dtype();
  const memory::data_type dt = dnnlType(dtype);
  if (x.isBlocked()) addBlockedToKey(key, blockedDesc(x));
  for (const Shape* s : {&g.kernel, &g.stride, &g.pad_l, &g.pad_r, &g.dilation}) key.insert(key.end(), s->begin(), s->end());
  key.push_back(static_cast<int64_t>(alg));
  key.push_back(follow);
  auto e = cache.get(key, [&] {
    PoolEntry pe;
    memory::dims dil(g.dilation.size());
    for (size_t i = 0; i < dil.size(); ++i) dil[i] = g.dilation[i] - 1;
    auto make = [&](const memory::desc& src, const memory::desc& dst) {
      dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, alg, src, dst, g.stride, g.kernel, dil,
                                       g.pad_l, g.pad_r);
      return dnnl::pooling_v2_forward::primitive_desc(d, scratchpadAttr(), cpuEngine());
    };
    if (dtype == ScalarType::Float && globalPoolGeometry(x, g)) {  // no padding: every average algorithm is the mean
      pe.own_global = true;
      pe.src_md = x.isBlocked() ? blockedDesc(x) : plainDesc(x);
      pe.dst_md = memory::desc(out_shape, memory::data_type::f32, memory::format_tag::nchw);
      pe.dst_strides = denseStrides(pe.dst_md);
      pe.impl = "llga_global_pool";
      return pe;
    }
    const memory::desc any(out_shape, dt, memory::format_tag::any);
    std::optional<dnnl::pooling_v2_forward::primitive_desc> pd;
    if (x.isBlocked()) {
      pe.src_md = blockedDesc(x);
      pd = make(pe.src_md, any);
    } else {
      // src and dst in the same order (mixed orders fall to oneDNN's slow reference kernels)
      pe.src_md = pe.x_md = plainDesc(x);
      pd = make(pe.src_md, plainDesc(Tensor::emptyLike(dtype, out_shape, x)));
      for (memory::format_tag t : scalarKernel(implName(*pd)) ? blockedTags(x.dim()) : std::vector<memory::format_tag>{}) {
        const memory::desc src(x.sizes(), dt, t);
        auto blocked = make(src, any);
        if (scalarKernel(implName(blocked))) continue;
        pd = blocked, pe.src_md = src, pe.reorder_src = true;
        break;
      }
    }
    pe.dst_md = pd->dst_desc();
    pe.blocked_dst = pe.dst_md.data.format_kind == dnnl_blocked && pe.dst_md.data.format_desc.blocking.inner_nblks > 0;
    if (pe.blocked_dst) pe.dst_layout = makeLayout(pe.dst_md);
    else pe.dst_strides = denseStrides(pe.dst_md);
    pe.scratch_md = pd->scratchpad_desc();
    pe.impl = implName(*pd);
    pe.prim = dnnl::pooling_v2_forward(*pd);
    // Where oneDNN pools nChw8c (AVX2), a 2-D max pooling without dilation is llga's.
    const bool nchw8c = x.dim() == 4 && x.size(1) % 8 == 0 &&
                        pe.src_md == memory::desc(x.sizes(), memory::data_type::f32, memory::format_tag::nChw8c) &&
                        pe.dst_md == memory::desc(out_shape, memory::data_type::f32, memory::format_tag::nChw8c);
    if (alg == dnnl::algorithm::pooling_max && nchw8c && g.dilation[0] == 1 && g.dilation[1] == 1 &&
        pool8c::available()) {
      pe.own_max = true;
      pe.own_geometry = {x.size(0), x.size(1), x.size(2), x.size(3), out_shape[2], out_shape[3],
                         g.kernel[0], g.kernel[1], g.stride[0], g.stride[1], g.pad_l[0], g.pad_l[1]};
      pe.impl = "llga_max_pool:avx2";
    }
    return pe;
  });
  trace.last.store(e);
  trace.chunks.store(0, std::memory_order_relaxed);
  SharedBoundArgs::Lease args = e->bound.lease();
  Tensor src_buf;  // x in the blocked layout, for this call
  if (e->reorder_src) reorder(ctx, wrap(x, e->x_md), temporary(e->src_md, src_buf));
  const void* src = e->reorder_src ? src_buf.data() : x.data();
  Tensor out = e->blocked_dst ? Tensor::blocked(Storage::allocate(e->dst_md.get_size()), dtype, out_shape, e->dst_layout)
                              : Tensor::fromStorage(Storage::allocate(e->dst_md.get_size()), dtype, out_shape,
                                                    e->dst_strides, 0);
  if (e->own_max) {
    pool8c::run(e->own_geometry, static_cast<const float*>(src), static_cast<float*>(out.data()));
  } else if (e->own_global) {
    const global_pool::Geometry geom = *globalPoolGeometry(x, g);
    global_pool::run(geom, alg == dnnl::algorithm::pooling_max, static_cast<const float*>(x.data()),
                     static_cast<float*>(out.data()));
    if (int64_t k = global_pool::chunks(geom); k > 1) trace.chunks.store(k, std::memory_order_relaxed);
  } else {
    args->bind(DNNL_ARG_SRC, e->src_md, const_cast<void*>(src));
    args->bind(DNNL_ARG_DST, e->dst_md, out.data());
    args->execute(ctx, e->prim, e->scratch_md);
  }
  if (out.isBlocked()) return keep_blocked ? out : toPlain(ctx, out);
  return follow ? out : out.contiguous();
}

// Reference average pooling over [N, C, *spatial] (contiguous x), PyTorch's divisor rules.
Tensor avgPoolReference(const Tensor& xin, const PoolGeom& g, bool count_include_pad, std::optional<int64_t> divisor) {
  Tensor x = xin.contiguous();
  const size_t nsp = g.kernel.size();
  Shape out_shape(x.sizes().begin(), x.sizes().begin() + 2);
  out_shape.insert(out_shape.end(), g.out.begin(), g.out.end());
  Tensor out = Tensor::empty(ScalarType::Float, out_shape);
  int64_t planes = x.size(0) * x.size(1), in_plane = 1, out_plane = 1;
  for (size_t i = 0; i < nsp; ++i) {
    in_plane *= x.size(static_cast<int64_t>(i) + 2);
    out_plane *= g.out[i];
  }
  const float* src = x.data<float>();
  float* dst = out.data<float>();
  std::vector<int64_t> o(nsp);
  for (int64_t pl = 0; pl < planes; ++pl) {
    for (int64_t oi = 0; oi < out_plane; ++oi) {
      int64_t rem = oi;
      for (size_t i = nsp; i-- > 0;) { o[i] = rem % g.out[i]; rem /= g.out[i]; }
      std::vector<int64_t> lo(nsp), hi(nsp);
      int64_t pool_size = 1, valid = 1;
      for (size_t i = 0; i < nsp; ++i) {
        int64_t in = x.size(static_cast<int64_t>(i) + 2);
        int64_t start = o[i] * g.stride[i] - g.pad_l[i];
        int64_t end = std::min(start + g.kernel[i], in + g.pad_l[i]);
        pool_size *= end - start;
        lo[i] = std::max<int64_t>(start, 0);
        hi[i] = std::min(end, in);
        valid *= std::max<int64_t>(hi[i] - lo[i], 0);
      }
      double sum = 0;
      if (valid > 0) {
        std::vector<int64_t> idx(lo);
        while (true) {
          int64_t off = 0;
          for (size_t i = 0; i < nsp; ++i) off = off * x.size(static_cast<int64_t>(i) + 2) + idx[i];
          sum += src[pl * in_plane + off];
          size_t i = nsp;
          while (i-- > 0) {
            if (++idx[i] < hi[i]) break;
            idx[i] = lo[i];
          }
          if (i == static_cast<size_t>(-1)) break;
        }
      }
      int64_t div = divisor ? *divisor : count_include_pad ? pool_size : valid;
      dst[pl * out_plane + oi] = static_cast<float>(div ? sum / static_cast<double>(div) : 0.0);
    }
  }
  return out;
}

class PoolKernel final : public Kernel {
 public:
  enum class Kind { Max, Avg };
  PoolKernel(Kind k, size_t nsp) : kind_(k), nsp_(nsp) {}
  bool acceptsStrided(size_t input) const override { return input == 0; }
  void allowStridedOutput(size_t output) override { follow_ = follow_ || output == 0; }
  bool acceptsBlocked(size_t input) const override { return input == 0; }
  void allowBlockedOutput(size_t output) override { keep_blocked_ = keep_blocked_ || output == 0; }
  KernelReport report() const override { return trace_.report(); }

  void run(const KernelArgs& a) override {
    Tensor x = a.tensor(0);
    if (x.dtype() != ScalarType::Float && !(kind_ == Kind::Max && int8::isInt8(x.dtype())))
      throw std::invalid_argument("pooling supports float32 (and u8/s8 for max pooling), got " + x.describe());
    bool batched = x.dim() == static_cast<int64_t>(nsp_) + 2;
    if (!batched && x.isBlocked()) x = toPlain(a.ctx, x);
    if (!batched && x.dim() == static_cast<int64_t>(nsp_) + 1) x = x.unsqueeze(0);
    else if (!batched) throw std::invalid_argument("pooling: unexpected input " + x.describe());
    PoolGeom g;
    g.kernel = param(a.intList(1), nsp_, {}, "kernel_size");
    g.stride = param(a.num_in > 2 ? a.intList(2) : Shape{}, nsp_, g.kernel, "stride");
    g.pad_l = param(a.num_in > 3 ? a.intList(3) : Shape{0}, nsp_, {0}, "padding");
    bool ceil_mode;
    bool count_include_pad = true;
    std::optional<int64_t> divisor;
    if (kind_ == Kind::Max) {
      g.dilation = param(a.num_in > 4 ? a.intList(4) : Shape{1}, nsp_, {1}, "dilation");
      ceil_mode = a.num_in > 5 && a.toBool(5);
    } else {
      g.dilation = Shape(nsp_, 1);
      ceil_mode = a.num_in > 4 && a.toBool(4);
      count_include_pad = a.num_in > 5 ? a.toBool(5) : true;
      if (!a.isNone(6)) divisor = a.toInt(6);
    }
    bool beyond_padding = false;  // a ceil_mode window reaches past the right padding
    for (size_t i = 0; i < nsp_; ++i) {
      int64_t in = x.size(static_cast<int64_t>(i) + 2);
      if (kind_ == Kind::Avg && nsp_ == 3 && in < g.kernel[i])  // PyTorch's avg_pool3d alone checks, padding or not
        throw std::invalid_argument("avg_pool3d: input " + x.describe() + " is smaller than the kernel");
      if (g.pad_l[i] * 2 > g.kernel[i]) throw std::invalid_argument("pooling: padding should be at most half of the kernel size");
      int64_t o = poolOutputSize(in, g.kernel[i], g.stride[i], g.pad_l[i], g.dilation[i], ceil_mode);
      // PyTorch's max_pool1d (only it) gives an empty result where the others raise
      if (o < 0 || (o == 0 && !(kind_ == Kind::Max && nsp_ == 1)))
        throw std::invalid_argument("pooling: output size is too small (" + std::to_string(o) + ") for input " + x.describe());
      g.out.push_back(o);
      int64_t pr = (o - 1) * g.stride[i] + g.dilation[i] * (g.kernel[i] - 1) + 1 - in - g.pad_l[i];
      beyond_padding |= pr > g.pad_l[i];
      g.pad_r.push_back(std::max<int64_t>(pr, 0));
    }
    Tensor out;
    for (int64_t d = 1; d < x.dim(); ++d)
      if (x.size(d) == 0)  // as PyTorch: only the batch may be empty
        throw std::invalid_argument("pooling: expected an input with non-zero sizes except the batch, got " + x.describe());
    if (std::find(g.out.begin(), g.out.end(), 0) != g.out.end() || x.numel() == 0) {
      Shape sizes{x.size(0), x.size(1)};
      sizes.insert(sizes.end(), g.out.begin(), g.out.end());
      out = Tensor::empty(x.dtype(), sizes);
    } else if (kind_ == Kind::Max) {
      out = runPool(a.ctx, cache_, x, g, dnnl::algorithm::pooling_max, follow_, keep_blocked_ && batched, trace_);
    } else if (divisor || (count_include_pad && beyond_padding)) {
      out = avgPoolReference(toPlain(a.ctx, x), g, count_include_pad, divisor);
    } else {
      out = runPool(a.ctx, cache_, x, g,
                    count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                      : dnnl::algorithm::pooling_avg_exclude_padding,
                    follow_, keep_blocked_ && batched, trace_);
    }
    a.set(0, batched ? out : out.squeeze(0));
  }

 private:
  Kind kind_;
  size_t nsp_;
  bool follow_ = false;        // every reader takes strided tensors
  bool keep_blocked_ = false;  // every reader takes blocked tensors
  PoolTrace trace_;
  PrimitiveCache<PoolEntry> cache_;
};

class AdaptivePoolKernel final : public Kernel {
 public:
  AdaptivePoolKernel(bool max, size_t nsp) : max_(max), nsp_(nsp) {}
  bool acceptsStrided(size_t input) const override { return input == 0; }
  void allowStridedOutput(size_t output) override { follow_ = follow_ || output == 0; }
  bool acceptsBlocked(size_t input) const override { return input == 0; }
  void allowBlockedOutput(size_t output) override { keep_blocked_ = keep_blocked_ || output == 0; }
  KernelReport report() const override { return trace_.report(); }
  void run(const KernelArgs& a) override {
    Tensor x = a.tensor(0);
    if (x.dtype() != ScalarType::Float) throw std::invalid_argument("adaptive pooling supports float32, got " + x.describe());
    bool batched = x.dim() == static_cast<int64_t>(nsp_) + 2;
    if (!batched && x.isBlocked()) x = toPlain(a.ctx, x);
    if (!batched) x = x.unsqueeze(0);
    Shape want = param(a.intList(1), nsp_, {}, "output_size");
    PoolGeom g;
    bool even = true;
    for (size_t i = 0; i < nsp_; ++i) {
      int64_t in = x.size(static_cast<int64_t>(i) + 2), o = want[i] < 0 ? in : want[i];
      if (o <= 0) throw std::invalid_argument("adaptive pooling: output size must be positive");
      even &= in % o == 0;
      g.out.push_back(o);
      g.kernel.push_back(in / o);
      g.stride.push_back(in / o);
    }
    g.pad_l = g.pad_r = Shape(nsp_, 0);
    g.dilation = Shape(nsp_, 1);
    // As PyTorch: empty spatial dims (and, for max, empty channels) raise; an empty batch gives an empty result.
    for (int64_t d = max_ ? 1 : 2; d < x.dim(); ++d)
      if (x.size(d) == 0)
        throw std::invalid_argument("adaptive pooling: expected an input with non-zero sizes except the batch, got " + x.describe());
    Tensor out;
    if (x.numel() == 0) {
      Shape sizes{x.size(0), x.size(1)};
      sizes.insert(sizes.end(), g.out.begin(), g.out.end());
      out = Tensor::empty(ScalarType::Float, sizes);
    } else if (even) {
      out = runPool(a.ctx, cache_, x, g, max_ ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_exclude_padding,
                    follow_, keep_blocked_ && batched, trace_);
    } else if (!max_) {
      out = adaptiveReference(toPlain(a.ctx, x), g.out);
    } else {
      throw std::invalid_argument("adaptive max pooling with uneven bins is not supported");
    }
    a.set(0, batched ? out : out.squeeze(0));
  }

 private:
  // bins [floor(i*in/out), ceil((i+1)*in/out))
  static Tensor adaptiveReference(const Tensor& xin, const Shape& out_sp) {
    Tensor x = xin.contiguous();
    size_t nsp = out_sp.size();
    Shape out_shape(x.sizes().begin(), x.sizes().begin() + 2);
    out_shape.insert(out_shape.end(), out_sp.begin(), out_sp.end());
    Tensor out = Tensor::empty(ScalarType::Float, out_shape);
    Tensor flat_in = x.reshape({x.size(0) * x.size(1), -1});
    int64_t planes = flat_in.size(0), out_plane = out.numel() / std::max<int64_t>(planes, 1);
    Shape in_sp(x.sizes().begin() + 2, x.sizes().end());
    const float* src = x.data<float>();
    float* dst = out.data<float>();
    int64_t in_plane = flat_in.size(1);
    for (int64_t pl = 0; pl < planes; ++pl)
      for (int64_t oi = 0; oi < out_plane; ++oi) {
        std::vector<int64_t> o(nsp), lo(nsp), hi(nsp);
        int64_t rem = oi;
        for (size_t i = nsp; i-- > 0;) { o[i] = rem % out_sp[i]; rem /= out_sp[i]; }
        for (size_t i = 0; i < nsp; ++i) {
          lo[i] = o[i] * in_sp[i] / out_sp[i];
          hi[i] = ((o[i] + 1) * in_sp[i] + out_sp[i] - 1) / out_sp[i];
        }
        double sum = 0;
        int64_t count = 0;
        std::vector<int64_t> idx(lo);
        while (true) {
          int64_t off = 0;
          for (size_t i = 0; i < nsp; ++i) off = off * in_sp[i] + idx[i];
          sum += src[pl * in_plane + off];
          ++count;
          size_t i = nsp;
          while (i-- > 0) {
            if (++idx[i] < hi[i]) break;
            idx[i] = lo[i];
          }
          if (i == static_cast<size_t>(-1)) break;
        }
        dst[pl * out_plane + oi] = static_cast<float>(sum / static_cast<double>(count));
      }
    return out;
  }
  bool max_;
  size_t nsp_;
  bool follow_ = false;        // every reader takes strided tensors
  bool keep_blocked_ = false;  // every reader takes blocked tensors
  PoolTrace trace_;
  PrimitiveCache<PoolEntry> cache_;
};

}  // namespace

int64_t poolOutputSize(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  const int64_t num = in + 2 * p - d * (k - 1) - 1;
  int64_t o = (ceil_mode ? floorDiv(num + s - 1, s) : floorDiv(num, s)) + 1;
  if (ceil_mode && (o - 1) * s >= in + p) --o;  // the last window must start inside the input or left padding
  return o;
}

void registerPoolOps(OpRegistry& r) {
  for (size_t nsp = 1; nsp <= 3; ++nsp) {
    std::string d = std::to_string(nsp) + "d";
    r.add(OpDef{"aten::max_pool" + d, 2, 6, [nsp](const Node&) { return std::make_unique<PoolKernel>(PoolKernel::Kind::Max, nsp); }});
    r.add(OpDef{"aten::avg_pool" + d, 2, 7, [nsp](const Node&) { return std::make_unique<PoolKernel>(PoolKernel::Kind::Avg, nsp); }});
    r.add(OpDef{"aten::adaptive_avg_pool" + d, 2, 2, [nsp](const Node&) { return std::make_unique<AdaptivePoolKernel>(false, nsp); }});
  }
}
LLGA_REGISTER_OPS(registerPoolOps);

}  // namespace llga
