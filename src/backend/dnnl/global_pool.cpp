#include "backend/dnnl/global_pool.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "backend/dnnl/dnnl_utils.h"
#include "runtime/threads.h"

namespace llga::global_pool {
namespace {

int threadsFor(const Geometry& g) {
  return g.images * g.outer * g.spatial * g.inner < kParallelGrain ? 1 : getNumThreads();
}

// max(m, x) where a NaN, in either, wins.
[[gnu::always_inline]] inline float maxNan(float m, float x) { return m != m ? m : (x > m || x != x) ? x : m; }

// acc[0..inner) += (or max=) the `count` positions of `inner` floats at src,
// two positions a step (half the loads and stores of acc).
template <bool Max>
[[gnu::always_inline]] inline void accumulate(const float* src, int64_t count, int64_t inner, float* acc) {
  int64_t p = 0;
  for (; p + 2 <= count; p += 2) {
    const float* a = src + p * inner;
    const float* b = a + inner;
#pragma omp simd
    for (int64_t i = 0; i < inner; ++i) {
      if constexpr (Max) acc[i] = maxNan(maxNan(acc[i], a[i]), b[i]);
      else acc[i] += a[i] + b[i];
    }
  }
  for (; p < count; ++p) {
    const float* a = src + p * inner;
#pragma omp simd
    for (int64_t i = 0; i < inner; ++i) {
      if constexpr (Max) acc[i] = maxNan(acc[i], a[i]);
      else acc[i] += a[i];
    }
  }
}

template <bool Max>
[[gnu::always_inline]] inline void body(const Geometry& g, const float* src, float* dst) {
  const int threads = threadsFor(g);
  const int64_t n_chunks = chunks(g), runs = g.images * g.outer, units = runs * n_chunks;
  const int64_t per = (g.spatial + n_chunks - 1) / n_chunks;
  thread_local std::vector<float> scratch;  // the partials of split runs
  if (n_chunks > 1) scratch.resize(static_cast<size_t>(units * g.inner));
  float* partial = n_chunks > 1 ? scratch.data() : dst;
  const float init = Max ? -std::numeric_limits<float>::infinity() : 0.0f;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t u = 0; u < units; ++u) {
    const int64_t run = u / n_chunks, k = u % n_chunks;
    const int64_t lo = k * per, hi = std::min(g.spatial, lo + per);
    float* acc = partial + u * g.inner;
    std::fill(acc, acc + g.inner, init);
    const float* s = src + (run / g.outer) * g.image_stride + (run % g.outer) * g.outer_stride + lo * g.inner;
    accumulate<Max>(s, hi - lo, g.inner, acc);
  }
  const float count = static_cast<float>(g.spatial);
  for (int64_t run = 0; run < runs; ++run) {
    float* out = dst + run * g.inner;
    const float* first = partial + run * n_chunks * g.inner;
    if (n_chunks > 1) {
      std::copy(first, first + g.inner, out);
      accumulate<Max>(first + g.inner, n_chunks - 1, g.inner, out);
    }
    if constexpr (!Max)
#pragma omp simd
      for (int64_t i = 0; i < g.inner; ++i) out[i] /= count;
  }
}

__attribute__((target("avx2,fma"))) void runAvx2(const Geometry& g, bool max, const float* src, float* dst) {
  max ? body<true>(g, src, dst) : body<false>(g, src, dst);
}

void runBaseline(const Geometry& g, bool max, const float* src, float* dst) {
  max ? body<true>(g, src, dst) : body<false>(g, src, dst);
}

}  // namespace

int64_t chunks(const Geometry& g) {
  const int64_t threads = threadsFor(g), runs = g.images * g.outer;
  if (threads <= 1 || runs >= threads) return 1;
  const int64_t want = (threads + runs - 1) / runs;
  return std::max<int64_t>(1, std::min(want, g.spatial / 16));  // at least 16 positions a chunk
}

void run(const Geometry& g, bool max, const float* src, float* dst) {
  if (g.images * g.outer * g.inner == 0) return;
  cpuRunsAvx2Kernels() ? runAvx2(g, max, src, dst) : runBaseline(g, max, src, dst);
}

}  // namespace llga::global_pool
