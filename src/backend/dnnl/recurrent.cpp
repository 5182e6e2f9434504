#include "backend/dnnl/recurrent.h"

#include <algorithm>
#include <cstring>

#include "backend/dnnl/dnnl_utils.h"
#include "backend/dnnl/vec_math.h"

namespace llga::recurrent {
namespace {

constexpr int64_t kL = 16;  // floats a vector
constexpr int kRows = 4;     // sequences a pass over W_hh serves (its reads from L2 bound a step)

// hg[r][0, ldw) = b + sum_p h[r][p] * wt[p][0, ldw) for R sequences: U vectors from column j0.
template <int R, int U>
LLGA_AVX512 void iterProduct(const IterWeights& w, const float* const* h, float* hg, int64_t j0) {
  __m512 acc[R][U];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int u = 0; u < U; ++u) acc[r][u] = _mm512_loadu_ps(w.bias() + j0 + u * kL);
  const float* col = w.wt() + j0;
  for (int64_t p = 0; p < w.p; ++p, col += w.ldw) {
    __m512 wv[U];
#pragma GCC unroll 8
    for (int u = 0; u < U; ++u) wv[u] = _mm512_loadu_ps(col + u * kL);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512 hp = _mm512_set1_ps(h[r][p]);
#pragma GCC unroll 8
      for (int u = 0; u < U; ++u) acc[r][u] = _mm512_fmadd_ps(hp, wv[u], acc[r][u]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int u = 0; u < U; ++u) _mm512_storeu_ps(hg + r * w.ldw + j0 + u * kL, acc[r][u]);
}

// The columns from j0 with the largest U <= `vectors` (1..U) of the template.
template <int R, int U>
LLGA_AVX512 void productColumns(const IterWeights& w, const float* const* h, float* hg, int64_t j0, int64_t vectors) {
  if constexpr (U > 1)
    if (vectors < U) return productColumns<R, U - 1>(w, h, hg, j0, vectors);
  iterProduct<R, U>(w, h, hg, j0);
}

// Up to kMax vectors of the R rows' accumulators in registers (R * kMax + kMax <= 32 zmm).
template <int R>
LLGA_AVX512 void productRows(const IterWeights& w, const float* const* h, float* hg) {
  constexpr int kMax = R <= 2 ? 8 : R == 3 ? 6 : 5;
  for (int64_t j0 = 0; j0 < w.ldw; j0 += kMax * kL)
    productColumns<R, kMax>(w, h, hg, j0, std::min<int64_t>(kMax, (w.ldw - j0) / kL));
}

// hg[r] = W_hh h[r] + b_hh for `rows` (1..kRows) sequences, one pass over W_hh.
LLGA_AVX512 void product(const IterWeights& w, const float* const* h, int rows, float* hg) {
  switch (rows) {
    case 1: return productRows<1>(w, h, hg);
    case 2: return productRows<2>(w, h, hg);
    case 3: return productRows<3>(w, h, hg);
    default: return productRows<4>(w, h, hg);
  }
}

// 1 / (1 + e^-x), from e^-|x| (never overflows); NaN stays NaN.
LLGA_AVX512 inline __m512 sigmoid16(__m512 x) {
  const __m512 abs = _mm512_abs_ps(x);
  const __m512 e = vec::expNonPositive16(_mm512_sub_ps(_mm512_setzero_ps(), abs));
  const __m512 r = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
  const __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
  return _mm512_mask_mul_ps(r, neg, e, r);  // x < 0: e^x / (1 + e^x)
}

// tanh: sign(x) (1 - e) / (1 + e) with e = e^-2|x|; below |x| = 1/16 the
// series x - x^3/3 + 2x^5/15 - 17x^7/315 (next term < 3e-13 there), where
// 1 - e would lose the low bits. NaN stays NaN.
LLGA_AVX512 inline __m512 tanh16(__m512 x) {
  const __m512 abs = _mm512_abs_ps(x);
  const __m512 e = vec::expNonPositive16(_mm512_mul_ps(abs, _mm512_set1_ps(-2.0f)));
  const __m512 big = _mm512_div_ps(_mm512_sub_ps(_mm512_set1_ps(1.0f), e), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
  const __m512 signed_big = _mm512_castsi512_ps(_mm512_or_si512(
      _mm512_castps_si512(big), _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN))));
  const __m512 x2 = _mm512_mul_ps(x, x);
  __m512 s = _mm512_set1_ps(-17.0f / 315.0f);
  s = _mm512_fmadd_ps(s, x2, _mm512_set1_ps(2.0f / 15.0f));
  s = _mm512_fmadd_ps(s, x2, _mm512_set1_ps(-1.0f / 3.0f));
  s = _mm512_mul_ps(s, x2);
  const __m512 small = _mm512_fmadd_ps(s, x, x);
  const __mmask16 is_small = _mm512_cmp_ps_mask(abs, _mm512_set1_ps(0.0625f), _CMP_LT_OQ);
  return _mm512_mask_blend_ps(is_small, signed_big, small);
}

LLGA_AVX512 inline __m512 load(__mmask16 m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }

// One sequence's step: the gates from xg (input projection) and hg (W_hh h + b_hh), h_prev -> h (and c in place).
LLGA_AVX512 void cellStep(Cell cell, int64_t H, const float* xg, const float* hg, const float* h_prev, float* c,
                          float* h) {
  for (int64_t j = 0; j < H; j += kL) {
    const __mmask16 m = H - j >= kL ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (H - j)) - 1);
    const float *x = xg + j, *r = hg + j;
    __m512 out;
    switch (cell) {
      case Cell::Lstm: {
        const __m512 i = sigmoid16(_mm512_add_ps(load(m, x), load(m, r)));
        const __m512 f = sigmoid16(_mm512_add_ps(load(m, x + H), load(m, r + H)));
        const __m512 g = tanh16(_mm512_add_ps(load(m, x + 2 * H), load(m, r + 2 * H)));
        const __m512 o = sigmoid16(_mm512_add_ps(load(m, x + 3 * H), load(m, r + 3 * H)));
        const __m512 cn = _mm512_fmadd_ps(f, load(m, c + j), _mm512_mul_ps(i, g));
        _mm512_mask_storeu_ps(c + j, m, cn);
        out = _mm512_mul_ps(o, tanh16(cn));
        break;
      }
      case Cell::Gru: {
        const __m512 rg = sigmoid16(_mm512_add_ps(load(m, x), load(m, r)));
        const __m512 z = sigmoid16(_mm512_add_ps(load(m, x + H), load(m, r + H)));
        const __m512 n = tanh16(_mm512_fmadd_ps(rg, load(m, r + 2 * H), load(m, x + 2 * H)));
        out = _mm512_fmadd_ps(z, _mm512_sub_ps(load(m, h_prev + j), n), n);
        break;
      }
      case Cell::RnnTanh: out = tanh16(_mm512_add_ps(load(m, x), load(m, r))); break;
      default: {  // relu; max(x, 0) would turn a NaN into 0: keep PyTorch's NaN
        const __m512 v = _mm512_add_ps(load(m, x), load(m, r));
        out = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ), _mm512_setzero_ps());
      }
    }
    _mm512_mask_storeu_ps(h + j, m, out);
  }
}

}  // namespace

bool available() {
  static const bool cpu = vec::cpuHasAvx512();
  return cpu && envSwitchOn("LLGA_OWN_RNN");
}

int64_t gatesOf(Cell c) { return c == Cell::Lstm ? 4 : c == Cell::Gru ? 3 : 1; }

IterWeights prepareIter(const float* w_hh, int64_t w_stride, const float* b_hh, int64_t gh, int64_t p) {
  IterWeights w;
  w.gh = gh;
  w.p = p;
  w.ldw = (gh + kL - 1) / kL * kL;
  w.w = Storage::allocate(static_cast<size_t>(std::max<int64_t>(1, p * w.ldw)) * sizeof(float), AllocPurpose::WeightCache);
  w.b = Storage::allocate(static_cast<size_t>(w.ldw) * sizeof(float), AllocPurpose::WeightCache);
  float* wt = static_cast<float*>(w.w->data);
  float* b = static_cast<float*>(w.b->data);
  std::memset(wt, 0, static_cast<size_t>(p * w.ldw) * sizeof(float));
  std::memset(b, 0, static_cast<size_t>(w.ldw) * sizeof(float));
  for (int64_t o = 0; o < gh; ++o)
    for (int64_t i = 0; i < p; ++i) wt[i * w.ldw + o] = w_hh[o * w_stride + i];
  if (b_hh) std::memcpy(b, b_hh, static_cast<size_t>(gh) * sizeof(float));
  return w;
}

size_t scratchFloats(const IterWeights& w, int64_t N, int64_t H) { return static_cast<size_t>(kRows * w.ldw + N * H); }

void run(const Direction& d, const IterWeights& w, float* scratch) {
  float* hg = scratch;                // [kRows][ldw]: the sequences at hand
  float* c = scratch + kRows * w.ldw;  // [N][H]: LSTM's cell states
  const int64_t H = d.H;
  if (d.cell == Cell::Lstm) std::memcpy(c, d.c0, static_cast<size_t>(d.N * H) * sizeof(float));
  for (int64_t s = 0; s < d.T; ++s) {
    const int64_t t = d.reverse ? d.T - 1 - s : s, prev = d.reverse ? t + 1 : t - 1;
    for (int64_t n0 = 0; n0 < d.N; n0 += kRows) {
      const int rows = static_cast<int>(std::min<int64_t>(kRows, d.N - n0));
      const float* h_prev[kRows];
      for (int r = 0; r < rows; ++r)
        h_prev[r] = s == 0 ? d.h0 + (n0 + r) * H : d.out + prev * d.out_t + (n0 + r) * d.out_n;
      product(w, h_prev, rows, hg);
      for (int r = 0; r < rows; ++r) {
        const int64_t n = n0 + r;
        cellStep(d.cell, H, d.xg + t * d.xg_t + n * d.xg_n, hg + r * w.ldw, h_prev[r], c + n * H,
                 d.out + t * d.out_t + n * d.out_n);
      }
    }
  }
  const int64_t last = d.reverse ? 0 : d.T - 1;
  for (int64_t n = 0; n < d.N; ++n) {
    std::memcpy(d.hT + n * H, d.out + last * d.out_t + n * d.out_n, static_cast<size_t>(H) * sizeof(float));
    if (d.cell == Cell::Lstm) std::memcpy(d.cT + n * H, c + n * H, static_cast<size_t>(H) * sizeof(float));
  }
}

}  // namespace llga::recurrent
