#include "backend/dnnl/swish.h"

#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_ps) when they are inlined here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "runtime/threads.h"

namespace llga {
namespace {

#define LLGA_AVX512 __attribute__((target("avx512f")))

// x * sigmoid(x) for 16 lanes. With a = max(-|x|, -104) (never overflows; e^-104
// is below float's smallest denormal, so the clamp changes nothing):
//   e = exp(a) in (0, 1],  sigmoid(|x|) = 1 / (1 + e),  sigmoid(-|x|) = e / (1 + e).
// exp: a = n ln2 + r, |r| <= ln2/2, degree-6 Taylor for e^r, scaled by 2^n.
LLGA_AVX512 inline __m512 swish16(__m512 x) {
  const __m512 a = _mm512_max_ps(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(x)), _mm512_set1_ps(-104.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(a, _mm512_set1_ps(1.44269504f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145752f), a);  // ln2 split in two parts
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860677e-6f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512 e = _mm512_scalef_ps(p, n);
  const __m512 d = _mm512_add_ps(e, _mm512_set1_ps(1.0f));  // in [1, 2]
  __m512 inv = _mm512_rcp14_ps(d);
  inv = _mm512_mul_ps(inv, _mm512_fnmadd_ps(d, inv, _mm512_set1_ps(2.0f)));  // Newton step
  const __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
  const __m512 sig = _mm512_mask_mul_ps(inv, neg, inv, e);
  __m512 out = _mm512_mul_ps(x, sig);
  // -inf * sigmoid(-inf) is -inf * 0: NaN in PyTorch, not the -inf above.
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __mmask16 minus_inf = _mm512_cmp_ps_mask(x, ninf, _CMP_EQ_OQ);
  return _mm512_mask_mov_ps(out, minus_inf, _mm512_set1_ps(std::numeric_limits<float>::quiet_NaN()));
}

LLGA_AVX512 void swishRange(float* p, int64_t begin, int64_t end) {
  int64_t i = begin;
  for (; i + 32 <= end; i += 32) {  // two vectors per step: independent chains overlap
    __m512 a = _mm512_loadu_ps(p + i), b = _mm512_loadu_ps(p + i + 16);
    _mm512_storeu_ps(p + i, swish16(a));
    _mm512_storeu_ps(p + i + 16, swish16(b));
  }
  for (; i + 16 <= end; i += 16) _mm512_storeu_ps(p + i, swish16(_mm512_loadu_ps(p + i)));
  if (i < end) {
    const __mmask16 m = static_cast<__mmask16>((1u << (end - i)) - 1);
    _mm512_mask_storeu_ps(p + i, m, swish16(_mm512_maskz_loadu_ps(m, p + i)));
  }
}

bool cpuHasAvx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
}

}  // namespace

bool fastSwishEnabled() {
  static const bool cpu = cpuHasAvx512();
  const char* env = std::getenv("LLGA_FAST_SWISH");
  return cpu && !(env && std::strcmp(env, "0") == 0);
}

void swishInPlace(float* p, int64_t n) {
  constexpr int64_t kPerThreadMin = 16384;  // below this a fork costs more than it saves
  const int threads = static_cast<int>(std::min<int64_t>(getNumThreads(), std::max<int64_t>(1, n / kPerThreadMin)));
  if (threads <= 1) {
    swishRange(p, 0, n);
    return;
  }
  // Equal parts, each a whole number of cache lines (16 floats).
  const int64_t lines = (n + 15) / 16;
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t lo = std::min(n, lines * t / nt * 16), hi = std::min(n, lines * (t + 1) / nt * 16);
    swishRange(p, lo, hi);
  }
}

}  // namespace llga
