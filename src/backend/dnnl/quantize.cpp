#include "backend/dnnl/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/dnnl/dnnl_utils.h"
#include "backend/dnnl/image_layout.h"
#include "backend/dnnl/vec_math.h"
#include "runtime/threads.h"

namespace llga::int8 {

std::vector<float> quantizeRows(const float* w, int64_t rows, int64_t cols, int8_t* out) {
  std::vector<float> scales(static_cast<size_t>(rows));
  const int threads = rows * cols < kParallelGrain ? 1 : getNumThreads();
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = w + r * cols;
    float m = 0.0f;
#pragma omp simd reduction(max : m)
    for (int64_t c = 0; c < cols; ++c) m = std::max(m, std::fabs(row[c]));
    const float scale = m > 0.0f ? m / 127.0f : 1.0f;
    scales[static_cast<size_t>(r)] = scale;
    const float inv = 1.0f / scale;
    int8_t* q = out + r * cols;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) {
      const float v = std::nearbyint(row[c] * inv);
      q[c] = static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
    }
  }
  return scales;
}

std::optional<OpQuant> opQuantOf(const Node& n) {
  if (dynamicActivation(n)) {
    const std::optional<int> qmax = dynamicU8Qmax(n);
    OpQuant q{ActivationQuant{1.0, qmax.has_value(), 0}, weightScalesOf(n).value_or(std::vector<float>{})};
    q.dynamic = true;
    q.qmax = qmax.value_or(127);
    return q;
  }
  std::optional<ActivationQuant> act = activationQuantOf(n);
  if (!act) return std::nullopt;
  return OpQuant{*act, weightScalesOf(n).value_or(std::vector<float>{})};
}

ActivationQuant pytorchDynamicParams(const float* x, int64_t n, int qmax) {
  const int threads = n < kParallelGrain ? 1 : getNumThreads();
  float lo = 0.0f, hi = 0.0f;  // the range holds 0
#pragma omp parallel for simd schedule(static) num_threads(threads) reduction(min : lo) reduction(max : hi)
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const bool finite = v - v == 0.0f;
    lo = finite && v < lo ? v : lo;
    hi = finite && v > hi ? v : hi;
  }
  constexpr float kSmallest = 6.1e-5f;
  const double qmin = 0;
  double scale = (static_cast<double>(hi) - lo) / (qmax - qmin);
  if (static_cast<float>(scale) == 0.0f || std::isinf(1.0f / static_cast<float>(scale))) scale = 0.1;
  if (scale < kSmallest) {  // widen the range with the scale
    const float was = static_cast<float>(scale);
    scale = kSmallest;
    if (lo == 0.0f)
      hi = kSmallest * static_cast<float>(qmax - qmin);
    else if (hi == 0.0f)
      lo = -kSmallest * static_cast<float>(qmax - qmin);
    else {
      lo *= kSmallest / was;
      hi *= kSmallest / was;
    }
  }
  const double from_min = qmin - lo / scale, from_max = qmax - hi / scale;
  const double err_min = std::abs(qmin) - std::abs(lo / scale), err_max = std::abs(static_cast<double>(qmax)) - std::abs(hi / scale);
  const double zp = err_min < err_max ? from_min : from_max;
  const int32_t z = zp < qmin ? 0 : zp > qmax ? qmax : static_cast<int32_t>(std::nearbyint(zp));
  return ActivationQuant{static_cast<double>(static_cast<float>(scale)), true, z};
}

std::vector<float> quantizeWeights(const float* w, int64_t rows, int64_t cols, const OpQuant& q, int8_t* out) {
  if (q.weight_scales.empty()) return quantizeRows(w, rows, cols, out);
  if (static_cast<int64_t>(q.weight_scales.size()) != rows)
    throw std::invalid_argument("int8 weight: " + std::to_string(q.weight_scales.size()) + " scales (w_scale) for " +
                                std::to_string(rows) + " output channels");
  const int threads = rows * cols < kParallelGrain ? 1 : getNumThreads();
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t r = 0; r < rows; ++r) {
    const float inv = 1.0f / q.weight_scales[static_cast<size_t>(r)];
    const float* row = w + r * cols;
    int8_t* to = out + r * cols;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) to[c] = static_cast<int8_t>(std::clamp(std::nearbyint(row[c] * inv), -128.0f, 127.0f));
  }
  return q.weight_scales;
}

namespace {

template <typename T>
void quantizeAffineScalar(const float* x, int64_t n, float inv, float z, T* out) {
  const float lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float r = z + roundHalfEven(x[i] * inv);
    out[i] = static_cast<T>(!(r == r) ? lo : r < lo ? lo : r > hi ? hi : r);  // NaN: the lowest, as PyTorch's
  }
}

// The same 16 lanes at a time (vec::quantize16). The SSE2 loop above took
// ~60 us for 150K elements on two threads, this ~10.

template <typename T>
LLGA_AVX512 void quantizeAffineAvx512(const float* x, int64_t n, float inv, float z, T* out) {
  const __m512 vinv = _mm512_set1_ps(inv), vz = _mm512_set1_ps(z);
  const __m512 vlo = _mm512_set1_ps(std::numeric_limits<T>::min()), vhi = _mm512_set1_ps(std::numeric_limits<T>::max());
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i q = vec::quantize16(_mm512_loadu_ps(x + i), vinv, vz, vlo, vhi);
    if constexpr (std::is_same_v<T, uint8_t>) _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm512_cvtusepi32_epi8(q));
    else _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm512_cvtsepi32_epi8(q));
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512i q = vec::quantize16(_mm512_maskz_loadu_ps(m, x + i), vinv, vz, vlo, vhi);
    if constexpr (std::is_same_v<T, uint8_t>) _mm512_mask_cvtusepi32_storeu_epi8(out + i, m, q);
    else _mm512_mask_cvtsepi32_storeu_epi8(out + i, m, q);
  }
}

// out = saturate(zero_point + round-half-even(x * (1 / scale))), PyTorch's
// order: rounding first, then the shift (oneDNN's reorder rounds the shifted
// value, one step apart at exact halves with an odd zero point). Vectorised
// (AVX-512 where the CPU has it), split over llga's threads in runs of
// whole 16-lane vectors.
template <typename T>
void quantizeAffine(const float* x, int64_t n, float scale, int32_t zero_point, T* out) {
  static const bool avx512 = vec::cpuHasAvx512();
  const float inv = 1.0f / scale, z = static_cast<float>(zero_point);
  const int threads = n < kParallelGrain ? 1 : getNumThreads();
  const int64_t per = (n + threads - 1) / threads / 16 * 16 + 16;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int t = 0; t < threads; ++t) {
    const int64_t lo = std::min(n, t * per), len = std::min(n, lo + per) - lo;
    if (avx512) quantizeAffineAvx512(x + lo, len, inv, z, out + lo);
    else quantizeAffineScalar(x + lo, len, inv, z, out + lo);
  }
}

template <typename T>
void scaledRowScalar(const float* x, const float* s, int64_t c, float inv, float z, T* out) {
  const float lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
  for (int64_t j = 0; j < c; ++j) {
    const float y = x[j] * s[j];
    const float r = z + roundHalfEven(y * inv);
    out[j] = static_cast<T>(!(r == r) ? lo : r < lo ? lo : r > hi ? hi : r);
  }
}

template <typename T>
LLGA_AVX512 void scaledRowAvx512(const float* x, const float* s, int64_t c, float inv, float z, T* out) {
  const __m512 vinv = _mm512_set1_ps(inv), vz = _mm512_set1_ps(z);
  const __m512 vlo = _mm512_set1_ps(std::numeric_limits<T>::min()), vhi = _mm512_set1_ps(std::numeric_limits<T>::max());
  for (int64_t j = 0; j < c; j += 16) {
    const __mmask16 m = vec::tailMask(c - j);
    const __m512 y = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + j), _mm512_maskz_loadu_ps(m, s + j));
    const __m512i q = vec::quantize16(y, vinv, vz, vlo, vhi);
    if constexpr (std::is_same_v<T, uint8_t>) _mm512_mask_cvtusepi32_storeu_epi8(out + j, m, q);
    else _mm512_mask_cvtsepi32_storeu_epi8(out + j, m, q);
  }
}

template <typename T>
void quantizeScaledRowsAs(const float* x, int64_t rows, int64_t c, int64_t x_step, const float* s, float scale,
                          int32_t zero_point, T* out, int64_t out_step) {
  static const bool avx512 = vec::cpuHasAvx512();
  const float inv = 1.0f / scale, z = static_cast<float>(zero_point);
  const int threads = rows * c < kParallelGrain ? 1 : getNumThreads();
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t r = 0; r < rows; ++r) {
    if (avx512) scaledRowAvx512(x + r * x_step, s, c, inv, z, out + r * out_step);
    else scaledRowScalar(x + r * x_step, s, c, inv, z, out + r * out_step);
  }
}

// out = (x - zero_point) * scale: the difference is a whole number, exact
// in float, so one rounding, as PyTorch's dequantize.
template <typename T>
void dequantizeAffine(const T* x, int64_t n, float scale, int32_t zero_point, float* out) {
  const float z = static_cast<float>(zero_point);
  const int threads = n < kParallelGrain ? 1 : getNumThreads();
#pragma omp parallel for simd schedule(static) num_threads(threads)
  for (int64_t i = 0; i < n; ++i) out[i] = (static_cast<float>(x[i]) - z) * scale;
}

// Whether src is a dense f32 NCHW tensor and dst the same sizes as a dense
// NHWC u8/s8 one.
bool isNchwToNhwc(const dnnl::memory::desc& src, const dnnl::memory::desc& dst) {
  const dnnl::memory::dims dims = src.dims();
  if (dims.size() != 4 || dst.dims() != dims || src.data_type() != dnnl::memory::data_type::f32) return false;
  const dnnl::memory::data_type t = dst.data_type();
  if (t != dnnl::memory::data_type::u8 && t != dnnl::memory::data_type::s8) return false;
  return src == dnnl::memory::desc(dims, dnnl::memory::data_type::f32, dnnl::memory::format_tag::nchw) &&
         dst == dnnl::memory::desc(dims, t, dnnl::memory::format_tag::nhwc);
}

}  // namespace

void quantizeActivation(ExecContext& ctx, const dnnl::memory& src, const dnnl::memory& dst, float scale,
                        int32_t zero_point) {
  if (image::takes(src.get_desc(), dst.get_desc())) {
    // A CNN's input entering its int8 stem: quantized and moved into
    // channels-last in one pass. oneDNN's quantizing reorder took 74 us for
    // a 3 x 224 x 224 image into u8 channels-last (an AVX512-VNNI Xeon), the
    // float reorder then llga's loop (zero point) about 55, llga's loop where
    // the image lies then a byte reorder 37.
    image::toChannelsLast(src, dst, scale, zero_point);
    return;
  }
  if (isNchwToNhwc(src.get_desc(), dst.get_desc())) {
    // More channels than image::toChannelsLast takes: quantized where it
    // lies, then the bytes moved into channels-last by a reorder without
    // attributes.
    dnnl::memory::desc q = src.get_desc();
    q.data.data_type = dst.get_desc().data.data_type;
    Tensor keep;
    const dnnl::memory where = temporary(q, keep);
    const int64_t n = static_cast<int64_t>(q.get_size());
    const float* x = static_cast<const float*>(src.get_data_handle());
    if (q.data_type() == dnnl::memory::data_type::u8)
      quantizeAffine(x, n, scale, zero_point, static_cast<uint8_t*>(where.get_data_handle()));
    else
      quantizeAffine(x, n, scale, zero_point, static_cast<int8_t*>(where.get_data_handle()));
    reorder(ctx, where, dst);
    return;
  }
  if (zero_point != 0) {  // in dst's layout as float first (unless src is), then llga's loop
    dnnl::memory::desc f32 = dst.get_desc();
    f32.data.data_type = dnnl_f32;
    Tensor keep;
    dnnl::memory from = src;
    if (src.get_desc() != f32) {
      from = temporary(f32, keep);
      reorder(ctx, src, from);
    }
    const int64_t n = static_cast<int64_t>(f32.get_size() / sizeof(float));
    const float* x = static_cast<const float*>(from.get_data_handle());
    if (dst.get_desc().data_type() == dnnl::memory::data_type::u8)
      quantizeAffine(x, n, scale, zero_point, static_cast<uint8_t*>(dst.get_data_handle()));
    else
      quantizeAffine(x, n, scale, zero_point, static_cast<int8_t*>(dst.get_data_handle()));
    return;
  }
  dnnl::primitive_attr attr = scratchpadAttr();
  attr.set_output_scales(0, {1.0f / scale});
  dnnl::reorder::primitive_desc pd(src, dst, attr);
  execute(ctx, dnnl::reorder(pd), pd.scratchpad_desc(), {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}});
}

void quantizeActivationShifted(ExecContext& ctx, const dnnl::memory& src, const dnnl::memory& dst, float scale,
                               int32_t zero_point) {
  dnnl::primitive_attr attr = scratchpadAttr();
  attr.set_output_scales(0, {1.0f / scale});
  if (zero_point != 0) attr.set_zero_points(DNNL_ARG_DST, 0, {zero_point});
  dnnl::reorder::primitive_desc pd(src, dst, attr);
  execute(ctx, dnnl::reorder(pd), pd.scratchpad_desc(), {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}});
}

namespace {
// The vector width of VNNI in oneDNN's effective ISA: 0 (none), 256 or 512.
int vnniBits() {
  static const int bits = [] {
    switch (dnnl::get_effective_cpu_isa()) {
      case dnnl::cpu_isa::avx2_vnni: return 256;
      case dnnl::cpu_isa::avx512_core_vnni:
      case dnnl::cpu_isa::avx512_core_bf16:
      case dnnl::cpu_isa::avx512_core_amx: return 512;
      default: return 0;
    }
  }();
  return bits;
}
}  // namespace

bool hasVnni() { return vnniBits() > 0; }
bool hasAvx512Vnni() { return vnniBits() == 512; }

dnnl::convolution_forward::primitive_desc convolutionWithZeroPoint(const dnnl::convolution_forward::desc& d,
                                                                    const dnnl::primitive_attr& attr) {
  auto brgemm = [](const dnnl::convolution_forward::primitive_desc& pd) {
    return std::string(pd.impl_info_str()).rfind("brg", 0) == 0;
  };
  const auto creating = convolutionCreationLock();
  dnnl::convolution_forward::primitive_desc first(d, attr, cpuEngine());
  if (brgemm(first)) return first;
  dnnl::convolution_forward::primitive_desc pd(d, attr, cpuEngine());  // iterated: next_impl changes it in place
  while (pd.next_impl())
    if (brgemm(pd)) return pd;
  return first;
}

bool shiftSignedActivations() {
  static const bool shifted = [] {
    if (!hasVnni()) return false;
    const std::string chosen = std::getenv("LLGA_INT8_SIGNED") ? std::getenv("LLGA_INT8_SIGNED") : "";
    if (chosen == "u8" || chosen == "s8") return chosen == "u8";
    using dnnl::memory;
    // the implementation oneDNN picks for the probe with this source
    auto pick = [](memory::data_type src_dt, bool zero_point) {
      const memory::desc src({1, 32, 28, 28}, src_dt, memory::format_tag::nhwc),
          wei({192, 32, 1, 1}, memory::data_type::s8, memory::format_tag::any),
          dst({1, 192, 28, 28}, memory::data_type::u8, memory::format_tag::nhwc);
      dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src, wei,
                                        dst, {1, 1}, {0, 0}, {0, 0});
      dnnl::primitive_attr attr;
      attr.set_output_scales(1 << 1, std::vector<float>(192, 1.0f));
      const auto creating = convolutionCreationLock();
      if (!zero_point) return std::string(dnnl::convolution_forward::primitive_desc(d, attr, cpuEngine()).impl_info_str());
      attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
      return std::string(convolutionWithZeroPoint(d, attr).impl_info_str());
    };
    try {
      return pick(memory::data_type::u8, true) == pick(memory::data_type::s8, false);
    } catch (const dnnl::error&) {  // no kernel for one of them: the other
      return false;
    }
  }();
  return shifted;
}

Tensor fakeQuantize(ExecContext& ctx, const Tensor& x, const ActivationQuant& q) {
  Tensor xq = Tensor::empty(storageType(q), x.sizes());
  quantizeActivation(ctx, x.isBlocked() ? memoryOf(x) : wrap(x), wrap(xq), static_cast<float>(q.scale), q.zero_point);
  return dequantize(ctx, xq, static_cast<float>(q.scale), q.zero_point);
}

Tensor dequantize(ExecContext& ctx, const Tensor& x, float scale, int32_t zero_point) {
  Tensor out = Tensor::empty(ScalarType::Float, x.sizes());
  if (zero_point != 0) {
    // Not oneDNN's reorder with a source zero point: where it also changes
    // the layout (u8/s8 nhwc -> f32 nchw at odd spatial sizes, e.g. 7x7,
    // any channel count), oneDNN 2.6's jit:uni reorder gets the zero point
    // wrong (values off by up to the zero point times the scale). The
    // integers plain first (a copy without attributes), then llga's loop.
    Tensor plain = x;
    if (x.isBlocked() || !x.isContiguous()) {
      plain = Tensor::empty(x.dtype(), x.sizes());
      reorder(ctx, x.isBlocked() ? memoryOf(x) : wrap(x), wrap(plain));
    }
    if (x.dtype() == ScalarType::Byte)
      dequantizeAffine(static_cast<const uint8_t*>(plain.data()), out.numel(), scale, zero_point,
                       static_cast<float*>(out.data()));
    else
      dequantizeAffine(static_cast<const int8_t*>(plain.data()), out.numel(), scale, zero_point,
                       static_cast<float*>(out.data()));
    return out;
  }
  dnnl::primitive_attr attr = scratchpadAttr();
  attr.set_output_scales(0, {scale});
  const dnnl::memory src = x.isBlocked() ? memoryOf(x) : wrap(x), dst = wrap(out);
  dnnl::reorder::primitive_desc pd(src, dst, attr);
  execute(ctx, dnnl::reorder(pd), pd.scratchpad_desc(), {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}});
  return out;
}

Tensor quantizeTensor(ExecContext& ctx, const Tensor& given, const ActivationQuant& q) {
  // A view oneDNN cannot describe (dims that do not nest: x[..., ::2] of an
  // odd width, a concat's part under llga.quantize; graph fuzzer seed
  // 437254) is copied dense first, by llga's own strided copy.
  const Tensor x = given.isBlocked() || dnnlDescribable(given) ? given : given.contiguous();
  const ScalarType qt = storageType(q);
  Tensor out = !x.isBlocked() && x.isPermutedDense() ? Tensor::emptyLike(qt, x.sizes(), x) : Tensor::empty(qt, x.sizes());
  quantizeActivation(ctx, memoryOf(x), wrap(out), static_cast<float>(q.scale), q.zero_point);
  return out;
}

void quantizeScaledRows(const float* x, int64_t rows, int64_t c, int64_t x_step, const float* s, float scale,
                        int32_t zero_point, bool is_unsigned, void* out, int64_t out_step) {
  if (is_unsigned)
    quantizeScaledRowsAs(x, rows, c, x_step, s, scale, zero_point, static_cast<uint8_t*>(out), out_step);
  else
    quantizeScaledRowsAs(x, rows, c, x_step, s, scale, zero_point, static_cast<int8_t*>(out), out_step);
}

bool isInt8(ScalarType t) { return t == ScalarType::Byte || t == ScalarType::Char; }

Tensor biasForInt8(const Tensor& bias, const std::vector<float>& scales) {
  const Tensor given = bias.contiguous();
  Tensor out = Tensor::empty(ScalarType::Float, given.sizes());
  const float* from = static_cast<const float*>(given.data());
  float* to = static_cast<float*>(out.data());
  const int64_t n = static_cast<int64_t>(scales.size()), total = out.numel();
  if (n == 0 || total % n != 0)
    throw std::logic_error("int8 bias of " + std::to_string(total) + " for " + std::to_string(n) + " scales");
  // Runs on every call of an int8 convolution or linear: vectorised, no modulo
  for (int64_t at = 0; at < total; at += n)
#pragma omp simd
    for (int64_t c = 0; c < n; ++c) to[at + c] = from[at + c] / scales[static_cast<size_t>(c)];
  return out;
}

bool foldQuantizingScale(std::vector<PostOp>& ops, std::vector<float>& out_scales, float& sum_scale, bool dst_unsigned) {
  if (ops.empty()) return false;
  const PostOp& q = ops.back();
  if (q.kind != PostOp::Kind::Eltwise || q.alg != PostOpAlg::Linear || q.beta != 0.0f || !(q.alpha > 0.0f) ||
      !std::isfinite(q.alpha))
    return false;
  for (size_t i = 0; i + 1 < ops.size(); ++i) {
    const PostOp& op = ops[i];
    const bool homogeneous = op.kind == PostOp::Kind::Sum ||
                             (op.kind == PostOp::Kind::Eltwise && (op.alg == PostOpAlg::Relu || op.alg == PostOpAlg::Clip));
    if (!homogeneous) return false;
  }
  const float a = q.alpha;
  std::vector<PostOp> folded(ops.begin(), ops.end() - 1);
  for (PostOp& op : folded)
    if (op.kind == PostOp::Kind::Eltwise && op.alg == PostOpAlg::Clip) op.alpha *= a, op.beta *= a;
  const float lo = dst_unsigned ? 0.0f : -128.0f, hi = dst_unsigned ? 255.0f : 127.0f;
  while (!folded.empty() && folded.back().kind == PostOp::Kind::Eltwise) {
    const PostOp& last = folded.back();
    const bool saturation_makes_it = (last.alg == PostOpAlg::Relu && last.alpha == 0.0f && dst_unsigned) ||
                                     (last.alg == PostOpAlg::Clip && last.alpha <= lo && last.beta >= hi);
    if (!saturation_makes_it) break;
    folded.pop_back();
  }
  for (float& s : out_scales) s *= a;
  sum_scale *= a;
  ops = std::move(folded);
  return true;
}

float dynamicScale(const float* x, int64_t n) {
  const int threads = n < kParallelGrain ? 1 : getNumThreads();
  float m = 0.0f;
#pragma omp parallel for simd schedule(static) num_threads(threads) reduction(max : m)
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    m = a - a == 0.0f && a > m ? a : m;  // infinities and NaN left out
  }
  return m > 0.0f ? m / 127.0f : 1.0f;
}

void quantizeS8(const float* x, int64_t n, float scale, int8_t* out) {
  const int threads = n < kParallelGrain ? 1 : getNumThreads();
  const float inv = 1.0f / scale;
#pragma omp parallel for simd schedule(static) num_threads(threads)
  for (int64_t i = 0; i < n; ++i)
    out[i] = x[i] != x[i] ? int8_t{0} : static_cast<int8_t>(std::clamp(std::nearbyint(x[i] * inv), -128.0f, 127.0f));
}

}  // namespace llga::int8
