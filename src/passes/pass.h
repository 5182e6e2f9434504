// Passes and the PassManager.
//
// A pass is a small class with a name, a one-line description and
// run(Graph&) -> changed. Passes are registered by name, so a pipeline is a
// string ("remove-dropout,constant-propagation,cse,dce") usable from
// llga-opt, Python and tests alike. Dumps, timing and verification are the
// PassManager's job (instrumentation), never the passes'.
//
// The passes (this folder and src/fuser) depend on src/ir only: what they
// need from execution they ask the Evaluator in their PassContext
// (evaluator.h), and per-op shapes come from shape_functions.h. Nothing here
// includes the runtime or the backend (tests/py/test_layering.py).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/ir.h"
#include "passes/evaluator.h"

namespace llga {

// What passes may read besides the graph: the weights bound to it, by
// qualified attribute path ("layer1.0.conv1.weight") or constant name.
// Where propagate-shapes takes shapes from: the per-op shape functions, with
// the evaluator running the graph for what they cannot type (Infer); the
// functions only; or execution only (what the kernels produce).
enum class ShapeSource { Infer, Functions, Execute };

struct PassContext {
  std::unordered_map<std::string, TensorRef> weights;
  // Method graphs of submodules by "<class qualified name>.<method>" (inline).
  std::unordered_map<std::string, std::shared_ptr<const Graph>> methods;
  // Example inputs of the graph, in order (propagate-shapes).
  std::vector<TensorRef> example_inputs;
  // Op kinds and fusion pattern names the fuse pass must leave out of
  // partitions (llga.optimize(route=...)), to bisect a numerical difference.
  std::set<std::string> route_off;
  // Execution, for the passes that must evaluate something (constant
  // propagation, propagate-shapes, remove-mutation's op lookup).
  std::shared_ptr<const Evaluator> evaluator;
  ShapeSource shapes = ShapeSource::Infer;
  // constant-propagation folds a tensor result of at most this many bytes
  // (emformer's attention mask: zeros, ones, cat of constants; swin's
  // relative position bias, up to 2401 x 24 floats gathered from a table);
  // 0: none. A bound on what a model's constants may grow by per node.
  size_t fold_tensor_bytes = size_t{1} << 20;
  // llga.optimize(precision="bf16"): assign-precision runs the policy's bf16
  // op kinds in bf16, with these per-kind overrides ("aten::linear" ->
  // "fp32"); false: everything fp32.
  bool bf16 = false;
  std::map<std::string, std::string> precision_overrides;
  // llga.quantize: assign-precision runs the policy's int8 op kinds in int8
  // (unless overridden to "fp32"), their activations quantized with scales
  // from the ranges these input sets give (each set: the graph's inputs).
  bool int8 = false;
  std::vector<std::vector<TensorRef>> calibration;
  // How a convolution's signed activation is written: the s8 grid shifted
  // into u8 with zero point 128 (true), or s8. The backend's answer for this
  // CPU (int8::shiftSignedActivations: which its kernels take faster), put
  // here by whoever builds the context.
  bool int8_shift_signed = true;
  // llga.quantize(activations="asymmetric"): a signed activation gets the
  // u8 grid over its calibrated [min, max] (0 included) with the zero point
  // that puts 0 on a step, as PyTorch's affine observers and ONNX Runtime's
  // QDQ do; false: the symmetric s8 grid over its largest magnitude.
  // Non-negative activations are u8 with zero point 0 either way.
  bool int8_asymmetric = false;
  // How a range becomes a scale: "minmax" (the largest magnitude seen),
  // "percentile" (the `percentile`-th percentile of the magnitudes) or
  // "histogram" (the clipping threshold whose expected squared error,
  // clipping plus rounding, over the magnitudes' histogram is least).
  std::string calibration_method = "minmax";
  double percentile = 99.99;
  // Partitions (or lone ops) kept fp32 by the name of their first output
  // (llga.quantize(skip=[...]), compiled.partitions[i].output_name); and,
  // when `int8_only` is set, every int8 candidate not named in it
  // (llga.quantization_sensitivity quantizes one at a time).
  std::set<std::string> int8_skip;
  std::optional<std::set<std::string>> int8_only;
  // llga.quantize(mode="dynamic"): the int8 linears quantize their
  // activation per call (act_scale="dynamic"); no calibration runs.
  bool int8_dynamic = false;
};

// An op a pass left outside partitions, and why. Typed, so that Python,
// the profiler and tests read fields and never parse prose.
struct Unfused {
  std::string kind;    // "aten::relu"
  std::string source;  // "model.py:12:8", or "" when the op carries no source range
  std::string value;   // the name of its first output ("y"), or ""
  std::string reason;  // "a lone aten::relu is not a partition"
};

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string_view name() const = 0;
  virtual std::string_view description() const = 0;
  // Transforms g in place; returns whether anything changed.
  virtual bool run(Graph& g) = 0;
  // What the last run chose not to do, and why ("aten::relu_ at f.py:3:4 (%y):
  // its input is read afterwards"). Kept in the pass's record.
  const std::vector<std::string>& notes() const { return notes_; }
  // Ops the last run left outside partitions (the fuse pass).
  const std::vector<Unfused>& unfused() const { return unfused_; }
  void setContext(const PassContext* ctx) { ctx_ = ctx; }

 protected:
  void note(std::string s) { notes_.push_back(std::move(s)); }
  void reportUnfused(const Node& n, std::string reason) {
    unfused_.push_back({n.kind().toQualString(), n.source(), n.outputs().empty() ? "" : n.output(0)->debugName(),
                        std::move(reason)});
  }
  // The context's evaluator, or null (the pass then notes that it did nothing).
  const Evaluator* evaluator() const { return context().evaluator.get(); }
  const PassContext& context() const {
    static const PassContext empty;
    return ctx_ ? *ctx_ : empty;
  }

 private:
  std::vector<std::string> notes_;
  std::vector<Unfused> unfused_;
  const PassContext* ctx_ = nullptr;
};

struct PassInfo {
  std::string name, description;
  std::function<std::unique_ptr<Pass>()> make;
};

class PassRegistry {
 public:
  static PassRegistry& global();  // every pass registered
  void add(PassInfo info);
  const PassInfo* find(std::string_view name) const;
  std::vector<const PassInfo*> list() const;  // sorted by name

 private:
  std::map<std::string, PassInfo, std::less<>> passes_;
};

// Node count by kind (all blocks) and the number of fusion groups.
struct GraphStats {
  size_t nodes = 0;
  size_t fusion_groups = 0;
  std::map<std::string, size_t> kinds;
};
GraphStats graphStats(const Graph& g);

// What instrumentation records about one pass.
struct PassRecord {
  std::string name;
  bool changed = false;
  double seconds = 0;
  GraphStats before, after;
  std::string ir;  // the IR after the pass (before it, when the pass failed)
  std::vector<std::string> verify_errors;
  std::vector<std::string> notes;  // what the pass left alone, and why
  std::vector<Unfused> unfused;    // ops left outside partitions, and why (fuse)
  std::string error;  // what the pass threw, if it did
};

struct PassManagerOptions {
  bool verify_each = true;  // run the verifier after every pass
  bool keep_ir = true;      // keep each pass's IR text in its record
  // Called after every pass (dumps, logs); `ir` is the text after it.
  std::function<void(const PassRecord&)> after_pass;
  std::shared_ptr<const PassContext> context;  // weights for freeze and folding
};

struct PassError : std::runtime_error {
  PassError(std::string msg, std::vector<PassRecord> records)
      : std::runtime_error(std::move(msg)), records(std::move(records)) {}
  std::vector<PassRecord> records;  // up to and including the failed pass
};

class PassManager {
 public:
  // `pipeline` is a comma-separated list of registered pass names; unknown
  // names throw std::invalid_argument listing the known ones.
  explicit PassManager(std::string_view pipeline, PassManagerOptions options = {});
  // Runs every pass. Throws PassError if a pass throws or breaks the IR.
  std::vector<PassRecord> run(Graph& g) const;
  const std::vector<std::string>& names() const { return names_; }

 private:
  std::vector<std::string> names_;
  PassManagerOptions options_;
};

// The default pipeline of llga.optimize.
std::string_view defaultPipeline();

// Registers a pass class under its own name() and description(), as one line
// after its definition:  LLGA_REGISTER_PASS(RemoveMutation);
// (the libraries holding passes are linked whole, so every registration runs).
template <typename P>
struct PassRegistration {
  PassRegistration() {
    P p;
    PassRegistry::global().add({std::string(p.name()), std::string(p.description()), [] { return std::make_unique<P>(); }});
  }
};
#define LLGA_REGISTER_PASS(Class) static const ::llga::PassRegistration<Class> llga_registered_pass_##Class


// The op kinds the decompose pass rewrites into others (decompose.cpp), so
// they run although no kernel has their name: part of llga.supported_ops().
const std::vector<std::string>& decomposedKinds();

}  // namespace llga
