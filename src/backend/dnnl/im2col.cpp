#include "backend/dnnl/im2col.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backend/dnnl/dnnl_utils.h"
#include "runtime/threads.h"

namespace llga::im2col {

bool available() {
  return cpuRunsAvx512Kernels() && envSwitchOn("LLGA_IM2COL");  // read per decision (a convolution's first call at a shape)
}

bool pays(const Geometry& g) {
  const char* env = std::getenv("LLGA_IM2COL");
  if (env && std::strcmp(env, "all") == 0) return true;
  return g.stride >= 2 && g.k > g.stride && g.dilation == 1 && g.oc * g.c * g.k >= kMinWeightFloats;
}

int64_t chunkRows(const Geometry& g) {
  const int64_t bytes = g.cols() * static_cast<int64_t>(sizeof(float));
  return std::max<int64_t>(1, std::min(g.rows(), kChunkBytes / std::max<int64_t>(bytes, 1)));
}

void copy(const Geometry& g, const float* src, float* col, int64_t begin, int64_t end) {
  const int64_t cols = g.cols();
  parallelFor(end - begin, (end - begin) * cols >= kParallelGrain, [&](int64_t at_row) {
    const int64_t r = begin + at_row, i = r / g.ow, j = r % g.ow;
    float* out = col + at_row * cols;
    const float* image = src + i * g.w * g.c;
    for (int64_t tap = 0; tap < g.k; ++tap) {
      const int64_t at = j * g.stride + tap * g.dilation - g.pad_l;
      if (at < 0 || at >= g.w) {
        for (int64_t ic = 0; ic < g.c; ++ic) out[ic * g.k + tap] = 0.0f;
        continue;
      }
      const float* in = image + at * g.c;
      for (int64_t ic = 0; ic < g.c; ++ic) out[ic * g.k + tap] = in[ic];
    }
  });
}

}  // namespace llga::im2col
