// The op library's interface. Each op kind registers a factory that, given
// the node, returns a Kernel; the plan calls Kernel::run once per execution.
// Kernels may cache work that depends only on shapes (oneDNN primitives,
// reordered weights) keyed by the shapes they see; they must be safe to run
// from several threads at once.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/ir.h"
#include "runtime/kernel_report.h"
#include "runtime/value.h"

namespace llga {

struct ExecContext;

struct KernelArgs {
  RtValue* const* in;
  size_t num_in;
  RtValue* const* out;
  size_t num_out;
  ExecContext& ctx;
  // Bit i: input i's register is freed right after this op (its last reader).
  // With the buffer owned by llga and held nowhere else, a kernel may reuse it.
  uint64_t dying = 0;
  // Bit i: output i may be handed out with any dense strides (e.g. channels-last),
  // because every reader of it accepts strided tensors.
  uint64_t strided_out = 0;

  const RtValue& input(size_t i) const { return *in[i]; }
  const Tensor& tensor(size_t i) const { return in[i]->tensor(); }
  std::optional<Tensor> optTensor(size_t i) const {
    if (i >= num_in || in[i]->isNone()) return std::nullopt;
    return in[i]->tensor();
  }
  int64_t toInt(size_t i) const { return in[i]->toInt(); }
  double toDouble(size_t i) const { return in[i]->toDouble(); }
  bool toBool(size_t i) const { return in[i]->toBool(); }
  bool isNone(size_t i) const { return i >= num_in || in[i]->isNone(); }
  Shape intList(size_t i) const { return in[i]->intList(); }
  void set(size_t i, RtValue v) const { *out[i] = std::move(v); }
  bool inputDies(size_t i) const { return i < 64 && ((dying >> i) & 1u); }
  bool stridedOutputOk(size_t i) const { return i < 64 && ((strided_out >> i) & 1u); }
  // Whether the op may write its result into input i's buffer: the register dies
  // here, the buffer is llga's own (not a caller's array) and nothing else holds it.
  bool reusable(size_t i) const {
    if (!inputDies(i) || !in[i]->isTensor()) return false;
    const Tensor& t = in[i]->tensor();
    return t.storage() && t.storage()->owned && t.storage().use_count() == 1 && !t.isBlocked();
  }
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual void run(const KernelArgs& args) = 0;

  // Layout propagation. An input a kernel accepts blocked may arrive in a
  // oneDNN blocked layout (Tensor::isBlocked); the plan hands every other
  // input over plain.
  virtual bool acceptsBlocked(size_t /*input*/) const { return false; }
  // Called while the plan is built, for an output whose every reader accepts
  // it blocked: the kernel may then hand it out in its primitive's layout.
  virtual void allowBlockedOutput(size_t /*output*/) {}
  // Strided (dense, any dimension order, e.g. channels-last) inputs: kernels that
  // take blocked ones take these too; others may opt in. Reading a strided tensor
  // correctly is every kernel's duty; opting in says the op's result does not
  // depend on its input's strides (no view, no stride query).
  virtual bool acceptsStrided(size_t input) const { return acceptsBlocked(input); }
  // Called while the plan is built, for an output whose every reader accepts
  // strided tensors: the kernel may hand it out in its own dimension order.
  virtual void allowStridedOutput(size_t /*output*/) {}
  // Weight compaction (Plan::takeReleased, during the first call): if the kernel
  // reads constant input `input` only through the copy it reordered into its
  // primitive's layout, that copy as a blocked tensor of the input's sizes.
  // The plan may then hand it in place of the original on later calls, so the
  // kernel must take it (acceptsBlocked) and reorder from it for new shapes.
  virtual std::optional<Tensor> compactedWeight(size_t /*input*/) const { return std::nullopt; }
  // What the kernel did on its latest call, for dumps and profiles
  // (implementation, layouts, where the output went); empty if nothing to say.
  virtual KernelReport report() const { return {}; }
  // The oneDNN primitive kind it runs ("convolution", "matmul"), or "".
  virtual const char* primitiveKind() const { return ""; }
};

using KernelFn = std::function<void(const KernelArgs&)>;

class FnKernel final : public Kernel {
 public:
  explicit FnKernel(KernelFn fn, bool strided_inputs = false) : fn_(std::move(fn)), strided_inputs_(strided_inputs) {}
  void run(const KernelArgs& a) override {
    if (!strided_out_) return fn_(a);
    KernelArgs b = a;
    b.strided_out = strided_out_;
    fn_(b);
  }
  bool acceptsStrided(size_t) const override { return strided_inputs_; }
  void allowStridedOutput(size_t output) override {
    if (strided_inputs_ && output < 64) strided_out_ |= uint64_t{1} << output;
  }

 private:
  KernelFn fn_;
  bool strided_inputs_;
  uint64_t strided_out_ = 0;
};

// The op on Python numbers alone: `arity` int/float/bool inputs, one output.
// The plan calls it directly, without a kernel's argument records, for a node
// whose inputs and outputs are all typed int, float or bool (a scripted
// loop's counters and arithmetic), unless a profiler or observer watches
// (they see the kernel run); the kernel runs everything else.
using ScalarFn = RtValue (*)(const RtValue* const* in);
constexpr size_t kMaxScalarArity = 4;

struct OpDef {
  std::string kind;
  size_t min_inputs, max_inputs;  // the schema's arity (optional trailing args allowed)
  std::function<std::unique_ptr<Kernel>(const Node&)> make;
  ScalarFn scalar = nullptr;  // OpRegistry::addScalar
  size_t scalar_arity = 0;
};

class OpRegistry {
 public:
  static OpRegistry& global();  // every op family registered
  void add(std::string kind, size_t min_inputs, size_t max_inputs, KernelFn fn);
  void add(OpDef def);
  // The ScalarFn of a kind registered before (a std::logic_error otherwise).
  void addScalar(const std::string& kind, size_t arity, ScalarFn fn);
  const OpDef* find(Symbol kind) const;
  std::vector<std::string> kinds() const;

 private:
  std::unordered_map<Symbol, OpDef> ops_;
};

// An op family (one file under ops/) registers its ops with one line after
// the function that adds them:  LLGA_REGISTER_OPS(registerConvOps);
// (llga_runtime is linked whole, so no registration is dropped; a kind
// registered twice is a std::logic_error, so the order of files never matters).
struct OpFamilyRegistration {
  explicit OpFamilyRegistration(void (*add_ops)(OpRegistry&)) { add_ops(OpRegistry::global()); }
};
#define LLGA_REGISTER_OPS(fn) static const ::llga::OpFamilyRegistration llga_registered_ops_##fn(fn)

// While alive, kernels built on this thread (convolutions, matrix products) take
// constant weights in their plain layout instead of one oneDNN picks: no
// reordered copies (for runs made once, such as propagate-shapes', whose
// copies would only add to the compile's peak memory).
class PlainWeightsScope {
 public:
  PlainWeightsScope();
  ~PlainWeightsScope();
  PlainWeightsScope(const PlainWeightsScope&) = delete;
  PlainWeightsScope& operator=(const PlainWeightsScope&) = delete;
  static bool active();

 private:
  bool prev_;
};

}  // namespace llga
