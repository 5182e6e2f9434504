#include "backend/dnnl/fused_attention_avx2.h"

#include <algorithm>
#include <cstring>

#include "backend/dnnl/dnnl_utils.h"
#include "backend/dnnl/vec_math.h"

namespace llga::attention::avx2 {
namespace {

constexpr int kQkRows = 6;  // q @ kt tile: 6 rows x 16 columns (12 accumulators)
constexpr int kPvRows = 6;  // p @ v tile: 6 rows x up to 16 columns

using vec::tailMask8;

// The rows of the next tile when `left` remain: 6, but 4 where 6 would leave
// 1-3 (a block's 32 rows as 6, 6, 6, 6, 4, 4, not 6 x 5 and a 2-row tile
// whose few accumulators leave the FMA units waiting on their latency).
int64_t tileRows(int64_t left) { return left >= 7 && left <= 9 ? 4 : std::min<int64_t>(6, left); }

// scores[R x sp] = q[R x d] @ kp[d x sp] (sp a multiple of 16; q's rows qs
// apart, kp's and scores' rows sp apart).
template <int R>
LLGA_AVX2_FMA void qkTile(const float* q, int64_t qs, const float* kp, int64_t d, int64_t sp, float* scores) {
  for (int64_t j = 0; j < sp; j += 16) {
    __m256 c0[R], c1[R];
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) c0[r] = c1[r] = _mm256_setzero_ps();
    for (int64_t k = 0; k < d; ++k) {
      const __m256 b0 = _mm256_loadu_ps(kp + k * sp + j), b1 = _mm256_loadu_ps(kp + k * sp + j + 8);
#pragma GCC unroll 6
      for (int r = 0; r < R; ++r) {
        const __m256 a = _mm256_broadcast_ss(q + r * qs + k);
        c0[r] = _mm256_fmadd_ps(a, b0, c0[r]);
        c1[r] = _mm256_fmadd_ps(a, b1, c1[r]);
      }
    }
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      _mm256_storeu_ps(scores + r * sp + j, c0[r]);
      _mm256_storeu_ps(scores + r * sp + j + 8, c1[r]);
    }
  }
}

template <int R>
LLGA_AVX2_FMA void qkRows(int rows, const float* q, int64_t qs, const float* kp, int64_t d, int64_t sp, float* scores) {
  if constexpr (R > 1) {
    if (rows < R) return qkRows<R - 1>(rows, q, qs, kp, d, sp, scores);
  }
  qkTile<R>(q, qs, kp, d, sp, scores);
}

// out[R x n] = p[R x s] @ v[s x n] over s steps, n <= 8 * NV columns (the
// last vector's lanes in `last`): p's rows sp apart, v's vs, out's os.
template <int R, int NV>
LLGA_AVX2_FMA void pvTile(const float* p, int64_t sp, const float* v, int64_t vs, int64_t s, __m256i last, float* out,
                          int64_t os) {
  __m256 acc[R][NV];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int c = 0; c < NV; ++c) acc[r][c] = _mm256_setzero_ps();
  for (int64_t k = 0; k < s; ++k) {
    __m256 b[NV];
#pragma GCC unroll 2
    for (int c = 0; c < NV; ++c)
      b[c] = c + 1 < NV ? _mm256_loadu_ps(v + k * vs + 8 * c) : _mm256_maskload_ps(v + k * vs + 8 * c, last);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m256 a = _mm256_broadcast_ss(p + r * sp + k);
#pragma GCC unroll 2
      for (int c = 0; c < NV; ++c) acc[r][c] = _mm256_fmadd_ps(a, b[c], acc[r][c]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int c = 0; c < NV; ++c) {
      if (c + 1 < NV) _mm256_storeu_ps(out + r * os + 8 * c, acc[r][c]);
      else _mm256_maskstore_ps(out + r * os + 8 * c, last, acc[r][c]);
    }
}

template <int R>
LLGA_AVX2_FMA void pvRows(int rows, const float* p, int64_t sp, const float* v, int64_t vs, int64_t s, int64_t dv,
                          float* out, int64_t os) {
  if constexpr (R > 1) {
    if (rows < R) return pvRows<R - 1>(rows, p, sp, v, vs, s, dv, out, os);
  }
  for (int64_t j = 0; j < dv; j += 16) {
    const int64_t left = dv - j;
    if (left > 8) pvTile<R, 2>(p, sp, v + j, vs, s, tailMask8(left - 8), out + j, os);
    else pvTile<R, 1>(p, sp, v + j, vs, s, tailMask8(left), out + j, os);
  }
}

// 8 lanes of the mask row from column j: lane t set where the bool at
// column j + t is true (lanes past `count` clear).
LLGA_AVX2_FMA __m256 selected(const bool* mrow, int64_t col_stride, int64_t j, int64_t count) {
  alignas(8) uint8_t bytes[8] = {};
  if (col_stride == 1) std::memcpy(bytes, mrow + j, static_cast<size_t>(count));
  else
    for (int64_t t = 0; t < count; ++t) bytes[t] = mrow[(j + t) * col_stride] ? 1 : 0;
  const __m256i ints = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes)));
  return _mm256_castsi256_ps(_mm256_cmpgt_epi32(ints, _mm256_setzero_si256()));
}

// row[j] = f(row[j], j, lanes) for j < s in chunks of 8: whole vectors with
// plain loads and stores, the tail (lanes < 8) through masks (AMD's masked
// stores are slow); f gets the chunk's first column and its lane count (a
// lambda given here carries LLGA_AVX2_FMA itself: it does not inherit it).
template <typename F>
LLGA_AVX2_FMA inline void eachChunk(float* row, int64_t s, const F& f) {
  int64_t j = 0;
  for (; j + 8 <= s; j += 8) _mm256_storeu_ps(row + j, f(_mm256_loadu_ps(row + j), j, int64_t{8}));
  if (j < s) {
    const __m256i m = tailMask8(s - j);
    _mm256_maskstore_ps(row + j, m, f(_mm256_maskload_ps(row + j, m), j, s - j));
  }
}

// The score ops on one row of s scores, then its softmax numerators in
// place; returns 1 / their sum (the AVX-512 kernel's scoreRow, 8 lanes).
LLGA_AVX2_FMA float scoreRow(float* row, int64_t s, const std::vector<ScoreOp>& ops, int64_t b, int64_t i) {
  for (const ScoreOp& op : ops) {
    if (op.kind == ScoreOp::Kind::Linear) {
      const __m256 a = _mm256_set1_ps(op.alpha), c = _mm256_set1_ps(op.beta);
      eachChunk(row, s, [&](__m256 x, int64_t, int64_t) LLGA_AVX2_FMA { return _mm256_fmadd_ps(x, a, c); });
      continue;
    }
    if (op.kind == ScoreOp::Kind::Select) {
      const bool* mrow = op.mask + op.batch_offset[static_cast<size_t>(b)] + i * op.row_stride;
      const __m256 fill = _mm256_set1_ps(op.alpha);
      const __m256 flip = _mm256_castsi256_ps(_mm256_set1_epi32(op.invert ? -1 : 0));
      const __m256 all = op.col_stride == 0 && *mrow ? _mm256_castsi256_ps(_mm256_set1_epi32(-1)) : _mm256_setzero_ps();
      eachChunk(row, s, [&](__m256 x, int64_t j, int64_t count) LLGA_AVX2_FMA {
        const __m256 sel = op.col_stride == 0 ? all : selected(mrow, op.col_stride, j, count);
        return _mm256_blendv_ps(x, fill, _mm256_xor_ps(sel, flip));
      });
      continue;
    }
    const float* o = op.data + op.batch_offset[static_cast<size_t>(b)] + i * op.row_stride;
    eachChunk(row, s, [&](__m256 x, int64_t j, int64_t count) LLGA_AVX2_FMA {
      __m256 y;
      if (op.col_stride == 1) {
        y = count == 8 ? _mm256_loadu_ps(o + j) : _mm256_maskload_ps(o + j, tailMask8(count));
      } else if (op.col_stride == 0) {
        y = _mm256_set1_ps(*o);
      } else {
        alignas(32) float g[8] = {};
        for (int64_t t = 0; t < count; ++t) g[t] = o[(j + t) * op.col_stride];
        y = _mm256_load_ps(g);
      }
      switch (op.kind) {
        case ScoreOp::Kind::Add: return _mm256_add_ps(x, y);
        case ScoreOp::Kind::Sub: return _mm256_sub_ps(x, y);
        case ScoreOp::Kind::Mul: return _mm256_mul_ps(x, y);
        default: return _mm256_div_ps(x, y);
      }
    });
  }
  return vec::softmaxNumerators8(row, row, s);
}

// dst[c][r] = src[r][c] for an 8 x 8 tile (rows src_stride and dst_stride floats apart).
LLGA_AVX2_FMA void transpose8(const float* src, int64_t src_stride, float* dst, int64_t dst_stride) {
  __m256 r[8], t[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * src_stride);
#pragma GCC unroll 4
  for (int i = 0; i < 8; i += 2) {  // pairs of rows interleaved within 128-bit lanes
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
#pragma GCC unroll 2
  for (int i = 0; i < 8; i += 4) {  // then quads: lane L of r[i + m] holds rows i..i+3 of column 4L + m
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
#pragma GCC unroll 4
  for (int m = 0; m < 4; ++m) {  // low halves: columns m, high halves: columns 4 + m
    _mm256_storeu_ps(dst + m * dst_stride, _mm256_permute2f128_ps(r[m], r[4 + m], 0x20));
    _mm256_storeu_ps(dst + (4 + m) * dst_stride, _mm256_permute2f128_ps(r[m], r[4 + m], 0x31));
  }
}

}  // namespace

bool available() { return cpuHasAvx2Fma(); }

LLGA_AVX2_FMA void packKt(const Problem& p, int64_t b, int64_t sp, float* __restrict kp) {
  const float* __restrict k = p.kt.data + p.kt.batch_offset[static_cast<size_t>(b)];
  const int64_t s = p.S, d = p.D, rs = p.kt.row_stride, cs = p.kt.col_stride;
  if (cs == 1) {  // rows of K^T are contiguous
    for (int64_t r = 0; r < d; ++r) std::copy(k + r * rs, k + r * rs + s, kp + r * sp);
  } else if (rs == 1) {  // the usual case, kt a transposed view of row-major k: 8 x 8 tiles, the edges one by one
    const int64_t s8 = s / 8 * 8, d8 = d / 8 * 8;
    for (int64_t j = 0; j < s8; j += 8)
      for (int64_t r = 0; r < d8; r += 8) transpose8(k + j * cs + r, cs, kp + r * sp + j, sp);
    for (int64_t j = 0; j < s; ++j)
      for (int64_t r = j < s8 ? d8 : 0; r < d; ++r) kp[r * sp + j] = k[j * cs + r];
  } else {
    for (int64_t j = 0; j < s; ++j)
      for (int64_t r = 0; r < d; ++r) kp[r * sp + j] = k[j * cs + r * rs];
  }
  for (int64_t r = 0; r < d; ++r) std::fill(kp + r * sp + s, kp + (r + 1) * sp, 0.0f);
}

LLGA_AVX2_FMA void block(const Problem& p, int64_t sp, const float* kp, float* qp, float* scores, float* vp, int64_t b,
                         int64_t r0, int64_t rows) {
  int64_t qs = 0;
  const float* q = qRows(p, b, r0, rows, qp, qs);
  for (int64_t i = 0, t = 0; i < rows; i += t) {
    t = tileRows(rows - i);
    qkRows<kQkRows>(static_cast<int>(t), q + i * qs, qs, kp, p.D, sp, scores + i * sp);
  }
  float inv[kMaxRows];
  for (int64_t i = 0; i < rows; ++i) inv[i] = scoreRow(scores + i * sp, p.S, p.ops, b, r0 + i);
  const int64_t ors = outRowStride(p);
  float* out = outRows(p, b) + r0 * ors;
  int64_t vs = 0;
  const float* v = vRows(p, b, vp, vs);
  for (int64_t i = 0, t = 0; i < rows; i += t) {
    t = tileRows(rows - i);
    pvRows<kPvRows>(static_cast<int>(t), scores + i * sp, sp, v, vs, p.S, p.Dv, out + i * ors, ors);
  }
  for (int64_t i = 0; i < rows; ++i) {
    const __m256 s = _mm256_set1_ps(inv[i]);
    eachChunk(out + i * ors, p.Dv, [&](__m256 x, int64_t, int64_t) LLGA_AVX2_FMA { return _mm256_mul_ps(x, s); });
  }
}

}  // namespace llga::attention::avx2
