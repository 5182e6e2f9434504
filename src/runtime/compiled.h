// A graph ready to run: its weights bound, its plan built, its inputs checked.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "runtime/arena.h"
#include "runtime/batch_split.h"
#include "runtime/plan.h"

namespace llga {

struct InputSpec {
  std::string name;
  TypePtr type;
  // A node that may write into this input's memory (an in-place op on it or
  // on a view of it), or null. Such an input must be writeable and free of
  // overlapping elements; checkInputs refuses it otherwise.
  const Node* writer = nullptr;
  std::string writerText() const;  // "aten::add_ at model.py:4:0"
};

// What a compiled graph holds, in bytes (compiled.memory).
struct MemoryReport {
  int64_t weights = 0;       // weights and tensor constants bound to the plan (shared with the caller where given)
  int64_t weight_cache = 0;  // weights reordered into primitives' layouts, held by the kernels
  int64_t released = 0;      // original weights let go during the first call (only the reordered copy is used)
  // Per input signature ("1x3x224x224:Float, ..."): the most bytes of
  // activations (every buffer llga allocated during the call, outputs and
  // oneDNN scratch included) live at once, over the calls with it; the
  // kMaxPeakSignatures signatures called most recently.
  std::map<std::string, int64_t> peak_activations;
  // Per input signature: the memory planner's arena (runtime/arena.h).
  std::map<std::string, ArenaStats> arenas;
};

class CompiledGraph {
 public:
  CompiledGraph(std::shared_ptr<Graph> graph, WeightMap weights);

  // Checks count, dtype and rank of each input against the graph's types,
  // and that inputs the graph writes into are writeable and do not overlap
  // themselves (std::invalid_argument naming the input), then runs.
  // `observer`, if given, sees every executed op node and its outputs (Plan::run).
  // A graph the batch-rows pass proved separable (return[batch_dim=0]) may
  // run a call's batch as smaller chunks (batch_split.h), unless observed.
  std::vector<RtValue> run(std::vector<RtValue> inputs, const NodeObserver* observer = nullptr) const;

  const std::shared_ptr<Graph>& graph() const { return graph_; }
  const std::vector<InputSpec>& inputs() const { return inputs_; }
  // Null when the graph is not proved separable by batch.
  BatchSplit* batchSplit() const { return batch_split_.get(); }
  size_t weightBytes() const;  // plain weights still held (see memory())
  MemoryReport memory() const;
  // Each op's kernel with what it did on its latest call ("" when nothing to say).
  std::vector<std::pair<const Node*, KernelReport>> kernelReports() const { return plan_->kernelReports(); }
  // The constants the plan bound and holds now (a model file saves them).
  std::vector<Plan::BoundConstant> boundConstants() const { return plan_->boundConstants(); }

 private:
  void checkInputs(const std::vector<RtValue>& inputs) const;
  // One call of the plan (the memory planner and peak of its signature).
  std::vector<RtValue> runWhole(std::vector<RtValue> inputs, const NodeObserver* observer) const;
  // The call in chunks of rows (false when it turns out not to split: the
  // caller then runs it whole).
  bool runSplit(const std::vector<RtValue>& inputs, int64_t items, std::vector<RtValue>& out) const;
  void runSideBySide(const std::vector<RtValue>& inputs, int64_t items, int64_t chunk, int lanes,
                     std::vector<RtValue>& out) const;
  static std::set<std::string> chunkSignatures(const std::vector<RtValue>& inputs, int64_t items, int64_t chunk);
  void dropChunkState(const std::vector<RtValue>& inputs, int64_t items, const BatchSplit::Recorded& r) const;
  // The tag of kernel state made by calls with this signature (runtime/shape_tags.h).
  uint64_t shapeTag(const std::string& sig) const;
  std::unique_ptr<BatchSplit> batch_split_;
  std::shared_ptr<Graph> graph_;
  std::vector<InputSpec> inputs_;
  std::unique_ptr<Plan> plan_;
  std::shared_ptr<MemoryMeter> cache_meter_ = std::make_shared<MemoryMeter>();
  mutable std::mutex mu_;
  // Bounded like every per-shape structure: a service called with ever new
  // input sizes must not grow (the oldest signature goes).
  static constexpr size_t kMaxPeakSignatures = 64;
  struct PeakSlot {
    int64_t bytes = 0;
    uint64_t last_used = 0;
  };
  mutable std::map<std::string, PeakSlot> peaks_;
  mutable int64_t released_bytes_ = 0;
  // Per recent input signature (LRU by last call): the memory plan, and what
  // the plan's shape-only instructions computed (evicted together).
  struct PlannerSlot {
    std::shared_ptr<ArenaPlanner> planner;
    std::shared_ptr<ShapeValues> shape_values;
    uint64_t last_used = 0;
  };
  mutable std::map<std::string, PlannerSlot> planners_;
  mutable uint64_t calls_ = 0;
  PlannerSlot plannerFor(const std::string& sig) const;
};

}  // namespace llga
