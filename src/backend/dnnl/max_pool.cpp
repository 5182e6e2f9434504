#include "backend/dnnl/max_pool.h"

#include <immintrin.h>

#include <algorithm>

#include "backend/dnnl/dnnl_utils.h"
#include "runtime/threads.h"

namespace llga::pool8c {
namespace {

#define LLGA_AVX2 __attribute__((target("avx2")))

// max(m, x) where a NaN in x wins, and stays (max_ps returns its second
// operand when either is NaN: m once NaN is kept).
LLGA_AVX2 inline __m256 maxNan(__m256 m, __m256 x) {
  return _mm256_blendv_ps(_mm256_max_ps(x, m), x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

// One output row of one channel block.
LLGA_AVX2 void row(const Geometry& g, const float* src, float* dst, int64_t oy) {
  const int64_t y0 = oy * g.sh - g.pad_t;
  const int64_t ky0 = std::max<int64_t>(0, -y0), ky1 = std::min(g.kh, g.h - y0);
  for (int64_t ox = 0; ox < g.ow; ++ox) {
    const int64_t x0 = ox * g.sw - g.pad_l;
    const int64_t kx0 = std::max<int64_t>(0, -x0), kx1 = std::min(g.kw, g.w - x0);
    __m256 m = _mm256_set1_ps(-__builtin_inff());
    for (int64_t ky = ky0; ky < ky1; ++ky) {
      const float* p = src + ((y0 + ky) * g.w + x0) * 8;
      for (int64_t kx = kx0; kx < kx1; ++kx) m = maxNan(m, _mm256_loadu_ps(p + kx * 8));
    }
    _mm256_storeu_ps(dst + (oy * g.ow + ox) * 8, m);
  }
}

}  // namespace

bool available() { return cpuRunsAvx2Kernels(); }

void run(const Geometry& g, const float* src, float* dst) {
  const int64_t planes = g.n * (g.c / 8), rows = planes * g.oh;
  const int64_t work = rows * g.ow * g.kh * g.kw * 8;
  const int threads = work < kParallelGrain ? 1 : getNumThreads();
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t plane = r / g.oh, oy = r % g.oh;
    row(g, src + plane * g.h * g.w * 8, dst + plane * g.oh * g.ow * 8, oy);
  }
}

}  // namespace llga::pool8c
