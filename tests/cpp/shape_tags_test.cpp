// Shape tags: forgetShapeTag reaching the caches of every kernel while other
// threads make and destroy kernels (and their caches).
#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "backend/dnnl/ops/primitive_cache.h"
#include "runtime/shape_tags.h"

namespace llga {
namespace {

struct Entry {
  int value = 0;
};

// A cache is reachable by forgetShapeTag only once it is whole: one registered
// while its base was being constructed had its pure forgetTag called (a batch
// split dropping a chunk's state while another thread compiled: "pure virtual
// method called", the process aborted).
TEST(ShapeTags, ForgetWhileCachesAreMadeAndDestroyed) {
  std::atomic<bool> done{false};
  std::thread forgetting([&] {
    while (!done.load(std::memory_order_relaxed)) forgetShapeTag(12345);
  });
  for (int i = 0; i < 200000; ++i) {
    PrimitiveCache<Entry> cache;
    if (i % 64 == 0) {
      ShapeTagScope tag(12345);
      cache.get({i}, [] { return Entry{1}; });
    }
  }
  done = true;
  forgetting.join();
}

TEST(ShapeTags, ForgetDropsOnlyTheTaggedEntries) {
  PrimitiveCache<Entry> cache;
  {
    ShapeTagScope tag(7);
    cache.get({1}, [] { return Entry{1}; });
  }
  {
    ShapeTagScope tag(8);
    cache.get({2}, [] { return Entry{2}; });
  }
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(forgetShapeTag(7), 1u);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(forgetShapeTag(7), 0u);
}

}  // namespace
}  // namespace llga
