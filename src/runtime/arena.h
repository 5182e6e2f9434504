// The memory planner: static offsets in one arena for a call's activations.
//
// The first call with an input signature runs on the heap (it builds
// primitives and caches: not a typical call). The second one also runs on the
// heap and records every activation buffer it allocates: its size, when it is
// allocated and when it is freed (the plan frees each register after its last
// reader). Buffers freed
// before the call returns get offsets in one arena, packed greedily by size so
// that buffers alive at the same time never share bytes (the greedy-by-size
// scheme of TFLite's arena planner); buffers still alive when the call returns
// (outputs, anything a kernel keeps) stay on the heap.
//
// Later calls with that signature take an arena and serve their n-th
// allocation from its planned offset: no malloc/free per buffer, and the same
// addresses call after call (warm in cache). A call that deviates from the
// recording (another size, more or fewer allocations, a block whose
// neighbours in the arena are still alive) takes the heap for the rest of it
// and the next call records again; an arena with a buffer still held after its
// call returns is never handed out again. A plan may take calls to settle; it
// never overlaps two live buffers.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/tensor.h"

namespace llga {

struct ArenaStats {
  int64_t arena_bytes = 0;     // the planned arena; 0 until a call was recorded
  int64_t blocks = 0;          // buffers given an offset in it
  int64_t heap_blocks = 0;     // buffers alive after the recorded call: left on the heap
  int64_t recorded_calls = 0;  // calls that ran on the heap and recorded (not the first call)
  int64_t planned_calls = 0;   // calls served from the arena as planned
  int64_t deviations = 0;      // calls that deviated from the plan (recorded again next)
  int64_t failed_calls = 0;    // calls that ended in an exception (not deviations: the plan stays)
  int64_t in_use_blocks = 0;   // planned blocks handed out and not freed yet, over all its arenas
  bool disabled = false;       // deviated too often in a row, or allocates too much to plan: heap only
};

class ArenaPlanner {
 public:
  ArenaPlanner();
  ~ArenaPlanner();

  // One call's activations: while alive, the calling thread allocates through it.
  class Call {
   public:
    explicit Call(ArenaPlanner& planner);
    ~Call();
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;

   private:
    ArenaPlanner& planner_;
    std::unique_ptr<ActivationSource> source_;
    std::unique_ptr<SourceScope> scope_;
    int exceptions_ = 0;  // std::uncaught_exceptions() at the start: more at the end means the call failed
  };

  ArenaStats stats() const;

  // Process-wide switch (on by default; LLGA_MEMORY_PLAN=0 turns it off at start-up).
  static void setEnabled(bool on);
  static bool enabled();

  struct Layout;
  struct Recording;
  struct Buffer;

 private:
  void finishRecording(const std::shared_ptr<Recording>& rec, bool failed);
  void finishPlanned(bool as_planned, bool failed, std::shared_ptr<Buffer> buffer,
                     const std::shared_ptr<const Layout>& layout);

  mutable std::mutex mu_;
  std::shared_ptr<const Layout> layout_;         // null until recorded
  std::vector<std::shared_ptr<Buffer>> pool_;    // arenas free for the next call
  std::vector<std::weak_ptr<Buffer>> issued_;    // every arena alive (for stats().in_use_blocks)
  bool warm_ = false;                            // a call ran (the first one is not recorded)
  bool recording_ = false;                       // a call is recording now
  int failures_in_a_row_ = 0;
  ArenaStats stats_;
};

}  // namespace llga
