#include "backend/dnnl/image_layout.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "backend/dnnl/quantize.h"
#include "backend/dnnl/vec_math.h"
#include "runtime/tensor.h"
#include "runtime/threads.h"

namespace llga::image {

namespace {

using dt = dnnl::memory::data_type;
constexpr int64_t kLanes = 16;

// What the kernels here are compiled for (LLGA_AVX512_BF16): AVX-512 F, BW
// and VL, and AVX512-BF16 for a bf16 destination.
bool cpuRuns(dt to) {
  static const bool avx512 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  }();
  static const bool bf16 = avx512 && __builtin_cpu_supports("avx512bf16");
  return to == dt::bf16 ? bf16 : avx512;
}

// For output vector v of 16 pixels' C channels (element e is pixel
// (16 v + e) / C, channel (16 v + e) % C): the permute indices into the
// pair of planes (0, 1) and (2, 3), and which elements come from the second pair.
struct Shuffle {
  alignas(64) int32_t pair01[4][kLanes], pair23[4][kLanes];
  uint16_t second[4] = {0, 0, 0, 0};
  explicit Shuffle(int64_t c) {
    for (int64_t v = 0; v < c; ++v)
      for (int64_t e = 0; e < kLanes; ++e) {
        const int64_t g = kLanes * v + e, p = g / c, ch = g % c;
        pair01[v][e] = static_cast<int32_t>(p + (ch % 2) * kLanes);
        pair23[v][e] = pair01[v][e];
        if (ch >= 2) second[v] = static_cast<uint16_t>(second[v] | (1u << e));
      }
  }
};

template <dt Out>
struct Convert {
  float inv = 1.0f, z = 0.0f;
};

// One output vector, converted and stored at `at` (elements, dst's type).
template <dt Out>
LLGA_AVX512_BF16 inline void put(void* dst, int64_t at, __m512 v, const Convert<Out>& k) {
  if constexpr (Out == dt::f32) {
    _mm512_storeu_ps(static_cast<float*>(dst) + at, v);
  } else if constexpr (Out == dt::bf16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(static_cast<uint16_t*>(dst) + at),
                        reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)));
  } else {
    using T = std::conditional_t<Out == dt::u8, uint8_t, int8_t>;
    const __m512i q = vec::quantize16(v, _mm512_set1_ps(k.inv), _mm512_set1_ps(k.z),
                                      _mm512_set1_ps(std::numeric_limits<T>::min()),
                                      _mm512_set1_ps(std::numeric_limits<T>::max()));
    auto* p = reinterpret_cast<__m128i*>(static_cast<T*>(dst) + at);
    if constexpr (Out == dt::u8) _mm_storeu_si128(p, _mm512_cvtusepi32_epi8(q));
    else _mm_storeu_si128(p, _mm512_cvtsepi32_epi8(q));
  }
}

// One element (the pixels past the last 16 of an image).
template <dt Out>
inline void putOne(void* dst, int64_t at, float x, const Convert<Out>& k) {
  if constexpr (Out == dt::f32) {
    static_cast<float*>(dst)[at] = x;
  } else if constexpr (Out == dt::bf16) {
    uint32_t bits;
    std::memcpy(&bits, &x, 4);
    // rounded to nearest even; a NaN stays a (quiet) NaN, as vcvtneps2bf16 keeps it
    static_cast<uint16_t*>(dst)[at] = std::isnan(x) ? static_cast<uint16_t>((bits >> 16) | 0x40) : BFloat16::from(x).bits;
  } else {
    using T = std::conditional_t<Out == dt::u8, uint8_t, int8_t>;
    const float lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
    const float r = k.z + int8::roundHalfEven(x * k.inv);
    static_cast<T*>(dst)[at] = static_cast<T>(!(r == r) ? lo : r < lo ? lo : r > hi ? hi : r);
  }
}

// Pixels [p0, p1) of image n: 16 at a time, then one by one.
template <dt Out>
LLGA_AVX512_BF16 void pixels(const float* src, void* dst, int64_t c, int64_t hw, int64_t n, int64_t p0, int64_t p1,
                             const Shuffle& s, const Convert<Out>& k) {
  const float* img = src + n * c * hw;
  const int64_t out0 = n * c * hw;
  int64_t p = p0;
  for (; p + kLanes <= p1; p += kLanes) {
    __m512 x[4];
    for (int64_t ch = 0; ch < 4; ++ch) x[ch] = _mm512_loadu_ps(img + std::min(ch, c - 1) * hw + p);
    for (int64_t v = 0; v < c; ++v) {
      __m512 o = _mm512_permutex2var_ps(x[0], _mm512_load_si512(s.pair01[v]), x[1]);
      if (s.second[v])  // the elements of channels 2 and 3
        o = _mm512_mask_blend_ps(s.second[v], o, _mm512_permutex2var_ps(x[2], _mm512_load_si512(s.pair23[v]), x[3]));
      put<Out>(dst, out0 + p * c + v * kLanes, o, k);
    }
  }
  for (; p < p1; ++p)
    for (int64_t ch = 0; ch < c; ++ch) putOne<Out>(dst, out0 + p * c + ch, img[ch * hw + p], k);
}

template <dt Out>
void run(const float* src, void* dst, int64_t n, int64_t c, int64_t hw, const Convert<Out>& k) {
  const Shuffle s(c);
  constexpr int64_t kChunk = 1024;  // pixels a task (a multiple of 16)
  const int64_t chunks = (hw + kChunk - 1) / kChunk, tasks = n * chunks;
  parallelFor(tasks, n * c * hw >= kParallelGrain, [&](int64_t t) {
    const int64_t img = t / chunks, p0 = t % chunks * kChunk;
    pixels<Out>(src, dst, c, hw, img, p0, std::min(hw, p0 + kChunk), s, k);
  });
}

}  // namespace

bool takes(const dnnl::memory::desc& src, const dnnl::memory::desc& dst) {
  // (reorder() asks for every reorder: the cheap tests first, on the C struct)
  if (src.data.ndims != 4 || src.data.dims[1] < 1 || src.data.dims[1] > 4 || src.data.data_type != dnnl_f32) return false;
  const dnnl::memory::dims dims = src.dims();
  const dt t = dst.data_type();
  if (dst.dims() != dims || (t != dt::f32 && t != dt::bf16 && t != dt::u8 && t != dt::s8) || !cpuRuns(t)) return false;
  return src == dnnl::memory::desc(dims, dt::f32, dnnl::memory::format_tag::nchw) &&
         dst == dnnl::memory::desc(dims, t, dnnl::memory::format_tag::nhwc);
}

void toChannelsLast(const dnnl::memory& src, const dnnl::memory& dst, float scale, int32_t zero_point) {
  const dnnl::memory::dims d = src.get_desc().dims();
  const auto* x = static_cast<const float*>(src.get_data_handle());
  void* y = dst.get_data_handle();
  const int64_t n = d[0], c = d[1], hw = d[2] * d[3];
  switch (dst.get_desc().data_type()) {
    case dt::f32: return run<dt::f32>(x, y, n, c, hw, {});
    case dt::bf16: return run<dt::bf16>(x, y, n, c, hw, {});
    case dt::u8: return run<dt::u8>(x, y, n, c, hw, {1.0f / scale, static_cast<float>(zero_point)});
    case dt::s8: return run<dt::s8>(x, y, n, c, hw, {1.0f / scale, static_cast<float>(zero_point)});
    default: break;
  }
}

}  // namespace llga::image
