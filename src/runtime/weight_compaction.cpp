// Weights a plan holds, and weight compaction: after the first call, a
// constant read only through its reordered copy is let go and the copy
// stands in for it (Plan::constantBytes, prepareCompaction, compactConstant).
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <unordered_set>

#include "runtime/exec_context.h"
#include "runtime/plan.h"

namespace llga {

size_t Plan::constantBytes() const {
  std::unordered_set<const void*> seen;
  size_t n = 0;
  auto add = [&](const RtValue& v, auto& self) -> void {
    if (v.isTensor()) {
      const Tensor& t = v.tensor();
      if (t.storage() && seen.insert(t.storage()->data).second) n += t.storage()->nbytes;
    } else if (v.isList()) {
      for (const RtValue& item : *v.list()) self(item, self);
    }
  };
  std::shared_lock<std::shared_mutex> lock(constants_mu_);
  for (const auto& [r, v] : constants_)
    if (!(v.isTensor() && v.tensor().isBlocked())) add(v, add);
  return n;
}

std::vector<Plan::BoundConstant> Plan::boundConstants() const {
  std::shared_lock<std::shared_mutex> lock(constants_mu_);
  std::vector<BoundConstant> out;
  out.reserve(constants_.size());
  for (size_t k = 0; k < constants_.size(); ++k)
    out.push_back({constant_origins_[k].value, constant_origins_[k].weight_name, constants_[k].second});
  return out;
}

// Which constants may be compacted, and after which top-level instruction
// (their last reader) to try each: a constant returned by the graph or read
// inside a nested block (If/Loop) stays as it is.
void Plan::prepareCompaction() const {
  Compaction& c = compaction_;
  c.after.assign(main_.code.size(), {});
  std::unordered_set<int> elsewhere(main_.outputs.begin(), main_.outputs.end());
  std::unordered_map<int, size_t> last;
  for (size_t i = 0; i < main_.code.size(); ++i) {
    const Instr& ins = main_.code[i];
    if (ins.kind == Instr::Kind::Op) {
      for (size_t p = 0; p < ins.in.size(); ++p) {
        c.readers[ins.in[p]].emplace_back(&ins, p);
        last[ins.in[p]] = i;
      }
    } else {
      std::vector<int> used;
      collectUses(ins, used);
      elsewhere.insert(used.begin(), used.end());
    }
  }
  for (size_t k = 0; k < constants_.size(); ++k) {
    int r = constants_[k].first;
    const RtValue& v = constants_[k].second;
    if (!v.isTensor() || v.tensor().isBlocked() || elsewhere.count(r) || !last.count(r)) continue;
    c.index[r] = k;
    c.after[last[r]].push_back(r);
  }
  c.prepared = true;
}

// Swaps constant register r for the reordered copy its readers made, if they
// all read it only through one such copy; `regs` (this call's) follows, so the
// original is not held from here on.
void Plan::compactConstant(int r, std::vector<RtValue>& regs) const {
  const Compaction& c = compaction_;
  std::optional<Tensor> copy;
  for (const auto& [ins, p] : c.readers.at(r)) {
    std::optional<Tensor> t = ins->kernel ? ins->kernel->compactedWeight(p) : std::nullopt;
    if (!t || (copy && copy->storage() != t->storage())) return;
    copy = std::move(t);
  }
  std::unique_lock<std::shared_mutex> lock(constants_mu_);
  RtValue& v = constants_[c.index.at(r)].second;
  if (!copy || !v.isTensor() || v.tensor().isBlocked() || copy->sizes() != v.tensor().sizes()) return;
  const Tensor& t = v.tensor();
  const void* data = t.data();
  const size_t bytes = static_cast<size_t>(t.numel()) * t.itemsize();
  v = RtValue(*copy);
  regs[static_cast<size_t>(r)] = RtValue(std::move(*copy));
  lock.unlock();
  if (on_release_) on_release_(data, bytes);
}

}  // namespace llga
