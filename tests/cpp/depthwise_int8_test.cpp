// llga's own int8 depthwise convolution (backend/dnnl/depthwise_int8.h)
// against the same arithmetic done by hand in int64 and double: kernels 1x1
// to 7x7 (one and two groups of four rows), strides 1 to 3, asymmetric
// padding, channel counts around the 64-channel block and its 16-channel
// lanes, pixel strides wider than the channels, batch, each output type and
// step, on one thread and on several.
#include <gtest/gtest.h>

#include <omp.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "backend/dnnl/depthwise_int8.h"

using namespace llga;
using dw_int8::Geometry;
using dw_int8::Output;
using dw_int8::Step;

namespace {

struct Case {
  int64_t n, c, h, w, kh, kw, sh, sw, pad_t, pad_l, pad_b, pad_r;
  int64_t src_pixel_extra = 0;  // elements between one pixel's channels and the next's
  int32_t zp = 0;  // of a u8 source; -1: an s8 source
  Output out = Output::U8;
  std::vector<Step> steps;
  bool bias = true;
};

double applyStep(double y, const Step& s) {
  switch (s.kind) {
    case Step::Kind::Relu: return y < 0 ? y * s.alpha : y;
    case Step::Kind::Clip: return std::min(std::max(y, static_cast<double>(s.alpha)), static_cast<double>(s.beta));
    case Step::Kind::Linear: return y * s.alpha + s.beta;
    case Step::Kind::Sigmoid: return 1.0 / (1.0 + std::exp(-y));  // (not a step the kernel is given)
    case Step::Kind::Swish: return y / (1.0 + std::exp(-y));
  }
  return y;
}

void check(const Case& k, int threads) {
  std::mt19937 rng(static_cast<unsigned>(k.c * 131 + k.kh * 17 + k.kw * 7 + k.sh + threads));
  Geometry g;
  g.n = k.n, g.c = k.c, g.h = k.h, g.w = k.w, g.kh = k.kh, g.kw = k.kw, g.stride_h = k.sh, g.stride_w = k.sw;
  g.pad_t = k.pad_t, g.pad_l = k.pad_l;
  g.oh = (k.h + k.pad_t + k.pad_b - k.kh) / k.sh + 1;
  g.ow = (k.w + k.pad_l + k.pad_r - k.kw) / k.sw + 1;
  const int64_t px = k.c + k.src_pixel_extra;
  g.src_strides[2] = px, g.src_strides[1] = px * k.w, g.src_strides[0] = px * k.w * k.h;
  g.dst_strides[2] = k.c, g.dst_strides[1] = k.c * g.ow, g.dst_strides[0] = k.c * g.ow * g.oh;
  ASSERT_TRUE(dw_int8::supports(g));

  std::vector<uint8_t> src(static_cast<size_t>(g.src_strides[0] * k.n));
  for (auto& v : src) v = static_cast<uint8_t>(rng() % 256);
  const bool s8 = k.zp < 0;  // the bytes read as int8_t, real zero 0
  const int32_t zp = s8 ? 0 : k.zp;
  std::vector<int8_t> w(static_cast<size_t>(k.c * k.kh * k.kw));
  for (auto& v : w) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  std::vector<float> scale(static_cast<size_t>(k.c)), bias(static_cast<size_t>(k.c));
  for (int64_t c = 0; c < k.c; ++c) {
    scale[static_cast<size_t>(c)] = 1e-6f * static_cast<float>(1 + rng() % 50);
    bias[static_cast<size_t>(c)] = 0.01f * static_cast<float>(static_cast<int>(rng() % 200) - 100);
  }
  auto wt = dw_int8::pack(w.data(), scale.data(), k.c, k.kh, k.kw, zp, s8);
  const size_t elem = k.out == Output::F32 ? 4 : 1;
  const size_t out_n = static_cast<size_t>(g.dst_strides[0] * k.n);
  std::vector<char> dst(out_n * elem + 64, 0x5a);  // the bytes past the output stay 0x5a
  std::vector<char> scratch(dw_int8::scratchBytes(g, threads) + 64);
  void* aligned = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(scratch.data()) + 63) & ~uintptr_t{63});
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);
  dw_int8::run(*wt, g, src.data(), dst.data(), k.out, k.bias ? bias.data() : nullptr, k.steps, aligned);
  omp_set_num_threads(before);

  int64_t bad = 0;
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t oh = 0; oh < g.oh; ++oh)
      for (int64_t ow = 0; ow < g.ow; ++ow)
        for (int64_t c = 0; c < k.c; ++c) {
          int64_t sum = 0;
          for (int64_t i = 0; i < k.kh; ++i)
            for (int64_t j = 0; j < k.kw; ++j) {
              const int64_t ih = oh * k.sh - k.pad_t + i, iw = ow * k.sw - k.pad_l + j;
              const bool inside = ih >= 0 && ih < k.h && iw >= 0 && iw < k.w;
              const uint8_t byte = inside ? src[static_cast<size_t>(n * g.src_strides[0] + ih * g.src_strides[1] +
                                                                 iw * g.src_strides[2] + c)]
                                          : static_cast<uint8_t>(zp);
              const int64_t x = s8 ? static_cast<int8_t>(byte) : byte;
              sum += (x - zp) * w[static_cast<size_t>((c * k.kh + i) * k.kw + j)];
            }
          double y = static_cast<double>(scale[static_cast<size_t>(c)]) * static_cast<double>(sum) +
                     (k.bias ? bias[static_cast<size_t>(c)] : 0.0);
          for (const Step& s : k.steps) y = applyStep(y, s);
          const size_t at = static_cast<size_t>(n * g.dst_strides[0] + oh * g.dst_strides[1] + ow * g.dst_strides[2] + c);
          if (k.out == Output::F32) {
            const float got = reinterpret_cast<const float*>(dst.data())[at];
            if (std::fabs(got - y) > 1e-5 * std::max(1.0, std::fabs(y))) ++bad;
          } else {
            const double lo = k.out == Output::U8 ? 0 : -128, hi = k.out == Output::U8 ? 255 : 127;
            const double want = std::min(std::max(std::nearbyint(y), lo), hi);
            const double got = k.out == Output::U8 ? static_cast<uint8_t>(dst[at]) : static_cast<int8_t>(dst[at]);
            // float rounding of y may land on the other side of a half
            if (std::fabs(got - want) > (std::fabs(y - std::floor(y) - 0.5) < 1e-3 ? 1 : 0)) ++bad;
          }
        }
  EXPECT_EQ(bad, 0) << "c=" << k.c << " k=" << k.kh << "x" << k.kw << " stride " << k.sh << "x" << k.sw
                    << " threads " << threads;
  for (size_t i = out_n * elem; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0x5a) << "wrote past the output at byte " << i;
}

}  // namespace

TEST(DepthwiseInt8, MatchesIntegerReference) {
  if (!dw_int8::available()) GTEST_SKIP() << "no AVX512-VNNI here (as oneDNN reports the ISA)";
  const Step relu{Step::Kind::Relu, 0, 0}, clip6{Step::Kind::Clip, 0, 6}, leaky{Step::Kind::Relu, 0.1f, 0},
      swish{Step::Kind::Swish, 1, 0}, quant{Step::Kind::Linear, 40.0f, 3.0f}, quant_s{Step::Kind::Linear, 30.0f, 0},
      clip_half{Step::Kind::Clip, 0, 0.5f}, clip_sym{Step::Kind::Clip, -0.5f, 0.25f};
  const std::vector<Case> cases = {
      // mobilenet_v2's: 3x3, pad 1, relu6, quantized u8 (zero point 128: a signed grid as u8)
      {1, 144, 14, 14, 3, 3, 1, 1, 1, 1, 1, 1, 0, 128, Output::U8, {clip6, quant}},
      {1, 96, 15, 15, 3, 3, 2, 2, 1, 1, 1, 1, 0, 0, Output::U8, {clip6, quant}},
      // clips that bind on both sides (most values here are within +-2), with
      // bounds inside u8's and s8's range: the clamp is the epilogue's own, not
      // the saturation's
      {1, 144, 13, 14, 3, 3, 1, 1, 1, 1, 1, 1, 0, 128, Output::U8, {clip_half, quant}},
      {1, 80, 9, 9, 3, 3, 1, 1, 1, 1, 1, 1, 0, 0, Output::S8, {clip_sym, quant_s}},
      // channel tails: below one lane, across lanes, one block and a bit
      {1, 1, 6, 7, 3, 3, 1, 1, 1, 1, 1, 1, 0, 5, Output::U8, {relu, quant}},
      {2, 17, 5, 9, 3, 3, 1, 1, 1, 1, 1, 1, 3, 0, Output::S8, {quant_s}},
      {1, 70, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 0, 128, Output::S8, {leaky, quant_s}},
      {1, 200, 4, 5, 3, 3, 2, 1, 0, 2, 1, 0, 8, 17, Output::U8, {quant}},
      // efficientnet's: 5x5 (two groups of rows), swish, fp32 out
      {1, 240, 12, 11, 5, 5, 2, 2, 2, 2, 2, 2, 0, 128, Output::F32, {swish}},
      {1, 48, 9, 9, 5, 5, 1, 1, 2, 2, 2, 2, 0, 0, Output::F32, {}},
      // other kernels: 1x1, 7x7, 4x2, 3x1 with stride 3, no bias
      {1, 32, 6, 6, 1, 1, 1, 1, 0, 0, 0, 0, 0, 9, Output::F32, {relu}},
      {1, 65, 10, 10, 7, 7, 1, 1, 3, 3, 3, 3, 0, 128, Output::F32, {}, false},
      {1, 64, 8, 9, 4, 2, 1, 2, 1, 0, 2, 1, 0, 0, Output::U8, {quant}, false},
      {1, 20, 11, 8, 3, 1, 3, 1, 1, 0, 1, 0, 1, 128, Output::S8, {quant_s}},
      // s8 sources (a signed grid where the backend writes it so): a block and a tail, both unit widths
      {1, 144, 14, 14, 3, 3, 1, 1, 1, 1, 1, 1, 0, -1, Output::U8, {clip6, quant}},
      {2, 17, 5, 9, 3, 3, 2, 1, 1, 1, 1, 1, 3, -1, Output::S8, {quant_s}},
      {1, 70, 9, 8, 5, 5, 1, 1, 2, 2, 2, 2, 0, -1, Output::F32, {swish}},
  };
  for (const Case& k : cases)
    for (int threads : {1, 2, 3}) check(k, threads);
}

TEST(DepthwiseInt8, PackRejectsLargeKernels) {
  std::vector<int8_t> w(9 * 9);
  std::vector<float> s(1, 1.0f);
  EXPECT_THROW(dw_int8::pack(w.data(), s.data(), 1, 9, 9, 0), std::invalid_argument);
  EXPECT_THROW(dw_int8::pack(w.data(), s.data(), 1, 3, 3, 5, true), std::invalid_argument);  // s8 has no zero point
}
