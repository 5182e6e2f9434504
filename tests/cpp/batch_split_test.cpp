// The batch split's measurement: which chunk each call tries, which calls
// count, when it settles, and what it lets go (runtime/batch_split.h).
#include <gtest/gtest.h>

#include "runtime/batch_split.h"

using namespace llga;

namespace {

// Runs the measurement for `items` with ns per item given by `cost(chunk)`,
// as CompiledGraph does: a chunked call reports its later chunks' time when
// it has three or more, a whole call (or a call of two chunks) only its own.
std::vector<int64_t> measure(BatchSplit& b, int64_t items, double (*cost)(int64_t), int max_calls = 40) {
  std::vector<int64_t> tried;
  for (int call = 0; call < max_calls; ++call) {
    const BatchSplit::Pick p = b.pick(items);
    if (!p.timed) break;
    tried.push_back(p.chunk);
    const int64_t chunks = (items + p.chunk - 1) / p.chunk;
    b.record(items, p.chunk, chunks >= 3 ? cost(p.chunk) : -1.0, cost(p.chunk));
  }
  return tried;
}

// The same with `lanes` threads: side-by-side candidates cost `side(chunk)`
// and time from their second call (the first lays out each lane's arena).
std::vector<std::pair<int64_t, int>> measureLanes(BatchSplit& b, int64_t items, int lanes, double (*cost)(int64_t),
                                                  double (*side)(int64_t), int max_calls = 60) {
  std::vector<std::pair<int64_t, int>> tried;
  for (int call = 0; call < max_calls; ++call) {
    const BatchSplit::Pick p = b.pick(items, lanes);
    if (!p.timed) break;
    tried.emplace_back(p.chunk, p.lanes);
    const int64_t chunks = (items + p.chunk - 1) / p.chunk;
    if (p.lanes > 1)
      b.record(items, p.chunk, -1.0, side(p.chunk), p.lanes);
    else
      b.record(items, p.chunk, chunks >= 3 ? cost(p.chunk) : -1.0, cost(p.chunk));
  }
  return tried;
}

double bowl(int64_t chunk) { return chunk == 4 ? 1.0 : chunk < 4 ? 1.0 + 0.1 * static_cast<double>(4 / chunk) : 2.0; }
double falling(int64_t chunk) { return 100.0 / static_cast<double>(chunk); }

}  // namespace

TEST(BatchSplit, TriesFromOneItemUpAndStopsPastTheBest) {
  BatchSplit b;
  // 1, 2 and 4 time on their first call (later chunks); 8 has 4 chunks too;
  // 8 is 2x the best: settled on 4 without trying 16 or 32
  EXPECT_EQ(measure(b, 32, bowl), (std::vector<int64_t>{1, 2, 4, 8}));
  const auto r = b.report();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].chunk, 4);
  EXPECT_EQ(b.pick(32).chunk, 4);
  EXPECT_FALSE(b.pick(32).timed);
}

TEST(BatchSplit, TheWholeBatchCountsFromItsThirdCall) {
  BatchSplit b;
  // a falling cost reaches the whole batch: 16 (two chunks) needs a second
  // call, 32 (one) a third; the whole batch wins
  EXPECT_EQ(measure(b, 32, falling), (std::vector<int64_t>{1, 2, 4, 8, 16, 16, 32, 32, 32}));
  EXPECT_EQ(b.report()[0].chunk, 32);
  EXPECT_EQ(b.report()[0].ns_per_item.size(), 6u);
}

TEST(BatchSplit, SmallBatchesRunWholeAndLargeOnesInAtMost32Chunks) {
  BatchSplit b;
  EXPECT_EQ(b.pick(7).chunk, 7);
  EXPECT_FALSE(b.pick(7).timed);
  EXPECT_EQ(b.pick(1000).chunk, 32);  // ceil(1000 / 32): not 1000 calls of one item
}

TEST(BatchSplit, FixedAndOffModes) {
  BatchSplit b;
  b.setMode(BatchSplit::Mode::Fixed, 3);
  EXPECT_EQ(b.pick(8).chunk, 3);
  EXPECT_EQ(b.pick(2).chunk, 2);
  b.setMode(BatchSplit::Mode::Off);
  EXPECT_EQ(b.pick(64).chunk, 64);
  EXPECT_THROW(b.setMode(BatchSplit::Mode::Fixed, 0), std::invalid_argument);
}

TEST(BatchSplit, MeasuringHoldsOneCandidateAndARefusalIsFinal) {
  BatchSplit b;
  const BatchSplit::Recorded first = b.record(32, b.pick(32).chunk, 5.0, 5.0);  // chunk 1
  EXPECT_EQ(first.dropped, (std::vector<int64_t>{1}));  // dropped though best: the next candidate builds its own
  EXPECT_FALSE(first.settled);
  b.refuse("output 0 is a view of an input");
  EXPECT_EQ(b.pick(32).chunk, 32);
  EXPECT_FALSE(b.pick(32).timed);
  EXPECT_EQ(b.refused(), "output 0 is a view of an input");
  EXPECT_TRUE(b.report().empty());
}

double flat(int64_t) { return 1.0; }
double sideCheaper(int64_t chunk) { return chunk <= 2 ? 0.8 : 1.5; }
double sideNearlyEven(int64_t) { return 1.02; }
double sideDearer(int64_t) { return 1.1; }

TEST(BatchSplit, WithTwoLanesTheSideBySideSeriesFollowsAndCanWin) {
  BatchSplit b;
  // one after another: 1, 2 ... 32 all even (never 15% past the best); then
  // side by side from 1 item up, each candidate twice; 4 is past the best
  const auto tried = measureLanes(b, 32, 2, flat, sideCheaper);
  const std::vector<std::pair<int64_t, int>> want = {{1, 1}, {2, 1}, {4, 1},  {8, 1},  {16, 1}, {16, 1}, {32, 1},
                                                     {32, 1}, {32, 1}, {1, 2}, {1, 2}, {2, 2}, {2, 2}, {4, 2}, {4, 2}};
  EXPECT_EQ(tried, want);
  const auto r = b.report();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].lanes, 2);
  EXPECT_EQ(r[0].chunk, 1);
  EXPECT_EQ(r[0].ns_per_item_side_by_side.size(), 3u);
  const BatchSplit::Pick p = b.pick(32, 2);
  EXPECT_EQ(p.chunk, 1);
  EXPECT_EQ(p.lanes, 2);
  EXPECT_FALSE(p.timed);
}

TEST(BatchSplit, SideBySideIsPreferredWithinItsMarginAndNotBeyond) {
  BatchSplit near, dear;
  measureLanes(near, 32, 2, flat, sideNearlyEven);  // 2% slower: within kSideBySideMargin
  EXPECT_EQ(near.report()[0].lanes, 2);
  measureLanes(dear, 32, 2, flat, sideDearer);  // 10% slower: one after another
  EXPECT_EQ(dear.report()[0].lanes, 1);
  EXPECT_EQ(dear.report()[0].chunk, 1);  // the first of the even ones
}

TEST(BatchSplit, OneLaneHasNoSideBySideSeries) {
  BatchSplit b;
  measureLanes(b, 32, 1, bowl, sideCheaper);
  EXPECT_EQ(b.report()[0].lanes, 1);
  EXPECT_TRUE(b.report()[0].ns_per_item_side_by_side.empty());
}
