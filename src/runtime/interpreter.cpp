// The interpreter: a register file and a loop over a plan's instructions,
// with the profiler's hooks (Plan::run, runBlock, runInstr).
#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>

#include "runtime/constant_eval.h"
#include "runtime/exec_context.h"
#include "runtime/plan.h"
#include "runtime/profiler.h"
#include "runtime/threads.h"

namespace llga {

namespace {

std::atomic<OutOfMemoryTest> g_out_of_memory_test{nullptr};

std::string describeValue(const RtValue& v) {
  if (!v.isTensor()) return v.kindName();
  const Tensor& t = v.tensor();
  return t.shapeKey() + (t.isBlocked() ? " " + t.blockedLayout()->name() : t.isContiguous() ? " plain" : " strided");
}

}  // namespace

void setOutOfMemoryTest(OutOfMemoryTest test) { g_out_of_memory_test.store(test); }

void runKernelProfiled(const Node& node, const std::string& pattern, int partition, Kernel& kernel, const KernelArgs& a) {
  Profiler& prof = *Profiler::active();
  ProfileEvent e;
  const bool details = prof.wantsDetails();
  if (details)
    for (size_t i = 0; i < a.num_in; ++i) e.inputs.push_back(describeValue(*a.in[i]));
  int& depth = Profiler::depth();
  e.depth = depth++;
  e.start_ns = Profiler::nowNs();
  try {
    kernel.run(a);
  } catch (...) {
    --depth;
    throw;
  }
  e.dur_ns = Profiler::nowNs() - e.start_ns;
  --depth;
  e.name = node.kind().toQualString();
  e.pattern = pattern;
  e.partition = partition;
  e.source = node.source();
  if (details) {
    for (size_t i = 0; i < a.num_out; ++i) e.outputs.push_back(describeValue(*a.out[i]));
    e.primitive = kernel.primitiveKind();
    e.kernel = kernel.report();
  }
  prof.record(std::move(e));
}

std::vector<RtValue> Plan::run(std::vector<RtValue> inputs, const NodeObserver* observer,
                               ShapeValues* shape_values, const NodeObserver* input_observer) const {
  ThreadsScope threads;
  ExecContext ctx;
  ctx.observer = observer;
  ctx.input_observer = input_observer;
  const bool watched = observer || input_observer;
  return runMain(std::move(inputs), ctx, watched || shape_slots_ == 0 ? nullptr : shape_values);
}

std::vector<RtValue> Plan::run(std::vector<RtValue> inputs, ExecContext& ctx) const {
  return runMain(std::move(inputs), ctx, nullptr);
}

std::vector<RtValue> Plan::runMain(std::vector<RtValue> inputs, ExecContext& ctx, ShapeValues* shape_values) const {
  if (inputs.size() != main_.inputs.size())
    throw std::invalid_argument("expected " + std::to_string(main_.inputs.size()) + " inputs, got " +
                                std::to_string(inputs.size()));
  std::vector<RtValue> regs(static_cast<size_t>(num_regs_));
  {
    std::shared_lock<std::shared_mutex> lock(constants_mu_);
    for (const auto& [r, v] : constants_) regs[static_cast<size_t>(r)] = v;
  }
  for (size_t i = 0; i < inputs.size(); ++i) regs[static_cast<size_t>(main_.inputs[i])] = std::move(inputs[i]);
  // The shape-only instructions' values for this signature: taken as kept,
  // or kept as they are computed (held from their instruction on, so that no
  // later kernel takes their buffer for its output) and stored at the end.
  std::shared_ptr<const std::vector<RtValue>> kept;
  std::vector<RtValue> keeping;
  if (shape_values) {
    std::lock_guard<std::mutex> lock(shape_values->mu);
    kept = shape_values->values;
  }
  if (shape_values && !kept) keeping.resize(static_cast<size_t>(shape_slots_));
  auto step = [&](const Instr& ins) {
    if (ins.shape_only && kept) {
      for (const auto& [r, slot] : ins.keep) regs[static_cast<size_t>(r)] = (*kept)[static_cast<size_t>(slot)];
    } else {
      runInstr(ins, regs, ctx);
      if (ins.shape_only && !keeping.empty())
        for (const auto& [r, slot] : ins.keep) keeping[static_cast<size_t>(slot)] = regs[static_cast<size_t>(r)];
    }
    for (int r : ins.free_after) regs[static_cast<size_t>(r)] = RtValue();
  };
  if (compact_pending_.exchange(false)) {  // this call compacts the weights as it goes (see compactConstant)
    try {
      if (!compaction_.prepared) prepareCompaction();
      for (size_t i = 0; i < main_.code.size(); ++i) {
        step(main_.code[i]);
        for (int r : compaction_.after[i]) compactConstant(r, regs);
      }
    } catch (...) {
      compact_pending_ = true;  // the next call tries the rest
      throw;
    }
  } else {
    for (const Instr& ins : main_.code) step(ins);
  }
  if (!keeping.empty()) {
    std::lock_guard<std::mutex> lock(shape_values->mu);
    if (!shape_values->values) shape_values->values = std::make_shared<const std::vector<RtValue>>(std::move(keeping));
  }
  std::vector<RtValue> out;
  out.reserve(main_.outputs.size());
  for (int r : main_.outputs) {
    RtValue& v = regs[static_cast<size_t>(r)];
    out.push_back(v.isTensor() && v.tensor().isBlocked() ? RtValue(toPlain(ctx, v.tensor())) : v);
  }
  return out;
}

void Plan::runBlock(const Block& b, std::vector<RtValue>& regs, ExecContext& ctx) const {
  for (const Instr& ins : b.code) {
    runInstr(ins, regs, ctx);
    for (int r : ins.free_after) regs[static_cast<size_t>(r)] = RtValue();
  }
}

void Plan::runInstr(const Instr& ins, std::vector<RtValue>& regs, ExecContext& ctx) const {
  auto at = [&](int r) -> RtValue& { return regs[static_cast<size_t>(r)]; };
  try {
    switch (ins.kind) {
      case Instr::Kind::Op: {
        if (ins.scalar && !ctx.observer && !ctx.input_observer && !Profiler::active()) {  // Python numbers: no kernel call
          std::array<const RtValue*, kMaxScalarArity> args;
          for (size_t i = 0; i < ins.in.size(); ++i) args[i] = &at(ins.in[i]);
          at(ins.out[0]) = ins.scalar(args.data());
          break;
        }
        std::array<RtValue*, 32> in_small, out_small;
        std::vector<RtValue*> in_big, out_big;
        RtValue** in = in_small.data();
        RtValue** out = out_small.data();
        if (ins.in.size() > in_small.size()) { in_big.resize(ins.in.size()); in = in_big.data(); }
        if (ins.out.size() > out_small.size()) { out_big.resize(ins.out.size()); out = out_big.data(); }
        std::vector<RtValue> plain;  // blocked inputs the kernel cannot take, converted (not expected to happen)
        for (size_t i = 0; i < ins.in.size(); ++i) {
          in[i] = &at(ins.in[i]);
          if (!in[i]->isTensor()) continue;
          const Tensor& t = in[i]->tensor();
          if (t.isBlocked() && !ins.kernel->acceptsBlocked(i)) {
            if (plain.empty()) plain.reserve(ins.in.size());
            plain.emplace_back(toPlain(ctx, t));
            in[i] = &plain.back();
          } else if (i < 64 && ((ins.may_copy >> i) & 1u) && !t.isBlocked() && !t.stridesNest()) {
            if (plain.empty()) plain.reserve(ins.in.size());
            plain.emplace_back(t.contiguous());
            in[i] = &plain.back();
          }
        }
        for (size_t i = 0; i < ins.out.size(); ++i) out[i] = &at(ins.out[i]);
        const KernelArgs args{in, ins.in.size(), out, ins.out.size(), ctx, plain.empty() ? ins.dying : 0};
        if (ctx.input_observer) (*ctx.input_observer)(*ins.node, in, ins.in.size());
        if (Profiler::active()) runKernelProfiled(*ins.node, ins.pattern, ins.partition, *ins.kernel, args);
        else ins.kernel->run(args);
        if (ctx.observer) (*ctx.observer)(*ins.node, out, ins.out.size());
        break;
      }
      case Instr::Kind::If: {
        const Block& b = *ins.blocks[at(ins.in[0]).toBool() ? 0 : 1];
        runBlock(b, regs, ctx);
        for (size_t i = 0; i < ins.out.size(); ++i) at(ins.out[i]) = at(b.outputs[i]);
        break;
      }
      case Instr::Kind::Loop: {
        const Block& b = *ins.blocks[0];
        int64_t max_trip = at(ins.in[0]).toInt();
        bool cond = at(ins.in[1]).toBool();
        std::vector<RtValue> carried;
        for (size_t i = 2; i < ins.in.size(); ++i) carried.push_back(at(ins.in[i]));
        for (int64_t it = 0; cond && it < max_trip; ++it) {
          at(b.inputs[0]) = RtValue(it);
          for (size_t i = 0; i < carried.size(); ++i) at(b.inputs[i + 1]) = std::move(carried[i]);
          runBlock(b, regs, ctx);
          cond = at(b.outputs[0]).toBool();
          for (size_t i = 0; i < carried.size(); ++i) carried[i] = at(b.outputs[i + 1]);
        }
        for (size_t i = 0; i < ins.out.size(); ++i) at(ins.out[i]) = std::move(carried[i]);
        break;
      }
    }
  } catch (const ExecutionError&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw OutOfMemory(describeNode(*ins.node) + ": out of memory");
  } catch (const std::exception& e) {
    if (OutOfMemoryTest test = g_out_of_memory_test.load(); test && test(e))
      throw OutOfMemory(describeNode(*ins.node) + ": out of memory (" + e.what() + ")");
    throw ExecutionError(describeNode(*ins.node) + ": " + e.what());
  }
}

}  // namespace llga
