#include "backend/dnnl/gemv.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "backend/dnnl/dnnl_utils.h"
#include "backend/dnnl/vec_math.h"
#include "runtime/threads.h"

namespace llga::gemv {
namespace {

// One panel: 16 columns of y from k rows of 16 weights.
LLGA_AVX512 void panel(const float* x, const float* w, int64_t k, const float* bias, float* y, int64_t cols,
                       const std::vector<Step>& steps) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 4 <= k; i += 4, w += 4 * kPanel) {
    a0 = _mm512_fmadd_ps(_mm512_set1_ps(x[i]), _mm512_loadu_ps(w), a0);
    a1 = _mm512_fmadd_ps(_mm512_set1_ps(x[i + 1]), _mm512_loadu_ps(w + kPanel), a1);
    a2 = _mm512_fmadd_ps(_mm512_set1_ps(x[i + 2]), _mm512_loadu_ps(w + 2 * kPanel), a2);
    a3 = _mm512_fmadd_ps(_mm512_set1_ps(x[i + 3]), _mm512_loadu_ps(w + 3 * kPanel), a3);
  }
  for (; i < k; ++i, w += kPanel) a0 = _mm512_fmadd_ps(_mm512_set1_ps(x[i]), _mm512_loadu_ps(w), a0);
  // (the padded columns hold 0 x x[i], NaN where x[i] is not finite: never stored)
  const __mmask16 m = cols >= kPanel ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << cols) - 1);
  __m512 s = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
  if (bias) s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(m, bias));
  for (const Step& step : steps) s = vec::applyStep16(s, step);
  _mm512_mask_storeu_ps(y, m, s);
}

// The same panel with AVX2 and FMA: each row of 16 weights two vectors of 8,
// four rows a step in eight accumulators; the steps on 8 lanes
// (vec::applyStep8), a partial panel through a buffer of 16.
LLGA_AVX2_FMA void panelAvx2(const float* x, const float* w, int64_t k, const float* bias, float* y, int64_t cols,
                             const std::vector<Step>& steps) {
  __m256 lo[4], hi[4];
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) lo[r] = hi[r] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 4 <= k; i += 4, w += 4 * kPanel) {
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const __m256 xr = _mm256_broadcast_ss(x + i + r);
      lo[r] = _mm256_fmadd_ps(xr, _mm256_loadu_ps(w + r * kPanel), lo[r]);
      hi[r] = _mm256_fmadd_ps(xr, _mm256_loadu_ps(w + r * kPanel + 8), hi[r]);
    }
  }
  for (; i < k; ++i, w += kPanel) {
    const __m256 xr = _mm256_broadcast_ss(x + i);
    lo[0] = _mm256_fmadd_ps(xr, _mm256_loadu_ps(w), lo[0]);
    hi[0] = _mm256_fmadd_ps(xr, _mm256_loadu_ps(w + 8), hi[0]);
  }
  alignas(32) float out[kPanel] = {};
  const bool whole = cols >= kPanel;
  float* dst = whole ? y : out;
  __m256 s[2] = {_mm256_add_ps(_mm256_add_ps(lo[0], lo[1]), _mm256_add_ps(lo[2], lo[3])),
                 _mm256_add_ps(_mm256_add_ps(hi[0], hi[1]), _mm256_add_ps(hi[2], hi[3]))};
  if (bias) {
    if (!whole) std::copy(bias, bias + cols, out);  // (the padded columns are never stored)
    const float* b = whole ? bias : out;
    s[0] = _mm256_add_ps(s[0], _mm256_loadu_ps(b));
    s[1] = _mm256_add_ps(s[1], _mm256_loadu_ps(b + 8));
  }
  for (const Step& step : steps) {
    s[0] = vec::applyStep8(s[0], step);
    s[1] = vec::applyStep8(s[1], step);
  }
  _mm256_storeu_ps(dst, s[0]);
  _mm256_storeu_ps(dst + 8, s[1]);
  if (!whole) std::copy(out, out + cols, y);
}

void panels(const float* x, const float* b, int64_t k, int64_t n, const float* bias, float* y,
            const std::vector<Step>& steps, int64_t begin, int64_t end) {
  static const auto one = cpuRunsAvx512Kernels() ? panel : panelAvx2;
  for (int64_t p = begin; p < end; ++p)
    one(x, b + p * k * kPanel, k, bias ? bias + p * kPanel : nullptr, y + p * kPanel, std::min(kPanel, n - p * kPanel),
        steps);
}

// acc + one pair of rows (16 columns, two bf16 each) times the pair of x values in xx.
LLGA_AVX512_BF16 inline __m512 dot(__m512 acc, uint32_t xx, const uint16_t* w) {
  return _mm512_dpbf16_ps(acc, (__m512bh)_mm512_set1_epi32(static_cast<int>(xx)), (__m512bh)_mm512_loadu_si512(w));
}

// One bf16 panel: `pairs` pairs of rows, x as bf16 pairs (one dword each).
LLGA_AVX512_BF16 void panelBf16(const uint32_t* xp, const uint16_t* w, int64_t pairs, const float* bias, float* y,
                                int64_t cols, const std::vector<Step>& steps) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 4 <= pairs; i += 4, w += 8 * kPanel) {
    a0 = dot(a0, xp[i], w);
    a1 = dot(a1, xp[i + 1], w + 2 * kPanel);
    a2 = dot(a2, xp[i + 2], w + 4 * kPanel);
    a3 = dot(a3, xp[i + 3], w + 6 * kPanel);
  }
  for (; i < pairs; ++i, w += 2 * kPanel) a0 = dot(a0, xp[i], w);
  const __mmask16 m = cols >= kPanel ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << cols) - 1);
  __m512 s = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
  if (bias) s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(m, bias));
  for (const Step& step : steps) s = vec::applyStep16(s, step);
  _mm512_mask_storeu_ps(y, m, s);
}

// x rounded to bf16 (to nearest even), in pairs: xp[i] = bf16(x[2i]) | bf16(x[2i + 1]) << 16, a 0 past k.
LLGA_AVX512_BF16 void roundPairs(const float* x, int64_t k, uint32_t* xp) {
  int64_t i = 0;
  for (; i + 16 <= k; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(xp + i / 2), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(x + i)));
  if (i < k) {
    const __mmask16 m = static_cast<__mmask16>((1u << (k - i)) - 1);
    alignas(32) uint16_t last[16];
    _mm256_store_si256(reinterpret_cast<__m256i*>(last), (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x + i)));
    std::memcpy(xp + i / 2, last, static_cast<size_t>((k - i + 1) / 2) * sizeof(uint32_t));
  }
}

void panelsBf16(const uint32_t* xp, const uint16_t* b, int64_t pairs, int64_t n, const float* bias, float* y,
                const std::vector<Step>& steps, int64_t begin, int64_t end) {
  for (int64_t p = begin; p < end; ++p)
    panelBf16(xp, b + p * pairs * 2 * kPanel, pairs, bias ? bias + p * kPanel : nullptr, y + p * kPanel,
              std::min(kPanel, n - p * kPanel), steps);
}

bool switchedOn() {
  return envSwitchOn("LLGA_GEMV");  // read per decision (a product's first call)
}

}  // namespace

bool available() { return (cpuRunsAvx512Kernels() || cpuRunsAvx2Kernels()) && switchedOn(); }

const char* implName() { return cpuRunsAvx512Kernels() ? "llga_gemv:avx512" : "llga_gemv:avx2"; }

bool availableBf16() {
  static const bool isa = [] {
    const dnnl::cpu_isa i = dnnl::get_effective_cpu_isa();
    return i == dnnl::cpu_isa::avx512_core_bf16 || i == dnnl::cpu_isa::avx512_core_amx;
  }();
  return isa && switchedOn();
}

dnnl::memory::desc panelDesc(int64_t k, int64_t n) {
  if (k < 1 || n < 1)
    throw std::invalid_argument("gemv::panelDesc: a " + std::to_string(k) + " x " + std::to_string(n) + " product");
  dnnl::memory::desc md({k, n}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab);
  dnnl_memory_desc_t& d = md.data;
  d.padded_dims[1] = (n + kPanel - 1) / kPanel * kPanel;
  dnnl_blocking_desc_t& bl = d.format_desc.blocking;
  bl.inner_nblks = 1;
  bl.inner_blks[0] = kPanel;
  bl.inner_idxs[0] = 1;
  bl.strides[0] = kPanel;      // a row of one panel
  bl.strides[1] = k * kPanel;  // a panel (per block of 16 columns)
  return md;
}

dnnl::memory::desc panelDescBf16(int64_t k, int64_t n) {
  if (k < 1 || n < 1)
    throw std::invalid_argument("gemv::panelDescBf16: a " + std::to_string(k) + " x " + std::to_string(n) + " product");
  dnnl::memory::desc md({k, n}, dnnl::memory::data_type::bf16, dnnl::memory::format_tag::ab);
  dnnl_memory_desc_t& d = md.data;
  const int64_t pairs = (k + 1) / 2;
  d.padded_dims[0] = 2 * pairs;
  d.padded_dims[1] = (n + kPanel - 1) / kPanel * kPanel;
  dnnl_blocking_desc_t& bl = d.format_desc.blocking;
  bl.inner_nblks = 2;  // 16 columns, then the pair of rows innermost
  bl.inner_blks[0] = kPanel;
  bl.inner_idxs[0] = 1;
  bl.inner_blks[1] = 2;
  bl.inner_idxs[1] = 0;
  bl.strides[0] = 2 * kPanel;          // a pair of rows of one panel
  bl.strides[1] = pairs * 2 * kPanel;  // a panel
  return md;
}

void run(const float* x, const float* b_panels, int64_t k, int64_t n, const float* bias, float* y,
         const std::vector<Step>& steps) {
  const int64_t count = (n + kPanel - 1) / kPanel;
  const int threads = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), count));
  if (threads <= 1 || k * n < kSerialMacs || omp_in_parallel()) {  // no team (parallelFor's reason)
    panels(x, b_panels, k, n, bias, y, steps, 0, count);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    panels(x, b_panels, k, n, bias, y, steps, count * t / nt, count * (t + 1) / nt);
  }
}

void runBf16(const float* x, const uint16_t* b_panels, int64_t k, int64_t n, const float* bias, float* y,
             const std::vector<Step>& steps) {
  const int64_t pairs = (k + 1) / 2, count = (n + kPanel - 1) / kPanel;
  thread_local std::vector<uint32_t> xp;  // reused: no allocation per call
  xp.assign(static_cast<size_t>(pairs), 0u);
  roundPairs(x, k, xp.data());
  const int threads = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), count));
  if (threads <= 1 || k * n < kSerialMacs || omp_in_parallel()) {
    panelsBf16(xp.data(), b_panels, pairs, n, bias, y, steps, 0, count);
    return;
  }
  const uint32_t* shared = xp.data();  // (thread_local: the team reads the caller's)
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    panelsBf16(shared, b_panels, pairs, n, bias, y, steps, count * t / nt, count * (t + 1) / nt);
  }
}

}  // namespace llga::gemv
