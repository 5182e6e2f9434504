// The batch split's measurement: which chunk each call tries, which calls
// count, when it settles, and what it lets go (runtime/batch_split.h).
#include <gtest/gtest.h>

#include "runtime/batch_split.h"

using namespace llga;

namespace {

// The cost functions below give ns per item in units of 4 * kUnit by
// default: 4 ms a call at 32 items and cost 1, over kSampleNs from cost 0.5
// on, so that every candidate is timed by one call (the sampling of fast
// calls has tests of its own).
constexpr double kUnit = 1e6 / 32;
static_assert(4 * kUnit * 32 * 0.5 >= BatchSplit::kSampleNs);

// Runs the measurement for `items` with ns per item given by `cost(chunk)`,
// as CompiledGraph does: a chunked call reports its later chunks' time when
// it has three or more, a whole call (or a call of two chunks) only its own.
std::vector<int64_t> measure(BatchSplit& b, int64_t items, double (*cost)(int64_t), int max_calls = 40,
                             double unit = 4 * kUnit) {
  std::vector<int64_t> tried;
  for (int call = 0; call < max_calls; ++call) {
    const BatchSplit::Pick p = b.pick(items);
    if (!p.timed) break;
    tried.push_back(p.chunk);
    const int64_t chunks = (items + p.chunk - 1) / p.chunk;
    const double ns = cost(p.chunk) * unit;
    b.record(items, p.chunk, chunks >= 3 ? ns : -1.0, ns);
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
      b.record(items, p.chunk, -1.0, side(p.chunk) * 4 * kUnit, p.lanes);
    else
      b.record(items, p.chunk, chunks >= 3 ? cost(p.chunk) * 4 * kUnit : -1.0, cost(p.chunk) * 4 * kUnit);
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

// A fast call is timed several times and counts at its fastest: one slow call
// (an interrupt) does not decide. Here the whole batch's first timed call
// is 3x its cost, which alone would have chosen chunks of 16.
int g_whole_calls = 0;
double fastWholeOnceSlow(int64_t chunk) {
  if (chunk == 32 && g_whole_calls++ == 2) return 3.0 * falling(32);  // its first timed call
  return falling(chunk);
}

TEST(BatchSplit, FastCallsAreTimedSeveralTimesAndCountAtTheFastest) {
  BatchSplit b;
  g_whole_calls = 0;
  // calls of 0.3 to 10 us: kMaxSamples timed calls per candidate, and the whole
  // batch's two warm-up calls before its own
  const double unit = 100.0 / 32;
  const auto tried = measure(b, 32, fastWholeOnceSlow, 200, unit);
  const int n = BatchSplit::kMaxSamples;
  // 1, 2, 4 and 8 time from their first call; 16 (two chunks) from its second, 32 from its third
  EXPECT_EQ(tried.size(), static_cast<size_t>(4 * n + (1 + n) + (2 + n)));
  const auto r = b.report();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].chunk, 32);
  ASSERT_EQ(r[0].ns_per_item.size(), 6u);
  EXPECT_DOUBLE_EQ(r[0].ns_per_item.back().second, falling(32) * unit);  // its fastest, not the slow one
}

TEST(BatchSplit, SlowerCallsAreTimedUntilTheyAddUpToTheSampleTime) {
  BatchSplit b;
  // 32 items at 20 us each: 0.64 ms a call, so 4 calls reach kSampleNs (2 ms)
  const BatchSplit::Pick p = b.pick(32);
  ASSERT_EQ(p.chunk, 1);
  int calls = 0;
  while (b.pick(32).chunk == 1 && calls < 100) {
    b.record(32, 1, 20000.0, 20000.0);
    ++calls;
  }
  EXPECT_EQ(calls, 4);
  EXPECT_EQ(b.pick(32).chunk, 2);
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
  const BatchSplit::Recorded first = b.record(32, b.pick(32).chunk, 5e6, 5e6);  // chunk 1, timed once (5 ms an item)
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
