// A graph, lowered for execution: an instruction list over a register file
// (TorchScript's interpreter idea). Constants and weights are bound once;
// every call gets its own register file, so one Plan serves many threads.
//
// The runtime core (this folder) knows kernels only through the Kernel
// interface and the op registry (kernel.h), which the backend
// (src/backend/dnnl) fills; layouts between kernels are what the
// propagate-layouts pass wrote on the IR (out_layouts), applied as is.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <atomic>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/ir.h"
#include "runtime/exec_context.h"
#include "runtime/kernel.h"
#include "runtime/value.h"

namespace llga {

// Weights for prim::GetAttr paths ("layer1.0.conv1.weight") and for frozen
// constants by value name ("self.fc.weight").
using WeightMap = std::unordered_map<std::string, Tensor>;

// Thrown by Plan::build with every op kind the runtime lacks.
struct UnsupportedOps : std::runtime_error {
  UnsupportedOps(std::string msg, std::map<std::string, std::vector<std::string>> ops)
      : std::runtime_error(std::move(msg)), ops(std::move(ops)) {}
  std::map<std::string, std::vector<std::string>> ops;  // kind -> source lines
};

// Thrown when a kernel fails, naming the node.
struct ExecutionError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Thrown when an allocation failed while a kernel ran (std::bad_alloc, or
// oneDNN's out-of-memory status), naming the node; Python's MemoryError.
struct OutOfMemory : ExecutionError {
  using ExecutionError::ExecutionError;
};
// A backend whose library reports running out of memory in its own exception
// type says how to recognise it (the dnnl backend: dnnl::error with
// dnnl_out_of_memory). One per process; null: only std::bad_alloc.
using OutOfMemoryTest = bool (*)(const std::exception&);
void setOutOfMemoryTest(OutOfMemoryTest test);

// Thrown by llga::Guard: this call's inputs differ in rank or dtype from
// those the graph was specialized for (passes/specialize_inputs.cpp).
struct SpecializationMismatch : ExecutionError {
  using ExecutionError::ExecutionError;
};

// What a plan's shape-only instructions (passes/mark_shape_only.cpp: ops
// whose results depend on the input shapes alone) computed for one input
// signature: the values the rest of the plan reads of them. The caller keeps
// one per signature (CompiledGraph: with its memory plan); the first call
// that runs to its end fills it, later calls skip those instructions.
struct ShapeValues {
  std::mutex mu;
  std::shared_ptr<const std::vector<RtValue>> values;
};

class Plan {
 public:
  static std::unique_ptr<Plan> build(std::shared_ptr<const Graph> graph, const WeightMap& weights);
  // `observer`, if given, sees every executed op node and its outputs (and
  // then every shape-only instruction runs); `input_observer`, if given, its
  // inputs just before it runs (alike); `shape_values`, if given, holds what
  // the shape-only instructions computed for this call's signature.
  std::vector<RtValue> run(std::vector<RtValue> inputs, const NodeObserver* observer = nullptr,
                           ShapeValues* shape_values = nullptr, const NodeObserver* input_observer = nullptr) const;
  // The same inside a kernel of an enclosing plan: its context (stream,
  // scratchpad, observer) serves this plan's ops too.
  std::vector<RtValue> run(std::vector<RtValue> inputs, ExecContext& ctx) const;
  size_t numInstructions() const;
  // Each op's kernel with what it did on its latest call (Kernel::report).
  std::vector<std::pair<const Node*, KernelReport>> kernelReports() const;
  // For a plan run as one kernel (a fusion group run op by op): whether graph
  // input i may arrive strided, and letting graph output j leave strided.
  bool inputAcceptsStrided(size_t i) const;
  void allowOutputStrided(size_t j);
  // Bytes of the plain tensors bound as constants (weights), each buffer once
  // (compacted ones are counted with the weight cache).
  size_t constantBytes() const;
  // Weight compaction: during the first call that runs to its end, each
  // constant tensor whose readers (all of them run by then) take it only
  // through the copy they reordered into their primitive's layout
  // (Kernel::compactedWeight) is replaced by that copy right after its last
  // reader, so from there on the plan holds only the copy. `hook` hears of
  // each original let go (its data pointer and bytes), on the calling thread,
  // so that other holders can let go too. Set before the first call.
  void setReleaseHook(std::function<void(const void*, size_t)> hook) { on_release_ = std::move(hook); }
  // The constants the plan bound (a model file saves them): the graph value,
  // the WeightMap key it was bound by ("" when it came from the graph's own
  // attribute), and what the plan holds for it now (after weight compaction,
  // the reordered copy: a blocked tensor).
  struct BoundConstant {
    const Value* value;
    std::string weight_name;
    RtValue held;
  };
  std::vector<BoundConstant> boundConstants() const;

 private:
  struct Block;
  struct Instr {
    enum class Kind { Op, If, Loop } kind = Kind::Op;
    const Node* node = nullptr;
    std::unique_ptr<Kernel> kernel;
    ScalarFn scalar = nullptr;    // the op on Python numbers (OpDef::scalar), when the node is typed so
    std::vector<int> in, out;
    std::vector<int> free_after;  // registers whose last use this is
    uint64_t dying = 0;           // bit p: input p's register is among them (KernelArgs::dying)
    // Bit p: input p is only read, by an op that keeps no view of it: a tensor
    // whose strides do not nest (Tensor::stridesNest) is handed over as a dense copy.
    uint64_t may_copy = 0;
    int partition = -1;           // a fusion group's index in program order (profiles)
    // Marked shape_only (top-level instructions only): skipped once the
    // signature's ShapeValues are filled; `keep` are its output registers
    // that other instructions or the plan's outputs read, with their slots.
    bool shape_only = false;
    std::vector<std::pair<int, int>> keep;
    std::string pattern;          // and its pattern
    std::vector<std::unique_ptr<Block>> blocks;
  };
  struct Block {
    std::vector<int> inputs;
    std::vector<Instr> code;
    std::vector<int> outputs;
  };

  std::vector<RtValue> runMain(std::vector<RtValue> inputs, ExecContext& ctx, ShapeValues* shape_values) const;
  void runBlock(const Block& b, std::vector<RtValue>& regs, ExecContext& ctx) const;
  void runInstr(const Instr& ins, std::vector<RtValue>& regs, ExecContext& ctx) const;
  bool readersAcceptStrided(int r, bool need_reader) const;
  void prepareCompaction() const;
  void compactConstant(int r, std::vector<RtValue>& regs) const;

  friend class PlanBuilder;
  // The registers an instruction reads, with those of its nested blocks.
  static void collectUses(const Instr& ins, std::vector<int>& used);
  std::shared_ptr<const Graph> graph_;
  int num_regs_ = 0;
  mutable std::vector<std::pair<int, RtValue>> constants_;  // swapped by the compacting call (under constants_mu_)
  mutable std::shared_mutex constants_mu_;  // run() reads constants_ while the compacting call may replace some
  struct ConstantOrigin {
    const Value* value;
    std::string weight_name;
  };
  std::vector<ConstantOrigin> constant_origins_;  // parallel to constants_
  struct Compaction {
    bool prepared = false;
    std::unordered_map<int, std::vector<std::pair<const Instr*, size_t>>> readers;  // constant register -> readers
    std::unordered_map<int, size_t> index;  // compactable constant register -> its constants_ index
    std::vector<std::vector<int>> after;    // per main_ instruction: constants whose last reader it is
  };
  mutable Compaction compaction_;  // only the compacting call (one at a time) touches it
  mutable std::atomic<bool> compact_pending_{true};
  std::function<void(const void*, size_t)> on_release_;
  Block main_;
  int shape_slots_ = 0;  // the keep slots of main_'s shape-only instructions
};

// A tensor over a constant's bytes (no copy; the constant's owner kept alive).
Tensor tensorFromConstant(const ConstantTensor& c);

// Where a node came from, for messages: "aten::relu at model.py:3:4 (%y)".
std::string describeNode(const Node& n);

}  // namespace llga
