// Vector math llga's own AVX-512 and AVX2 kernels share (swish, fused attention,
// softmax, the one-row product's steps).
// Header-only: each function carries its target attribute, so a file that
// includes it needs no -mavx512f and calls it only where the CPU has it.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_ps) when they are inlined here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backend/dnnl/eltwise_step.h"

#define LLGA_AVX512 __attribute__((target("avx512f")))
#define LLGA_AVX2_FMA __attribute__((target("avx2,fma")))
// AVX512-BF16's vdpbf16ps and conversions, with AVX512-BW/VL for their operands.
#define LLGA_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
// AMX tiles with bf16 products (Sapphire Rapids and later), AVX-512 around them.
#define LLGA_AMX __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,amx-tile,amx-bf16")))

namespace llga::vec {

// exp for a <= 0: n = round(a log2e), r = a - n ln2 with ln2 in two parts,
// e^r by a polynomial, scaled by 2^n; 0 below -87.
constexpr float kExpFloor = -104.0f, kLog2e = 1.44269504f, kLn2Hi = 0.693145752f, kLn2Lo = 1.42860677e-6f;
// Below this e^a is flushed to 0 instead of computed: from a >= -87 the
// result is at least 2^-126 (float's smallest normal); scalef writing a
// denormal takes a microcode assist (~100+ cycles), which a softmax row with
// an additive -10000 mask (BERT's) hit on every masked score.
constexpr float kExpNormalFloor = -87.0f;
// e^r on |r| <= ln2/2: degree 5, fitted to the relative error with the
// constant term held at 1 (iteratively reweighted least squares on Chebyshev
// nodes): 1.7e-7 evaluated in float, one FMA fewer than Taylor's degree 6,
// highest power first.
constexpr float kExpPoly5[] = {8.290370926e-03f, 4.189793020e-02f, 1.666763574e-01f, 4.999915063e-01f,
                               9.999997020e-01f, 1.0f};

// e^a for 16 lanes of a <= 0 (or NaN, which stays NaN); 0 for a < -87 (and
// -inf), never a denormal (e^-87 is 1.6e-38).
LLGA_AVX512 inline __m512 expNonPositive16(__m512 a) {
  const __mmask16 normal = _mm512_cmp_ps_mask(a, _mm512_set1_ps(kExpNormalFloor), _CMP_NLT_UQ);  // NaN too
  a = _mm512_max_ps(_mm512_set1_ps(kExpNormalFloor), a);  // the second operand when NaN: a NaN stays
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(a, _mm512_set1_ps(kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), a);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kExpPoly5[0]);
#pragma GCC unroll 5
  for (int i = 1; i < 6; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpPoly5[i]));
  return _mm512_maskz_scalef_ps(normal, p, n);
}

// e = exp(-|x|) in [0, 1] (0 below -87: expNonPositive16 never writes a
// denormal) and 1 / (1 + e), for swish16 and sigmoid16. The divide is a
// reciprocal estimate and one Newton step (vdivps issues about once per
// 10-16 cycles).
struct ExpNegAbs16 {
  __m512 e, inv;
};
LLGA_AVX512 inline ExpNegAbs16 expNegAbs16(__m512 x) {
  const __m512 minus_abs = _mm512_castsi512_ps(
      _mm512_or_si512(_mm512_castps_si512(x), _mm512_set1_epi32(static_cast<int>(0x80000000u))));
  const __m512 e = expNonPositive16(minus_abs);
  const __m512 d = _mm512_add_ps(e, _mm512_set1_ps(1.0f));  // in [1, 2]
  __m512 inv = _mm512_rcp14_ps(d);
  inv = _mm512_mul_ps(inv, _mm512_fnmadd_ps(d, inv, _mm512_set1_ps(2.0f)));  // Newton step
  return {e, inv};
}

// x * sigmoid(x) for 16 lanes. With e = exp(-|x|) (expNegAbs16),
//   x * sigmoid(x) = (x < 0 ? x * e : x) / (1 + e).
// No special case: e is 0 there, so -inf gives
// -inf * 0 = NaN as PyTorch's silu(-inf) does, and x < -87 gives x * 0 = -0
// (PyTorch's is at most 7e-38 in magnitude). 20 vector instructions, ~20%
// faster than the earlier form (degree-6 Taylor, |x| as 0 - abs(x), a
// compare and blend for -inf).
LLGA_AVX512 inline __m512 swish16(__m512 x) {
  const ExpNegAbs16 q = expNegAbs16(x);
  const __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
  return _mm512_mul_ps(_mm512_mask_mul_ps(x, neg, x, q.e), q.inv);
}

// sigmoid(x) for 16 lanes: with e = exp(-|x|) (expNegAbs16),
//   sigmoid(x) = (x < 0 ? e : 1) / (1 + e).
// +inf gives 1, -inf 0, NaN stays NaN.
LLGA_AVX512 inline __m512 sigmoid16(__m512 x) {
  const ExpNegAbs16 q = expNegAbs16(x);
  const __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
  return _mm512_mul_ps(_mm512_mask_mov_ps(_mm512_set1_ps(1.0f), neg, q.e), q.inv);
}

// One eltwise step over 16 lanes. A relu of slope 0 is max(0, v) (-inf * 0
// would be NaN); relu and clip keep a NaN (v is max's second operand), as
// PyTorch's do.
LLGA_AVX512 inline __m512 applyStep16(__m512 v, const Step& s) {
  switch (s.kind) {
    case Step::Kind::Relu:
      if (s.alpha == 0.0f) return _mm512_max_ps(_mm512_setzero_ps(), v);
      return _mm512_mask_mul_ps(v, _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ), v, _mm512_set1_ps(s.alpha));
    case Step::Kind::Clip: return _mm512_min_ps(_mm512_set1_ps(s.beta), _mm512_max_ps(_mm512_set1_ps(s.alpha), v));
    case Step::Kind::Linear: return _mm512_fmadd_ps(v, _mm512_set1_ps(s.alpha), _mm512_set1_ps(s.beta));
    case Step::Kind::Sigmoid: return sigmoid16(v);
    case Step::Kind::Swish:
      return s.alpha == 1.0f ? swish16(v) : _mm512_mul_ps(v, sigmoid16(_mm512_mul_ps(v, _mm512_set1_ps(s.alpha))));
  }
  return v;
}

// The same steps on 8 lanes with AVX2 and FMA (the one-row product on a CPU
// without AVX-512). e^(-|x|) as the AVX2 swish computes it: -|x| clamped at
// -104, e^r by degree-6 Taylor, and 2^n (n in [-150, 0]) as 2^(n + 64) *
// 2^-64, so that without scalef the product rounds into the denormals once.
constexpr float kTaylor6[] = {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f};

LLGA_AVX2_FMA inline __m256 expNegAbs8(__m256 x) {
  const __m256 a = _mm256_max_ps(_mm256_or_ps(x, _mm256_set1_ps(-0.0f)), _mm256_set1_ps(kExpFloor));  // -|x|, clamped
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(a, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), a);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kTaylor6[0]);
#pragma GCC unroll 6
  for (int i = 1; i < 7; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kTaylor6[i]));
  const __m256i up = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127 + 64)), 23);
  return _mm256_mul_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(up)), _mm256_set1_ps(0x1p-64f));
}

// x sigmoid(x) = (x < 0 ? x e : x) / (1 + e), e = e^(-|x|): the divide is one
// instruction off the FMA ports. No -inf case: at the clamp e rounds to 0, so
// -inf * e is NaN as PyTorch's silu(-inf) is; a NaN x stays NaN.
LLGA_AVX2_FMA inline __m256 swish8(__m256 x) {
  const __m256 e = expNegAbs8(x);
  const __m256 neg = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
  return _mm256_div_ps(_mm256_blendv_ps(x, _mm256_mul_ps(x, e), neg), _mm256_add_ps(e, _mm256_set1_ps(1.0f)));
}

// sigmoid(x) = (x < 0 ? e : 1) / (1 + e); a NaN x gives NaN (its e is the clamp's).
LLGA_AVX2_FMA inline __m256 sigmoid8(__m256 x) {
  const __m256 e = expNegAbs8(x);
  const __m256 neg = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
  const __m256 s = _mm256_div_ps(_mm256_blendv_ps(_mm256_set1_ps(1.0f), e, neg), _mm256_add_ps(e, _mm256_set1_ps(1.0f)));
  return _mm256_blendv_ps(s, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

// applyStep16's step on 8 lanes: the same operand order, so NaN is kept alike.
LLGA_AVX2_FMA inline __m256 applyStep8(__m256 v, const Step& s) {
  switch (s.kind) {
    case Step::Kind::Relu:
      if (s.alpha == 0.0f) return _mm256_max_ps(_mm256_setzero_ps(), v);
      return _mm256_blendv_ps(v, _mm256_mul_ps(v, _mm256_set1_ps(s.alpha)), _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LT_OQ));
    case Step::Kind::Clip: return _mm256_min_ps(_mm256_set1_ps(s.beta), _mm256_max_ps(_mm256_set1_ps(s.alpha), v));
    case Step::Kind::Linear: return _mm256_fmadd_ps(v, _mm256_set1_ps(s.alpha), _mm256_set1_ps(s.beta));
    case Step::Kind::Sigmoid: return sigmoid8(v);
    case Step::Kind::Swish:
      return s.alpha == 1.0f ? swish8(v) : _mm256_mul_ps(v, sigmoid8(_mm256_mul_ps(v, _mm256_set1_ps(s.alpha))));
  }
  return v;
}

// 16 lanes quantized: min(max(z + round-half-even(v * inv), lo), hi) as
// int32 (int8::quantizeAffine's arithmetic; roundscale rounds half to even,
// and max(r, lo) gives lo for a NaN r, the second operand), for a
// saturating narrowing to store.
LLGA_AVX512 inline __m512i quantize16(__m512 v, __m512 inv, __m512 z, __m512 lo, __m512 hi) {
  const __m512 r = _mm512_add_ps(z, _mm512_roundscale_ps(_mm512_mul_ps(v, inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  return _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(r, lo), hi));
}

// The bf16 bits of 16 floats as vcvtneps2bf16 gives them (rounded to
// nearest even, a NaN made quiet, denormals in and out flushed to signed
// zeros), in AVX-512F integer ops, so that a CPU without AVX512-BF16 writes
// the same bits. channel_affine.cpp's StoreBF16 is the 8-lane AVX2 form.
LLGA_AVX512 inline __m256i bf16Bits16(__m512 y) {
  __m512i b = _mm512_castps_si512(y);
  const __mmask16 tiny = _mm512_testn_epi32_mask(b, _mm512_set1_epi32(0x7f800000));  // exponent 0
  b = _mm512_mask_and_epi32(b, tiny, b, _mm512_set1_epi32(static_cast<int>(0x80000000u)));
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_add_epi32(b, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
  r = _mm512_mask_or_epi32(r, _mm512_cmp_ps_mask(y, y, _CMP_UNORD_Q), b, _mm512_set1_epi32(0x00400000));
  return _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16));
}

// The bf16 of y's first min(n, 16) lanes stored at q (bf16Bits16's
// rounding); nothing past them is written.
LLGA_AVX512 inline void storeBf16(uint16_t* q, __m512 y, int64_t n) {
  if (n >= 16) return _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), bf16Bits16(y));
  alignas(32) uint16_t lanes[16];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), bf16Bits16(y));
  std::memcpy(q, lanes, static_cast<size_t>(n) * sizeof(uint16_t));
}

// The first min(n, 16) lanes.
LLGA_AVX512 inline __mmask16 tailMask(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1);
}

// A softmax row's numerators: dst[j] = exp(src[j] - max(src)) for j < n
// (src == dst allowed); returns 1 / their sum. A NaN anywhere in the row (or
// a row of -inf, whose max is -inf) makes the sum NaN and so the whole
// normalised row NaN, as PyTorch's softmax does. Shared by llga's attention
// kernel and its softmax (backend/dnnl/row_softmax.h).
LLGA_AVX512 inline float softmaxNumerators(const float* src, float* dst, int64_t n) {
  // _mm512_max_ps returns its second operand when either is NaN, so a NaN is
  // skipped here and caught by the sum below.
  __m512 mx = _mm512_set1_ps(-__builtin_inff());
  for (int64_t j = 0; j < n; j += 16) {  // masked loads: nothing past the row is read
    const __mmask16 m = tailMask(n - j);
    mx = _mm512_mask_max_ps(mx, m, _mm512_maskz_loadu_ps(m, src + j), mx);
  }
  const __m512 vmax = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = tailMask(n - j);
    const __m512 e = expNonPositive16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, src + j), vmax));
    _mm512_mask_storeu_ps(dst + j, m, e);
    sum = _mm512_mask_add_ps(sum, m, sum, e);
  }
  return 1.0f / _mm512_reduce_add_ps(sum);
}

// The first min(max(n, 0), 8) lanes, as AVX2's maskload and maskstore take them.
LLGA_AVX2_FMA inline __m256i tailMask8(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::clamp<int64_t>(n, 0, 8))),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// expNonPositive16 on 8 lanes: the same polynomial and flush (0 below -87,
// never a denormal; a NaN stays NaN), 2^n made in the exponent bits (n is
// in [-126, 0] here) as AVX2 has no scalef.
LLGA_AVX2_FMA inline __m256 expNonPositive8(__m256 a) {
  const __m256 normal = _mm256_cmp_ps(a, _mm256_set1_ps(kExpNormalFloor), _CMP_NLT_UQ);  // NaN too
  a = _mm256_max_ps(_mm256_set1_ps(kExpNormalFloor), a);  // the second operand when NaN: a NaN stays
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(a, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), a);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kExpPoly5[0]);
#pragma GCC unroll 5
  for (int i = 1; i < 6; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpPoly5[i]));
  const __m256i scale = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(scale)), normal);
}

// softmaxNumerators on 8 lanes (the AVX2 attention kernel's), with the same
// NaN and -inf rules; nothing past src's or dst's n values is read or written.
// Whole vectors plain, the tail through masks (AMD's masked stores are slow).
LLGA_AVX2_FMA inline float softmaxNumerators8(const float* src, float* dst, int64_t n) {
  const __m256 minus_inf = _mm256_set1_ps(-__builtin_inff());
  __m256 mx = minus_inf;
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) mx = _mm256_max_ps(_mm256_loadu_ps(src + j), mx);  // a NaN is skipped, caught by the sum
  if (j < n) {
    const __m256i m = tailMask8(n - j);
    mx = _mm256_max_ps(_mm256_blendv_ps(minus_inf, _mm256_maskload_ps(src + j, m), _mm256_castsi256_ps(m)), mx);
  }
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  const __m256 vmax = _mm256_set1_ps(_mm_cvtss_f32(h));
  __m256 sum = _mm256_setzero_ps();
  for (j = 0; j + 8 <= n; j += 8) {
    const __m256 e = expNonPositive8(_mm256_sub_ps(_mm256_loadu_ps(src + j), vmax));
    _mm256_storeu_ps(dst + j, e);
    sum = _mm256_add_ps(sum, e);
  }
  if (j < n) {
    const __m256i m = tailMask8(n - j);
    const __m256 e = _mm256_and_ps(expNonPositive8(_mm256_sub_ps(_mm256_maskload_ps(src + j, m), vmax)),
                                   _mm256_castsi256_ps(m));
    _mm256_maskstore_ps(dst + j, m, e);
    sum = _mm256_add_ps(sum, e);
  }
  __m128 t = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
  t = _mm_add_ps(t, _mm_movehl_ps(t, t));
  t = _mm_add_ss(t, _mm_movehdup_ps(t));
  return 1.0f / _mm_cvtss_f32(t);
}

// Whether this CPU runs the AVX-512F functions here.
bool cpuHasAvx512();

}  // namespace llga::vec
