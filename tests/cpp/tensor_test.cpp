// Tensor views share storage and follow PyTorch's rules; copies convert dtypes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "runtime/tensor.h"

using namespace llga;

namespace {
Tensor iota(const Shape& sizes) {
  Tensor t = Tensor::empty(ScalarType::Float, sizes);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}
float at(const Tensor& t, const Shape& idx) {
  int64_t off = 0;
  for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * t.strides()[d];
  return t.data<float>()[off];
}
}  // namespace

TEST(Tensor, ViewsShareStorage) {
  Tensor t = iota({2, 3, 4});
  Tensor v = t.transpose(0, 2);
  EXPECT_TRUE(v.sharesStorageWith(t));
  EXPECT_EQ(v.sizes(), (Shape{4, 3, 2}));
  EXPECT_EQ(at(v, {3, 1, 1}), at(t, {1, 1, 3}));
  Tensor s = t.slice(2, 1, 4, 2);  // columns 1 and 3
  EXPECT_EQ(s.sizes(), (Shape{2, 3, 2}));
  EXPECT_EQ(at(s, {1, 2, 1}), at(t, {1, 2, 3}));
  Tensor sel = t.select(1, -1);
  EXPECT_EQ(at(sel, {1, 0}), at(t, {1, 2, 0}));
  Tensor e = t.select(0, 0).select(0, 0).unsqueeze(0).expand({5, 4});
  EXPECT_EQ(e.strides()[0], 0);
  EXPECT_EQ(at(e, {4, 3}), 3.0f);
}

TEST(Tensor, ViewNeedsCompatibleStrides) {
  Tensor t = iota({2, 3, 4});
  EXPECT_EQ(t.view({6, -1}).sizes(), (Shape{6, 4}));
  Tensor tr = t.transpose(1, 2);  // [2, 4, 3], not contiguous
  EXPECT_THROW(tr.view({2, 12}), std::invalid_argument);
  EXPECT_EQ(tr.view({2, 4, 3, 1}).sizes(), (Shape{2, 4, 3, 1}));  // adding size-1 dims is fine
  Tensor r = tr.reshape({2, 12});  // copies
  EXPECT_FALSE(r.sharesStorageWith(t));
  EXPECT_EQ(r.data<float>()[1], at(t, {0, 1, 0}));
  EXPECT_TRUE(t.slice(0, 1, 2, 1).view({12}).sharesStorageWith(t));
  EXPECT_THROW(t.view({5, -1}), std::invalid_argument);
  EXPECT_THROW(t.view({-1, -1}), std::invalid_argument);
}

TEST(Tensor, CopyConvertsAndFollowsStrides) {
  Tensor t = iota({3, 4});
  Tensor d = t.transpose(0, 1).to(ScalarType::Long);
  EXPECT_TRUE(d.isContiguous());
  EXPECT_EQ(d.data<int64_t>()[1], 4);  // element [0, 1] of the transpose is t[1, 0]
  Tensor b = Tensor::empty(ScalarType::BFloat16, {3, 4});
  b.copyFrom(t);
  EXPECT_EQ(static_cast<float>(b.data<BFloat16>()[11]), 11.0f);
  Tensor f = Tensor::empty(ScalarType::Float, {2});
  f.fill(2.5);
  EXPECT_EQ(f.data<float>()[1], 2.5f);
}

// Copies whose source is a transposition (contiguous along a dim other than
// the destination's inner one) take a tiled path: every element where its
// strides say, for each element size, sizes not multiples of the 16-element
// tile, above and below the parallel grain, with and without outer dims.
TEST(Tensor, TransposedCopiesPutEveryElementInPlace) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{1, 56, 56, 256}, {0, 3, 1, 2}},  // channels-last made NCHW (above the grain: two threads)
      {{2, 7, 9, 35}, {0, 3, 1, 2}},     // two images, odd sizes
      {{37, 19}, {1, 0}},                // a transposed matrix
      {{3, 5, 17, 4}, {2, 0, 3, 1}},     // the contiguous dim in the middle
      {{6, 33, 2, 18}, {1, 3, 0, 2}},
  };
  for (ScalarType dt : {ScalarType::Byte, ScalarType::BFloat16, ScalarType::Float, ScalarType::Long})
    for (const auto& [sizes, perm] : cases) {
      SCOPED_TRACE(std::string(scalarTypeName(dt)) + " " + std::to_string(sizes.size()) + "-d, first size " +
                   std::to_string(sizes[0]));
      Tensor base = Tensor::empty(dt, sizes);
      const int64_t item = static_cast<int64_t>(base.itemsize());
      auto* bytes = static_cast<unsigned char*>(base.data());
      for (int64_t i = 0; i < base.numel() * item; ++i) bytes[i] = static_cast<unsigned char>((i * 131 + i / 251) % 253);
      const Tensor view = base.permute(perm);
      const Tensor copy = view.contiguous();
      ASSERT_TRUE(copy.isContiguous());
      const auto* out = static_cast<const unsigned char*>(copy.data());
      std::vector<int64_t> idx(view.sizes().size(), 0);
      for (int64_t n = 0; n < copy.numel(); ++n) {  // row-major over the view's indices
        int64_t off = 0;
        for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * view.strides()[d];
        ASSERT_EQ(std::memcmp(out + n * item, bytes + off * item, static_cast<size_t>(item)), 0) << "element " << n;
        for (size_t d = idx.size(); d-- > 0;) {
          if (++idx[d] < view.sizes()[d]) break;
          idx[d] = 0;
        }
      }
    }
}

TEST(Tensor, WrapDimAndSqueeze) {
  Tensor t = iota({1, 3, 1});
  EXPECT_EQ(t.squeeze().sizes(), (Shape{3}));
  EXPECT_EQ(t.squeeze(-1).sizes(), (Shape{1, 3}));
  EXPECT_EQ(t.squeeze(1).sizes(), (Shape{1, 3, 1}));  // not size 1: unchanged
  EXPECT_THROW(t.size(3), std::out_of_range);
  EXPECT_EQ(t.flatten(0, -1).sizes(), (Shape{3}));
  EXPECT_EQ(Tensor::scalar(ScalarType::Long, 7).unsqueeze(0).sizes(), (Shape{1}));
}

TEST(Tensor, Promotion) {
  EXPECT_EQ(promoteTypes(ScalarType::Long, ScalarType::Float), ScalarType::Float);
  EXPECT_EQ(promoteTypes(ScalarType::Bool, ScalarType::Int), ScalarType::Int);
  EXPECT_EQ(promoteTypes(ScalarType::Byte, ScalarType::Char), ScalarType::Short);
  EXPECT_EQ(promoteTypes(ScalarType::Float, ScalarType::Double), ScalarType::Double);
}

// Small heap buffers are reused by the thread that frees them: still 64-byte
// aligned, never shared by two live buffers, counted on the meter while they
// live (the requested size), and safe to free from another thread.
TEST(Storage, SmallBuffersAreReusedSafely) {
  auto meter = std::make_shared<MemoryMeter>();
  std::vector<std::shared_ptr<Storage>> live;
  for (int round = 0; round < 3; ++round) {
    for (size_t bytes : {1, 64, 65, 200, 1000, 4096, 4097, 20000}) {
      const size_t rounded = std::max<size_t>(64, (bytes + 63) / 64 * 64);
      std::shared_ptr<Storage> s = Storage::heap(bytes, rounded, meter);
      ASSERT_EQ(reinterpret_cast<uintptr_t>(s->data) % 64, 0u);
      std::memset(s->data, round + 1, rounded);  // the whole rounded size is ours to write
      live.push_back(std::move(s));
    }
    for (size_t i = 0; i < live.size(); ++i)
      for (size_t j = i + 1; j < live.size(); ++j) ASSERT_NE(live[i]->data, live[j]->data);
    live.erase(live.begin(), live.begin() + static_cast<std::ptrdiff_t>(live.size() / 2));  // half die, half live on
  }
  std::shared_ptr<Storage> other_thread = Storage::heap(100, 128, meter);
  std::thread([s = std::move(other_thread)]() mutable { s.reset(); }).join();  // freed (and pooled) by another thread
  live.clear();
  EXPECT_EQ(meter->live.load(), 0);
  EXPECT_GT(meter->peak.load(), 0);
}
