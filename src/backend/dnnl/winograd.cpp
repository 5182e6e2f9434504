#include "backend/dnnl/winograd.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>

#include "backend/dnnl/dnnl_utils.h"
#include "runtime/threads.h"

namespace llga::winograd {
namespace {

#define LLGA_AVX2 __attribute__((target("avx2,fma")))

constexpr int kMr = 6;    // output tiles per micro-kernel call (rows of M)
constexpr int kSlab = 16; // output channels per packed weight slab (two ymm)

int64_t tilesOf(const Geometry& g) { return g.n * ((g.oh + 1) / 2) * ((g.ow + 1) / 2); }

// How a call is split between threads. Measured on an AVX2 EPYC, 2 threads
// (ratios to oneDNN's direct jit:avx2 with a sum and relu):
// - Private: each thread runs whole chunks of 12 tiles (transform, 16
//   products, transform) with its V and M in L1/L2 and no barriers, reading
//   all of U per chunk; best with many tiles and small weights (64x56x56:
//   1.5x, 8x64x56x56: 1.4x where Shared gave 1.1-1.3x).
// - Shared: the threads split each phase over a chunk of up to 3 MiB of V
//   and M (tiles, then (point, 16 output channels), then tiles), so each
//   slab of U is read once per chunk; best for few tiles and large weights
//   (256x14x14: 2.0x, 512x7x7: 1.7x where Private gave 1.8x and 1.3x).
struct Split {
  bool private_chunks;
  int64_t tiles;  // per chunk
  int threads;
};
constexpr int64_t kPrivateTiles = 12;
constexpr int64_t kSharedBytes = int64_t{3} << 20;

Split splitOf(const Geometry& g) {
  const int threads = getNumThreads();
  const int64_t total = tilesOf(g);
  const int64_t u_bytes = 16 * g.c * g.k * static_cast<int64_t>(sizeof(float));
  if (u_bytes <= (int64_t{1} << 20) && total >= 128 * threads) return {true, kPrivateTiles, threads};
  // Equal chunks of at most the budget, each a multiple of the micro-kernel's rows.
  const int64_t per_tile = 16 * (g.c + g.k) * static_cast<int64_t>(sizeof(float));
  const int64_t cap = std::max<int64_t>(kMr, kSharedBytes / per_tile / kMr * kMr);
  const int64_t chunks = (total + cap - 1) / cap;
  const int64_t even = (total + chunks - 1) / chunks;
  return {false, std::min(cap, (even + kMr - 1) / kMr * kMr), threads};
}

// ---- 1. input transform: V = B^T d B, B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1] ----
// One tile (global index `tile`, row `t_local` of the chunk's V), every channel block.
LLGA_AVX2 void inputTile(const Geometry& g, const float* src, int64_t tile, float* v, int64_t tc, int64_t t_local) {
  const int64_t th = (g.oh + 1) / 2, tw = (g.ow + 1) / 2;
  const int64_t n = tile / (th * tw), ty = tile / tw % th, tx = tile % tw;
  const int64_t iy0 = 2 * ty - g.pad_t, ix0 = 2 * tx - g.pad_l;
  const bool inside = iy0 >= 0 && iy0 + 4 <= g.h && ix0 >= 0 && ix0 + 4 <= g.w;
  const int64_t plane = tc * g.c;  // one point's V: tc tiles x c
  for (int64_t cb = 0; cb < g.c / 8; ++cb) {
    const float* base = src + ((n * (g.c / 8) + cb) * g.h) * g.w * 8;
    __m256 d[4][4];
    if (inside) {
      const float* p = base + (iy0 * g.w + ix0) * 8;
      for (int r = 0; r < 4; ++r)
        for (int s = 0; s < 4; ++s) d[r][s] = _mm256_loadu_ps(p + (r * g.w + s) * 8);
    } else {
      for (int r = 0; r < 4; ++r)
        for (int s = 0; s < 4; ++s) {
          const int64_t y = iy0 + r, x = ix0 + s;
          d[r][s] = y >= 0 && y < g.h && x >= 0 && x < g.w ? _mm256_loadu_ps(base + (y * g.w + x) * 8)
                                                          : _mm256_setzero_ps();
        }
    }
    __m256 t[4][4];
    for (int s = 0; s < 4; ++s) {
      t[0][s] = _mm256_sub_ps(d[0][s], d[2][s]);
      t[1][s] = _mm256_add_ps(d[1][s], d[2][s]);
      t[2][s] = _mm256_sub_ps(d[2][s], d[1][s]);
      t[3][s] = _mm256_sub_ps(d[1][s], d[3][s]);
    }
    float* out = v + t_local * g.c + cb * 8;
    for (int r = 0; r < 4; ++r) {
      _mm256_storeu_ps(out + (r * 4 + 0) * plane, _mm256_sub_ps(t[r][0], t[r][2]));
      _mm256_storeu_ps(out + (r * 4 + 1) * plane, _mm256_add_ps(t[r][1], t[r][2]));
      _mm256_storeu_ps(out + (r * 4 + 2) * plane, _mm256_sub_ps(t[r][2], t[r][1]));
      _mm256_storeu_ps(out + (r * 4 + 3) * plane, _mm256_sub_ps(t[r][1], t[r][3]));
    }
  }
}

// ---- 2. M[p] = V[p] U[p]: MR tiles x NB*8 output channels, over all c ----
// The loops over MR and NB are unrolled (GCC keeps the accumulators in
// registers only then: 12 of the 16 ymm registers at 6x2).
template <int MR, int NB>
LLGA_AVX2 void microKernel(const float* a, int64_t lda, const float* b, float* c, int64_t ldc, int64_t kc) {
  __m256 acc[MR][NB];
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int j = 0; j < NB; ++j) acc[r][j] = _mm256_setzero_ps();
  for (int64_t i = 0; i < kc; ++i) {
    __m256 bv[NB];
#pragma GCC unroll 2
    for (int j = 0; j < NB; ++j) bv[j] = _mm256_loadu_ps(b + i * NB * 8 + j * 8);
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + r * lda + i);
#pragma GCC unroll 2
      for (int j = 0; j < NB; ++j) acc[r][j] = _mm256_fmadd_ps(av, bv[j], acc[r][j]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int j = 0; j < NB; ++j) _mm256_storeu_ps(c + r * ldc + j * 8, acc[r][j]);
}

template <int NB>
LLGA_AVX2 void gemmRows(const float* a, int64_t lda, const float* b, float* c, int64_t ldc, int64_t kc, int64_t rows) {
  int64_t r = 0;
  for (; r + kMr <= rows; r += kMr) microKernel<kMr, NB>(a + r * lda, lda, b, c + r * ldc, ldc, kc);
  switch (rows - r) {
    case 0: break;
    case 1: microKernel<1, NB>(a + r * lda, lda, b, c + r * ldc, ldc, kc); break;
    case 2: microKernel<2, NB>(a + r * lda, lda, b, c + r * ldc, ldc, kc); break;
    case 3: microKernel<3, NB>(a + r * lda, lda, b, c + r * ldc, ldc, kc); break;
    case 4: microKernel<4, NB>(a + r * lda, lda, b, c + r * ldc, ldc, kc); break;
    default: microKernel<5, NB>(a + r * lda, lda, b, c + r * ldc, ldc, kc); break;
  }
}

// ---- 3. output transform: Y = A^T m A, A^T = [1 1 1 0; 0 1 -1 -1]; bias, steps ----
LLGA_AVX2 inline __m256 applySteps(__m256 y, const std::vector<Step>& steps, const float* old) {
  for (const Step& s : steps) {
    if (s.kind == Step::Kind::Sum) {
      y = _mm256_add_ps(y, _mm256_loadu_ps(old));
    } else if (s.alpha == 0.0f) {
      y = _mm256_max_ps(y, _mm256_setzero_ps());
    } else {  // x > 0 ? x : alpha * x
      const __m256 neg = _mm256_cmp_ps(y, _mm256_setzero_ps(), _CMP_GT_OQ);
      y = _mm256_blendv_ps(_mm256_mul_ps(y, _mm256_set1_ps(s.alpha)), y, neg);
    }
  }
  return y;
}

// One tile, every output channel block.
LLGA_AVX2 void outputTile(const Geometry& g, const float* m, int64_t tc, int64_t t_local, int64_t tile,
                          const float* bias, const std::vector<Step>& steps, float* dst) {
  const int64_t th = (g.oh + 1) / 2, tw = (g.ow + 1) / 2;
  const int64_t n = tile / (th * tw), ty = tile / tw % th, tx = tile % tw;
  const int64_t plane = tc * g.k;
  const bool full = 2 * ty + 2 <= g.oh && 2 * tx + 2 <= g.ow;
  for (int64_t kb = 0; kb < g.k / 8; ++kb) {
    const float* in = m + t_local * g.k + kb * 8;
    __m256 r0[4], r1[4];
    for (int s = 0; s < 4; ++s) {
      const __m256 m0 = _mm256_loadu_ps(in + (0 * 4 + s) * plane), m1 = _mm256_loadu_ps(in + (1 * 4 + s) * plane);
      const __m256 m2 = _mm256_loadu_ps(in + (2 * 4 + s) * plane), m3 = _mm256_loadu_ps(in + (3 * 4 + s) * plane);
      r0[s] = _mm256_add_ps(_mm256_add_ps(m0, m1), m2);
      r1[s] = _mm256_sub_ps(_mm256_sub_ps(m1, m2), m3);
    }
    const __m256 b = bias ? _mm256_loadu_ps(bias + kb * 8) : _mm256_setzero_ps();
    __m256 y[2][2];
    y[0][0] = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(r0[0], r0[1]), r0[2]), b);
    y[0][1] = _mm256_add_ps(_mm256_sub_ps(_mm256_sub_ps(r0[1], r0[2]), r0[3]), b);
    y[1][0] = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(r1[0], r1[1]), r1[2]), b);
    y[1][1] = _mm256_add_ps(_mm256_sub_ps(_mm256_sub_ps(r1[1], r1[2]), r1[3]), b);
    float* base = dst + (((n * (g.k / 8) + kb) * g.oh + 2 * ty) * g.ow + 2 * tx) * 8;
    for (int dy = 0; dy < 2; ++dy)
      for (int dx = 0; dx < 2; ++dx) {
        if (!full && (2 * ty + dy >= g.oh || 2 * tx + dx >= g.ow)) continue;
        float* p = base + (dy * g.ow + dx) * 8;
        _mm256_storeu_ps(p, applySteps(y[dy][dx], steps, p));
      }
  }
}

}  // namespace

bool available() {
  return cpuRunsAvx2Kernels() && envSwitchOn("LLGA_WINOGRAD");
}

bool supports(const Geometry& g) {
  return g.c > 0 && g.k > 0 && g.c % 8 == 0 && g.k % 8 == 0 && g.n > 0 && g.oh > 0 && g.ow > 0;
}

std::shared_ptr<const Weights> transformWeights(const float* w, const int64_t strides[4], int64_t k, int64_t c) {
  auto out = std::make_shared<Weights>();
  out->k = k;
  out->c = c;
  out->storage = Storage::allocate(static_cast<size_t>(16 * k * c) * sizeof(float), AllocPurpose::WeightCache);
  float* u = static_cast<float*>(out->storage->data);
  for (int64_t ko = 0; ko < k; ++ko) {
    const int64_t slab = ko / kSlab, width = std::min<int64_t>(kSlab, k - slab * kSlab), lane = ko % kSlab;
    for (int64_t ci = 0; ci < c; ++ci) {
      double gk[3][3], tmp[4][3];
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) gk[i][j] = w[ko * strides[0] + ci * strides[1] + i * strides[2] + j * strides[3]];
      // G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]: tmp = G g, then U = tmp G^T
      for (int j = 0; j < 3; ++j) {
        tmp[0][j] = gk[0][j];
        tmp[1][j] = 0.5 * (gk[0][j] + gk[1][j] + gk[2][j]);
        tmp[2][j] = 0.5 * (gk[0][j] - gk[1][j] + gk[2][j]);
        tmp[3][j] = gk[2][j];
      }
      for (int r = 0; r < 4; ++r) {
        const double u4[4] = {tmp[r][0], 0.5 * (tmp[r][0] + tmp[r][1] + tmp[r][2]),
                              0.5 * (tmp[r][0] - tmp[r][1] + tmp[r][2]), tmp[r][2]};
        for (int s = 0; s < 4; ++s)
          u[(r * 4 + s) * k * c + slab * kSlab * c + ci * width + lane] =
              static_cast<float>(u4[s]);
      }
    }
  }
  return out;
}

size_t scratchBytes(const Geometry& g) {
  const Split sp = splitOf(g);
  return static_cast<size_t>((sp.private_chunks ? sp.threads : 1) * 16 * sp.tiles * (g.c + g.k)) * sizeof(float);
}

namespace {
// M[p] = V[p] U[p] for rows [0, count) of a chunk, output channels of slab s.
LLGA_AVX2 void products(const Weights& u, const Geometry& g, const float* v, float* m, int64_t tc, int64_t count,
                        int64_t p, int64_t s) {
  const float* a = v + p * tc * g.c;
  const float* b = u.u() + p * g.k * g.c + s * kSlab * g.c;
  float* c = m + p * tc * g.k + s * kSlab;
  if (g.k - s * kSlab >= kSlab) gemmRows<2>(a, g.c, b, c, g.k, g.c, count);
  else gemmRows<1>(a, g.c, b, c, g.k, g.c, count);
}
}  // namespace

void run(const Weights& u, const Geometry& g, const float* src, float* dst, const float* bias,
         const std::vector<Step>& steps, float* scratch) {
  const Split sp = splitOf(g);
  const int64_t total = tilesOf(g), tc = sp.tiles;
  const int64_t slabs = (g.k + kSlab - 1) / kSlab;
  if (sp.private_chunks) {
    const int64_t chunks = (total + tc - 1) / tc;
#pragma omp parallel num_threads(sp.threads)
    {
      float* v = scratch + omp_get_thread_num() * 16 * tc * (g.c + g.k);
      float* m = v + 16 * tc * g.c;
#pragma omp for schedule(static)
      for (int64_t ch = 0; ch < chunks; ++ch) {
        const int64_t start = ch * tc, count = std::min(tc, total - start);
        for (int64_t t = 0; t < count; ++t) inputTile(g, src, start + t, v, tc, t);
        for (int64_t p = 0; p < 16; ++p)
          for (int64_t s = 0; s < slabs; ++s) products(u, g, v, m, tc, count, p, s);
        for (int64_t t = 0; t < count; ++t) outputTile(g, m, tc, t, start + t, bias, steps, dst);
      }
    }
    return;
  }
  float* v = scratch;
  float* m = scratch + 16 * tc * g.c;
#pragma omp parallel num_threads(sp.threads)
  for (int64_t start = 0; start < total; start += tc) {
    const int64_t count = std::min(tc, total - start);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < count; ++t) inputTile(g, src, start + t, v, tc, t);
#pragma omp for schedule(static)
    for (int64_t job = 0; job < 16 * slabs; ++job) products(u, g, v, m, tc, count, job / slabs, job % slabs);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < count; ++t) outputTile(g, m, tc, t, start + t, bias, steps, dst);
  }
}

}  // namespace llga::winograd
