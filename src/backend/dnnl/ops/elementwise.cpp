// Elementwise ops: unary (relu, gelu, sigmoid, ...), binary with broadcasting
// and scalar operands (add, sub, mul, div, comparisons, ...), on int/float
// scalars too (TorchScript's aten::add(int, int)).
//
// float32 tensors run on oneDNN eltwise / binary primitives; other dtypes
// and layouts oneDNN cannot take run a strided C++ loop.
#include <cmath>
#include <mutex>

#include "backend/dnnl/bound_args.h"
#include "backend/dnnl/dnnl_utils.h"
#include "backend/dnnl/ops/op_utils.h"
#include "backend/dnnl/ops/primitive_cache.h"
#include "runtime/kernel.h"
#include "runtime/strided.h"
#include "runtime/threads.h"

namespace llga {
namespace {

using dnnl::algorithm;

// ------------------------------------------------------------------ unary

struct UnaryDef {
  const char* name;
  algorithm alg;  // eltwise_* or undef when oneDNN has none
  float alpha, beta;
  double (*fn)(double, double, double);  // reference math (x, alpha, beta)
};

double gelu_erf(double x, double, double) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh(double x, double, double) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
double sigmoid(double x, double, double) { return 1.0 / (1.0 + std::exp(-x)); }

// The inverse error function: Giles' single-precision approximation, then two
// Newton steps on erf in double (|error| below float's resolution on (-1, 1)).
double erfinv(double y, double, double) {
  if (y <= -1.0) return y == -1.0 ? -INFINITY : NAN;
  if (y >= 1.0) return y == 1.0 ? INFINITY : NAN;
  double w = -std::log((1.0 - y) * (1.0 + y)), x;
  if (w < 5.0) {
    w -= 2.5;
    double p = 2.81022636e-08;
    for (double c : {3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503, -0.00417768164,
                     0.246640727, 1.50140941})
      p = c + p * w;
    x = p * y;
  } else {
    w = std::sqrt(w) - 3.0;
    double p = -0.000200214257;
    for (double c : {0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613, 0.00943887047,
                     1.00167406, 2.83297682})
      p = c + p * w;
    x = p * y;
  }
  for (int i = 0; i < 2; ++i) x -= (std::erf(x) - y) / (2.0 / std::sqrt(M_PI) * std::exp(-x * x));
  return x;
}

// The digamma function: up past 10 by psi(x) = psi(x + 1) - 1/x, then its
// asymptotic series in 1/x^2 (Bernoulli numbers); below 0 by the reflection
// psi(1 - x) - pi / tan(pi x), poles (0 and the negative integers) as PyTorch.
double digamma(double x, double, double) {
  if (x == 0) return std::copysign(INFINITY, -x);
  if (x < 0) {
    if (x == std::trunc(x)) return NAN;
    double whole;
    const double frac = std::modf(x, &whole);  // tan(pi * frac): exact where tan(pi * x) is not
    return digamma(1 - x, 0, 0) - M_PI / std::tan(M_PI * frac);
  }
  double shift = 0;
  for (; x < 10; x += 1) shift -= 1 / x;
  const double z = 1 / (x * x);
  // sum of B_2k / (2k x^2k), k = 1..7
  const double series =
      z * (1.0 / 12 - z * (1.0 / 120 - z * (1.0 / 252 - z * (1.0 / 240 - z * (1.0 / 132 - z * (691.0 / 32760 - z / 12))))));
  return shift + std::log(x) - 0.5 / x - series;
}

// The modified Bessel function of order 0 (even; libstdc++'s takes x >= 0
// and throws where its series fails, past any float: the limit there). An
// infinity gives NaN, as PyTorch's (its Chebyshev form is inf * 0 there).
double besselI0(double x, double, double) {
  if (std::isnan(x) || std::isinf(x)) return NAN;
  const double a = std::abs(x);
  if (a > 700) return INFINITY;
  try {
    return std::cyl_bessel_i(0.0, a);
  } catch (const std::exception&) {
    return INFINITY;
  }
}

double lgamma(double x, double, double) {
  int sign;
  return lgamma_r(x, &sign);  // glibc's lgamma writes the global signgam: not across threads
}

const UnaryDef kUnary[] = {
    {"relu", algorithm::eltwise_relu, 0, 0, [](double x, double, double) { return x > 0 || std::isnan(x) ? x : 0.0; }},
    {"sigmoid", algorithm::eltwise_logistic, 0, 0, sigmoid},
    {"tanh", algorithm::eltwise_tanh, 0, 0, [](double x, double, double) { return std::tanh(x); }},
    {"silu", algorithm::eltwise_swish, 1, 0, [](double x, double, double) { return x * sigmoid(x, 0, 0); }},
    {"hardswish", algorithm::eltwise_hardswish, 0, 0,
     [](double x, double, double) { return x * std::min(std::max(x + 3.0, 0.0), 6.0) / 6.0; }},
    {"hardsigmoid", algorithm::undef, 0, 0,
     [](double x, double, double) { return std::min(std::max(x + 3.0, 0.0), 6.0) / 6.0; }},
    {"relu6", algorithm::eltwise_clip, 0, 6, [](double x, double, double) { return std::min(std::max(x, 0.0), 6.0); }},
    {"exp", algorithm::eltwise_exp, 0, 0, [](double x, double, double) { return std::exp(x); }},
    {"log", algorithm::eltwise_log, 0, 0, [](double x, double, double) { return std::log(x); }},
    {"sqrt", algorithm::eltwise_sqrt, 0, 0, [](double x, double, double) { return std::sqrt(x); }},
    // not oneDNN's eltwise_pow(1, -0.5): it gives +inf for -0 and 0 for -inf (PyTorch: -inf, NaN)
    {"rsqrt", algorithm::undef, 0, 0, [](double x, double, double) { return 1.0 / std::sqrt(x); }},
    {"abs", algorithm::eltwise_abs, 0, 0, [](double x, double, double) { return std::abs(x); }},
    {"neg", algorithm::eltwise_linear, -1, 0, [](double x, double, double) { return -x; }},
    {"square", algorithm::eltwise_square, 0, 0, [](double x, double, double) { return x * x; }},
    {"erf", algorithm::undef, 0, 0, [](double x, double, double) { return std::erf(x); }},
    {"erfinv", algorithm::undef, 0, 0, erfinv},
    {"lgamma", algorithm::undef, 0, 0, lgamma},
    {"digamma", algorithm::undef, 0, 0, digamma},
    {"floor", algorithm::undef, 0, 0, [](double x, double, double) { return std::floor(x); }},
    {"ceil", algorithm::undef, 0, 0, [](double x, double, double) { return std::ceil(x); }},
    {"round", algorithm::eltwise_round, 0, 0, [](double x, double, double) { return std::nearbyint(x); }},
    {"sin", algorithm::undef, 0, 0, [](double x, double, double) { return std::sin(x); }},
    {"cos", algorithm::undef, 0, 0, [](double x, double, double) { return std::cos(x); }},
    {"reciprocal", algorithm::eltwise_pow, 1, -1, [](double x, double, double) { return 1.0 / x; }},
    {"log2", algorithm::undef, 0, 0, [](double x, double, double) { return std::log2(x); }},
    {"log10", algorithm::undef, 0, 0, [](double x, double, double) { return std::log10(x); }},
    {"log1p", algorithm::undef, 0, 0, [](double x, double, double) { return std::log1p(x); }},
    {"expm1", algorithm::undef, 0, 0, [](double x, double, double) { return std::expm1(x); }},
    {"exp2", algorithm::undef, 0, 0, [](double x, double, double) { return std::exp2(x); }},
    // sin(pi x) / (pi x), 1 at 0
    {"sinc", algorithm::undef, 0, 0, [](double x, double, double) { return x == 0 ? 1.0 : std::sin(M_PI * x) / (M_PI * x); }},
    // the modified Bessel function of order 0 (even: libstdc++'s takes x >= 0)
    {"i0", algorithm::undef, 0, 0, besselI0},
    {"trunc", algorithm::undef, 0, 0, [](double x, double, double) { return std::trunc(x); }},
    {"frac", algorithm::undef, 0, 0, [](double x, double, double) { return x - std::trunc(x); }},
    {"sign", algorithm::undef, 0, 0, [](double x, double, double) { return double((x > 0) - (x < 0)); }},  // NaN: 0, as PyTorch
    {"log_sigmoid", algorithm::eltwise_logsigmoid, 0, 0,
     [](double x, double, double) { return std::min(x, 0.0) - std::log1p(std::exp(-std::abs(x))); }},
    {"mish", algorithm::eltwise_mish, 0, 0,
     [](double x, double, double) { return x * std::tanh(std::log1p(std::exp(x))); }},
};

// Applies f elementwise from src into dst (same shape), in the compute type
// float for float inputs (double for double).
void unaryLoop(const Tensor& src, Tensor& dst, const std::function<double(double)>& f) {
  Tensor s = src;
  if (s.dtype() != dst.dtype()) s = s.to(dst.dtype());
  std::array<Shape, 2> bs;
  for (int64_t d = 0; d < dst.dim(); ++d) {
    bs[0].push_back(dst.stride(d) * static_cast<int64_t>(dst.itemsize()));
    bs[1].push_back(s.stride(d) * static_cast<int64_t>(s.itemsize()));
  }
  const auto loop = makeLoop<2>(dst.sizes(), bs);
  // Items are pieces of rows of the merged loop (at most kChunk elements),
  // shared among the threads for large tensors (f is pure): sin over 1M
  // floats took 12.8x PyTorch's time on one thread.
  constexpr int64_t kChunk = 16384;
  const size_t nd = loop.sizes.size();
  const int64_t inner = loop.sizes[nd - 1], chunks = (inner + kChunk - 1) / kChunk;
  int64_t outer = 1;
  for (size_t d = 0; d + 1 < nd; ++d) outer *= loop.sizes[d];
  const int64_t items = outer * chunks;
  char* const d0 = static_cast<char*>(dst.data());
  const char* const s0 = static_cast<const char*>(s.data());
  dispatchDtype(dst.dtype(), [&](auto t) {
    using T = decltype(t);
    auto item = [&](int64_t it) {
      int64_t row = it / chunks, od = 0, os = 0;
      for (int64_t d = static_cast<int64_t>(nd) - 2; d >= 0; --d) {
        const size_t du = static_cast<size_t>(d);
        const int64_t i = row % loop.sizes[du];
        row /= loop.sizes[du];
        od += i * loop.strides[0][du];
        os += i * loop.strides[1][du];
      }
      const int64_t begin = (it % chunks) * kChunk, n = std::min(kChunk, inner - begin);
      const int64_t sd = loop.strides[0][nd - 1], ss = loop.strides[1][nd - 1];
      char* out = d0 + od + begin * sd;
      const char* in = s0 + os + begin * ss;
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<T*>(out + i * sd) = fromDouble<T>(f(toDouble(*reinterpret_cast<const T*>(in + i * ss))));
    };
#pragma omp parallel for schedule(static) if (dst.numel() >= 32768)
    for (int64_t it = 0; it < items; ++it) item(it);
  });
}

struct EltEntry {
  dnnl::eltwise_forward prim;
  dnnl::memory::desc src_md, dst_md, scratch_md;
  bool same_layout;  // oneDNN's dst layout (it follows src) is dst's own
  SharedBoundArgs bound;
};
using EltCache = PrimitiveCache<EltEntry>;

// oneDNN eltwise over a float32 tensor with no zero strides (dst may be src).
void dnnlEltwise(ExecContext& ctx, EltCache& cache, algorithm alg, float alpha, float beta, const Tensor& src,
                 const Tensor& dst) {
  std::vector<int64_t> key{static_cast<int64_t>(alg), static_cast<int64_t>(alpha * 1e6), static_cast<int64_t>(beta * 1e6)};
  addToKey(key, src);
  addToKey(key, dst);
  auto e = cache.get(key, [&] {
    EltEntry en;
    en.src_md = plainDesc(src);
    en.dst_md = plainDesc(dst);
    dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, alg, en.src_md, alpha, beta);
    dnnl::eltwise_forward::primitive_desc pd(d, scratchpadAttr(), cpuEngine());
    en.prim = dnnl::eltwise_forward(pd);
    en.scratch_md = pd.scratchpad_desc();
    en.same_layout = pd.dst_desc() == en.dst_md;
    return en;
  });
  if (!e->same_layout) {  // compute into a buffer laid out like src, then reorder into dst
    if (src.isPermutedDense()) {  // channels-last src, plain dst: oneDNN's reorder, not a strided copy
      Tensor tmp = Tensor::emptyLike(ScalarType::Float, src.sizes(), src);
      dnnlEltwise(ctx, cache, alg, alpha, beta, src, tmp);
      reorder(ctx, wrap(tmp), wrap(dst));
      return;
    }
    Tensor tmp = Tensor::empty(ScalarType::Float, src.sizes());
    Tensor srcc = src.contiguous();
    dnnlEltwise(ctx, cache, alg, alpha, beta, srcc, tmp);
    const_cast<Tensor&>(dst).copyFrom(tmp);
    return;
  }
  SharedBoundArgs::Lease args = e->bound.lease();
  args->bind(DNNL_ARG_SRC, e->src_md, src.data());
  args->bind(DNNL_ARG_DST, e->dst_md, dst.data());
  SerialScope serial(dst.numel() < kParallelGrain);
  args->execute(ctx, e->prim, e->scratch_md);
}

bool dnnlFriendly(const Tensor& t) { return t.dtype() == ScalarType::Float && t.numel() > 0 && dnnlDescribable(t); }

void applyUnary(ExecContext& ctx, EltCache& cache, const UnaryDef& def, const Tensor& src, Tensor& dst, float alpha,
                float beta) {
  if (def.alg != algorithm::undef && dnnlFriendly(src) && dnnlFriendly(dst) && dst.numel() > kTinyElements) {
    dnnlEltwise(ctx, cache, def.alg, alpha, beta, src, dst);
    return;
  }
  auto fn = def.fn;
  unaryLoop(src, dst, [&](double x) { return fn(x, alpha, beta); });
}

// An elementwise op's result: in x's dimension order (channels-last stays
// so) when its readers take strided tensors, else plain.
Tensor unaryOutput(const KernelArgs& a, ScalarType dtype) {
  const Tensor& x = a.tensor(0);
  return a.stridedOutputOk(0) ? Tensor::emptyLike(dtype, x.sizes(), x) : Tensor::empty(dtype, x.sizes());
}

ScalarType unaryResultType(ScalarType t, bool int_to_float) {
  if (int_to_float && isIntegralType(t, true)) return ScalarType::Float;
  return t;
}

void registerUnary(OpRegistry& r, const UnaryDef& def) {
  std::string name = def.name;
  // Ops whose result is floating for integer inputs (exp, log, sigmoid, ...).
  bool int_to_float = name != "relu" && name != "abs" && name != "neg" && name != "square" && name != "floor" &&
                      name != "ceil" && name != "round" && name != "relu6" && name != "trunc" && name != "sign" &&
                      name != "frac";
  const UnaryDef* d = &def;
  addCached<EltCache>(r, "aten::" + name, 1, 1, [d, int_to_float, name](const KernelArgs& a, EltCache& c) {
    if (!a.input(0).isTensor()) {  // TorchScript's scalar math: neg/abs keep ints, floor/ceil give ints
      const RtValue& v = a.input(0);
      const double r = d->fn(v.toDouble(), d->alpha, d->beta);
      const bool int_result = (v.isInt() && (name == "neg" || name == "abs" || name == "sign")) || name == "floor" || name == "ceil";
      return a.set(0, int_result ? RtValue(static_cast<int64_t>(r)) : RtValue(r));
    }
    const Tensor& x = a.tensor(0);
    Tensor out = unaryOutput(a, unaryResultType(x.dtype(), int_to_float));
    applyUnary(a.ctx, c, *d, x, out, d->alpha, d->beta);
    a.set(0, out);
  }, /*strided_inputs=*/true);
  addCached<EltCache>(r, "aten::" + name + "_", 1, 1, [d](const KernelArgs& a, EltCache& c) {
    Tensor x = a.tensor(0);
    applyUnary(a.ctx, c, *d, x, x, d->alpha, d->beta);
    a.set(0, x);
  });
}

// Unary ops with scalar parameters: (name, first parameter input, defaults)
void registerParamUnary(OpRegistry& r) {
  // gelu(x, approximate="none"|"tanh")
  addCached<EltCache>(r, "aten::gelu", 1, 2, [](const KernelArgs& a, EltCache& c) {
    const Tensor& x = a.tensor(0);
    std::string approx = a.num_in > 1 ? a.input(1).str() : "none";
    if (approx != "none" && approx != "tanh") throw std::invalid_argument("gelu: approximate must be 'none' or 'tanh'");
    static const UnaryDef erf_def{"gelu", algorithm::eltwise_gelu_erf, 0, 0, gelu_erf};
    static const UnaryDef tanh_def{"gelu", algorithm::eltwise_gelu_tanh, 0, 0, gelu_tanh};
    Tensor out = unaryOutput(a, x.dtype());
    applyUnary(a.ctx, c, approx == "tanh" ? tanh_def : erf_def, x, out, 0, 0);
    a.set(0, out);
  }, /*strided_inputs=*/true);
  // clamp family: hardtanh(x, min, max), clamp(x, min?, max?)
  static const UnaryDef clip{"clip", algorithm::eltwise_clip, 0, 0,
                             [](double x, double lo, double hi) { return std::min(std::max(x, lo), hi); }};
  // bounds: 0 = clamp(x, min?, max?), 1 = hardtanh(x, min, max), 2 = clamp_min(x, min), 3 = clamp_max(x, max)
  auto clampKernel = [](bool inplace, int form) {
    return [inplace, form](const KernelArgs& a, EltCache& c) {
      Tensor x = a.tensor(0);
      double lo = -INFINITY, hi = INFINITY;
      auto bound = [&](size_t i) { return a.input(i).isTensor() ? a.tensor(i).item() : a.toDouble(i); };
      if (form == 2) {
        lo = bound(1);
      } else if (form == 3) {
        hi = bound(1);
      } else if (form == 1) {
        lo = a.num_in > 1 ? a.toDouble(1) : -1.0;
        hi = a.num_in > 2 ? a.toDouble(2) : 1.0;
      } else {
        if (!a.isNone(1)) lo = a.input(1).isTensor() ? a.tensor(1).item() : a.toDouble(1);
        if (!a.isNone(2)) hi = a.input(2).isTensor() ? a.tensor(2).item() : a.toDouble(2);
      }
      // An integer tensor clamped by a float bound becomes float, as PyTorch promotes (not in place).
      bool float_bound = false;
      for (size_t i = 1; i < a.num_in; ++i) float_bound |= a.input(i).isDouble();
      if (!inplace && float_bound && isIntegralType(x.dtype(), true)) x = x.to(ScalarType::Float);
      Tensor out = inplace ? x : unaryOutput(a, x.dtype());
      if (isIntegralType(x.dtype(), true) || std::isinf(lo) || std::isinf(hi)) {
        unaryLoop(x, out, [lo, hi](double v) { return std::min(std::max(v, lo), hi); });
      } else {
        applyUnary(a.ctx, c, clip, x, out, static_cast<float>(lo), static_cast<float>(hi));
      }
      a.set(0, out);
    };
  };
  // The out-of-place forms take channels-last inputs as unary ops do (unaryOutput).
  addCached<EltCache>(r, "aten::hardtanh", 1, 3, clampKernel(false, 1), /*strided_inputs=*/true);
  addCached<EltCache>(r, "aten::hardtanh_", 1, 3, clampKernel(true, 1));
  addCached<EltCache>(r, "aten::clamp", 1, 3, clampKernel(false, 0), /*strided_inputs=*/true);
  addCached<EltCache>(r, "aten::clamp_", 1, 3, clampKernel(true, 0));
  addCached<EltCache>(r, "aten::clip", 1, 3, clampKernel(false, 0), /*strided_inputs=*/true);
  addCached<EltCache>(r, "aten::clamp_min", 2, 2, clampKernel(false, 2), /*strided_inputs=*/true);
  addCached<EltCache>(r, "aten::clamp_min_", 2, 2, clampKernel(true, 2));
  addCached<EltCache>(r, "aten::clamp_max", 2, 2, clampKernel(false, 3), /*strided_inputs=*/true);
  addCached<EltCache>(r, "aten::clamp_max_", 2, 2, clampKernel(true, 3));
  // leaky_relu(x, negative_slope=0.01), elu(x, alpha=1, scale=1, input_scale=1)
  static const UnaryDef leaky{"leaky_relu", algorithm::eltwise_relu, 0, 0,
                              [](double x, double s, double) { return x > 0 ? x : x * s; }};
  for (bool inplace : {false, true}) {
    addCached<EltCache>(r, inplace ? "aten::leaky_relu_" : "aten::leaky_relu", 1, 2, [inplace](const KernelArgs& a, EltCache& c) {
      Tensor x = a.tensor(0);
      float slope = a.num_in > 1 ? static_cast<float>(a.toDouble(1)) : 0.01f;
      Tensor out = inplace ? x : unaryOutput(a, x.dtype());
      applyUnary(a.ctx, c, leaky, x, out, slope, 0);
      a.set(0, out);
    }, /*strided_inputs=*/!inplace);
    r.add(inplace ? "aten::elu_" : "aten::elu", 1, 4, [inplace](const KernelArgs& a) {
      Tensor x = a.tensor(0);
      double alpha = a.num_in > 1 ? a.toDouble(1) : 1.0, scale = a.num_in > 2 ? a.toDouble(2) : 1.0,
             in_scale = a.num_in > 3 ? a.toDouble(3) : 1.0;
      Tensor out = inplace ? x : Tensor::empty(x.dtype(), x.sizes());
      unaryLoop(x, out, [=](double v) { return v > 0 ? scale * v : scale * alpha * (std::exp(v * in_scale) - 1); });
      a.set(0, out);
    });
  }
}

// prelu(x, weight): x where x > 0, else weight[c] * x, the weight broadcast
// over every dimension but the channels (dim 1), or over all of them when it
// has one element. A loop of ours, rows of [N * C] in parallel and each row
// vectorised: oneDNN 2.6's PReLU primitive runs a reference kernel for
// per-channel weights on plain [N, C, L] tensors (measured 20x slower).
void prelu(const KernelArgs& a) {
  const Tensor& in = a.tensor(0);
  Tensor w = a.tensor(1).to(ScalarType::Float).contiguous();
  if (in.dtype() != ScalarType::Float) throw std::invalid_argument("prelu supports float32, got " + in.describe());
  const int64_t channels = in.dim() >= 2 ? in.size(1) : 1;
  if (w.numel() != 1 && w.numel() != channels)
    throw std::invalid_argument("prelu: weight " + w.describe() + " has neither 1 nor " + std::to_string(channels) +
                                " (the input's channels) elements for input " + in.describe());
  Tensor x = in.contiguous();
  Tensor out = Tensor::empty(ScalarType::Float, x.sizes());
  const int64_t n = x.dim() >= 1 ? x.size(0) : 1, rows = in.dim() >= 2 ? n * channels : 1;
  const int64_t inner = rows ? x.numel() / rows : 0;
  const float* src = x.data<float>();
  const float* wp = w.data<float>();
  float* dst = out.data<float>();
  const bool per_channel = w.numel() > 1;
  parallelFor(rows, x.numel() >= kParallelGrain, [&](int64_t r) {
    const float slope = wp[per_channel ? r % channels : 0];
    const float* s = src + r * inner;
    float* d = dst + r * inner;
#pragma omp simd
    for (int64_t i = 0; i < inner; ++i) d[i] = s[i] > 0.f ? s[i] : slope * s[i];
  });
  a.set(0, out);
}

// glu(x, dim=-1): the first half along dim times the sigmoid of the second.
void glu(const KernelArgs& a) {
  const Tensor& in = a.tensor(0);
  if (!isFloatingType(in.dtype()) || in.dim() == 0) throw std::invalid_argument("glu expects a floating tensor with dims, got " + in.describe());
  const int64_t dim = in.wrapDim(a.num_in > 1 ? a.toInt(1) : -1);
  if (in.size(dim) % 2)
    throw std::invalid_argument("glu halves dimension " + std::to_string(dim) + " of " + in.describe() + ", which is odd");
  Tensor x = in.to(ScalarType::Float).contiguous();
  const int64_t half = x.size(dim) / 2;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d < dim) outer *= x.size(d);
    if (d > dim) inner *= x.size(d);
  }
  Shape out_shape = x.sizes();
  out_shape[static_cast<size_t>(dim)] = half;
  Tensor out = Tensor::empty(ScalarType::Float, out_shape);
  const float* src = x.data<float>();
  float* dst = out.data<float>();
  const int64_t row = half * inner;
  parallelFor(outer, out.numel() >= kParallelGrain, [&](int64_t o) {
    const float *p = src + o * 2 * row, *q = p + row;
    float* d = dst + o * row;
#pragma omp simd
    for (int64_t i = 0; i < row; ++i) d[i] = p[i] / (1.0f + std::exp(-q[i]));
  });
  a.set(0, out.to(in.dtype()));
}

// bitwise_not(x): logical not for bool, ~x for integers.
void bitwiseNot(const KernelArgs& a) {
  const Tensor& x = a.tensor(0);
  if (!isIntegralType(x.dtype(), true)) throw std::invalid_argument("bitwise_not expects an integer or bool tensor, got " + x.describe());
  Tensor out = Tensor::empty(x.dtype(), x.sizes());
  if (x.dtype() == ScalarType::Bool) unaryLoop(x, out, [](double v) { return v == 0 ? 1.0 : 0.0; });
  else {
    Tensor l = x.to(ScalarType::Long).contiguous(), r = Tensor::empty(ScalarType::Long, x.sizes());
    for (int64_t i = 0; i < l.numel(); ++i) r.data<int64_t>()[i] = ~l.data<int64_t>()[i];
    out = r.to(x.dtype());
  }
  a.set(0, out);
}

// Activations with scalar parameters that oneDNN has no algorithm for, in
// PyTorch's definitions: (name, parameter count, defaults, f(x, p0, p1)).
struct ScalarParamDef {
  const char* name;
  size_t params;
  double d0, d1;
  double (*fn)(double, double, double);
};
constexpr double kSeluAlpha = 1.6732632423543772848170429916717, kSeluScale = 1.0507009873554804934193349852946;
const ScalarParamDef kScalarParam[] = {
    {"celu", 1, 1.0, 0, [](double x, double a, double) { return x > 0 ? x : a * std::expm1(x / a); }},
    {"selu", 0, 0, 0, [](double x, double, double) { return kSeluScale * (x > 0 ? x : kSeluAlpha * std::expm1(x)); }},
    {"softplus", 2, 1.0, 20.0,
     [](double x, double beta, double th) { return x * beta > th ? x : std::log1p(std::exp(x * beta)) / beta; }},
    {"hardshrink", 1, 0.5, 0, [](double x, double l, double) { return x >= -l && x <= l ? 0.0 : x; }},
    {"softshrink", 1, 0.5, 0, [](double x, double l, double) { return x > l ? x - l : x < -l ? x + l : 0.0; }},
    {"threshold", 2, 0, 0, [](double x, double th, double v) { return x > th ? x : v; }},
    // rrelu(x, lower, upper, training, generator) in eval: the mean slope
    {"rrelu", 2, 1.0 / 8, 1.0 / 3, [](double x, double lo, double hi) { return x >= 0 ? x : x * (lo + hi) / 2; }},
};

// f over a contiguous float32 buffer: chunks in parallel, f inlined (no call per element).
template <typename F>
void floatMap(const float* s, float* d, int64_t n, F f) {
  constexpr int64_t kChunk = 4096;
  parallelFor((n + kChunk - 1) / kChunk, n >= kParallelGrain, [&](int64_t c) {
    const int64_t b = c * kChunk, e = std::min(n, b + kChunk);
    for (int64_t i = b; i < e; ++i) d[i] = f(s[i]);
  });
}

// The float32 fast path of kScalarParam's ops (branch-free where the math allows);
// false for names without one.
bool scalarParamFloat(std::string_view name, const float* s, float* d, int64_t n, float p0, float p1) {
  if (name == "celu") floatMap(s, d, n, [p0](float x) { return std::max(x, 0.f) + std::min(0.f, p0 * std::expm1(x / p0)); });
  else if (name == "selu")
    floatMap(s, d, n, [](float x) {
      return static_cast<float>(kSeluScale) * (std::max(x, 0.f) + std::min(0.f, static_cast<float>(kSeluAlpha) * std::expm1(x)));
    });
  else if (name == "softplus") floatMap(s, d, n, [p0, p1](float x) { return x * p0 > p1 ? x : std::log1p(std::exp(x * p0)) / p0; });
  else if (name == "hardshrink") floatMap(s, d, n, [p0](float x) { return x >= -p0 && x <= p0 ? 0.f : x; });
  else if (name == "softshrink") floatMap(s, d, n, [p0](float x) { return x - std::max(-p0, std::min(x, p0)); });
  else if (name == "threshold") floatMap(s, d, n, [p0, p1](float x) { return x > p0 ? x : p1; });
  else if (name == "rrelu") {
    const float slope = (p0 + p1) / 2;
    floatMap(s, d, n, [slope](float x) { return std::max(x, 0.f) + slope * std::min(x, 0.f); });
  } else return false;
  return true;
}

void registerScalarParam(OpRegistry& r, const ScalarParamDef& def) {
  const bool has_inplace = std::string_view(def.name) != "softplus" && std::string_view(def.name) != "hardshrink" &&
                           std::string_view(def.name) != "softshrink";
  for (bool inplace : {false, true}) {
    if (inplace && !has_inplace) continue;
    const size_t hi = std::string_view(def.name) == "rrelu" ? 5 : 1 + def.params;
    r.add(std::string("aten::") + def.name + (inplace ? "_" : ""), 1, hi, [&def, inplace](const KernelArgs& a) {
      Tensor x = a.tensor(0);
      if (std::string_view(def.name) == "rrelu" && a.num_in > 3 && a.toBool(3))
        throw std::invalid_argument("rrelu in training mode samples its slopes; call model.eval() before tracing");
      double p0 = def.params > 0 && a.num_in > 1 ? a.toDouble(1) : def.d0;
      double p1 = def.params > 1 && a.num_in > 2 ? a.toDouble(2) : def.d1;
      if (x.dtype() == ScalarType::Float) {  // PyTorch compares with the parameters in the tensor's type
        p0 = static_cast<float>(p0);
        p1 = static_cast<float>(p1);
      }
      if (isIntegralType(x.dtype(), true)) throw std::invalid_argument(std::string(def.name) + " expects a floating tensor, got " + x.describe());
      Tensor out = inplace ? x : Tensor::empty(x.dtype(), x.sizes());
      if (x.dtype() == ScalarType::Float && x.isContiguous() && out.isContiguous() &&
          scalarParamFloat(def.name, x.data<float>(), out.data<float>(), x.numel(), static_cast<float>(p0), static_cast<float>(p1)))
        return a.set(0, out);
      auto fn = def.fn;
      unaryLoop(x, out, [fn, p0, p1](double v) { return fn(v, p0, p1); });
      a.set(0, out);
    });
  }
}

}  // namespace

void registerElementwiseOps(OpRegistry& r) {
  for (const UnaryDef& d : kUnary) registerUnary(r, d);
  for (const ScalarParamDef& d : kScalarParam) registerScalarParam(r, d);
  r.add("aten::prelu", 2, 2, prelu);
  r.add("aten::glu", 1, 2, glu);
  r.add("aten::bitwise_not", 1, 1, bitwiseNot);
  // nan_to_num(x, nan=0, posinf=None, neginf=None): infinities to the dtype's extremes by default
  r.add("aten::nan_to_num", 1, 4, [](const KernelArgs& a) {
    const Tensor& x = a.tensor(0);
    if (!isFloatingType(x.dtype())) {
      a.set(0, x.clone());
      return;
    }
    const double top = x.dtype() == ScalarType::Double ? std::numeric_limits<double>::max()
                                                       : std::numeric_limits<float>::max();
    const double nan = a.num_in > 1 && !a.isNone(1) ? a.toDouble(1) : 0.0;
    const double pos = a.num_in > 2 && !a.isNone(2) ? a.toDouble(2) : top;
    const double neg = a.num_in > 3 && !a.isNone(3) ? a.toDouble(3) : -top;
    Tensor out = Tensor::empty(x.dtype(), x.sizes());
    unaryLoop(x, out, [=](double v) { return std::isnan(v) ? nan : v == INFINITY ? pos : v == -INFINITY ? neg : v; });
    a.set(0, out);
  });
  registerParamUnary(r);
  registerBinaryOps(r);
}
LLGA_REGISTER_OPS(registerElementwiseOps);

}  // namespace llga
