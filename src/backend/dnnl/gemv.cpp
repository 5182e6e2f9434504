#include "backend/dnnl/gemv.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "backend/dnnl/vec_math.h"
#include "runtime/threads.h"

#define LLGA_AVX512 __attribute__((target("avx512f")))

namespace llga::gemv {
namespace {

LLGA_AVX512 __m512 apply(__m512 v, const Step& s) {
  switch (s.kind) {
    case Step::Kind::Relu:  // (a slope of 0 as max(0, v): -inf * 0 would be NaN; v second: a NaN stays NaN)
      if (s.alpha == 0.0f) return _mm512_max_ps(_mm512_setzero_ps(), v);
      return _mm512_mask_mul_ps(v, _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ), v, _mm512_set1_ps(s.alpha));
    case Step::Kind::Clip:  // v second: a NaN stays NaN (PyTorch's clamp)
      return _mm512_min_ps(_mm512_set1_ps(s.beta), _mm512_max_ps(_mm512_set1_ps(s.alpha), v));
    case Step::Kind::Linear: return _mm512_fmadd_ps(v, _mm512_set1_ps(s.alpha), _mm512_set1_ps(s.beta));
    case Step::Kind::Sigmoid: return vec::sigmoid16(v);
    case Step::Kind::Swish: return _mm512_mul_ps(v, vec::sigmoid16(_mm512_mul_ps(v, _mm512_set1_ps(s.alpha))));
  }
  return v;
}

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
  for (const Step& step : steps) s = apply(s, step);
  _mm512_mask_storeu_ps(y, m, s);
}

void panels(const float* x, const float* b, int64_t k, int64_t n, const float* bias, float* y,
            const std::vector<Step>& steps, int64_t begin, int64_t end) {
  for (int64_t p = begin; p < end; ++p)
    panel(x, b + p * k * kPanel, k, bias ? bias + p * kPanel : nullptr, y + p * kPanel, std::min(kPanel, n - p * kPanel),
          steps);
}

}  // namespace

bool available() {
  static const bool isa = [] {
    switch (dnnl::get_effective_cpu_isa()) {
      case dnnl::cpu_isa::avx512_core:
      case dnnl::cpu_isa::avx512_core_vnni:
      case dnnl::cpu_isa::avx512_core_bf16:
      case dnnl::cpu_isa::avx512_core_amx: return true;
      default: return false;
    }
  }();
  const char* env = std::getenv("LLGA_GEMV");  // read per decision (a product's first call), as LLGA_WINOGRAD
  return isa && !(env && std::strcmp(env, "0") == 0);
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

std::optional<std::vector<Step>> stepsOf(const std::vector<PostOp>& ops) {
  std::vector<Step> steps;
  using K = Step::Kind;
  for (const PostOp& op : ops) {
    if (op.kind != PostOp::Kind::Eltwise) return std::nullopt;
    switch (op.alg) {
      case PostOpAlg::Relu: steps.push_back({K::Relu, op.alpha, 0}); break;
      case PostOpAlg::Clip: steps.push_back({K::Clip, op.alpha, op.beta}); break;
      case PostOpAlg::Linear: steps.push_back({K::Linear, op.alpha, op.beta}); break;
      case PostOpAlg::Logistic: steps.push_back({K::Sigmoid, 0, 0}); break;
      case PostOpAlg::Swish: steps.push_back({K::Swish, op.alpha, 0}); break;
      default: return std::nullopt;
    }
  }
  return steps;
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

}  // namespace llga::gemv
