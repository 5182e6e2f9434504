// The memory planner: recorded lifetimes become static offsets; a call that
// deviates or keeps a buffer never gets bytes that are still in use.
#include <gtest/gtest.h>

#include "runtime/arena.h"

#include <cstring>

using namespace llga;

namespace {

using Buf = std::shared_ptr<Storage>;
Buf alloc(size_t n) { return Storage::allocate(n); }

// a(1 KiB) and b(2 KiB) live together; a dies; c(1 KiB) then d(1 KiB) live with b.
struct Seen {
  void *a, *b, *c, *d;
};
Seen typicalCall(ArenaPlanner& p) {
  ArenaPlanner::Call call(p);
  Buf a = alloc(1000), b = alloc(2048);
  Seen s{a->data, b->data, nullptr, nullptr};
  a.reset();
  Buf c = alloc(1000);
  Buf d = alloc(1024);
  s.c = c->data;
  s.d = d->data;
  return s;
}

}  // namespace

TEST(Arena, RecordedLifetimesBecomeStaticOffsets) {
  ArenaPlanner p;
  typicalCall(p);  // warm-up: heap
  typicalCall(p);  // recorded: heap
  ArenaStats st = p.stats();
  EXPECT_EQ(st.recorded_calls, 1);
  EXPECT_EQ(st.blocks, 4);
  EXPECT_EQ(st.heap_blocks, 0);
  // b (2048) and c + d (1024 each) live together; a's bytes are reused by c or d.
  EXPECT_EQ(st.arena_bytes, 2048 + 1024 + 1024);
  Seen s1 = typicalCall(p);
  Seen s2 = typicalCall(p);
  EXPECT_EQ(p.stats().planned_calls, 2);
  EXPECT_TRUE(s1.a == s1.c || s1.a == s1.d);  // a died before c and d came
  EXPECT_NE(s1.c, s1.d);
  EXPECT_NE(s1.b, s1.c);
  EXPECT_EQ(s1.b, s2.b);  // the same addresses call after call
  EXPECT_EQ(s1.c, s2.c);
}

TEST(Arena, AnOverlappingLiveBlockSendsTheCallToTheHeap) {
  ArenaPlanner p;
  typicalCall(p);
  typicalCall(p);
  Buf a, c, d;
  {
    ArenaPlanner::Call call(p);
    a = alloc(1000);
    Buf b = alloc(2048);  // a is kept alive this time
    c = alloc(1000);
    d = alloc(1024);
    EXPECT_NE(a->data, c->data);
    EXPECT_NE(a->data, d->data);
    EXPECT_NE(c->data, d->data);
  }
  EXPECT_EQ(p.stats().deviations, 1);
  EXPECT_EQ(p.stats().planned_calls, 0);
}

TEST(Arena, ABufferHeldAfterItsCallKeepsItsBytes) {
  ArenaPlanner p;
  typicalCall(p);
  typicalCall(p);
  Buf kept;
  {
    ArenaPlanner::Call call(p);
    Buf a = alloc(1000), b = alloc(2048);
    a.reset();
    Buf c = alloc(1000), d = alloc(1024);
    kept = b;  // outlives the call, in the arena
  }
  EXPECT_EQ(p.stats().deviations, 1);
  EXPECT_EQ(p.stats().in_use_blocks, 1);  // counted in use until released
  static_cast<char*>(kept->data)[0] = 42;
  for (int i = 0; i < 4; ++i) {  // later calls record and plan again, never over `kept`
    ArenaPlanner::Call call(p);
    Buf a = alloc(1000), b = alloc(2048);
    std::memset(b->data, 0, 2048);
    a.reset();
    Buf c = alloc(1000), d = alloc(1024);
    std::memset(c->data, 0, 1000);
    std::memset(d->data, 0, 1024);
  }
  EXPECT_EQ(static_cast<char*>(kept->data)[0], 42);
  EXPECT_GE(p.stats().planned_calls, 1);
  kept.reset();
  EXPECT_EQ(p.stats().in_use_blocks, 0);
}

TEST(Arena, CallsThatKeepDeviatingEndOnTheHeap) {
  ArenaPlanner p;
  typicalCall(p);
  typicalCall(p);
  for (int i = 0; i < 10; ++i) {  // every call allocates sizes unlike the one recorded before it
    ArenaPlanner::Call call(p);
    Buf a = alloc(4096 + static_cast<size_t>(i) * 64);
    Buf b = alloc(64);
    EXPECT_NE(a->data, b->data);
  }
  ArenaStats st = p.stats();
  EXPECT_EQ(st.planned_calls, 0);
  EXPECT_EQ(st.deviations, 4);
  EXPECT_TRUE(st.disabled);
}

TEST(Arena, OffWhenDisabled) {
  ArenaPlanner::setEnabled(false);
  ArenaPlanner p;
  for (int i = 0; i < 3; ++i) typicalCall(p);
  ArenaPlanner::setEnabled(true);
  EXPECT_EQ(p.stats().recorded_calls, 0);
  EXPECT_EQ(p.stats().planned_calls, 0);
}

// A call that ends in an exception (an allocation failing inside a partition)
// frees its buffers as it unwinds: nothing of the arena stays in use, the plan
// is kept (not a deviation: four failures in a row must not disable it) and
// the next call is served as planned. A failing recorded call records nothing.
TEST(Arena, ACallThatThrowsLeavesNothingInUseAndKeepsThePlan) {
  ArenaPlanner p;
  typicalCall(p);
  auto failing = [&p] {
    ArenaPlanner::Call call(p);
    Buf a = alloc(1000), b = alloc(2048);
    EXPECT_TRUE(failActivationAllocationAfter(0) == false);
    Buf c = alloc(1000);  // throws
    ADD_FAILURE() << "the armed allocation did not throw";
  };
  EXPECT_THROW(failing(), std::bad_alloc);  // while recording
  EXPECT_EQ(p.stats().recorded_calls, 0);
  EXPECT_EQ(p.stats().failed_calls, 1);
  typicalCall(p);  // records now
  EXPECT_EQ(p.stats().recorded_calls, 1);
  for (int i = 0; i < 6; ++i) EXPECT_THROW(failing(), std::bad_alloc);
  ArenaStats st = p.stats();
  EXPECT_EQ(st.failed_calls, 7);
  EXPECT_EQ(st.deviations, 0);
  EXPECT_EQ(st.in_use_blocks, 0);
  EXPECT_FALSE(st.disabled);
  Seen s = typicalCall(p);
  EXPECT_EQ(p.stats().planned_calls, 1);
  EXPECT_NE(s.b, s.c);
  EXPECT_FALSE(failActivationAllocationAfter(-1));  // disarmed by the failure
}

