// llga's recurrence (backend/dnnl/recurrent.h): its tanh and logistic
// functions against the double-precision definitions, through the public
// entry point (a step with W_hh = 0 and no bias is the activation of its
// input projection), tighter than the end-to-end parity tests in
// tests/py/test_rnn.py can see; and a step's product against a plain sum.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/dnnl/recurrent.h"

using namespace llga;

namespace {

// One step of `cell` for one sequence of H = xs.size() with W_hh = 0 and no
// bias, input projection `xg` (gates x H), initial state h0 (and c0).
std::vector<float> step(recurrent::Cell cell, const std::vector<float>& xg, int64_t H, const std::vector<float>& h0,
                        const std::vector<float>& c0) {
  const int64_t gh = recurrent::gatesOf(cell) * H;
  std::vector<float> w(static_cast<size_t>(gh * H), 0.0f);
  const recurrent::IterWeights iw = recurrent::prepareIter(w.data(), H, nullptr, gh, H);
  std::vector<float> out(static_cast<size_t>(H)), hT(static_cast<size_t>(H)), cT(static_cast<size_t>(H));
  std::vector<float> scratch(recurrent::scratchFloats(iw, 1, H));
  const recurrent::Direction d{cell, H, 1, 1, false, xg.data(), gh, gh, h0.data(), c0.data(), out.data(), H, H,
                               hT.data(), cT.data()};
  recurrent::run(d, iw, scratch.data());
  EXPECT_EQ(std::memcmp(out.data(), hT.data(), out.size() * sizeof(float)), 0);  // the final state is the last output, bit for bit
  return out;
}

// x from -30 to 30, densest near 0 (the series / exponential seam at 1/16 included), plus exact 0.
std::vector<float> sweep() {
  std::vector<float> xs{0.0f, 0.0625f, -0.0625f, std::nextafter(0.0625f, 0.0f), 1e-30f, -1e-30f};
  for (int i = -3000; i <= 3000; ++i) xs.push_back(static_cast<float>(i) * 0.01f);
  for (int i = 1; i <= 400; ++i) xs.push_back(std::ldexp(1.0f, -i / 10) * (i % 2 ? 1.0f : -1.0f) * (1.0f + 0.01f * i));
  return xs;
}

double relErr(double got, double want) { return std::abs(got - want) / std::max(std::abs(want), 1e-30); }

}  // namespace

TEST(Recurrence, TanhIsWithinAFewUlpOfTheDefinition) {
  if (!recurrent::available()) GTEST_SKIP() << "llga's recurrence needs AVX-512F";
  const std::vector<float> xs = sweep();
  const int64_t H = static_cast<int64_t>(xs.size());
  const std::vector<float> zeros(static_cast<size_t>(H), 0.0f);
  const std::vector<float> got = step(recurrent::Cell::RnnTanh, xs, H, zeros, zeros);
  double worst = 0, worst_small = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double e = relErr(got[i], std::tanh(static_cast<double>(xs[i])));
    if (std::abs(xs[i]) < 0.0625f) worst_small = std::max(worst_small, e);
    else worst = std::max(worst, e);
  }
  // below 1/16 the series keeps tanh(x) ~ x to float's precision; above, (1 - e) / (1 + e) loses up to ~11 ulp at 1/16
  EXPECT_LT(worst_small, 3e-7);
  EXPECT_LT(worst, 2e-6);
  EXPECT_EQ(got[0], 0.0f);
}

TEST(Recurrence, LogisticIsWithinAFewUlpOfTheDefinition) {
  if (!recurrent::available()) GTEST_SKIP() << "llga's recurrence needs AVX-512F";
  // GRU with W_hh = 0, x_n = 0: n = 0, so h = s(x_z) * h0; h0 = 1 gives s(x_z).
  const std::vector<float> xs = sweep();
  const int64_t H = static_cast<int64_t>(xs.size());
  std::vector<float> xg(static_cast<size_t>(3 * H), 0.0f);
  std::copy(xs.begin(), xs.end(), xg.begin() + H);
  const std::vector<float> ones(static_cast<size_t>(H), 1.0f);
  const std::vector<float> got = step(recurrent::Cell::Gru, xg, H, ones, ones);
  double worst = 0;
  for (size_t i = 0; i < xs.size(); ++i)
    worst = std::max(worst, relErr(got[i], 1.0 / (1.0 + std::exp(-static_cast<double>(xs[i])))));
  EXPECT_LT(worst, 1e-6);
}

TEST(Recurrence, NanStaysNanAndSaturationIsExact) {
  if (!recurrent::available()) GTEST_SKIP() << "llga's recurrence needs AVX-512F";
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> xs{nan, inf, -inf, 100.0f, -100.0f};
  const std::vector<float> zeros(xs.size(), 0.0f);
  const std::vector<float> t = step(recurrent::Cell::RnnTanh, xs, 5, zeros, zeros);
  EXPECT_TRUE(std::isnan(t[0]));
  EXPECT_EQ(t[1], 1.0f);
  EXPECT_EQ(t[2], -1.0f);
  EXPECT_EQ(t[3], 1.0f);
  EXPECT_EQ(t[4], -1.0f);
  const std::vector<float> r = step(recurrent::Cell::RnnRelu, xs, 5, zeros, zeros);
  EXPECT_TRUE(std::isnan(r[0]));  // PyTorch's relu keeps NaN
  EXPECT_EQ(r[1], inf);
  EXPECT_EQ(r[2], 0.0f);
}

// W_hh h + b_hh for widths that take one, several and partial passes of the
// product's register block, against a sum in double (RNN relu of a positive
// product is the product itself).
TEST(Recurrence, StepProductMatchesASum) {
  if (!recurrent::available()) GTEST_SKIP() << "llga's recurrence needs AVX-512F";
  for (int64_t H : {1, 15, 16, 17, 129, 300}) {
    SCOPED_TRACE("H=" + std::to_string(H));
    std::vector<float> w(static_cast<size_t>(H * H)), b(static_cast<size_t>(H)), h0(static_cast<size_t>(H));
    for (int64_t i = 0; i < H * H; ++i) w[static_cast<size_t>(i)] = static_cast<float>((i * 37 + 5) % 17) / 16.0f;
    for (int64_t i = 0; i < H; ++i) {
      b[static_cast<size_t>(i)] = static_cast<float>(i % 5);
      h0[static_cast<size_t>(i)] = static_cast<float>((i * 11) % 7) / 8.0f;
    }
    const recurrent::IterWeights iw = recurrent::prepareIter(w.data(), H, b.data(), H, H);
    const std::vector<float> xg(static_cast<size_t>(H), 0.5f);
    std::vector<float> out(static_cast<size_t>(H)), hT(static_cast<size_t>(H));
    std::vector<float> scratch(recurrent::scratchFloats(iw, 1, H));
    const recurrent::Direction d{recurrent::Cell::RnnRelu, H, 1, 1, false, xg.data(), H, H, h0.data(), nullptr,
                                 out.data(), H, H, hT.data(), nullptr};
    recurrent::run(d, iw, scratch.data());
    for (int64_t o = 0; o < H; ++o) {
      double want = 0.5 + b[static_cast<size_t>(o)];
      for (int64_t i = 0; i < H; ++i) want += static_cast<double>(w[static_cast<size_t>(o * H + i)]) * h0[static_cast<size_t>(i)];
      ASSERT_NEAR(out[static_cast<size_t>(o)], want, 1e-5 * std::max(1.0, want)) << "output " << o;
    }
  }
}
