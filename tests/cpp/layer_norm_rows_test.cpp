// llga's bf16 layer norm rows (backend/dnnl/layer_norm_rows.h) against a
// double-precision layer norm: every value within half a bf16 step of the
// exact result plus the fp32 statistics' error, every row length's tail,
// rows split across threads, nothing written past the last row, weight and
// bias optional, and a row with NaN or inf all NaN (PyTorch's answer).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/dnnl/layer_norm_rows.h"

using namespace llga;

namespace {

float fromBf16(uint16_t h) {
  const uint32_t b = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

// The exact (double) normalised row, times w plus b.
std::vector<double> reference(const float* x, int64_t n, const float* w, const float* b, double eps) {
  double mean = 0, var = 0;
  for (int64_t j = 0; j < n; ++j) mean += x[j];
  mean /= static_cast<double>(n);
  for (int64_t j = 0; j < n; ++j) var += (x[j] - mean) * (x[j] - mean);
  var /= static_cast<double>(n);
  std::vector<double> y(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j)
    y[static_cast<size_t>(j)] = (x[j] - mean) / std::sqrt(var + eps) * (w ? w[j] : 1.0) + (b ? b[j] : 0.0);
  return y;
}

}  // namespace

TEST(LayerNormRows, WritesTheNormalisedRowsRoundedToBf16) {
  if (!lnrows::available()) GTEST_SKIP() << "no AVX-512 kernels on this CPU";
  for (int64_t n : {1, 2, 15, 16, 17, 31, 32, 33, 100, 768, 769}) {
    for (int64_t rows : {1, 3, 197}) {
      for (bool affine : {false, true}) {
        std::vector<float> x(static_cast<size_t>(rows * n)), w(static_cast<size_t>(n)), b(static_cast<size_t>(n));
        for (size_t i = 0; i < x.size(); ++i)  // rows of different offsets and spreads
          x[i] = 3.0f * static_cast<float>((i / static_cast<size_t>(n)) % 5) - 4.0f +
                 static_cast<float>(((i * 7919) % 1009)) / 1009.0f * static_cast<float>(1 + (i / static_cast<size_t>(n)) % 3);
        for (int64_t j = 0; j < n; ++j) {
          w[static_cast<size_t>(j)] = 0.5f + static_cast<float>(j % 7) / 7.0f;
          b[static_cast<size_t>(j)] = static_cast<float>(j % 3) - 1.0f;
        }
        std::vector<uint16_t> y(static_cast<size_t>(rows * n) + 16, 0xa5a5);
        const float* wp = affine ? w.data() : nullptr;
        const float* bp = affine ? b.data() : nullptr;
        lnrows::toBf16(x.data(), y.data(), rows, n, wp, bp, 1e-5f);
        for (int64_t r = 0; r < rows; ++r) {
          const std::vector<double> want = reference(x.data() + r * n, n, wp, bp, 1e-5);
          for (int64_t j = 0; j < n; ++j) {
            const double got = fromBf16(y[static_cast<size_t>(r * n + j)]), exact = want[static_cast<size_t>(j)];
            // half a bf16 step (2^-8 relative) of rounding, plus the fp32 arithmetic's own error before it
            ASSERT_LE(std::fabs(got - exact), std::fabs(exact) * (1.0 / 256 + 1e-5) + 1e-5)
                << "n=" << n << " rows=" << rows << " affine=" << affine << " at " << r << "," << j;
          }
        }
        for (size_t i = static_cast<size_t>(rows * n); i < y.size(); ++i)
          ASSERT_EQ(y[i], 0xa5a5) << "wrote past the end, n=" << n << " rows=" << rows;
      }
    }
  }
}

TEST(LayerNormRows, ARowWithNanOrInfIsNan) {
  if (!lnrows::available()) GTEST_SKIP() << "no AVX-512 kernels on this CPU";
  const int64_t n = 40;
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    std::vector<float> x(2 * n, 1.5f);
    for (int64_t j = 0; j < n; ++j) x[static_cast<size_t>(n + j)] = static_cast<float>(j);
    x[7] = bad;
    std::vector<uint16_t> y(2 * n);
    lnrows::toBf16(x.data(), y.data(), 2, n, nullptr, nullptr, 1e-5f);
    for (int64_t j = 0; j < n; ++j) ASSERT_TRUE(std::isnan(fromBf16(y[static_cast<size_t>(j)]))) << j;
    for (int64_t j = 0; j < n; ++j) ASSERT_FALSE(std::isnan(fromBf16(y[static_cast<size_t>(n + j)]))) << j;  // the next row is its own
  }
}

// A constant row has no variance: eps keeps the scale finite, so the row
// normalises to 0 and comes out as the bias.
TEST(LayerNormRows, AConstantRowIsItsBias) {
  if (!lnrows::available()) GTEST_SKIP() << "no AVX-512 kernels on this CPU";
  const int64_t n = 20;
  std::vector<float> x(n, 3.25f), w(n, 2.0f), b(n);
  for (int64_t j = 0; j < n; ++j) b[static_cast<size_t>(j)] = static_cast<float>(j) - 4.0f;
  std::vector<uint16_t> y(n);
  lnrows::toBf16(x.data(), y.data(), 1, n, w.data(), b.data(), 1e-5f);
  for (int64_t j = 0; j < n; ++j) ASSERT_EQ(fromBf16(y[static_cast<size_t>(j)]), b[static_cast<size_t>(j)]) << j;
}
