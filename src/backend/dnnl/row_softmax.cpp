#include "backend/dnnl/row_softmax.h"

#include <algorithm>

#include "backend/dnnl/dnnl_utils.h"
#include "backend/dnnl/vec_math.h"
#include "runtime/threads.h"

namespace llga::rowsoftmax {
namespace {

LLGA_AVX512 void rowsOf(const float* src, float* dst, int64_t r0, int64_t r1, int64_t n) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* x = src + r * n;
    float* y = dst + r * n;
    const __m512 inv = _mm512_set1_ps(vec::softmaxNumerators(x, y, n));
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 m = vec::tailMask(n - j);
      _mm512_mask_storeu_ps(y + j, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, y + j), inv));
    }
  }
}

}  // namespace

bool available() {
  return cpuRunsAvx512Kernels() && envSwitchOn("LLGA_OWN_SOFTMAX");
}

void run(const float* src, float* dst, int64_t rows, int64_t n) {
  if (rows <= 0 || n <= 0) return;
  if (rows * n < kParallelGrain) {
    rowsOf(src, dst, 0, rows, n);
    return;
  }
  const int64_t blocks = std::min<int64_t>(rows, 64);
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) rowsOf(src, dst, rows * b / blocks, rows * (b + 1) / blocks, n);
}

}  // namespace llga::rowsoftmax
