// llga's channel affine (backend/dnnl/channel_affine.h) against a scalar
// reference, for every row form concat_batchnorm builds: planes of one channel
// (NCHW), channel blocks of 8 and 16 (nChw8c here; nChw16c where convolutions
// write it, on AVX-512 CPUs), and pixels' channels (channels-last, where
// brgconv writes nhwc), with row tails, several strips, strided destinations,
// relu's NaN rule and enough work to split across threads; and the same
// forms written quantized to u8 and s8 (an int8 reader's input), with
// rounding to nearest even, saturation and NaN at the lowest value, and in
// bf16 (a bf16 reader's), rounded to nearest even as vcvtneps2bf16 does.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

#include "backend/dnnl/channel_affine.h"

using namespace llga;

namespace {

struct Case {
  int64_t rows, len, period, c_step, src_step, dst_step;
};

// What the kernel must write for y (after relu): y itself, or quantized as
// int8::quantizeActivation does (y times 1 / scale, rounded to nearest even,
// plus the zero point, saturated; NaN the lowest value).
// bf16 of y by the definition: of the two bf16 values around y (its top 16
// bits, and one step away from zero), the nearer, a tie to the even one;
// a denormal y is a signed zero and a NaN quiet (vcvtneps2bf16's rules).
uint16_t bf16Of(float y) {
  uint32_t b;
  std::memcpy(&b, &y, sizeof b);
  if (std::isnan(y)) return static_cast<uint16_t>((b >> 16) | 0x40);
  if (std::fpclassify(y) == FP_SUBNORMAL || y == 0.0f) return static_cast<uint16_t>((b >> 16) & 0x8000);
  if (std::isinf(y)) return static_cast<uint16_t>(b >> 16);
  const uint16_t lo = static_cast<uint16_t>(b >> 16), hi = static_cast<uint16_t>(lo + 1);
  auto value = [](uint16_t h) {
    const uint32_t w = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &w, sizeof f);
    return static_cast<double>(f);
  };
  const double d_lo = std::fabs(static_cast<double>(y) - value(lo));
  const double d_hi = std::isinf(value(hi)) ? std::ldexp(1.0, 128) - std::fabs(static_cast<double>(y)) : std::fabs(value(hi) - y);
  if (d_lo != d_hi) return d_lo < d_hi ? lo : hi;
  return (lo & 1) ? hi : lo;
}

template <typename T>
T expected(float y, const std::optional<affine::Job::Quantized>& q) {
  if constexpr (std::is_same_v<T, float>) {
    return y;
  } else if constexpr (std::is_same_v<T, uint16_t>) {
    return bf16Of(y);
  } else {
    const float r = static_cast<float>(q->zero_point) + std::nearbyint(y * (1.0f / q->scale));
    const float lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
    return static_cast<T>(std::isnan(r) ? lo : r < lo ? lo : r > hi ? hi : r);
  }
}

template <typename T>
void runCaseAs(const Case& k, bool relu, int strips, std::optional<affine::Job::Quantized> q) {
  const int64_t channels = 1 + (k.rows - 1) * k.c_step + k.period;  // the last row's last channel, strip 1's offset of 1

  std::vector<float> scale(channels), shift(channels);
  for (int64_t c = 0; c < channels; ++c) {
    scale[c] = 0.5f + 0.01f * static_cast<float>(c % 64);
    shift[c] = -0.3f + 0.02f * static_cast<float>(c % 61);
  }
  const int64_t src_size = k.rows * k.src_step + k.len, dst_size = k.rows * k.dst_step + k.len;
  std::vector<std::vector<float>> src(strips);
  std::vector<std::vector<T>> dst(strips);
  affine::Job job{{}, scale.data(), shift.data(), relu, q, std::is_same_v<T, uint16_t>};
  const T untouched = static_cast<T>(std::is_same_v<T, float> ? 7.25f : 77.0f);
  for (int s = 0; s < strips; ++s) {
    src[s].resize(src_size);
    dst[s].assign(dst_size, untouched);  // what the strips must not touch stays
    for (int64_t i = 0; i < src_size; ++i) src[s][i] = std::sin(0.37f * static_cast<float>(i + 11 * s)) * 3.0f;
    src[s][5] = std::numeric_limits<float>::quiet_NaN();
    src[s][6] = -std::numeric_limits<float>::infinity();
    job.strips.push_back({src[s].data(), dst[s].data(), k.rows, k.len, k.src_step, k.dst_step, s % 2, k.c_step, k.period});
  }
  affine::run(job);
  for (int s = 0; s < strips; ++s) {
    std::vector<bool> written(dst_size, false);
    for (int64_t r = 0; r < k.rows; ++r)
      for (int64_t j = 0; j < k.len; ++j) {
        const int64_t c = s % 2 + r * k.c_step + j % k.period;
        const float x = src[s][r * k.src_step + j];
        float y = std::fma(x, scale[c], shift[c]);
        if (relu && y < 0) y = 0;
        const T want = expected<T>(y, q);
        const T got = dst[s][r * k.dst_step + j];
        written[r * k.dst_step + j] = true;
        if constexpr (std::is_same_v<T, float>) {
          if (std::isnan(want)) {
            EXPECT_TRUE(std::isnan(got)) << "strip " << s << " row " << r << " j " << j;
          } else {
            EXPECT_FLOAT_EQ(got, want) << "strip " << s << " row " << r << " j " << j << " period " << k.period;
          }
        } else {
          EXPECT_EQ(static_cast<int>(got), static_cast<int>(want))
              << "strip " << s << " row " << r << " j " << j << " period " << k.period << " y " << y;
        }
      }
    for (int64_t i = 0; i < dst_size; ++i) {
      if (!written[i]) {
        EXPECT_EQ(dst[s][i], untouched) << "wrote outside its rows at " << i;
      }
    }
  }
}

void runCase(const Case& k, bool relu, int strips) { runCaseAs<float>(k, relu, strips, std::nullopt); }

}  // namespace

TEST(ChannelAffine, EveryRowFormMatchesTheReference) {
  if (!affine::available()) GTEST_SKIP() << "llga's AVX2 kernels do not run on this CPU";
  const Case cases[] = {
      {5, 13, 1, 1, 13, 13},   // NCHW planes with a tail of 5
      {3, 8 * 7, 8, 8, 56, 56},  // nChw8c blocks
      {2, 16 * 9, 16, 16, 144, 144},  // nChw16c blocks
      {9, 20, 20, 0, 20, 52},  // channels-last pixels: 20 of a 52-channel result's each
      {4, 7, 7, 0, 7, 30},     // channels-last, shorter than a vector
      {37, 16, 16, 0, 16, 80},  // a 16-channel block into a channels-last result, a pixel a row
      {6, 41, 41, 0, 41, 90},   // channels-last, 8-lane vectors and a tail of 1
      {3, 16 * 5, 16, 16, 80, 96},  // nChw16c blocks into a wider strided destination
      {33, 8, 8, 0, 8, 40},    // an 8-channel block into a channels-last result (nChw8c, AVX2 CPUs)
      {5, 13, 1, 0, 13, 20},   // rows of one channel, the same for every row
  };
  for (const Case& k : cases)
    for (bool relu : {false, true}) {
      runCase(k, relu, 3);
      // quantized: a step that puts the values (-3.6 .. 3.6) across the
      // range with saturation at both ends for s8, at the top for u8
      runCaseAs<uint8_t>(k, relu, 3, affine::Job::Quantized{0.02f, 0, true});
      runCaseAs<uint8_t>(k, relu, 3, affine::Job::Quantized{0.011f, 100, true});
      runCaseAs<int8_t>(k, relu, 3, affine::Job::Quantized{0.021f, -5, false});
      runCaseAs<uint16_t>(k, relu, 3, std::nullopt);  // bf16
    }
}

// bf16 output: ties to even both ways, the largest floats to infinity,
// infinities kept, NaN quiet, denormals flushed to signed zeros, on the
// vector path and the tail.
TEST(ChannelAffine, Bf16OutputRoundsAsVcvtneps2bf16) {
  if (!affine::available()) GTEST_SKIP() << "llga's AVX2 kernels do not run on this CPU";
  auto f = [](uint32_t bits) {
    float v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  };
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {f(0x3f808000u), f(0x3f818000u), f(0x3f808001u), f(0xbf818000u), f(0x7f7fffffu), -inf,
                                inf, std::numeric_limits<float>::quiet_NaN(), f(0x7f800001u), f(0x00000001u),
                                f(0x80400000u), 0.0f, -0.0f, 1.0f / 3.0f, -2.5e-38f, 3.0e38f, 1.00390625f};
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> one(1, 1.0f), zero(1, 0.0f);
  std::vector<uint16_t> out(x.size(), 0x1234);
  affine::Job job{{{x.data(), out.data(), 1, n, n, n, 0, 0, 1}}, one.data(), zero.data(), false, std::nullopt, true};
  affine::run(job);
  for (int64_t i = 0; i < n; ++i)  // y = x * 1 + 0 (so -0 becomes +0)
    EXPECT_EQ(out[i], bf16Of(std::fma(x[i], 1.0f, 0.0f))) << "x " << x[i] << " at " << i;
  // the reference's own rules
  EXPECT_EQ(bf16Of(f(0x3f808000u)), 0x3f80);  // a tie, to even (down)
  EXPECT_EQ(bf16Of(f(0x3f818000u)), 0x3f82);  // a tie, to even (up)
  EXPECT_EQ(bf16Of(f(0x7f7fffffu)), 0x7f80);  // to infinity
  EXPECT_EQ(bf16Of(f(0x80400000u)), 0x8000);  // a denormal: -0
}

// Halves round to even, out-of-range values saturate, NaN and -inf give the
// lowest value, +inf the highest, on the vector path (8 lanes) and the tail.
TEST(ChannelAffine, QuantizedOutputRoundsHalvesToEvenAndSaturates) {
  if (!affine::available()) GTEST_SKIP() << "llga's AVX2 kernels do not run on this CPU";
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 3.5f, 126.5f, 300.0f, -300.0f, nan,
                                inf,  -inf, 127.5f, -128.5f, 254.5f, 0.49999997f};
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> one(1, 1.0f), zero(1, 0.0f);
  for (const auto& q : {affine::Job::Quantized{1.0f, 0, true}, affine::Job::Quantized{1.0f, 3, false},
                        affine::Job::Quantized{1.0f, 0, false}}) {
    std::vector<int8_t> s8(x.size(), 0);
    std::vector<uint8_t> u8(x.size(), 0);
    void* dst = q.is_unsigned ? static_cast<void*>(u8.data()) : static_cast<void*>(s8.data());
    affine::Job job{{{x.data(), dst, 1, n, n, n, 0, 0, 1}}, one.data(), zero.data(), false, q};
    affine::run(job);
    for (int64_t i = 0; i < n; ++i) {
      const int got = q.is_unsigned ? u8[i] : s8[i];
      const int want = q.is_unsigned ? expected<uint8_t>(x[i], q) : expected<int8_t>(x[i], q);
      EXPECT_EQ(got, want) << "x " << x[i] << " zero point " << q.zero_point << (q.is_unsigned ? " u8" : " s8");
    }
  }
  // spot checks of the reference itself
  EXPECT_EQ(expected<uint8_t>(2.5f, affine::Job::Quantized{1.0f, 0, true}), 2);
  EXPECT_EQ(expected<int8_t>(-2.5f, affine::Job::Quantized{1.0f, 3, false}), 1);
  EXPECT_EQ(expected<int8_t>(nan, affine::Job::Quantized{1.0f, 3, false}), -128);
  EXPECT_EQ(expected<uint8_t>(300.0f, affine::Job::Quantized{1.0f, 0, true}), 255);
}

TEST(ChannelAffine, LargeJobsSplitAcrossThreads) {
  if (!affine::available()) GTEST_SKIP() << "llga's AVX2 kernels do not run on this CPU";
  runCase({40, 8 * 1024, 8, 8, 8 * 1024, 8 * 1024}, true, 4);  // 1.3M floats
  runCase({3000, 48, 48, 0, 48, 64}, false, 2);
  runCase({4000, 16, 16, 0, 16, 528}, true, 3);  // densenet's nChw16c parts into a channels-last concat
  runCaseAs<uint8_t>({3000, 48, 48, 0, 48, 64}, true, 2, affine::Job::Quantized{0.015f, 0, true});
}

TEST(ChannelAffine, RejectsAPeriodThatDoesNotTileItsRows) {
  if (!affine::available()) GTEST_SKIP() << "llga's AVX2 kernels do not run on this CPU";
  std::vector<float> buf(64), p(64, 1.0f);
  affine::Job job{{{buf.data(), buf.data(), 1, 12, 12, 12, 0, 0, 8}}, p.data(), p.data(), false, std::nullopt};
  EXPECT_THROW(affine::run(job), std::logic_error);
}
