// Running a large batch as several smaller calls, where the batch-rows pass
// proved it gives the same result (return[batch_dim=0]). Which chunk is
// fastest depends on the model and the CPU (resnet50 gains from images
// sharing each weight read; mobilenet_v2's activations at 32 images spill
// the caches and it runs faster per image in chunks of 2 to 4), so it is
// measured: the first calls with a batch size each try the next candidate,
// from 1 item (or 1/32 of the batch) up, doubling to the whole batch (for
// 32: 1, 2, 4, 8, 16, 32),
// so that the whole batch's memory is needed only if the trend gets there.
// With two threads or more a second series follows: the same chunks from 1
// item up, run side by side, one chunk per thread at a time on one thread
// each (`lanes`): no barrier per primitive, and each core keeps its own
// chunk's activations. mobilenet_v2 and efficientnet_b0 at 32 images ran
// 0.69-0.82x of the time of their sequential chunks so on a noisy 2-vCPU
// Zen 4 (regnet_y_800mf and resnet18 even): which wins is measured too.
// A call times its full chunks after the first two (which make the
// primitives and the memory plan of their shape), or, once the shape is
// warm, the whole call. A candidate is timed over calls until they have
// measured kSampleNs or kMaxSamples calls, and counts at the fastest of them:
// one call of a few microseconds is at the mercy of one interrupt (timed
// once, the 32-row linear of the bench's `tiny` model settled on chunks of
// 16 or 8 in about one compiled copy of four, which then ran at 1.5x or
// 2.3x the time for its whole life). The series stops once a candidate runs
// more than kGiveUp times slower per item than the best so far. Every call
// computes its own batch; nothing runs twice. The choice is kept per batch
// size (a bounded number of them) and reported (compiled.batch_split).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace llga {

struct BatchSplitReport {
  int64_t items = 0;    // the batch size of the calls
  int64_t chunk = 0;    // the chunk chosen (items: run whole); 0 while measuring
  int lanes = 1;        // chunks run side by side, one thread each (1: one after another on every thread)
  // ns per item measured for each chunk tried, in the order tried: one
  // after another, and side by side
  std::vector<std::pair<int64_t, double>> ns_per_item;
  std::vector<std::pair<int64_t, double>> ns_per_item_side_by_side;
};

class BatchSplit {
 public:
  // How a compiled graph splits batches: Auto (measured), Off (never) or a
  // fixed chunk (Fixed, `chunk` items a call).
  enum class Mode { Auto, Off, Fixed };
  static constexpr double kGiveUp = 1.15;
  // A candidate's timed calls: until they add up to this much (a call of a
  // few milliseconds or more is timed once) or this many calls.
  static constexpr double kSampleNs = 2e6;
  static constexpr int kMaxSamples = 8;
  // Side by side is taken unless one after another measured this much
  // faster: without a barrier per primitive it holds up when the host takes
  // a core away for a while, where one after another lost 20-30% (the
  // measurement is a few calls in one phase of the host).
  static constexpr double kSideBySideMargin = 1.03;
  // Auto splits batches of at least this many items: below, chunks measured
  // within a few percent of the whole batch (mobilenet_v2 at 8: 3.66 ms an
  // image whole, 3.57 in chunks of 4), not worth the calls spent measuring.
  static constexpr int64_t kMinItems = 8;
  // and into at most this many chunks a call (a linear over 26,624 rows is
  // not tried one row a call: each chunk is a whole plan run, ~10 us)
  static constexpr int64_t kMaxChunks = 32;
  static constexpr size_t kMaxBatchSizes = 16;  // like every per-shape record: bounded

  void setMode(Mode m, int64_t chunk = 0);

  // What a call with `items` rows runs: chunks of `chunk` items (`items`:
  // whole), `lanes` of them side by side, and whether it is a measurement
  // (record() then). `lanes`: the threads a call may use (2 or more adds the
  // side-by-side series to a batch size measured from now on).
  struct Pick {
    int64_t chunk;
    bool timed;
    int lanes = 1;
  };
  Pick pick(int64_t items, int lanes = 1);
  // A measured call: ns per item over its full chunks after the second (the
  // first made the primitives for their shape, the second laid out the
  // memory planner's arena), or -1 when it had none; and over the whole call.
  // The candidate moves on after enough timed calls (kSampleNs, kMaxSamples)
  // and is reported at the fastest.
  // A candidate's first call counts only with the former; the whole batch's
  // third call, or a chunked candidate's second, is timed whole. Side by
  // side (`lanes` > 1) a call passes -1 and the time per item of its chunks
  // after the first: its first call lays out each lane's memory plan, its
  // second counts.
  // Returns the best chunk so far, whether it is now chosen, and the chunk
  // just measured unless it is the one chosen: what its shapes made (memory
  // plans, primitives, weight copies) can go, so that measuring holds one
  // candidate's state at a time (the chosen one's is built again once).
  struct Recorded {
    int64_t best = 0;
    bool settled = false;
    std::vector<int64_t> dropped;
  };
  Recorded record(int64_t items, int64_t chunk, double later_chunks_ns, double call_ns, int lanes = 1);
  // Never split again (an output turned out to be a view of an input, which
  // a concatenation of chunks would not be).
  void refuse(std::string why);
  std::string refused() const;
  std::vector<BatchSplitReport> report() const;

 private:
  struct Candidate {
    int64_t chunk;
    int lanes;
  };
  struct State {
    // 1, then doubling (ceil(items / 2^k)) up to items; then, side by side,
    // from 1 up while every lane gets a chunk
    std::vector<Candidate> candidates;
    int side_lanes = 1;               // the side-by-side series' lanes
    size_t next = 0;                  // the candidate the next call tries
    int warm_calls = 0;               // calls with the candidate that measured nothing
    int samples = 0;                  // its timed calls so far,
    double sampled_ns = 0;            // the time they measured
    double fastest_ns = 0;            // and the fastest per item
    BatchSplitReport report;
    uint64_t last_used = 0;
  };
  State& state(int64_t items, int lanes);
  static Candidate best(const BatchSplitReport& r, int side_lanes);
  mutable std::mutex mu_;
  Mode mode_ = Mode::Auto;
  int64_t fixed_ = 0;
  std::string refused_;
  std::map<int64_t, State> states_;
  uint64_t calls_ = 0;
};

}  // namespace llga
