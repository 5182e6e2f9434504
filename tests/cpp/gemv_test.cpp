// llga's own one-row product (backend/dnnl/gemv.h) against the sum done in
// double: weights packed by oneDNN's reorder from a linear's layout (w [n, k]
// read as b = w^T) into panelDesc, panel edges around 16 columns, k around
// the 4-row step, with and without a bias, on one thread and on two; nothing
// written past y's n values; each eltwise step, non-finite values too; the
// bf16 product against the sum of bf16-rounded values in double.
#include <gtest/gtest.h>

#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backend/dnnl/dnnl_utils.h"
#include "backend/dnnl/gemv.h"

using namespace llga;

namespace {

// Runs `product` (writing y) on `threads` threads and compares y with
// sum_i x[i] * w[j k + i] + bias[j] done in double (x and w: the values the
// kernel multiplies); nothing may be written past y's n values.
template <typename Product>
void expectProduct(const Product& product, int threads, const std::vector<float>& x, const std::vector<float>& w,
                   const float* bias, int64_t k, int64_t n) {
  const float guard = -12345.0f;
  std::vector<float> y(static_cast<size_t>(n + 20), guard);
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);
  product(y.data());
  omp_set_num_threads(before);
  for (int64_t j = 0; j < n; ++j) {
    double want = bias ? bias[j] : 0.0, mag = std::fabs(want);
    for (int64_t i = 0; i < k; ++i) {
      const double p = static_cast<double>(x[static_cast<size_t>(i)]) * w[static_cast<size_t>(j * k + i)];
      want += p;
      mag += std::fabs(p);
    }
    EXPECT_NEAR(y[static_cast<size_t>(j)], want, 1e-6 * mag + 1e-6) << "k " << k << " n " << n << " column " << j;
  }
  for (size_t j = static_cast<size_t>(n); j < y.size(); ++j) ASSERT_EQ(y[j], guard) << "written past n at " << j;
}

// A linear's weights w [n, k], input x [k] and bias b [n], at random.
struct Problem {
  std::vector<float> w, x, b;
};
Problem randomProblem(int64_t k, int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Problem q{std::vector<float>(static_cast<size_t>(n * k)), std::vector<float>(static_cast<size_t>(k)),
            std::vector<float>(static_cast<size_t>(n))};
  for (auto& v : q.w) v = u(rng);
  for (auto& v : q.x) v = u(rng) * 3.0f;
  for (auto& v : q.b) v = u(rng) * 2.0f;
  return q;
}

void check(int64_t k, int64_t n, bool bias, int threads) {
  auto [w, x, b] = randomProblem(k, n, static_cast<unsigned>(k * 131 + n * 7 + threads));

  const dnnl::memory::desc plain({k, n}, dnnl::memory::data_type::f32, dnnl::memory::dims{1, k});  // w^T
  const dnnl::memory::desc md = gemv::panelDesc(k, n);
  const int64_t padded = (n + gemv::kPanel - 1) / gemv::kPanel * gemv::kPanel;
  ASSERT_EQ(md.get_size(), static_cast<size_t>(k * padded) * sizeof(float));
  std::vector<float> packed(md.get_size() / sizeof(float), 99.0f);
  ExecContext ctx;
  reorder(ctx, dnnl::memory(plain, cpuEngine(), w.data()), dnnl::memory(md, cpuEngine(), packed.data()));
  // the layout is what the kernel reads: panel p, row i, column j at (p k + i) 16 + j, zeros past n
  for (int64_t j = 0; j < padded; ++j)
    for (int64_t i = 0; i < k; ++i) {
      const float want = j < n ? w[static_cast<size_t>(j * k + i)] : 0.0f;
      ASSERT_EQ(packed[static_cast<size_t>(((j / 16) * k + i) * 16 + j % 16)], want) << "column " << j << " row " << i;
    }

  expectProduct([&](float* y) { gemv::run(x.data(), packed.data(), k, n, bias ? b.data() : nullptr, y); }, threads, x, w,
                bias ? b.data() : nullptr, k, n);
}

TEST(Gemv, MatchesTheSumInDouble) {
  if (!gemv::available()) GTEST_SKIP() << "oneDNN's ISA here is below AVX2 (or LLGA_GEMV=0)";
  for (int threads : {1, 2})
    for (int64_t k : {1, 3, 4, 5, 8, 37, 1280})
      for (int64_t n : {1, 15, 16, 17, 33, 100}) {
        check(k, n, true, threads);
        check(k, n, false, threads);
      }
  // large enough for the team (kSerialMacs), with more panels than threads and a partial last one
  for (int threads : {1, 2, 3}) check(2048, 1000, true, threads);
}

// Each step against double arithmetic, on values from -40 to 40 (x one-hot:
// y is the weight row itself plus the bias), and the non-finite values.
TEST(Gemv, StepsMatchTheirDefinitions) {
  if (!gemv::available()) GTEST_SKIP() << "oneDNN's ISA here is below AVX2 (or LLGA_GEMV=0)";
  using K = gemv::Step::Kind;
  const int64_t k = 1, n = 37;
  std::vector<float> w(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) w[static_cast<size_t>(j)] = -40.0f + 80.0f * static_cast<float>(j) / (n - 4);
  w[n - 3] = INFINITY, w[n - 2] = -INFINITY, w[n - 1] = NAN;
  const dnnl::memory::desc md = gemv::panelDesc(k, n);
  std::vector<float> packed(md.get_size() / sizeof(float));
  ExecContext ctx;
  reorder(ctx, dnnl::memory(dnnl::memory::desc({k, n}, dnnl::memory::data_type::f32, dnnl::memory::dims{n, 1}), cpuEngine(),
                            w.data()),
          dnnl::memory(md, cpuEngine(), packed.data()));
  const std::vector<std::pair<gemv::Step, double (*)(double)>> cases = {
      {{K::Relu, 0.0f, 0}, [](double v) { return v < 0 ? 0.0 : v; }},  // -inf gives 0 (not -inf * 0)
      {{K::Relu, 0.25f, 0}, [](double v) { return v < 0 ? 0.25 * v : v; }},
      {{K::Clip, -3.0f, 5.5f}, [](double v) { return std::isnan(v) ? v : std::min(std::max(v, -3.0), 5.5); }},
      {{K::Linear, 0.5f, -2.0f}, [](double v) { return 0.5 * v - 2.0; }},
      {{K::Sigmoid, 0, 0}, [](double v) { return 1.0 / (1.0 + std::exp(-v)); }},
      {{K::Swish, 1.0f, 0}, [](double v) { return v / (1.0 + std::exp(-v)); }},
      {{K::Swish, 1.702f, 0}, [](double v) { return v / (1.0 + std::exp(-1.702 * v)); }},
  };
  const float one = 1.0f;
  for (const auto& [step, f] : cases) {
    std::vector<float> y(static_cast<size_t>(n));
    gemv::run(&one, packed.data(), k, n, nullptr, y.data(), {step});
    for (int64_t j = 0; j < n; ++j) {
      const double want = f(w[static_cast<size_t>(j)]);
      const float got = y[static_cast<size_t>(j)];
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << "step " << static_cast<int>(step.kind) << " of " << w[static_cast<size_t>(j)];
      } else if (std::isinf(want)) {
        EXPECT_EQ(got, want) << "step " << static_cast<int>(step.kind) << " of " << w[static_cast<size_t>(j)];
      } else {
        EXPECT_NEAR(got, want, 2e-6 * std::fabs(want) + 1e-7) << "step " << static_cast<int>(step.kind) << " of "
                                                              << w[static_cast<size_t>(j)];
      }
    }
  }
}

// bf16 rounding to nearest even (oneDNN's), as a float.
float bf16Round(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  std::memcpy(&v, &u, 4);
  return v;
}

void checkBf16(int64_t k, int64_t n, bool bias, int threads) {
  auto [w, x, b] = randomProblem(k, n, static_cast<unsigned>(k * 31 + n * 3 + threads));
  const dnnl::memory::desc plain({k, n}, dnnl::memory::data_type::f32, dnnl::memory::dims{1, k});  // w^T
  const dnnl::memory::desc md = gemv::panelDescBf16(k, n);
  const int64_t pairs = (k + 1) / 2, padded = (n + 15) / 16 * 16;
  ASSERT_EQ(md.get_size(), static_cast<size_t>(2 * pairs * padded) * 2);
  std::vector<uint16_t> packed(md.get_size() / 2, 0x7FC0);  // NaN: a position the reorder misses shows
  ExecContext ctx;
  reorder(ctx, dnnl::memory(plain, cpuEngine(), w.data()), dnnl::memory(md, cpuEngine(), packed.data()));
  for (int64_t j = 0; j < padded; ++j)  // panel j / 16, pair i / 2, column j % 16, row i % 2
    for (int64_t i = 0; i < 2 * pairs; ++i) {
      const float want = j < n && i < k ? bf16Round(w[static_cast<size_t>(j * k + i)]) : 0.0f;
      const uint32_t bits = static_cast<uint32_t>(packed[static_cast<size_t>(((j / 16) * pairs + i / 2) * 32 + (j % 16) * 2 + i % 2)]) << 16;
      float got;
      std::memcpy(&got, &bits, 4);
      ASSERT_EQ(got, want) << "column " << j << " row " << i;
    }
  std::vector<float> xr(x), wr(w);  // the values the kernel multiplies
  for (float& v : xr) v = bf16Round(v);
  for (float& v : wr) v = bf16Round(v);
  expectProduct([&](float* y) { gemv::runBf16(x.data(), packed.data(), k, n, bias ? b.data() : nullptr, y); }, threads,
                xr, wr, bias ? b.data() : nullptr, k, n);
}

TEST(Gemv, Bf16MatchesTheRoundedSumInDouble) {
  if (!gemv::availableBf16()) GTEST_SKIP() << "oneDNN's ISA here is below avx512_core_bf16 (or LLGA_GEMV=0)";
  for (int threads : {1, 2})
    for (int64_t k : {1, 2, 3, 7, 8, 9, 17, 1280})
      for (int64_t n : {1, 15, 16, 17, 100}) {
        checkBf16(k, n, true, threads);
        checkBf16(k, n, false, threads);
      }
  for (int threads : {1, 2, 3}) checkBf16(2047, 1000, true, threads);
}

TEST(Gemv, RejectsAnEmptyProduct) {
  EXPECT_THROW(gemv::panelDesc(0, 4), std::invalid_argument);
  EXPECT_THROW(gemv::panelDesc(4, 0), std::invalid_argument);
  EXPECT_THROW(gemv::panelDescBf16(0, 4), std::invalid_argument);
}

}  // namespace
