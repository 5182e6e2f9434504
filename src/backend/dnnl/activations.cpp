#include "backend/dnnl/activations.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "backend/dnnl/dnnl_utils.h"
#include "backend/dnnl/vec_math.h"
#include "runtime/threads.h"

namespace llga {
namespace {

// f over p[begin, end) in place, 16 lanes at a time, four vectors a step
// (their independent chains overlap), the tail masked.
template <__m512 (*f)(__m512)>
LLGA_AVX512 void range16(float* p, int64_t begin, int64_t end) {
  int64_t i = begin;
  for (; i + 64 <= end; i += 64) {
    __m512 a = _mm512_loadu_ps(p + i), b = _mm512_loadu_ps(p + i + 16);
    __m512 c = _mm512_loadu_ps(p + i + 32), d = _mm512_loadu_ps(p + i + 48);
    _mm512_storeu_ps(p + i, f(a));
    _mm512_storeu_ps(p + i + 16, f(b));
    _mm512_storeu_ps(p + i + 32, f(c));
    _mm512_storeu_ps(p + i + 48, f(d));
  }
  for (; i + 16 <= end; i += 16) _mm512_storeu_ps(p + i, f(_mm512_loadu_ps(p + i)));
  if (i < end) {
    const __mmask16 m = static_cast<__mmask16>((1u << (end - i)) - 1);
    _mm512_mask_storeu_ps(p + i, m, f(_mm512_maskz_loadu_ps(m, p + i)));
  }
}

// The same for 8 lanes with AVX2 and FMA (vec::swish8), in fewer
// instructions (Zen 3: 0.59 against 0.79 ns per float on one core for the
// form above it had): without scalef, 2^n as 2^(n + 64) * 2^-64; the
// sigmoid's divide a divide (one instruction, correctly rounded, off the FMA
// ports) rather than an estimate and a Newton step; no -inf case.
using vec::swish8;

LLGA_AVX2_FMA void swishRangeAvx2(float* p, int64_t begin, int64_t end) {
  int64_t i = begin;
  for (; i + 16 <= end; i += 16) {
    __m256 a = _mm256_loadu_ps(p + i), b = _mm256_loadu_ps(p + i + 8);
    _mm256_storeu_ps(p + i, swish8(a));
    _mm256_storeu_ps(p + i + 8, swish8(b));
  }
  for (; i + 8 <= end; i += 8) _mm256_storeu_ps(p + i, swish8(_mm256_loadu_ps(p + i)));
  if (i < end) {
    alignas(32) float tail[8] = {};
    std::memcpy(tail, p + i, static_cast<size_t>(end - i) * sizeof(float));
    _mm256_store_ps(tail, swish8(_mm256_load_ps(tail)));
    std::memcpy(p + i, tail, static_cast<size_t>(end - i) * sizeof(float));
  }
}

void swishAnyRange(float* p, int64_t begin, int64_t end) {
  static const bool avx512 = vec::cpuHasAvx512();
  if (avx512) range16<vec::swish16>(p, begin, end);
  else swishRangeAvx2(p, begin, end);
}

// gelu(x) = x / 2 * (1 + erf(x / sqrt 2)), through erfc of z = |x| / sqrt 2
// (no cancellation for negative x, where PyTorch's float 1 + erf loses digits):
//   q = erfc(z) / 2,  gelu(x) = x >= 0 ? x * (1 - q) : x * q.
// erfc(z) = t (a1 + t (a2 + ... a5 t)) e^(-z^2), t = 1 / (1 + p z)
// (Abramowitz and Stegun 7.1.26, |error| <= 1.5e-7), the reciprocal an
// estimate and one Newton step, on z clamped at 9 (so t stays finite for
// z = inf). e^(-z^2) is 0 from z = 9.33 on (vec::expNonPositive16 flushes
// below e^-87), so no step makes a denormal, x < -13.2 gives -0 (PyTorch's
// float gelu gives 0 from -10), and -inf gives -inf * 0 = NaN as in PyTorch.
constexpr float kErfP = 0.3275911f;
constexpr float kErfA[] = {1.061405429f, -1.453152027f, 1.421413741f, -0.284496736f, 0.254829592f};  // a5 .. a1

LLGA_AVX512 inline __m512 gelu16(__m512 x) {
  const __m512 ax = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff)));
  const __m512 z = _mm512_mul_ps(ax, _mm512_set1_ps(0.70710678118654752f));
  const __m512 d = _mm512_fmadd_ps(_mm512_min_ps(z, _mm512_set1_ps(9.0f)), _mm512_set1_ps(kErfP), _mm512_set1_ps(1.0f));
  __m512 t = _mm512_rcp14_ps(d);
  t = _mm512_mul_ps(t, _mm512_fnmadd_ps(d, t, _mm512_set1_ps(2.0f)));  // Newton step
  __m512 poly = _mm512_set1_ps(kErfA[0]);
#pragma GCC unroll 4
  for (int i = 1; i < 5; ++i) poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(kErfA[i]));
  const __m512 e = vec::expNonPositive16(_mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), z), z));
  const __m512 q = _mm512_mul_ps(_mm512_mul_ps(poly, t), _mm512_mul_ps(e, _mm512_set1_ps(0.5f)));
  const __mmask16 nonneg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ);
  return _mm512_mul_ps(x, _mm512_mask_sub_ps(q, nonneg, _mm512_set1_ps(1.0f), q));
}

LLGA_AVX512 inline __m512 identity16(__m512 x) { return x; }

// range(lo, hi) over [0, n) on llga's threads, in equal parts of whole
// 16-float cache lines; serially below 16k elements a thread.
template <typename Range>
void inParallel(int64_t n, const Range& range) {
  constexpr int64_t kPerThreadMin = 16384;  // below this a fork costs more than it saves
  const int threads = static_cast<int>(std::min<int64_t>(getNumThreads(), std::max<int64_t>(1, n / kPerThreadMin)));
  if (threads <= 1) {
    range(0, n);
    return;
  }
  const int64_t lines = (n + 15) / 16;
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t lo = std::min(n, lines * t / nt * 16), hi = std::min(n, lines * (t + 1) / nt * 16);
    range(lo, hi);
  }
}

// q[i] = narrow(f(p[i])) for i in [begin, end): Out's put16 converts and
// stores 16 lanes, its putTail the first n < 16 of them.
template <__m512 (*f)(__m512), class Out>
LLGA_AVX512 void narrowRange(const float* p, typename Out::T* q, int64_t begin, int64_t end, const Out& out) {
  int64_t i = begin;
  for (; i + 64 <= end; i += 64) {  // four vectors a step, as range16 (their long chains overlap)
    const __m512 a = f(_mm512_loadu_ps(p + i)), b = f(_mm512_loadu_ps(p + i + 16));
    const __m512 c = f(_mm512_loadu_ps(p + i + 32)), d = f(_mm512_loadu_ps(p + i + 48));
    out.put16(q + i, a), out.put16(q + i + 16, b), out.put16(q + i + 32, c), out.put16(q + i + 48, d);
  }
  for (; i + 16 <= end; i += 16) out.put16(q + i, f(_mm512_loadu_ps(p + i)));
  if (i < end) out.putTail(q + i, end - i, f(_mm512_maskz_loadu_ps(vec::tailMask(end - i), p + i)));
}

// saturate(round(y * inv_scale + zero_point)) as u8 (U) or s8; round half
// to even, as oneDNN's int8 dst.
template <bool U>
struct QuantizedOut {
  using T = uint8_t;
  float inv_scale, zero_point;
  LLGA_AVX512 __m512i convert(__m512 y) const {
    const __m512i v = _mm512_cvtps_epi32(_mm512_fmadd_ps(y, _mm512_set1_ps(inv_scale), _mm512_set1_ps(zero_point)));
    return U ? _mm512_max_epi32(v, _mm512_setzero_si512()) : v;  // (vpmovusdb reads dwords as unsigned)
  }
  LLGA_AVX512 void put16(T* q, __m512 y) const {
    if constexpr (U) _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_cvtusepi32_epi8(convert(y)));
    else _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_cvtsepi32_epi8(convert(y)));
  }
  LLGA_AVX512 void putTail(T* q, int64_t n, __m512 y) const {
    if constexpr (U) _mm512_mask_cvtusepi32_storeu_epi8(q, vec::tailMask(n), convert(y));
    else _mm512_mask_cvtsepi32_storeu_epi8(q, vec::tailMask(n), convert(y));
  }
};

// bf16, as vcvtneps2bf16 rounds (vec::bf16Bits16).
struct Bf16Out {
  using T = uint16_t;
  LLGA_AVX512 void put16(T* q, __m512 y) const { vec::storeBf16(q, y, 16); }
  LLGA_AVX512 void putTail(T* q, int64_t n, __m512 y) const { vec::storeBf16(q, y, n); }
};

}  // namespace

bool vec::cpuHasAvx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
}

bool fastSwishEnabled() {
  static const bool cpu = vec::cpuHasAvx512() || cpuHasAvx2Fma();
  return cpu && envSwitchOn("LLGA_FAST_SWISH");
}

void swishInPlace(float* p, int64_t n) {
  inParallel(n, [p](int64_t lo, int64_t hi) { swishAnyRange(p, lo, hi); });
}

bool swishNarrowEnabled() { return fastSwishEnabled() && vec::cpuHasAvx512(); }

void swishQuantize(const float* p, void* q, int64_t n, float inv_scale, int32_t zero_point, bool is_unsigned) {
  auto* out = static_cast<uint8_t*>(q);
  const float zp = static_cast<float>(zero_point);
  if (is_unsigned) inParallel(n, [&](int64_t lo, int64_t hi) { narrowRange<vec::swish16>(p, out, lo, hi, QuantizedOut<true>{inv_scale, zp}); });
  else inParallel(n, [&](int64_t lo, int64_t hi) { narrowRange<vec::swish16>(p, out, lo, hi, QuantizedOut<false>{inv_scale, zp}); });
}

bool fastGeluEnabled() {
  static const bool cpu = vec::cpuHasAvx512();
  return cpu && envSwitchOn("LLGA_FAST_GELU");
}

void geluErfInPlace(float* p, int64_t n) {
  inParallel(n, [p](int64_t lo, int64_t hi) { range16<gelu16>(p, lo, hi); });
}

bool activationToBf16Available(OwnActivation a) {
  switch (a) {
    case OwnActivation::Swish: return swishNarrowEnabled();
    case OwnActivation::GeluErf: return fastGeluEnabled();
    case OwnActivation::None: return vec::cpuHasAvx512();
  }
  return false;
}

void activationToBf16(OwnActivation a, const float* p, uint16_t* q, int64_t n) {
  switch (a) {
    case OwnActivation::Swish:
      return inParallel(n, [&](int64_t lo, int64_t hi) { narrowRange<vec::swish16>(p, q, lo, hi, Bf16Out{}); });
    case OwnActivation::GeluErf:
      return inParallel(n, [&](int64_t lo, int64_t hi) { narrowRange<gelu16>(p, q, lo, hi, Bf16Out{}); });
    case OwnActivation::None:
      return inParallel(n, [&](int64_t lo, int64_t hi) { narrowRange<identity16>(p, q, lo, hi, Bf16Out{}); });
  }
}

void runOwnActivation(OwnActivation a, float* p, int64_t n) {
  switch (a) {
    case OwnActivation::Swish: return swishInPlace(p, n);
    case OwnActivation::GeluErf: return geluErfInPlace(p, n);
    case OwnActivation::None: return;
  }
}

const char* ownActivationSuffix(OwnActivation a) {
  switch (a) {
    case OwnActivation::Swish: return "+llga_swish";
    case OwnActivation::GeluErf: return "+llga_gelu";
    case OwnActivation::None: break;
  }
  return "";
}

}  // namespace llga
