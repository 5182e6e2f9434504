#include "runtime/exec_context.h"

#include <algorithm>
#include <utility>

#include "runtime/kernel.h"

namespace llga {

namespace {
thread_local bool t_plain_weights = false;  // PlainWeightsScope
thread_local std::vector<std::string> t_warnings;  // emitWarning
}  // namespace

void emitWarning(std::string message) {
  if (t_warnings.size() < 1000) t_warnings.push_back(std::move(message));  // a warning in a long loop stays bounded
}
std::vector<std::string> takeWarnings() { return std::exchange(t_warnings, {}); }

PlainWeightsScope::PlainWeightsScope() : prev_(std::exchange(t_plain_weights, true)) {}
PlainWeightsScope::~PlainWeightsScope() { t_plain_weights = prev_; }
bool PlainWeightsScope::active() { return t_plain_weights; }

dnnl::engine& cpuEngine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::primitive_attr scratchpadAttr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

dnnl::memory ExecContext::scratchpad(const dnnl::memory::desc& md) {
  return dnnl::memory(md, cpuEngine(), scratchpadData(md.get_size()));
}

void* ExecContext::scratchpadData(size_t bytes) {
  if (!scratch_ || scratch_->nbytes < bytes) scratch_ = Storage::allocate(std::max<size_t>(bytes, 1 << 16), AllocPurpose::Activation);
  return scratch_->data;
}


void execute(ExecContext& ctx, const dnnl::primitive& prim, const dnnl::memory::desc& scratch_md,
             std::unordered_map<int, dnnl::memory> args) {
  if (scratch_md.get_size() > 0) args[DNNL_ARG_SCRATCHPAD] = ctx.scratchpad(scratch_md);
  prim.execute(ctx.stream, args);
  ctx.stream.wait();
}

Tensor toPlain(ExecContext& ctx, const Tensor& t) { return t.isBlocked() ? t.blockedLayout()->toPlain(ctx, t) : t; }

}  // namespace llga
