#include "backend/dnnl/fused_attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/dnnl/vec_math.h"

namespace llga::attention {
namespace {

constexpr int64_t kRows = 32;    // query rows per block: their scores (32 x S floats) stay in L1/L2
constexpr int kQkRows = 8;       // q @ kt tile: 8 rows x 32 columns (16 accumulators)
constexpr int kPvRows = 6;       // p @ v tile: 6 rows x up to 64 columns (24 accumulators)

int64_t roundUp16(int64_t n) { return (n + 15) / 16 * 16; }

LLGA_AVX512 inline __mmask16 tailMask(int64_t n) {  // the first min(n, 16) lanes
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1);
}

// scores[R x sp] = q[R x d] @ kp[d x sp] (sp a multiple of 16; q's rows qs
// apart, columns contiguous; kp's and scores' rows sp apart).
template <int R>
LLGA_AVX512 void qkTile(const float* qp, int64_t qs, const float* kp, int64_t d, int64_t sp, float* scores) {
  int64_t j = 0;
  for (; j + 32 <= sp; j += 32) {
    __m512 acc0[R], acc1[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
    for (int64_t k = 0; k < d; ++k) {
      const __m512 b0 = _mm512_loadu_ps(kp + k * sp + j), b1 = _mm512_loadu_ps(kp + k * sp + j + 16);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512 a = _mm512_set1_ps(qp[r * qs + k]);
        acc0[r] = _mm512_fmadd_ps(a, b0, acc0[r]);
        acc1[r] = _mm512_fmadd_ps(a, b1, acc1[r]);
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
      const __m512 b = _mm512_loadu_ps(kp + k * sp + j);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(qp[r * qs + k]), b, acc[r]);
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) _mm512_storeu_ps(scores + r * sp + j, acc[r]);
  }
}

template <int R>
LLGA_AVX512 void qkRows(int rows, const float* qp, int64_t qs, const float* kp, int64_t d, int64_t sp, float* scores) {
  if constexpr (R > 1) {
    if (rows < R) return qkRows<R - 1>(rows, qp, qs, kp, d, sp, scores);
  }
  qkTile<R>(qp, qs, kp, d, sp, scores);
}

// out[R x n] = p[R x s] @ v[s x n] over NV vectors (n <= 16 * NV; the last
// vector masked by `last`): p rows `sp` apart, v rows `vs` apart (columns
// contiguous), out rows `dv` apart.
template <int R, int NV>
LLGA_AVX512 void pvTile(const float* p, int64_t sp, const float* v, int64_t vs, int64_t s, __mmask16 last,
                        float* out, int64_t dv) {
  __m512 acc[R][NV];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < NV; ++c) acc[r][c] = _mm512_setzero_ps();
  for (int64_t k = 0; k < s; ++k) {
    __m512 b[NV];
#pragma GCC unroll 4
    for (int c = 0; c < NV; ++c)
      b[c] = c + 1 < NV ? _mm512_loadu_ps(v + k * vs + 16 * c) : _mm512_maskz_loadu_ps(last, v + k * vs + 16 * c);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m512 a = _mm512_set1_ps(p[r * sp + k]);
#pragma GCC unroll 4
      for (int c = 0; c < NV; ++c) acc[r][c] = _mm512_fmadd_ps(a, b[c], acc[r][c]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < NV; ++c) {
      if (c + 1 < NV) _mm512_storeu_ps(out + r * dv + 16 * c, acc[r][c]);
      else _mm512_mask_storeu_ps(out + r * dv + 16 * c, last, acc[r][c]);
    }
}

template <int R>
LLGA_AVX512 void pvRows(int rows, const float* p, int64_t sp, const float* v, int64_t vs, int64_t s, int64_t dv,
                        float* out) {
  if constexpr (R > 1) {
    if (rows < R) return pvRows<R - 1>(rows, p, sp, v, vs, s, dv, out);
  }
  for (int64_t j = 0; j < dv; j += 64) {
    const int64_t left = dv - j;
    const int nv = static_cast<int>(std::min<int64_t>(4, (left + 15) / 16));
    const __mmask16 last = tailMask(left - 16 * (nv - 1));
    switch (nv) {
      case 1: pvTile<R, 1>(p, sp, v + j, vs, s, last, out + j, dv); break;
      case 2: pvTile<R, 2>(p, sp, v + j, vs, s, last, out + j, dv); break;
      case 3: pvTile<R, 3>(p, sp, v + j, vs, s, last, out + j, dv); break;
      default: pvTile<R, 4>(p, sp, v + j, vs, s, last, out + j, dv); break;
    }
  }
}

// f, then the row's softmax numerators exp(x - max) in place; returns 1 / sum.
// A NaN anywhere in the row (or a row of -inf, whose max is -inf) makes the
// sum NaN and so the whole output row NaN, as PyTorch's softmax does.
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
  // The max: _mm512_max_ps returns its second operand when either is NaN, so a
  // NaN score is skipped here and caught by the sum below.
  __m512 mx = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t j = 0; j < s; j += 16) mx = _mm512_mask_max_ps(mx, tailMask(s - j), _mm512_loadu_ps(row + j), mx);
  const __m512 vmax = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < s; j += 16) {
    const __mmask16 m = tailMask(s - j);
    const __m512 e = vec::expNonPositive16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, row + j), vmax));
    _mm512_mask_storeu_ps(row + j, m, e);
    sum = _mm512_mask_add_ps(sum, m, sum, e);
  }
  return 1.0f / _mm512_reduce_add_ps(sum);
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

struct Layout {  // the scratch: packed K^T for every batch entry, then each thread's block buffers
  int64_t sp, kt_floats, per_thread_floats, qp_floats, scores_floats, vp_floats;
  explicit Layout(const Problem& p) {
    sp = roundUp16(p.S);
    kt_floats = roundUp16(p.batch * p.D * sp);
    qp_floats = roundUp16(kRows * p.D);
    scores_floats = kRows * sp;
    vp_floats = p.v.col_stride == 1 ? 0 : roundUp16(p.S * p.Dv);  // v packed per block when its columns are strided
    per_thread_floats = qp_floats + scores_floats + vp_floats;
  }
};

LLGA_AVX512 void block(const Problem& p, const Layout& lay, const float* kp_all, float* mine, int64_t b, int64_t r0) {
  const int64_t rows = std::min(kRows, p.L - r0), sp = lay.sp;
  float* qp = mine;
  float* scores = qp + lay.qp_floats;
  float* vp = scores + lay.scores_floats;
  const float* q = p.q.data + p.q.batch_offset[static_cast<size_t>(b)] + r0 * p.q.row_stride;
  int64_t qs = p.q.row_stride;
  if (p.q.col_stride != 1) {  // q's columns strided: its rows packed
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t k = 0; k < p.D; ++k) qp[i * p.D + k] = q[i * p.q.row_stride + k * p.q.col_stride];
    q = qp;
    qs = p.D;
  }
  const float* kp = kp_all + b * p.D * sp;
  for (int64_t i = 0; i < rows; i += kQkRows)
    qkRows<kQkRows>(static_cast<int>(std::min<int64_t>(kQkRows, rows - i)), q + i * qs, qs, kp, p.D, sp, scores + i * sp);
  float inv[kRows];
  for (int64_t i = 0; i < rows; ++i) inv[i] = scoreRow(scores + i * sp, p.S, p.ops, b, r0 + i);
  const float* v = p.v.data + p.v.batch_offset[static_cast<size_t>(b)];
  int64_t vs = p.v.row_stride;
  if (p.v.col_stride != 1) {
    for (int64_t k = 0; k < p.S; ++k)
      for (int64_t j = 0; j < p.Dv; ++j) vp[k * p.Dv + j] = v[k * p.v.row_stride + j * p.v.col_stride];
    v = vp;
    vs = p.Dv;
  }
  float* out = p.out + (b * p.L + r0) * p.Dv;
  for (int64_t i = 0; i < rows; i += kPvRows)
    pvRows<kPvRows>(static_cast<int>(std::min<int64_t>(kPvRows, rows - i)), scores + i * sp, sp, v, vs, p.S, p.Dv,
                    out + i * p.Dv);
  for (int64_t i = 0; i < rows; ++i) {
    const __m512 s = _mm512_set1_ps(inv[i]);
    float* o = out + i * p.Dv;
    for (int64_t j = 0; j < p.Dv; j += 16) {
      const __mmask16 m = tailMask(p.Dv - j);
      _mm512_mask_storeu_ps(o + j, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, o + j), s));
    }
  }
}

}  // namespace

bool available() {
  static const bool ok = vec::cpuHasAvx512();
  return ok;
}

size_t scratchBytes(const Problem& p, int threads) {
  const Layout lay(p);
  return static_cast<size_t>(lay.kt_floats + std::max(1, threads) * lay.per_thread_floats) * sizeof(float);
}

void run(const Problem& p, int threads, void* scratch) {
  if (p.batch == 0 || p.L == 0 || p.Dv == 0) return;
  if (p.S == 0) {  // softmax over nothing, then a product over nothing: zeros
    std::fill(p.out, p.out + p.batch * p.L * p.Dv, 0.0f);
    return;
  }
  const Layout lay(p);
  float* kp_all = static_cast<float*>(scratch);
  float* per_thread = kp_all + lay.kt_floats;
  const int64_t blocks = (p.L + kRows - 1) / kRows, tasks = p.batch * blocks;
  threads = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, tasks)));
#pragma omp parallel num_threads(threads)
  {
#pragma omp for schedule(static)
    for (int64_t b = 0; b < p.batch; ++b) packKt(p, b, lay.sp, kp_all + b * p.D * lay.sp);
    float* mine = per_thread + omp_get_thread_num() * lay.per_thread_floats;
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tasks; ++t) block(p, lay, kp_all, mine, t / blocks, t % blocks * kRows);
  }
}

}  // namespace llga::attention
