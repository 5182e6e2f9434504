#include "backend/dnnl/channel_affine.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include <omp.h>

#include "backend/dnnl/dnnl_utils.h"
#include "runtime/threads.h"

namespace llga::affine {
namespace {

#define LLGA_AVX2 __attribute__((target("avx2,fma")))

template <bool Relu>
LLGA_AVX2 inline __m256 map8(__m256 x, __m256 s, __m256 t) {
  const __m256 y = _mm256_fmadd_ps(x, s, t);
  // max_ps returns its second operand when either is NaN: a NaN y stays.
  return Relu ? _mm256_max_ps(_mm256_setzero_ps(), y) : y;
}

template <bool Relu>
inline float map1(float x, float s, float t) {
  const float y = std::fma(x, s, t);
  return Relu && y < 0.0f ? 0.0f : y;
}

// Where a row's results go: fp32 as they are, or quantized (Job::Quantized).
struct StoreF32 {
  using T = float;
  LLGA_AVX2 void put8(float* p, __m256 y) const { _mm256_storeu_ps(p, y); }
  void put1(float* p, float y) const { *p = y; }
};

template <typename Q>  // uint8_t or int8_t
struct StoreQ {
  using T = Q;
  __m256 inv, z, lo, hi;
  float inv1, z1;
  LLGA_AVX2 explicit StoreQ(const Job::Quantized& q)
      : inv(_mm256_set1_ps(1.0f / q.scale)), z(_mm256_set1_ps(static_cast<float>(q.zero_point))),
        lo(_mm256_set1_ps(std::numeric_limits<Q>::min())), hi(_mm256_set1_ps(std::numeric_limits<Q>::max())),
        inv1(1.0f / q.scale), z1(static_cast<float>(q.zero_point)) {}
  // z + round-half-even(y / scale), clamped (max_ps returns its second
  // operand for a NaN: the lowest value), then the 8 values packed to bytes
  // (in range already, so the saturating packs change nothing).
  LLGA_AVX2 void put8(Q* p, __m256 y) const {
    __m256 r = _mm256_add_ps(z, _mm256_round_ps(_mm256_mul_ps(y, inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    r = _mm256_min_ps(_mm256_max_ps(r, lo), hi);
    const __m256i i = _mm256_cvtps_epi32(r);
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
    const __m128i b = std::is_same_v<Q, uint8_t> ? _mm_packus_epi16(w, w) : _mm_packs_epi16(w, w);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p), b);
  }
  void put1(Q* p, float y) const {
    const float r = z1 + std::nearbyint(y * inv1);  // the default rounding: to nearest even
    const float l = std::numeric_limits<Q>::min(), h = std::numeric_limits<Q>::max();
    *p = static_cast<Q>(!(r == r) ? l : r < l ? l : r > h ? h : r);
  }
};

// bf16 bits of v (vcvtneps2bf16's: denormals in and out flushed to zero,
// NaN made quiet, otherwise rounded to nearest even).
inline uint16_t bf16Bits(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  if ((b & 0x7f800000u) == 0) b &= 0x80000000u;  // zero or denormal: a signed zero
  if (v != v) return static_cast<uint16_t>((b | 0x00400000u) >> 16);
  return static_cast<uint16_t>((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

struct StoreBF16 {
  using T = uint16_t;
  LLGA_AVX2 void put8(uint16_t* p, __m256 y) const {
    __m256i b = _mm256_castps_si256(y);
    const __m256i exp = _mm256_and_si256(b, _mm256_set1_epi32(0x7f800000));
    const __m256i tiny = _mm256_cmpeq_epi32(exp, _mm256_setzero_si256());
    b = _mm256_blendv_epi8(b, _mm256_and_si256(b, _mm256_set1_epi32(static_cast<int>(0x80000000u))), tiny);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_add_epi32(b, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(y, y, _CMP_UNORD_Q));
    r = _mm256_blendv_epi8(r, _mm256_or_si256(b, _mm256_set1_epi32(0x00400000)), nan);
    r = _mm256_srli_epi32(r, 16);
    const __m128i h = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), h);
  }
  void put1(uint16_t* p, float y) const { *p = bf16Bits(y); }
};

// One row: x[j] -> y[j] with channel j % period of s and t (already offset to the row's first channel).
template <bool Relu, class Out>
LLGA_AVX2 void row(const float* x, typename Out::T* y, int64_t len, int64_t period, const float* s, const float* t,
                   const Out& out) {
  int64_t j = 0;
  if (period == 1) {
    const __m256 vs = _mm256_set1_ps(s[0]), vt = _mm256_set1_ps(t[0]);
    for (; j + 8 <= len; j += 8) out.put8(y + j, map8<Relu>(_mm256_loadu_ps(x + j), vs, vt));
    for (; j < len; ++j) out.put1(y + j, map1<Relu>(x[j], s[0], t[0]));
  } else if (period == 8) {
    const __m256 vs = _mm256_loadu_ps(s), vt = _mm256_loadu_ps(t);
    for (; j + 8 <= len; j += 8) out.put8(y + j, map8<Relu>(_mm256_loadu_ps(x + j), vs, vt));
  } else if (period == 16) {
    const __m256 s0 = _mm256_loadu_ps(s), s1 = _mm256_loadu_ps(s + 8);
    const __m256 t0 = _mm256_loadu_ps(t), t1 = _mm256_loadu_ps(t + 8);
    for (; j + 16 <= len; j += 16) {
      out.put8(y + j, map8<Relu>(_mm256_loadu_ps(x + j), s0, t0));
      out.put8(y + j + 8, map8<Relu>(_mm256_loadu_ps(x + j + 8), s1, t1));
    }
  } else {  // period == len: channel j
    for (; j + 8 <= len; j += 8)
      out.put8(y + j, map8<Relu>(_mm256_loadu_ps(x + j), _mm256_loadu_ps(s + j), _mm256_loadu_ps(t + j)));
    for (; j < len; ++j) out.put1(y + j, map1<Relu>(x[j], s[j], t[j]));
  }
}

// Rows r0 .. r1 of a strip whose rows all have the same channels (c_step 0:
// a blocked part's pixels into channels-last, a channels-last part's
// pixels), in one loop: the call, the branches and the scale and shift per
// row cost more than the row's 8 to 64 floats did (densenet121's
// concat_batchnorm: 4.1 ms of its 25, 21 GB/s).
template <bool Relu, class Out>
LLGA_AVX2 void sameChannelRows(const Strip& st, int64_t r0, int64_t r1, const float* s, const float* t, const Out& out) {
  const float* x = st.src + r0 * st.src_step;
  typename Out::T* y = static_cast<typename Out::T*>(st.dst) + r0 * st.dst_step;
  if (st.period == st.len && (st.len == 8 || st.len == 16)) {  // one or two vectors a row, scale and shift in registers
    const __m256 s0 = _mm256_loadu_ps(s), t0 = _mm256_loadu_ps(t);
    if (st.len == 8) {
      for (int64_t r = r0; r < r1; ++r, x += st.src_step, y += st.dst_step)
        out.put8(y, map8<Relu>(_mm256_loadu_ps(x), s0, t0));
      return;
    }
    const __m256 s1 = _mm256_loadu_ps(s + 8), t1 = _mm256_loadu_ps(t + 8);
    for (int64_t r = r0; r < r1; ++r, x += st.src_step, y += st.dst_step) {
      out.put8(y, map8<Relu>(_mm256_loadu_ps(x), s0, t0));
      out.put8(y + 8, map8<Relu>(_mm256_loadu_ps(x + 8), s1, t1));
    }
    return;
  }
  for (int64_t r = r0; r < r1; ++r, x += st.src_step, y += st.dst_step) row<Relu>(x, y, st.len, st.period, s, t, out);
}

// acc[j] += x[j] (Squares: (x[j] - m[j])^2) for j < c.
template <bool Squares>
LLGA_AVX2 void accumulateRow(const float* x, const float* m, float* acc, int64_t c) {
  int64_t j = 0;
  for (; j + 8 <= c; j += 8) {
    __m256 v = _mm256_loadu_ps(x + j);
    if (Squares) {
      v = _mm256_sub_ps(v, _mm256_loadu_ps(m + j));
      _mm256_storeu_ps(acc + j, _mm256_fmadd_ps(v, v, _mm256_loadu_ps(acc + j)));
    } else {
      _mm256_storeu_ps(acc + j, _mm256_add_ps(v, _mm256_loadu_ps(acc + j)));
    }
  }
  for (; j < c; ++j) {
    const float v = Squares ? x[j] - m[j] : x[j];
    acc[j] += Squares ? v * v : v;
  }
}

// Per channel, the sum over `rows` rows of x (Squares: of (x - m)^2), in double.
template <bool Squares>
std::vector<double> channelSums(const float* x, int64_t rows, int64_t c, const float* m) {
  constexpr int64_t kBlock = 64;  // rows summed in float before they join the double total
  const int threads = rows * c < kParallelGrain ? 1 : std::max(1, static_cast<int>(std::min<int64_t>(getNumThreads(), rows)));
  std::vector<double> partial(static_cast<size_t>(threads * c), 0.0);
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t r0 = rows * t / nt, r1 = rows * (t + 1) / nt;
    std::vector<float> block(static_cast<size_t>(c));
    double* mine = partial.data() + t * c;
    for (int64_t r = r0; r < r1; r += kBlock) {
      std::fill(block.begin(), block.end(), 0.0f);
      for (int64_t k = r; k < std::min(r1, r + kBlock); ++k) accumulateRow<Squares>(x + k * c, m, block.data(), c);
      for (int64_t j = 0; j < c; ++j) mine[j] += block[static_cast<size_t>(j)];
    }
  }
  for (int t = 1; t < threads; ++t)
    for (int64_t j = 0; j < c; ++j) partial[static_cast<size_t>(j)] += partial[static_cast<size_t>(t * c + j)];
  partial.resize(static_cast<size_t>(c));
  return partial;
}

struct Task {
  const Strip* strip;
  int64_t r0, r1;
};

template <class Out>
void runTasks(const Job& job, const std::vector<Task>& tasks, int threads, const Out& out) {
  const int64_t n = static_cast<int64_t>(tasks.size());
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t k = 0; k < n; ++k) {
    const Task& t = tasks[static_cast<size_t>(k)];
    const Strip& st = *t.strip;
    if (st.c_step == 0 && (st.period == st.len || st.period == 1)) {  // every row the same channels
      if (job.relu) sameChannelRows<true>(st, t.r0, t.r1, job.scale + st.c0, job.shift + st.c0, out);
      else sameChannelRows<false>(st, t.r0, t.r1, job.scale + st.c0, job.shift + st.c0, out);
      continue;
    }
    for (int64_t r = t.r0; r < t.r1; ++r) {
      const float* x = st.src + r * st.src_step;
      typename Out::T* y = static_cast<typename Out::T*>(st.dst) + r * st.dst_step;
      const int64_t c = st.c0 + r * st.c_step;
      if (job.relu) row<true>(x, y, st.len, st.period, job.scale + c, job.shift + c, out);
      else row<false>(x, y, st.len, st.period, job.scale + c, job.shift + c, out);
    }
  }
}

}  // namespace

void groupNormParams(const float* x, int64_t images, int64_t spatial, int64_t c, int64_t groups, double eps,
                     const float* w, const float* b, float* scale, float* shift) {
  if (groups <= 0 || c % groups != 0) throw std::logic_error("group_norm: channels do not split into the groups");
  const int64_t per = c / groups;
  const double count = static_cast<double>(per * spatial);
  std::vector<float> mean_c(static_cast<size_t>(c));
  std::vector<double> mean_g(static_cast<size_t>(groups));
  for (int64_t i = 0; i < images; ++i) {
    const float* xi = x + i * spatial * c;
    const std::vector<double> sums = channelSums<false>(xi, spatial, c, nullptr);
    for (int64_t g = 0; g < groups; ++g) {
      double s = 0.0;
      for (int64_t j = g * per; j < (g + 1) * per; ++j) s += sums[static_cast<size_t>(j)];
      mean_g[static_cast<size_t>(g)] = count > 0 ? s / count : 0.0;
      std::fill_n(mean_c.begin() + g * per, per, static_cast<float>(mean_g[static_cast<size_t>(g)]));
    }
    const std::vector<double> squares = channelSums<true>(xi, spatial, c, mean_c.data());
    for (int64_t g = 0; g < groups; ++g) {
      double s = 0.0;
      for (int64_t j = g * per; j < (g + 1) * per; ++j) s += squares[static_cast<size_t>(j)];
      const double rstd = 1.0 / std::sqrt((count > 0 ? s / count : 0.0) + eps);
      for (int64_t j = g * per; j < (g + 1) * per; ++j) {
        const double sc = rstd * (w ? w[j] : 1.0f);
        scale[i * c + j] = static_cast<float>(sc);
        shift[i * c + j] = static_cast<float>((b ? b[j] : 0.0f) - mean_g[static_cast<size_t>(g)] * sc);
      }
    }
  }
}

bool available() { return cpuRunsAvx2Kernels(); }

void run(const Job& job) {
  // Tasks of whole rows, about kParallelGrain elements each.
  std::vector<Task> tasks;
  int64_t total = 0;
  for (const Strip& st : job.strips) {
    if (st.period != 1 && st.period != st.len && ((st.period != 8 && st.period != 16) || st.len % st.period != 0))
      throw std::logic_error("channel affine: a strip's period must be 1, 8 or 16 dividing its rows, or the row length");
    if (st.rows <= 0 || st.len <= 0) continue;
    const int64_t per_task = std::max<int64_t>(1, kParallelGrain / st.len);
    for (int64_t r = 0; r < st.rows; r += per_task) tasks.push_back({&st, r, std::min(st.rows, r + per_task)});
    total += st.rows * st.len;
  }
  const int threads = total < kParallelGrain ? 1 : getNumThreads();
  if (job.bf16 && !job.quantized) {
    runTasks(job, tasks, threads, StoreBF16{});
  } else if (!job.quantized) {
    runTasks(job, tasks, threads, StoreF32{});
  } else if (job.quantized->is_unsigned) {
    runTasks(job, tasks, threads, StoreQ<uint8_t>(*job.quantized));
  } else {
    runTasks(job, tasks, threads, StoreQ<int8_t>(*job.quantized));
  }
}

}  // namespace llga::affine
