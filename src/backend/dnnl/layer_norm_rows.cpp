#include "backend/dnnl/layer_norm_rows.h"

#include <algorithm>
#include <cmath>

#include "backend/dnnl/dnnl_utils.h"
#include "backend/dnnl/vec_math.h"
#include "runtime/threads.h"

namespace llga::lnrows {
namespace {

// Two passes for the statistics (the sum, then the squared deviations from
// the mean: no cancellation), both over a row the first brought into L1.
LLGA_AVX512 void rowsOf(const float* src, uint16_t* dst, int64_t r0, int64_t r1, int64_t n, const float* w,
                        const float* b, float eps) {
  const float inv_n = 1.0f / static_cast<float>(n);
  for (int64_t r = r0; r < r1; ++r) {
    const float* x = src + r * n;
    uint16_t* y = dst + r * n;
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t j = 0;
    for (; j + 32 <= n; j += 32) {
      s0 = _mm512_add_ps(s0, _mm512_loadu_ps(x + j));
      s1 = _mm512_add_ps(s1, _mm512_loadu_ps(x + j + 16));
    }
    for (; j < n; j += 16) s0 = _mm512_add_ps(s0, _mm512_maskz_loadu_ps(vec::tailMask(n - j), x + j));
    const float mean = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1)) * inv_n;
    const __m512 vmean = _mm512_set1_ps(mean);
    s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    for (j = 0; j + 32 <= n; j += 32) {
      const __m512 d0 = _mm512_sub_ps(_mm512_loadu_ps(x + j), vmean), d1 = _mm512_sub_ps(_mm512_loadu_ps(x + j + 16), vmean);
      s0 = _mm512_fmadd_ps(d0, d0, s0);
      s1 = _mm512_fmadd_ps(d1, d1, s1);
    }
    for (; j < n; j += 16) {
      const __mmask16 m = vec::tailMask(n - j);
      const __m512 d = _mm512_maskz_sub_ps(m, _mm512_maskz_loadu_ps(m, x + j), vmean);
      s0 = _mm512_fmadd_ps(d, d, s0);
    }
    const float var = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1)) * inv_n;
    const __m512 rstd = _mm512_set1_ps(1.0f / std::sqrt(var + eps));
    for (j = 0; j < n; j += 16) {
      const __mmask16 m = vec::tailMask(n - j);
      __m512 v = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + j), vmean), rstd);
      if (w) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, w + j));
      if (b) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, b + j));
      vec::storeBf16(y + j, v, n - j);  // nothing past the row is written
    }
  }
}

}  // namespace

bool available() { return cpuRunsAvx512Kernels(); }

void toBf16(const float* src, uint16_t* dst, int64_t rows, int64_t n, const float* w, const float* b, float eps) {
  if (rows <= 0 || n <= 0) return;
  if (rows * n < kParallelGrain) {
    rowsOf(src, dst, 0, rows, n, w, b, eps);
    return;
  }
  const int64_t blocks = std::min<int64_t>(rows, 64);
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < blocks; ++k) rowsOf(src, dst, rows * k / blocks, rows * (k + 1) / blocks, n, w, b, eps);
}

}  // namespace llga::lnrows
