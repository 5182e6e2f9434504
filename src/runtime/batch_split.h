// Running a large batch as several smaller calls, where the batch-rows pass
// proved it gives the same result (return[batch_dim=0]). Which chunk is
// fastest depends on the model and the CPU (resnet50 gains from 32 images
// sharing each weight read; mobilenet_v2's activations at 32 images spill
// the caches and it runs faster per image in chunks of 4 to 8), so it is
// measured: the first calls with a batch size each try the next candidate
// (the whole batch, then halves: 32, 16, 8, ...), timing every chunk after
// the first (which creates the primitives for its shape), until one runs
// more than kGiveUp times slower per item than the best so far. Every call
// computes its own batch; nothing is run twice. The choice is kept per batch
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
  // ns per item measured for each chunk tried, in the order tried
  std::vector<std::pair<int64_t, double>> ns_per_item;
};

class BatchSplit {
 public:
  // How a compiled graph splits batches: Auto (measured), Off (never) or a
  // fixed chunk (Fixed, `chunk` items a call).
  enum class Mode { Auto, Off, Fixed };
  static constexpr double kGiveUp = 1.15;
  static constexpr size_t kMaxBatchSizes = 16;  // like every per-shape record: bounded

  void setMode(Mode m, int64_t chunk = 0);
  Mode mode() const;
  int64_t fixedChunk() const;

  // What a call with `items` rows runs: chunks of `chunk` items (`items`:
  // whole), and whether it is a measurement (record() then).
  struct Pick {
    int64_t chunk;
    bool timed;
  };
  Pick pick(int64_t items);
  // A measured call: ns per item over its chunks after the first (which made
  // the primitives for their shape), or -1 when it had no full chunk after
  // the first; and over the whole call. The first call with a candidate
  // counts only with the former; a second call is then timed whole.
  void record(int64_t items, int64_t chunk, double later_chunks_ns, double call_ns);
  // Never split again (an output turned out to be a view of an input, which
  // a concatenation of chunks would not be).
  void refuse(std::string why);
  std::string refused() const;
  std::vector<BatchSplitReport> report() const;

 private:
  struct State {
    std::vector<int64_t> candidates;  // the whole batch, then halves, to 1
    size_t next = 0;                  // the candidate the next call tries
    bool warmed = false;              // the candidate ran once (its shapes' primitives exist)
    BatchSplitReport report;
    uint64_t last_used = 0;
  };
  State& state(int64_t items);
  mutable std::mutex mu_;
  Mode mode_ = Mode::Auto;
  int64_t fixed_ = 0;
  std::string refused_;
  std::map<int64_t, State> states_;
  uint64_t calls_ = 0;
};

}  // namespace llga
