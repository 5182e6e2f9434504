// Small helpers between llga tensors and oneDNN memory.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include <unordered_map>

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
  dnnl::memory scratchpad(const dnnl::memory::desc& md);
  void* scratchpadData(size_t bytes);  // this call's scratch buffer, at least `bytes` long

 private:
  std::shared_ptr<Storage> scratch_;
};

dnnl::primitive_attr scratchpadAttr();
// Executes `prim` with `args` plus this call's scratchpad, then waits.
void execute(ExecContext& ctx, const dnnl::primitive& prim, const dnnl::memory::desc& scratch_md,
             std::unordered_map<int, dnnl::memory> args);

// A primitive's arguments kept from one call to the next. Making a
// dnnl::memory per argument per call costs an aligned allocation and a
// descriptor check each, and the argument map a few more allocations; a kernel
// that runs the same primitive call after call binds its arguments here
// instead: the memory object made on the first call is re-pointed at the next
// call's buffer (set_data_handle). Descriptors are told apart by address, so
// a bound `md` must be immutable and outlive the binding (a cache entry's own
// descriptor), or `owner` must keep it alive.
class BoundArgs {
 public:
  dnnl::memory bind(int arg, const dnnl::memory::desc& md, void* data, std::shared_ptr<const void> owner = {});
  dnnl::memory bind(int arg, const dnnl::memory& m);  // made elsewhere (e.g. a cached weight)
  // Runs `prim` with this call's bindings and scratchpad, waits, and starts the next call's bindings.
  void execute(ExecContext& ctx, const dnnl::primitive& prim, const dnnl::memory::desc& scratch_md);

 private:
  struct Slot {
    int arg;
    const void* md;  // the bound descriptor's address, or null for bind(arg, memory)
    void* data;      // mem's buffer
    dnnl::memory mem;
    std::shared_ptr<const void> owner;
    bool used;
  };
  Slot& slot(int arg);
  std::vector<Slot> slots_;
  std::vector<dnnl_exec_arg_t> c_args_;
};

// A BoundArgs of a cache entry, lent to one call at a time; a call that finds
// it in use (another thread running the same kernel on the same shapes) gets
// a fresh one of its own.
class SharedBoundArgs {
 public:
  SharedBoundArgs() = default;
  SharedBoundArgs(SharedBoundArgs&&) noexcept {}  // a moved-to entry starts unbound
  SharedBoundArgs& operator=(SharedBoundArgs&&) = delete;

  class Lease {
   public:
    explicit Lease(SharedBoundArgs* from) : from_(from) {}
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() {
      if (from_) from_->busy_.store(false, std::memory_order_release);
    }
    BoundArgs& operator*() { return from_ ? from_->args_ : own_; }
    BoundArgs* operator->() { return &**this; }

   private:
    SharedBoundArgs* from_;
    BoundArgs own_;
  };
  Lease lease() {
    bool free = false;
    return Lease(busy_.compare_exchange_strong(free, true, std::memory_order_acquire) ? this : nullptr);
  }

 private:
  std::atomic<bool> busy_{false};
  BoundArgs args_;
};

// A primitive built from `d` with a user-managed scratchpad, whose descriptor
// goes to `scratch` (pass it to execute()); `impl`, if given, gets oneDNN's
// implementation name ("jit:avx512_core").
template <typename Prim>
Prim makePrimitive(const typename Prim::desc& d, dnnl::memory::desc& scratch, std::string* impl = nullptr) {
  typename Prim::primitive_desc pd(d, scratchpadAttr(), cpuEngine());
  scratch = pd.scratchpad_desc();
  if (impl) *impl = pd.impl_info_str();
  return Prim(pd);
}

// src -> dst reorder (a reorder primitive with a user scratchpad).
void reorder(ExecContext& ctx, const dnnl::memory& src, const dnnl::memory& dst);

bool hasDnnlType(ScalarType t);
dnnl::memory::data_type dnnlType(ScalarType t);
// A plain (strided) memory descriptor for t; rank-0 tensors become {1}.
dnnl::memory::desc plainDesc(const Tensor& t);
dnnl::memory::desc plainDesc(const Tensor& t, const Shape& as_sizes);  // same strides, fewer/more dims
// oneDNN memory over the tensor's own buffer (no copy).
dnnl::memory wrap(const Tensor& t, const dnnl::memory::desc& md);
inline dnnl::memory wrap(const Tensor& t) { return wrap(t, plainDesc(t)); }
// A tensor whose bytes oneDNN may treat as any layout: by default a cached
// weight in a primitive's layout, counted as weight cache.
Tensor allocateFor(const dnnl::memory::desc& md, AllocPurpose purpose = AllocPurpose::WeightCache);
// The constant weight `w` (described by `plain`) reordered into `md`, made
// once and shared by every kernel that asks for the same tensor in the same
// layout while any of them holds it (shape specializations of one model
// share their weights this way). Counted as weight cache.
// When `md` equals `plain` (see PlainWeightsScope), `w`'s own bytes, no copy.
Tensor reorderedWeight(const Tensor& w, const dnnl::memory::desc& plain, const dnnl::memory::desc& md);

// While alive, convolutions and matrix products built on this thread take
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
// oneDNN memory of layout `md` for this call only (counted as an activation);
// `keep` owns the bytes and must outlive the memory's use.
dnnl::memory temporary(const dnnl::memory::desc& md, Tensor& keep);
// A oneDNN layout a tensor's bytes are in (Tensor::blocked).
struct BlockedLayout {
  dnnl::memory::desc md;
  std::string name;  // "nChw16c"
};
std::shared_ptr<const BlockedLayout> makeLayout(const dnnl::memory::desc& md, bool weights = false);  // named as layoutName
// oneDNN's name-like spelling of a layout: "nchw", "nhwc", "nChw16c" (for
// weights, "OIhw16i16o"), from the blocking strides and inner blocks.
std::string layoutName(const dnnl::memory::desc& md, bool weights = false);
// oneDNN memory over the tensor's bytes in whatever layout they are (blocked or strided).
dnnl::memory memoryOf(const Tensor& t);
// The tensor in a plain contiguous layout: itself unless blocked.
Tensor toPlain(ExecContext& ctx, const Tensor& t);

// Short name of the implementation oneDNN chose ("brgconv:avx512_core").
std::string implName(const dnnl::primitive_desc_base& pd);

}  // namespace llga
