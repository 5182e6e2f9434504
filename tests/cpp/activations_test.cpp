// llga's own activations (backend/dnnl/activations.h): swish against
// x / (1 + exp(-x)) and gelu against x / 2 * erfc(-x / sqrt 2) in double, over
// the whole float range that matters, every tail length, buffers split across
// threads, and PyTorch's answers for the special values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "backend/dnnl/activations.h"
#include "backend/dnnl/vec_math.h"
#include "runtime/threads.h"

using namespace llga;

namespace {

double reference(float x) { return static_cast<double>(x) / (1.0 + std::exp(-static_cast<double>(x))); }

// Relative error against the double reference; values whose exact result is
// below 1e-35 only need to be as small (the shared exp flushes e^x to 0 below
// x = -87 rather than compute a denormal: swish(-87.5) is -0, not -9e-37).
void expectClose(float got, float x) {
  const double want = reference(x);
  if (std::fabs(want) < 1e-35) {
    EXPECT_LE(std::fabs(got), 1e-35) << "x=" << x;
    return;
  }
  EXPECT_LE(std::fabs(got - want) / std::fabs(want), 1e-6) << "x=" << x << " got " << got << " want " << want;
}

}  // namespace

TEST(Swish, MatchesReferenceAcrossTheRange) {
  if (!fastSwishEnabled()) GTEST_SKIP() << "no AVX-512 on this CPU";
  std::vector<float> x;
  for (double v = -120; v <= 120; v += 0.0037) x.push_back(static_cast<float>(v));
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-40f, -1e-40f, 87.0f, -87.0f, 88.5f, -88.5f, 1e30f, -1e30f})
    x.push_back(v);
  std::vector<float> y = x;
  swishInPlace(y.data(), static_cast<int64_t>(y.size()));
  for (size_t i = 0; i < x.size(); ++i) expectClose(y[i], x[i]);
}

TEST(Swish, SpecialValuesAsPyTorch) {
  if (!fastSwishEnabled()) GTEST_SKIP() << "no AVX-512 on this CPU";
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> y = {inf, -inf, std::numeric_limits<float>::quiet_NaN(), -0.0f, -1000.0f};
  swishInPlace(y.data(), static_cast<int64_t>(y.size()));
  EXPECT_EQ(y[0], inf);
  EXPECT_TRUE(std::isnan(y[1]));  // torch.nn.functional.silu(-inf) is nan
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_EQ(y[3], 0.0f);
  EXPECT_TRUE(std::signbit(y[3]));
  EXPECT_EQ(y[4], 0.0f);  // -1000 / (1 + e^1000): -0 in PyTorch
}

namespace {

using InPlace = void (*)(float*, int64_t);
using Check = std::function<void(float got, float x)>;

// Every length up to several vectors: the masked tail touches nothing past n.
void checkTails(InPlace f, const Check& check) {
  for (int64_t n = 0; n <= 70; ++n) {
    std::vector<float> buf(static_cast<size_t>(n) + 16, 1234.5f);
    for (int64_t i = 0; i < n; ++i) buf[static_cast<size_t>(i)] = static_cast<float>(i) * 0.25f - 5.0f;
    f(buf.data(), n);
    for (int64_t i = 0; i < n; ++i) check(buf[static_cast<size_t>(i)], static_cast<float>(i) * 0.25f - 5.0f);
    for (size_t i = static_cast<size_t>(n); i < buf.size(); ++i)
      ASSERT_EQ(buf[i], 1234.5f) << "n=" << n << " wrote at " << i;
  }
}

// A buffer large enough to be split across threads, with a length that is
// not a multiple of the split: every element is done exactly once (applied
// twice, the check would see f(f(x))).
void checkThreadSplit(InPlace f, const Check& check) {
  const int before = getNumThreads();
  for (int threads : {1, 2, 3}) {
    setNumThreads(threads);
    const int64_t n = 3 * 16384 * 2 + 37;
    std::vector<float> buf(static_cast<size_t>(n) + 1, -7.0f);
    for (int64_t i = 0; i < n; ++i) buf[static_cast<size_t>(i)] = static_cast<float>(i % 1000) * 0.01f - 5.0f;
    f(buf.data(), n);
    for (int64_t i = 0; i < n; ++i) check(buf[static_cast<size_t>(i)], static_cast<float>(i % 1000) * 0.01f - 5.0f);
    EXPECT_EQ(buf[static_cast<size_t>(n)], -7.0f);
  }
  setNumThreads(before);
}

}  // namespace

TEST(Swish, TailsStopAtTheEnd) {
  if (!fastSwishEnabled()) GTEST_SKIP() << "no AVX-512 on this CPU";
  checkTails(swishInPlace, expectClose);
}

TEST(Swish, SplitAcrossThreadsCoversEveryElementOnce) {
  if (!fastSwishEnabled()) GTEST_SKIP() << "no AVX-512 on this CPU";
  checkThreadSplit(swishInPlace, expectClose);
}

// gelu (erf form): within 4e-7 absolute of the double reference everywhere
// (Abramowitz and Stegun's erfc is 1.5e-7 absolute; PyTorch's own float gelu
// is 6e-8 off at -5 through 1 + erf's cancellation), exactly x far right and
// 0 far left.
namespace {
double geluReference(float x) { return 0.5 * static_cast<double>(x) * std::erfc(-static_cast<double>(x) / std::sqrt(2.0)); }
void expectGeluClose(float got, float x) { EXPECT_NEAR(got, geluReference(x), 5e-7) << "x=" << x; }
}  // namespace

TEST(Gelu, MatchesReferenceAcrossTheRange) {
  if (!fastGeluEnabled()) GTEST_SKIP() << "no AVX-512 on this CPU";
  std::vector<float> x;
  for (double v = -30; v <= 30; v += 0.00071) x.push_back(static_cast<float>(v));
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-40f, -1e-40f, 12.7f, -12.7f, 13.0f, -13.0f, 1e30f, -1e30f})
    x.push_back(v);
  std::vector<float> y = x;
  geluErfInPlace(y.data(), static_cast<int64_t>(y.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = geluReference(x[i]);
    ASSERT_LE(std::fabs(y[i] - want), 4e-7 + 1e-7 * std::fabs(want)) << "x=" << x[i] << " got " << y[i] << " want " << want;
  }
}

TEST(Gelu, SpecialValuesAsPyTorch) {
  if (!fastGeluEnabled()) GTEST_SKIP() << "no AVX-512 on this CPU";
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> y = {inf, -inf, std::numeric_limits<float>::quiet_NaN(), 0.0f, -1000.0f, 1000.0f};
  geluErfInPlace(y.data(), static_cast<int64_t>(y.size()));
  EXPECT_EQ(y[0], inf);
  EXPECT_TRUE(std::isnan(y[1]));  // torch.nn.functional.gelu(-inf) is nan
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_EQ(y[3], 0.0f);
  EXPECT_EQ(y[4], 0.0f);
  EXPECT_EQ(y[5], 1000.0f);
}

TEST(Gelu, TailsStopAtTheEnd) {
  if (!fastGeluEnabled()) GTEST_SKIP() << "no AVX-512 on this CPU";
  checkTails(geluErfInPlace, expectGeluClose);
}

TEST(Gelu, SplitAcrossThreadsCoversEveryElementOnce) {
  if (!fastGeluEnabled()) GTEST_SKIP() << "no AVX-512 on this CPU";
  checkThreadSplit(geluErfInPlace, expectGeluClose);
}

// swishQuantize against swish in double, scaled, rounded half to even and
// saturated: every length up to past four vectors (each tail), u8 and s8,
// values spanning both saturations, split across threads (100k elements).
TEST(SwishQuantize, RoundsAndSaturatesAsTheReference) {
  if (!swishNarrowEnabled()) GTEST_SKIP() << "no AVX-512 on this CPU";
  for (bool is_unsigned : {true, false}) {
    const float inv_scale = 9.5f;
    const int32_t zp = is_unsigned ? 128 : -3;
    for (int64_t n : {1, 15, 16, 17, 63, 64, 65, 79, 100000}) {
      std::vector<float> x(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = -30.0f + 60.0f * static_cast<float>((i * 7919) % 1000) / 1000.0f;
      std::vector<uint8_t> q(static_cast<size_t>(n) + 16, 0xa5);
      swishQuantize(x.data(), q.data(), n, inv_scale, zp, is_unsigned);
      for (int64_t i = 0; i < n; ++i) {
        const double v = reference(x[static_cast<size_t>(i)]) * inv_scale + zp;
        const double lo = is_unsigned ? 0 : -128, hi = is_unsigned ? 255 : 127;
        const double want = std::min(std::max(std::nearbyint(v), lo), hi);
        const double got = is_unsigned ? q[static_cast<size_t>(i)] : static_cast<int8_t>(q[static_cast<size_t>(i)]);
        // float's swish may land on the other side of a half
        const double slack = std::fabs(v - std::floor(v) - 0.5) < 1e-4 ? 1 : 0;
        ASSERT_LE(std::fabs(got - want), slack) << "x=" << x[static_cast<size_t>(i)] << " n=" << n;
      }
      for (size_t i = static_cast<size_t>(n); i < q.size(); ++i) ASSERT_EQ(q[i], 0xa5) << "wrote past the end, n=" << n;
    }
  }
}

namespace {

// bf16 bits of v by definition: the nearer of the two bf16 values around v
// (ties to the even one), a NaN quiet, denormals in and out signed zeros
// (vcvtneps2bf16's rules).
uint16_t bf16ByDefinition(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  const uint16_t sign = static_cast<uint16_t>((b >> 16) & 0x8000u);
  if (std::isnan(v)) return static_cast<uint16_t>((b >> 16) | 0x0040u);
  if (std::fpclassify(v) == FP_SUBNORMAL || v == 0.0f) return sign;
  if (std::isinf(v)) return static_cast<uint16_t>(b >> 16);
  const uint16_t down = static_cast<uint16_t>(b >> 16);  // toward zero
  float fdown;
  const uint32_t down_bits = static_cast<uint32_t>(down) << 16;
  std::memcpy(&fdown, &down_bits, sizeof fdown);
  const double mag = std::fabs(static_cast<double>(v)), low = std::fabs(static_cast<double>(fdown));
  const double ulp = std::ldexp(1.0, std::ilogb(fdown) - 7);  // one step of bf16's 8-bit significand
  const double above = mag - low, below = low + ulp - mag;
  const bool up = above > below || (above == below && (down & 1u));
  return static_cast<uint16_t>(down + (up ? 1 : 0));  // up from the largest finite value gives inf's bits
}

}  // namespace

// vec::bf16Bits16 (the conversion activationToBf16 stores with) on floats whose
// rounding is special, then on 2^20 bit patterns of every kind.
LLGA_AVX512 void bf16Bits16Of(const float* x, uint16_t* out) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), vec::bf16Bits16(_mm512_loadu_ps(x)));
}

TEST(ActivationToBf16, ConversionRoundsAsVcvtneps2bf16) {
  if (!swishNarrowEnabled()) GTEST_SKIP() << "no AVX-512 on this CPU";
  const float big = std::ldexp(255.5f / 128, 127);  // halfway between bf16's largest finite value and the next step
  std::vector<float> x = {1.00390625f, 1.01171875f, -1.00390625f, 1.0f + 1.0f / 256 + 1.0f / 65536,  // ties down, up; above
                          std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::signaling_NaN(),
                          std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(), big, -big,
                          std::numeric_limits<float>::max(), 1e-39f, -1e-39f, 1.1754944e-38f, 0.0f, -0.0f};
  uint32_t state = 12345;
  for (int i = 0; i < (1 << 20); ++i) {
    state = state * 1664525u + 1013904223u;
    float f;
    std::memcpy(&f, &state, sizeof f);
    x.push_back(f);
  }
  std::vector<uint16_t> got(16);
  for (size_t i = 0; i + 16 <= x.size(); i += 16) {
    bf16Bits16Of(x.data() + i, got.data());
    for (size_t j = 0; j < 16; ++j) {
      uint32_t b;
      std::memcpy(&b, &x[i + j], sizeof b);
      ASSERT_EQ(got[j], bf16ByDefinition(x[i + j])) << "bits 0x" << std::hex << b;
    }
  }
}

// activationToBf16 writes the bf16 rounding of the float activation
// (runOwnActivation's values; None: the input itself) for every element:
// each tail length, across threads (100k), and special inputs (NaN, +-inf,
// zeros, denormals, overflow).
TEST(ActivationToBf16, WritesTheFloatActivationRoundedAsVcvtneps2bf16) {
  if (!swishNarrowEnabled() || !fastGeluEnabled()) GTEST_SKIP() << "no AVX-512 on this CPU";
  std::vector<float> special = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                                -std::numeric_limits<float>::infinity(), 0.0f, -0.0f, 1e-39f, -1e-39f, 3e38f, -100.0f,
                                1.00390625f, 1.01171875f, 2.0f + 1.0f / 64};
  for (OwnActivation a : {OwnActivation::Swish, OwnActivation::GeluErf, OwnActivation::None}) {
    for (int64_t n : {1, 12, 15, 16, 17, 63, 64, 65, 79, 100000}) {
      std::vector<float> x(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i)
        x[static_cast<size_t>(i)] = i < static_cast<int64_t>(special.size()) && n < 100000
                                        ? special[static_cast<size_t>(i)]
                                        : -40.0f + 80.0f * static_cast<float>((i * 7919) % 10007) / 10007.0f;
      std::vector<float> f = x;
      if (a != OwnActivation::None) runOwnActivation(a, f.data(), n);
      std::vector<uint16_t> q(static_cast<size_t>(n) + 16, 0xa5a5);
      activationToBf16(a, x.data(), q.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const float s = f[static_cast<size_t>(i)];
        ASSERT_EQ(q[static_cast<size_t>(i)], bf16ByDefinition(s))
            << ownActivationSuffix(a) << " x=" << x[static_cast<size_t>(i)] << " f(x) " << s << " n=" << n;
      }
      for (size_t i = static_cast<size_t>(n); i < q.size(); ++i)
        ASSERT_EQ(q[i], 0xa5a5) << "wrote past the end, n=" << n << " " << ownActivationSuffix(a);
    }
  }
}
