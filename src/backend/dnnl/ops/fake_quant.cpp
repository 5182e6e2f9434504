// Fake quantization: x rounded to the grid of an 8-bit (or 32-bit)
// quantization and back to float, as PyTorch's quantization-aware training
// and its FX reference graphs compute it (import-quantization turns a
// quantize_per_tensor/quantize_per_channel -> dequantize pair into these):
//
//   fake_quantize_per_tensor_affine(x, scale, zero_point, qmin, qmax)
//       scale and zero_point numbers or one-element tensors
//   fake_quantize_per_channel_affine(x, scales, zero_points, axis, qmin, qmax)
//       scales and zero_points one per index of x's dimension `axis`
//
//   y = (clamp(zero_point + round_half_even(x * (1 / scale)), qmin, qmax) - zero_point) * scale
//
// in float32, as PyTorch 1.13's CPU kernel: x times the float reciprocal,
// then rounded; a NaN or a value beyond int64 (an infinity) maps to qmin
// (PyTorch's cast to int64 gives INT64_MIN on x86 there). Float tensors only.
// One pass, split over llga's threads, 16 lanes at a time with AVX-512
// (the same operations in the same order, so the same bits as the scalar
// loop, which the compiler vectorised only for SSE2: 1.2 G elements/s on
// resnet50's FX residuals, 13 calls 4.3 ms); per tensor, a channels-last or
// blocked input keeps its layout.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>

#include "backend/dnnl/dnnl_utils.h"
#include "backend/dnnl/quantize.h"
#include "backend/dnnl/vec_math.h"
#include "runtime/kernel.h"
#include "runtime/threads.h"

namespace llga {
namespace {

struct Grid {
  float scale, inv;
  float zp;
  float lo, hi;  // qmin, qmax
};

inline float fakeQuant(float x, const Grid& g) {
  const float z = g.zp + int8::roundHalfEven(x * g.inv);
  // NaN and values beyond int64 go to qmin (PyTorch's int64 cast on x86); others clamp.
  const float q = !(std::fabs(z) < 9.2e18f) ? g.lo : z < g.lo ? g.lo : z > g.hi ? g.hi : z;
  return (q - g.zp) * g.scale;
}

// fakeQuant on 16 lanes: the same operations (roundscale is round half to
// even; a NaN or |z| past int64 fails the compare and takes qmin).
LLGA_AVX512 inline __m512 fakeQuant16(__m512 x, const Grid& g) {
  const __m512 r = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(g.inv)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 z = _mm512_add_ps(_mm512_set1_ps(g.zp), r);
  const __mmask16 finite = _mm512_cmp_ps_mask(_mm512_abs_ps(z), _mm512_set1_ps(9.2e18f), _CMP_LT_OQ);
  const __m512 lo = _mm512_set1_ps(g.lo);
  const __m512 q = _mm512_mask_min_ps(lo, finite, _mm512_max_ps(z, lo), _mm512_set1_ps(g.hi));
  return _mm512_mul_ps(_mm512_sub_ps(q, _mm512_set1_ps(g.zp)), _mm512_set1_ps(g.scale));
}

LLGA_AVX512 void fakeQuantAvx512(const float* s, float* d, int64_t n, const Grid& g) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(d + i, fakeQuant16(_mm512_loadu_ps(s + i), g));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(d + i, m, fakeQuant16(_mm512_maskz_loadu_ps(m, s + i), g));
  }
}

// d[i] = fakeQuant(s[i]) for i < n (d may be s).
void fakeQuantRange(const float* s, float* d, int64_t n, const Grid& g) {
  static const bool avx512 = vec::cpuHasAvx512();
  if (avx512) return fakeQuantAvx512(s, d, n, g);
  for (int64_t i = 0; i < n; ++i) d[i] = fakeQuant(s[i], g);
}

Grid gridOf(const char* op, double scale, int64_t zp, int64_t qmin, int64_t qmax) {
  if (!(qmin <= qmax)) throw std::invalid_argument(std::string(op) + ": quant_min " + std::to_string(qmin) +
                                                   " is above quant_max " + std::to_string(qmax));
  if (!(scale > 0) || !std::isfinite(scale))
    throw std::invalid_argument(std::string(op) + ": scale " + std::to_string(scale) + " (expected a positive finite number)");
  if (zp < qmin || zp > qmax)
    throw std::invalid_argument(std::string(op) + ": zero_point " + std::to_string(zp) + " is outside [quant_min, quant_max] = [" +
                                std::to_string(qmin) + ", " + std::to_string(qmax) + "]");
  const float s = static_cast<float>(scale);
  return {s, 1.0f / s, static_cast<float>(zp), static_cast<float>(qmin), static_cast<float>(qmax)};
}

Tensor floatInput(const char* op, const KernelArgs& a) {
  const Tensor& x = a.tensor(0);
  if (x.dtype() != ScalarType::Float) throw std::invalid_argument(std::string(op) + " expects a float32 tensor, got " + x.describe());
  return x.contiguous();
}

// A scale or zero point given as a number or as a one-element tensor.
double scalarArg(const KernelArgs& a, size_t i, const char* op, const char* what) {
  if (!a.input(i).isTensor()) return a.toDouble(i);
  const Tensor& t = a.tensor(i);
  if (t.numel() != 1) throw std::invalid_argument(std::string(op) + ": " + what + " has " + std::to_string(t.numel()) + " elements (expected 1)");
  return t.item();
}

// Per tensor: an input that arrives channels-last or in oneDNN's blocked
// layout (the convolution before it kept its own) is read and written in
// its memory order, where every reader takes that (no reorders); padding
// elements of a blocked buffer are rounded too (harmless: nothing reads them).
class PerTensorKernel final : public Kernel {
 public:
  bool acceptsBlocked(size_t input) const override { return input == 0; }
  bool acceptsStrided(size_t input) const override { return input == 0; }
  void allowBlockedOutput(size_t output) override { blocked_out_ = blocked_out_ || output == 0; }
  void allowStridedOutput(size_t output) override { strided_out_ = strided_out_ || output == 0; }

  void run(const KernelArgs& a) override {
    static const char* op = "fake_quantize_per_tensor_affine";
    const Tensor& in = a.tensor(0);
    if (in.dtype() != ScalarType::Float) throw std::invalid_argument(std::string(op) + " expects a float32 tensor, got " + in.describe());
    const double zp = scalarArg(a, 2, op, "zero_point");
    if (zp != std::nearbyint(zp)) throw std::invalid_argument(std::string(op) + ": zero_point " + std::to_string(zp) + " is not an integer");
    const Grid g = gridOf(op, scalarArg(a, 1, op, "scale"), static_cast<int64_t>(zp), a.toInt(3), a.toInt(4));
    // The input's buffer becomes the result when this is its last reader,
    // nobody else holds it and its layout may go on as it is.
    const bool layout_kept = in.isBlocked() ? blocked_out_ : in.isContiguous() || (in.isPermutedDense() && strided_out_);
    const bool in_place = layout_kept && a.inputDies(0) && in.storage() && in.storage()->owned && in.storage().use_count() == 1;
    Tensor x = in;
    Tensor out;
    int64_t n = x.numel();
    if (in_place) {
      out = x;
      if (x.isBlocked()) n = static_cast<int64_t>(blockedDesc(x).get_size() / sizeof(float));
    } else if (x.isBlocked() && blocked_out_) {
      const size_t bytes = blockedDesc(x).get_size();
      n = static_cast<int64_t>(bytes / sizeof(float));
      out = Tensor::blocked(Storage::allocate(bytes), ScalarType::Float, x.sizes(), x.blockedLayout());
    } else {
      if (x.isBlocked()) {
        ExecContext& ctx = a.ctx;
        x = x.blockedLayout()->toPlain(ctx, x);
      }
      if (!(x.isPermutedDense() && strided_out_)) x = x.contiguous();
      out = x.isContiguous() ? Tensor::empty(ScalarType::Float, x.sizes()) : Tensor::emptyLike(ScalarType::Float, x.sizes(), x);
    }
    const float* s = static_cast<const float*>(x.data());
    float* d = static_cast<float*>(out.data());
    const int threads = n < kParallelGrain ? 1 : getNumThreads();
    const int64_t per = (n / threads + 15) / 16 * 16;  // 16-aligned chunks
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int t = 0; t < threads; ++t) {
      const int64_t begin = std::min<int64_t>(n, t * per);
      const int64_t end = t + 1 == threads ? n : std::min<int64_t>(n, begin + per);
      fakeQuantRange(s + begin, d + begin, end - begin, g);
    }
    a.set(0, out);
  }

 private:
  bool blocked_out_ = false;
  bool strided_out_ = false;
};

void perChannel(const KernelArgs& a) {
  static const char* op = "fake_quantize_per_channel_affine";
  const Tensor x = floatInput(op, a);
  const Tensor& scales = a.tensor(1);
  const Tensor& zps = a.tensor(2);
  const int64_t rank = static_cast<int64_t>(x.sizes().size());
  int64_t axis = a.toInt(3);
  if (axis < -rank || axis >= rank || rank == 0)
    throw std::invalid_argument(std::string(op) + ": axis " + std::to_string(axis) + " is out of range for " + x.describe());
  if (axis < 0) axis += rank;
  const int64_t c = x.sizes()[static_cast<size_t>(axis)];
  if (scales.numel() != c || zps.numel() != c)
    throw std::invalid_argument(std::string(op) + ": " + std::to_string(scales.numel()) + " scales and " +
                                std::to_string(zps.numel()) + " zero points for dimension " + std::to_string(axis) +
                                " of size " + std::to_string(c));
  if (isFloatingType(zps.dtype()))
    throw std::invalid_argument(std::string(op) + ": floating zero points are not supported (llga takes integer ones)");
  const Tensor sc = scales.to(ScalarType::Double).contiguous(), z = zps.to(ScalarType::Long).contiguous();
  std::vector<Grid> grids;
  grids.reserve(static_cast<size_t>(c));
  for (int64_t i = 0; i < c; ++i)
    grids.push_back(gridOf(op, sc.data<double>()[i], z.data<int64_t>()[i], a.toInt(4), a.toInt(5)));
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < rank; ++d) inner *= x.sizes()[static_cast<size_t>(d)];
  const int64_t rows = c == 0 ? 0 : x.numel() / (c * std::max<int64_t>(inner, 1));
  Tensor out = Tensor::empty(ScalarType::Float, x.sizes());
  const float* s = x.data<float>();
  float* dst = out.data<float>();
  const int threads = x.numel() < kParallelGrain ? 1 : getNumThreads();
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t r = 0; r < rows * c; ++r) {
    const Grid g = grids[static_cast<size_t>(r % c)];
    fakeQuantRange(s + r * inner, dst + r * inner, inner, g);
  }
  a.set(0, out);
}

void registerFakeQuant(OpRegistry& r) {
  r.add(OpDef{"aten::fake_quantize_per_tensor_affine", 5, 5, [](const Node&) { return std::make_unique<PerTensorKernel>(); }});
  r.add("aten::fake_quantize_per_channel_affine", 6, 6, perChannel);
}
LLGA_REGISTER_OPS(registerFakeQuant);

}  // namespace
}  // namespace llga
