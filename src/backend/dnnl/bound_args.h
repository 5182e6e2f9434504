// A primitive's arguments kept with it from call to call (BoundArgs), and
// lent to one call at a time (SharedBoundArgs).
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "runtime/exec_context.h"

namespace llga {

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

}  // namespace llga
