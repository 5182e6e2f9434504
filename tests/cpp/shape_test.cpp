// Shape (runtime/shape.h) against std::vector<int64_t>: random sequences of
// the operations llga uses, across the inline -> heap boundary, with the
// aliasing cases (a range of the shape itself inserted or assigned) and
// copies and moves between inline and heap shapes.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "runtime/shape.h"

using namespace llga;

namespace {

void expectSame(const Shape& s, const std::vector<int64_t>& v, int step) {
  ASSERT_EQ(s.size(), v.size()) << "step " << step;
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(s[i], v[i]) << "step " << step << " index " << i;
  ASSERT_TRUE(s == v) << "step " << step;
  ASSERT_TRUE(v == s) << "step " << step;
  ASSERT_EQ(std::vector<int64_t>(s), v) << "step " << step;
  ASSERT_GE(s.capacity(), s.size());
}

}  // namespace

TEST(Shape, MatchesVectorOverRandomOperations) {
  std::mt19937 rng(20261128);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % (n + 1)); };
  for (int run = 0; run < 200; ++run) {
    Shape s;
    std::vector<int64_t> v;
    for (int step = 0; step < 60; ++step) {
      const int64_t x = static_cast<int64_t>(rng() % 1000) - 500;
      switch (rng() % 12) {
        case 0: s.push_back(x), v.push_back(x); break;
        case 1:
          if (!v.empty()) s.pop_back(), v.pop_back();
          break;
        case 2: {
          const size_t at = pick(v.size()), n = pick(4);
          s.insert(s.begin() + at, n, x), v.insert(v.begin() + static_cast<std::ptrdiff_t>(at), n, x);
          break;
        }
        case 3: {  // a range of the shape itself, inserted into it (may reallocate)
          const size_t a = pick(v.size()), b = a + pick(v.size() - a), at = pick(v.size());
          const std::vector<int64_t> items(v.begin() + static_cast<std::ptrdiff_t>(a), v.begin() + static_cast<std::ptrdiff_t>(b));
          s.insert(s.begin() + at, s.begin() + a, s.begin() + b);
          v.insert(v.begin() + static_cast<std::ptrdiff_t>(at), items.begin(), items.end());
          break;
        }
        case 4:
          if (!v.empty()) {
            const size_t a = pick(v.size() - 1), b = a + pick(v.size() - a);
            s.erase(s.begin() + a, s.begin() + b);
            v.erase(v.begin() + static_cast<std::ptrdiff_t>(a), v.begin() + static_cast<std::ptrdiff_t>(b));
          }
          break;
        case 5: {
          const size_t n = pick(10);
          s.resize(n, x), v.resize(n, x);
          break;
        }
        case 6: {  // a suffix of itself assigned to it
          const size_t a = pick(v.size());
          s.assign(s.begin() + a, s.end());
          v.assign(v.begin() + static_cast<std::ptrdiff_t>(a), v.end());
          break;
        }
        case 7: {  // copy out and back, through both kinds of storage
          Shape t = s;
          Shape u(std::move(t));
          s = u;
          break;
        }
        case 8: {  // move-assign over a shape of the other kind
          Shape other(pick(12), 7);
          other = std::move(s);
          s = std::move(other);
          break;
        }
        case 9: {
          Shape t(v);  // from a vector
          s.swap(t);
          break;
        }
        case 10: {
          const size_t n = pick(9);
          s.assign(n, x), v.assign(n, x);
          break;
        }
        case 11: s.clear(), v.clear(); break;
      }
      expectSame(s, v, step);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST(Shape, ComparesAndOrdersLikeVector) {
  const std::vector<int64_t> a{1, 2, 3}, b{1, 2, 3, 4, 5, 6, 7, 8}, c{1, 2, 4};
  EXPECT_TRUE(Shape(a) == Shape(a));
  EXPECT_TRUE(Shape(a) != Shape(b));
  EXPECT_TRUE(Shape(b) != a);
  EXPECT_TRUE(Shape(a) < Shape(b));
  EXPECT_TRUE(Shape(a) < Shape(c));
  EXPECT_FALSE(Shape(c) < Shape(a));
  EXPECT_EQ(Shape(b).size(), 8u);  // beyond the inline capacity
  EXPECT_THROW(Shape(a).at(3), std::out_of_range);
  Shape e;
  EXPECT_TRUE(e.empty());
  EXPECT_TRUE(e == std::vector<int64_t>{});
}
