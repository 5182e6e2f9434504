// Per-call execution state: oneDNN's engine and stream, this call's
// scratchpad, and the observer that sees every executed node.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>
#include <unordered_map>

#include <oneapi/dnnl/dnnl.hpp>

#include "runtime/tensor.h"

namespace llga {

dnnl::engine& cpuEngine();

// Per-call execution state. Primitives are created with a user-managed
// scratchpad (scratchpadAttr) and run with this call's scratch buffer, which
// makes them stateless: one primitive can run in many threads at once.
class Node;
struct RtValue;
// Sees every executed node with its outputs (propagate-shapes, profilers).
using NodeObserver = std::function<void(const Node&, RtValue* const* outputs, size_t count)>;

struct ExecContext {
  dnnl::stream stream{cpuEngine()};
  const NodeObserver* observer = nullptr;
  // Sees every executed op node with its inputs, just before it runs
  // (calibration: a value as its reader reads it, after any write into it).
  const NodeObserver* input_observer = nullptr;
  dnnl::memory scratchpad(const dnnl::memory::desc& md);
  void* scratchpadData(size_t bytes);  // this call's scratch buffer, at least `bytes` long

 private:
  std::shared_ptr<Storage> scratch_;
};

// Warnings a model issues (aten::warn) go to the calling thread's sink;
// the Python layer takes them after a call and re-issues them through
// Python's warnings module. Calls on one thread run one at a time.
void emitWarning(std::string message);
std::vector<std::string> takeWarnings();

dnnl::primitive_attr scratchpadAttr();
// The tensor in a plain contiguous layout: itself unless blocked.
Tensor toPlain(ExecContext& ctx, const Tensor& t);
// Executes `prim` with `args` plus this call's scratchpad, then waits.
void execute(ExecContext& ctx, const dnnl::primitive& prim, const dnnl::memory::desc& scratch_md,
             std::unordered_map<int, dnnl::memory> args);

}  // namespace llga
