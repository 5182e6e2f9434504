#include "backend/dnnl/fused_attention.h"

#include <cpuid.h>
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "backend/dnnl/fused_attention_avx2.h"
#include "backend/dnnl/vec_math.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace llga::attention {
namespace {

constexpr int64_t kRows = 32;    // query rows per block: their scores (32 x S floats) stay in L1/L2
static_assert(kRows <= avx2::kMaxRows);
constexpr int kQkRows = 8;       // q @ kt tile: 8 rows x 32 columns (16 accumulators)
constexpr int kPvRows = 6;       // p @ v tile: 6 rows x up to 64 columns (24 accumulators)

int64_t roundUp16(int64_t n) { return (n + 15) / 16 * 16; }

using vec::tailMask;

// The products' two operand forms. fp32: one FMA per step k. bf16 (the
// group's products assigned bf16): a step is a pair of k, each operand
// element a uint32 holding two bf16 (low half the even k), multiplied and
// added into fp32 lanes by one vdpbf16ps; half the instructions.
template <bool Bf16>
struct Mac;
template <>
struct Mac<false> {
  using T = float;
  using V = __m512;
  static LLGA_AVX512 V load(const T* p) { return _mm512_loadu_ps(p); }
  static LLGA_AVX512 V loadMasked(__mmask16 m, const T* p) { return _mm512_maskz_loadu_ps(m, p); }
  static LLGA_AVX512 __m512 step(__m512 acc, T a, V b) { return _mm512_fmadd_ps(_mm512_set1_ps(a), b, acc); }
};
template <>
struct Mac<true> {
  using T = uint32_t;
  using V = __m512i;
  static LLGA_AVX512 V load(const T* p) { return _mm512_loadu_si512(p); }
  static LLGA_AVX512 V loadMasked(__mmask16 m, const T* p) { return _mm512_maskz_loadu_epi32(m, p); }
  static LLGA_AVX512_BF16 __m512 step(__m512 acc, T a, V b) {
    return _mm512_dpbf16_ps(acc, (__m512bh)_mm512_set1_epi32(static_cast<int>(a)), (__m512bh)b);
  }
};

// scores[R x sp] = q[R x d] @ kp[d x sp] over d steps (sp a multiple of 16;
// q's rows qs apart, steps contiguous; kp's and scores' rows sp apart).
template <int R, bool Bf16, typename T = typename Mac<Bf16>::T>
LLGA_AVX512_BF16 void qkTile(const T* qp, int64_t qs, const T* kp, int64_t d, int64_t sp, float* scores) {
  using M = Mac<Bf16>;
  int64_t j = 0;
  for (; j + 32 <= sp; j += 32) {
    __m512 acc0[R], acc1[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
    for (int64_t k = 0; k < d; ++k) {
      const typename M::V b0 = M::load(kp + k * sp + j), b1 = M::load(kp + k * sp + j + 16);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const T a = qp[r * qs + k];
        acc0[r] = M::step(acc0[r], a, b0);
        acc1[r] = M::step(acc1[r], a, b1);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      _mm512_storeu_ps(scores + r * sp + j, acc0[r]);
      _mm512_storeu_ps(scores + r * sp + j + 16, acc1[r]);
    }
  }
  if (j < sp) {  // 16 columns left
    __m512 acc[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t k = 0; k < d; ++k) {
      const typename M::V b = M::load(kp + k * sp + j);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r] = M::step(acc[r], qp[r * qs + k], b);
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) _mm512_storeu_ps(scores + r * sp + j, acc[r]);
  }
}

template <int R, bool Bf16, typename T = typename Mac<Bf16>::T>
LLGA_AVX512_BF16 void qkRows(int rows, const T* qp, int64_t qs, const T* kp, int64_t d, int64_t sp, float* scores) {
  if constexpr (R > 1) {
    if (rows < R) return qkRows<R - 1, Bf16>(rows, qp, qs, kp, d, sp, scores);
  }
  qkTile<R, Bf16>(qp, qs, kp, d, sp, scores);
}

// out[R x n] = p[R x s] @ v[s x n] over s steps and NV vectors (n <= 16 *
// NV; the last vector masked by `last`): p rows `sp` apart, v rows `vs` apart
// (columns contiguous), out rows `os` apart.
template <int R, int NV, bool Bf16, typename T = typename Mac<Bf16>::T>
LLGA_AVX512_BF16 void pvTile(const T* p, int64_t sp, const T* v, int64_t vs, int64_t s, __mmask16 last, float* out,
                             int64_t os) {
  using M = Mac<Bf16>;
  __m512 acc[R][NV];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < NV; ++c) acc[r][c] = _mm512_setzero_ps();
  for (int64_t k = 0; k < s; ++k) {
    typename M::V b[NV];
#pragma GCC unroll 4
    for (int c = 0; c < NV; ++c) b[c] = c + 1 < NV ? M::load(v + k * vs + 16 * c) : M::loadMasked(last, v + k * vs + 16 * c);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const T a = p[r * sp + k];
#pragma GCC unroll 4
      for (int c = 0; c < NV; ++c) acc[r][c] = M::step(acc[r][c], a, b[c]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < NV; ++c) {
      if (c + 1 < NV) _mm512_storeu_ps(out + r * os + 16 * c, acc[r][c]);
      else _mm512_mask_storeu_ps(out + r * os + 16 * c, last, acc[r][c]);
    }
}

template <int R, bool Bf16, typename T = typename Mac<Bf16>::T>
LLGA_AVX512_BF16 void pvRows(int rows, const T* p, int64_t sp, const T* v, int64_t vs, int64_t s, int64_t dv,
                             float* out, int64_t os) {
  if constexpr (R > 1) {
    if (rows < R) return pvRows<R - 1, Bf16>(rows, p, sp, v, vs, s, dv, out, os);
  }
  for (int64_t j = 0; j < dv; j += 64) {
    const int64_t left = dv - j;
    const int nv = static_cast<int>(std::min<int64_t>(4, (left + 15) / 16));
    const __mmask16 last = tailMask(left - 16 * (nv - 1));
    switch (nv) {
      case 1: pvTile<R, 1, Bf16>(p, sp, v + j, vs, s, last, out + j, os); break;
      case 2: pvTile<R, 2, Bf16>(p, sp, v + j, vs, s, last, out + j, os); break;
      case 3: pvTile<R, 3, Bf16>(p, sp, v + j, vs, s, last, out + j, os); break;
      default: pvTile<R, 4, Bf16>(p, sp, v + j, vs, s, last, out + j, os); break;
    }
  }
}

// The first n floats of x rounded to bf16 (round to nearest even, as
// vcvtneps2bf16), as `pairs` uint32 of two each, zeros past n.
LLGA_AVX512_BF16 void toBf16Pairs(const float* x, int64_t n, uint32_t* out, int64_t pairs) {
  auto* y = reinterpret_cast<uint16_t*>(out);
  for (int64_t j = 0; j < 2 * pairs; j += 16) {
    const __m512 v = j < n ? _mm512_maskz_loadu_ps(tailMask(n - j), x + j) : _mm512_setzero_ps();
    const __m256i b = (__m256i)_mm512_cvtneps_pbh(v);
    if (j + 16 <= 2 * pairs) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + j), b);
    } else {
      alignas(32) uint16_t t[16];
      _mm256_store_si256(reinterpret_cast<__m256i*>(t), b);
      std::copy(t, t + (2 * pairs - j), y + j);
    }
  }
}

// Lanes of a and b (rows 2k and 2k + 1 of an operand) as 16 pairs.
LLGA_AVX512_BF16 inline __m512i interleaveBf16(__m512 a, __m512 b) {
  const __m512i lo = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(a));
  const __m512i hi = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(b));
  return _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
}

// f, then the row's softmax numerators exp(x - max) in place; returns 1 / sum
// (vec::softmaxNumerators).
LLGA_AVX512 float scoreRow(float* row, int64_t s, const std::vector<ScoreOp>& ops, int64_t b, int64_t i) {
  for (const ScoreOp& op : ops) {
    if (op.kind == ScoreOp::Kind::Linear) {
      const __m512 a = _mm512_set1_ps(op.alpha), c = _mm512_set1_ps(op.beta);
      for (int64_t j = 0; j < s; j += 16) {
        const __mmask16 m = tailMask(s - j);
        _mm512_mask_storeu_ps(row + j, m, _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, row + j), a, c));
      }
      continue;
    }
    if (op.kind == ScoreOp::Kind::Select) {
      const bool* mrow = op.mask + op.batch_offset[static_cast<size_t>(b)] + i * op.row_stride;
      const __m512 fill = _mm512_set1_ps(op.alpha);
      for (int64_t j = 0; j < s; j += 16) {
        const __mmask16 m = tailMask(s - j);
        __mmask16 sel;
        if (op.col_stride == 1) {  // 16 bools widened to 16 ints (AVX512F alone), the tail through a copy
          alignas(16) bool tail[16] = {};
          const bool* src = mrow + j;
          if (s - j < 16) src = static_cast<const bool*>(std::memcpy(tail, src, static_cast<size_t>(s - j)));
          const __m512i ints = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
          sel = _mm512_test_epi32_mask(ints, ints);
        } else if (op.col_stride == 0) {
          sel = *mrow ? m : 0;
        } else {
          sel = 0;
          for (int64_t t = 0; t < std::min<int64_t>(16, s - j); ++t)
            if (mrow[(j + t) * op.col_stride]) sel = static_cast<__mmask16>(sel | (1u << t));
        }
        if (op.invert) sel = static_cast<__mmask16>(~sel);
        _mm512_mask_storeu_ps(row + j, static_cast<__mmask16>(sel & m), fill);
      }
      continue;
    }
    const float* o = op.data + op.batch_offset[static_cast<size_t>(b)] + i * op.row_stride;
    for (int64_t j = 0; j < s; j += 16) {
      const __mmask16 m = tailMask(s - j);
      __m512 y;
      if (op.col_stride == 1) {
        y = _mm512_maskz_loadu_ps(m, o + j);
      } else if (op.col_stride == 0) {
        y = _mm512_set1_ps(*o);
      } else {
        alignas(64) float g[16] = {};
        for (int64_t t = 0; t < std::min<int64_t>(16, s - j); ++t) g[t] = o[(j + t) * op.col_stride];
        y = _mm512_load_ps(g);
      }
      const __m512 x = _mm512_maskz_loadu_ps(m, row + j);
      __m512 r;
      switch (op.kind) {
        case ScoreOp::Kind::Add: r = _mm512_add_ps(x, y); break;
        case ScoreOp::Kind::Sub: r = _mm512_sub_ps(x, y); break;
        case ScoreOp::Kind::Mul: r = _mm512_mul_ps(x, y); break;
        default: r = _mm512_div_ps(x, y); break;
      }
      _mm512_mask_storeu_ps(row + j, m, r);
    }
  }
  return vec::softmaxNumerators(row, row, s);
}

// dst[c][r] = src[r][c] for a 16 x 16 tile: `rows` rows of src (the rest
// read as 0), `cols` columns (dst rows), all 16 dst columns written.
LLGA_AVX512 void transpose16(const float* src, int64_t src_stride, int64_t rows, int64_t cols, float* dst,
                             int64_t dst_stride) {
  const __mmask16 m = tailMask(cols);
  __m512 r[16], a[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = i < rows ? _mm512_maskz_loadu_ps(m, src + i * src_stride) : _mm512_setzero_ps();
#pragma GCC unroll 8
  for (int i = 0; i < 16; i += 2) {  // pairs of rows interleaved within 128-bit lanes
    a[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    a[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 16; i += 4) {  // lane L of r[i + m]: rows i..i+3 of column 4L + m
    r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a[i]), _mm512_castps_pd(a[i + 2])));
    r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a[i]), _mm512_castps_pd(a[i + 2])));
    r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a[i + 1]), _mm512_castps_pd(a[i + 3])));
    r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a[i + 1]), _mm512_castps_pd(a[i + 3])));
  }
#pragma GCC unroll 4
  for (int mm = 0; mm < 4; ++mm) {  // gather lane L of r[mm], r[4 + mm], r[8 + mm], r[12 + mm]: column 4L + mm
    const __m512 d0 = _mm512_shuffle_f32x4(r[mm], r[4 + mm], 0x44), d1 = _mm512_shuffle_f32x4(r[mm], r[4 + mm], 0xEE);
    const __m512 e0 = _mm512_shuffle_f32x4(r[8 + mm], r[12 + mm], 0x44), e1 = _mm512_shuffle_f32x4(r[8 + mm], r[12 + mm], 0xEE);
    const __m512 out[4] = {_mm512_shuffle_f32x4(d0, e0, 0x88), _mm512_shuffle_f32x4(d0, e0, 0xDD),
                           _mm512_shuffle_f32x4(d1, e1, 0x88), _mm512_shuffle_f32x4(d1, e1, 0xDD)};
#pragma GCC unroll 4
    for (int l = 0; l < 4; ++l)
      if (4 * l + mm < cols) _mm512_storeu_ps(dst + (4 * l + mm) * dst_stride, out[l]);
  }
}

// K^T of batch entry b as kp[d x sp], columns s..sp zero. (Locals and
// __restrict: otherwise GCC reloads the loop's bounds from memory around every
// store.)
LLGA_AVX512 void packKt(const Problem& p, int64_t b, int64_t sp, float* __restrict kp) {
  const float* __restrict k = p.kt.data + p.kt.batch_offset[static_cast<size_t>(b)];
  const int64_t s = p.S, d = p.D, rs = p.kt.row_stride, cs = p.kt.col_stride;
  if (cs == 1) {  // rows of K^T are contiguous
    for (int64_t r = 0; r < d; ++r) std::copy(k + r * rs, k + r * rs + s, kp + r * sp);
  } else if (rs == 1) {  // the usual case, kt a transposed view of row-major k: 16 x 16 tiles
    for (int64_t j = 0; j < sp; j += 16)
      for (int64_t r = 0; r < d; r += 16)
        transpose16(k + j * cs + r, cs, std::min<int64_t>(16, s - j), std::min<int64_t>(16, d - r), kp + r * sp + j, sp);
    return;  // the padding columns were written as zeros
  } else {
    for (int64_t j = 0; j < s; ++j)
      for (int64_t r = 0; r < d; ++r) kp[r * sp + j] = k[j * cs + r * rs];
  }
  for (int64_t r = 0; r < d; ++r) std::fill(kp + r * sp + s, kp + (r + 1) * sp, 0.0f);
}

struct Layout {  // the scratch: packed operands for every batch entry, then each thread's block buffers
  int64_t sp, kt_floats, per_thread_floats, qp_floats, scores_floats, vp_floats;
  // bf16 products: dp pairs of q's columns (k's rows), sv of the scores'
  // columns (v's rows), each stored padded to a multiple of 16 (dpa, sva:
  // AMX's tiles are 16 pairs deep) with zeros. K^T as dpa rows of sp pairs
  // and v as sva rows of dvp, per batch entry; per thread q's block as
  // kRows x dpa, the probabilities' as kRows x sva and (AMX) the output
  // block as kRows x dvp floats.
  int64_t dp = 0, dpa = 0, sv = 0, sva = 0, dvp = 0;
  int64_t kb_words = 0, vb_words = 0, qb_words = 0, pb_words = 0, ob_floats = 0;
  explicit Layout(const Problem& p) {
    sp = roundUp16(p.S);
    kt_floats = roundUp16(p.batch * p.D * sp);
    qp_floats = roundUp16(kRows * p.D);
    scores_floats = kRows * sp;
    vp_floats = p.v.col_stride == 1 || p.bf16_pv ? 0 : roundUp16(p.S * p.Dv);  // v packed per block when its columns are strided
    if (p.bf16_qk) {
      dp = (p.D + 1) / 2;
      dpa = roundUp16(dp);
      kb_words = p.batch * dpa * sp;
      qb_words = kRows * dpa;
    }
    if (p.bf16_pv) {
      sv = (p.S + 1) / 2;
      sva = roundUp16(sv);
      dvp = roundUp16(p.Dv);
      vb_words = p.batch * sva * dvp;
      pb_words = kRows * sva;
      ob_floats = p.bf16_path == Bf16Path::Amx ? kRows * dvp : 0;
    }
    per_thread_floats = qp_floats + scores_floats + vp_floats + qb_words + pb_words + ob_floats;
  }
  int64_t shared() const { return kt_floats + kb_words + vb_words; }
};

// K^T of batch entry b (kp, as packKt wrote it) as bf16 pairs: row r of kb
// holds rows 2r and 2r + 1 of kp (zeros past d), dpa rows.
LLGA_AVX512_BF16 void pairKt(const float* kp, int64_t d, const Layout& lay, uint32_t* kb) {
  const int64_t sp = lay.sp;
  for (int64_t r = 0; r < lay.dpa; ++r)
    for (int64_t j = 0; j < sp; j += 16) {
      const __m512 a = 2 * r < d ? _mm512_loadu_ps(kp + 2 * r * sp + j) : _mm512_setzero_ps();
      const __m512 b = 2 * r + 1 < d ? _mm512_loadu_ps(kp + (2 * r + 1) * sp + j) : _mm512_setzero_ps();
      _mm512_storeu_si512(kb + r * sp + j, interleaveBf16(a, b));
    }
}

// 16 values of v's row k from column j (batch entry data), zeros past its end.
LLGA_AVX512 __m512 vRow16(const Problem& p, const float* v, int64_t k, int64_t j) {
  if (k >= p.S || j >= p.Dv) return _mm512_setzero_ps();
  const __mmask16 m = tailMask(p.Dv - j);
  if (p.v.col_stride == 1) return _mm512_maskz_loadu_ps(m, v + k * p.v.row_stride + j);
  alignas(64) float g[16] = {};
  for (int64_t t = 0; t < std::min<int64_t>(16, p.Dv - j); ++t) g[t] = v[k * p.v.row_stride + (j + t) * p.v.col_stride];
  return _mm512_load_ps(g);
}

// v of batch entry b as bf16 pairs: row r of vb holds rows 2r and 2r + 1 of
// v (zeros past S), sva rows of dvp columns (zeros past Dv).
LLGA_AVX512_BF16 void packVPairs(const Problem& p, int64_t b, const Layout& lay, uint32_t* vb) {
  const float* v = p.v.data + p.v.batch_offset[static_cast<size_t>(b)];
  for (int64_t r = 0; r < lay.sva; ++r)
    for (int64_t j = 0; j < lay.dvp; j += 16)
      _mm512_storeu_si512(vb + r * lay.dvp + j, interleaveBf16(vRow16(p, v, 2 * r, j), vRow16(p, v, 2 * r + 1, j)));
}

// AMX: every tile 16 rows of 64 bytes (16 floats, or 16 bf16 pairs). A
// block's 32 rows are two row tiles (A in tmm0, tmm1), two 16-column blocks
// of the right operand at a time (tmm2, tmm3), four accumulators (tmm4-7).
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

LLGA_AMX void amxBegin() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  // GCC 12 does not count ldtilecfg as reading cfg and drops the stores above without this.
  asm volatile("" : : "r"(&cfg) : "memory");
  _tile_loadconfig(&cfg);
}
LLGA_AMX void amxEnd() { _tile_release(); }

// c[32 x n] = a[32 x 16 * kblocks pairs] @ b[16 * kblocks pair rows x n], n
// a multiple of 16: a's rows `as` words apart, b's rows `bs` words apart,
// c's rows `cs` floats apart.
LLGA_AMX void amxProduct(const uint32_t* a, int64_t as, const uint32_t* b, int64_t bs, int64_t kblocks, int64_t n,
                         float* c, int64_t cs) {
  const int64_t ab = as * 4, bb = bs * 4, cb = cs * 4;
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
    _tile_zero(4);
    _tile_zero(5);
    _tile_zero(6);
    _tile_zero(7);
    for (int64_t k = 0; k < kblocks; ++k) {
      _tile_loadd(0, a + 16 * k, ab);
      _tile_loadd(1, a + 16 * as + 16 * k, ab);
      _tile_loadd(2, b + 16 * k * bs + j, bb);
      _tile_loadd(3, b + 16 * k * bs + j + 16, bb);
      _tile_dpbf16ps(4, 0, 2);
      _tile_dpbf16ps(5, 1, 2);
      _tile_dpbf16ps(6, 0, 3);
      _tile_dpbf16ps(7, 1, 3);
    }
    _tile_stored(4, c + j, cb);
    _tile_stored(5, c + 16 * cs + j, cb);
    _tile_stored(6, c + j + 16, cb);
    _tile_stored(7, c + 16 * cs + j + 16, cb);
  }
  if (j < n) {  // 16 columns left
    _tile_zero(4);
    _tile_zero(5);
    for (int64_t k = 0; k < kblocks; ++k) {
      _tile_loadd(0, a + 16 * k, ab);
      _tile_loadd(1, a + 16 * as + 16 * k, ab);
      _tile_loadd(2, b + 16 * k * bs + j, bb);
      _tile_dpbf16ps(4, 0, 2);
      _tile_dpbf16ps(5, 1, 2);
    }
    _tile_stored(4, c + j, cb);
    _tile_stored(5, c + 16 * cs + j, cb);
  }
}

LLGA_AVX512 void block(const Problem& p, const Layout& lay, const float* kp_all, const uint32_t* kb_all,
                       const uint32_t* vb_all, float* mine, int64_t b, int64_t r0) {
  const int64_t rows = std::min(kRows, p.L - r0), sp = lay.sp;
  const bool amx = p.bf16_path == Bf16Path::Amx;
  float* qp = mine;
  float* scores = qp + lay.qp_floats;
  float* vp = scores + lay.scores_floats;
  auto* qb = reinterpret_cast<uint32_t*>(vp + lay.vp_floats);
  uint32_t* pb = qb + lay.qb_words;
  float* ob = reinterpret_cast<float*>(pb + lay.pb_words);
  int64_t qs = 0;
  const float* q = qRows(p, b, r0, rows, qp, qs);
  if (p.bf16_qk) {
    for (int64_t i = 0; i < rows; ++i) toBf16Pairs(q + i * qs, p.D, qb + i * lay.dpa, lay.dpa);
    const uint32_t* kb = kb_all + b * lay.dpa * sp;
    if (amx) {  // the rows past the block's end as zeros: AMX multiplies all 32
      std::fill(qb + rows * lay.dpa, qb + kRows * lay.dpa, 0u);
      amxProduct(qb, lay.dpa, kb, sp, lay.dpa / 16, sp, scores, sp);
    } else {
      for (int64_t i = 0; i < rows; i += kQkRows)
        qkRows<kQkRows, true>(static_cast<int>(std::min<int64_t>(kQkRows, rows - i)), qb + i * lay.dpa, lay.dpa, kb,
                              lay.dp, sp, scores + i * sp);
    }
  } else {
    const float* kp = kp_all + b * p.D * sp;
    for (int64_t i = 0; i < rows; i += kQkRows)
      qkRows<kQkRows, false>(static_cast<int>(std::min<int64_t>(kQkRows, rows - i)), q + i * qs, qs, kp, p.D, sp,
                             scores + i * sp);
  }
  float inv[kRows];
  for (int64_t i = 0; i < rows; ++i) inv[i] = scoreRow(scores + i * sp, p.S, p.ops, b, r0 + i);
  const int64_t ors = outRowStride(p);
  float* out = outRows(p, b) + r0 * ors;
  if (p.bf16_pv) {
    for (int64_t i = 0; i < rows; ++i) toBf16Pairs(scores + i * sp, p.S, pb + i * lay.sva, lay.sva);
    const uint32_t* vb = vb_all + b * lay.sva * lay.dvp;
    if (amx) {  // into ob, then scaled into out below
      std::fill(pb + rows * lay.sva, pb + kRows * lay.sva, 0u);
      amxProduct(pb, lay.sva, vb, lay.dvp, lay.sva / 16, lay.dvp, ob, lay.dvp);
      for (int64_t i = 0; i < rows; ++i) {
        const __m512 s = _mm512_set1_ps(inv[i]);
        for (int64_t j = 0; j < p.Dv; j += 16) {
          const __mmask16 m = tailMask(p.Dv - j);
          _mm512_mask_storeu_ps(out + i * ors + j, m, _mm512_mul_ps(_mm512_loadu_ps(ob + i * lay.dvp + j), s));
        }
      }
      return;
    }
    for (int64_t i = 0; i < rows; i += kPvRows)
      pvRows<kPvRows, true>(static_cast<int>(std::min<int64_t>(kPvRows, rows - i)), pb + i * lay.sva, lay.sva, vb,
                            lay.dvp, lay.sv, p.Dv, out + i * ors, ors);
  } else {
    int64_t vs = 0;
    const float* v = vRows(p, b, vp, vs);
    for (int64_t i = 0; i < rows; i += kPvRows)
      pvRows<kPvRows, false>(static_cast<int>(std::min<int64_t>(kPvRows, rows - i)), scores + i * sp, sp, v, vs, p.S,
                             p.Dv, out + i * ors, ors);
  }
  for (int64_t i = 0; i < rows; ++i) {
    const __m512 s = _mm512_set1_ps(inv[i]);
    float* o = out + i * ors;
    for (int64_t j = 0; j < p.Dv; j += 16) {
      const __mmask16 m = tailMask(p.Dv - j);
      _mm512_mask_storeu_ps(o + j, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, o + j), s));
    }
  }
}

}  // namespace

float* outRows(const Problem& p, int64_t b) {
  return p.out + (p.out_batch_offset.empty() ? b * p.L * p.Dv : p.out_batch_offset[static_cast<size_t>(b)]);
}

int64_t outRowStride(const Problem& p) { return p.out_row_stride ? p.out_row_stride : p.Dv; }

const float* qRows(const Problem& p, int64_t b, int64_t r0, int64_t rows, float* qp, int64_t& qs) {
  const float* q = p.q.data + p.q.batch_offset[static_cast<size_t>(b)] + r0 * p.q.row_stride;
  qs = p.q.row_stride;
  if (p.q.col_stride == 1) return q;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t k = 0; k < p.D; ++k) qp[i * p.D + k] = q[i * p.q.row_stride + k * p.q.col_stride];
  qs = p.D;
  return qp;
}

const float* vRows(const Problem& p, int64_t b, float* vp, int64_t& vs) {
  const float* v = p.v.data + p.v.batch_offset[static_cast<size_t>(b)];
  vs = p.v.row_stride;
  if (p.v.col_stride == 1) return v;
  for (int64_t k = 0; k < p.S; ++k)
    for (int64_t j = 0; j < p.Dv; ++j) vp[k * p.Dv + j] = v[k * p.v.row_stride + j * p.v.col_stride];
  vs = p.Dv;
  return vp;
}

// The tiles are compiled for AVX-512 F, BW and VL (every AVX-512 CPU since
// Skylake-SP), BF16 instructions only in the bf16 instantiations; without
// them, the fp32 blocks of fused_attention_avx2.cpp on AVX2 and FMA.
bool availableAvx512() {
  static const bool ok = [] {
    __builtin_cpu_init();
    return vec::cpuHasAvx512() && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  }();
  return ok;
}

bool available() { return availableAvx512() || avx2::available(); }

bool availableBf16() {
  static const bool ok = [] {
    __builtin_cpu_init();
    return availableAvx512() && __builtin_cpu_supports("avx512bf16");
  }();
  return ok;
}

bool availableAmx() {
  static const bool ok = [] {
    __builtin_cpu_init();
    // AMX-BF16 and AMX-TILE: CPUID leaf 7, EDX bits 22 and 24 (clang 14's
    // __builtin_cpu_supports does not know their names).
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!availableAvx512() || !__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 22)) || !(d & (1u << 24)))
      return false;
    // Linux hands a process AMX's tile state only when asked (ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA).
    constexpr long kReqXcompPerm = 0x1023, kXtileData = 18;
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) == 0;
  }();
  return ok;
}

std::optional<Bf16Path> bf16Path() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  if (isa == dnnl::cpu_isa::avx512_core_amx && availableAmx()) return Bf16Path::Amx;
  if ((isa == dnnl::cpu_isa::avx512_core_amx || isa == dnnl::cpu_isa::avx512_core_bf16) && availableBf16())
    return Bf16Path::Avx512Bf16;
  return std::nullopt;
}

const char* bf16PathName(Bf16Path path) { return path == Bf16Path::Amx ? "amx" : "avx512_bf16"; }

size_t scratchBytes(const Problem& p, int threads) {
  const Layout lay(p);
  return static_cast<size_t>(lay.shared() + std::max(1, threads) * lay.per_thread_floats) * sizeof(float);
}

void run(const Problem& p, int threads, void* scratch) {
  if (p.batch == 0 || p.L == 0 || p.Dv == 0) return;
  if (p.S == 0) {  // softmax over nothing, then a product over nothing: zeros
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t i = 0; i < p.L; ++i) std::fill_n(outRows(p, b) + i * outRowStride(p), p.Dv, 0.0f);
    return;
  }
  if ((p.bf16_qk || p.bf16_pv) && !(p.bf16_path == Bf16Path::Amx ? availableAmx() : availableBf16()))
    throw std::logic_error("attention: bf16 products on an instruction set this CPU does not have");
  const Layout lay(p);
  float* kp_all = static_cast<float*>(scratch);
  auto* kb_all = reinterpret_cast<uint32_t*>(kp_all + lay.kt_floats);
  uint32_t* vb_all = kb_all + lay.kb_words;
  float* per_thread = kp_all + lay.shared();
  const int64_t blocks = (p.L + kRows - 1) / kRows, tasks = p.batch * blocks;
  threads = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, tasks)));
  const bool avx512 = availableAvx512();  // else AVX2 (available()), fp32 only: checked above
  auto work = [&] {  // on each thread of the team (its loops are OpenMP's orphaned worksharing)
    if (!avx512) {  // the fp32 blocks on AVX2 (fused_attention_avx2.h)
#pragma omp for schedule(static)
      for (int64_t b = 0; b < p.batch; ++b) avx2::packKt(p, b, lay.sp, kp_all + b * p.D * lay.sp);
      float* mine = per_thread + omp_get_thread_num() * lay.per_thread_floats;
#pragma omp for schedule(static)
      for (int64_t t = 0; t < tasks; ++t) {
        const int64_t b = t / blocks, r0 = t % blocks * kRows;
        avx2::block(p, lay.sp, kp_all + b * p.D * lay.sp, mine, mine + lay.qp_floats,
                    mine + lay.qp_floats + lay.scores_floats, b, r0, std::min(kRows, p.L - r0));
      }
      return;
    }
#pragma omp for schedule(static)
    for (int64_t b = 0; b < p.batch; ++b) {
      packKt(p, b, lay.sp, kp_all + b * p.D * lay.sp);
      if (p.bf16_qk) pairKt(kp_all + b * p.D * lay.sp, p.D, lay, kb_all + b * lay.dpa * lay.sp);
      if (p.bf16_pv) packVPairs(p, b, lay, vb_all + b * lay.sva * lay.dvp);
    }
    float* mine = per_thread + omp_get_thread_num() * lay.per_thread_floats;
    const bool amx = (p.bf16_qk || p.bf16_pv) && p.bf16_path == Bf16Path::Amx;
    if (amx) amxBegin();  // this thread's tile configuration, released before oneDNN's kernels load theirs
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tasks; ++t) block(p, lay, kp_all, kb_all, vb_all, mine, t / blocks, t % blocks * kRows);
    if (amx) amxEnd();
  };
  // Without entering OpenMP where a team of one would run it (0.3 us a call:
  // runtime/threads.h, parallelFor); not inside another region, whose team
  // the loops would bind to.
  if (threads == 1 && !omp_in_parallel()) {
    work();
    return;
  }
#pragma omp parallel num_threads(threads)
  work();
}

}  // namespace llga::attention
