#include "runtime/compiled.h"

#include <algorithm>
#include <unordered_map>

#include "ir/effects.h"
#include "runtime/profiler.h"

namespace llga {

CompiledGraph::CompiledGraph(std::shared_ptr<Graph> graph, WeightMap weights) : graph_(std::move(graph)) {
  const std::vector<const Node*> writers = inputWriters(*graph_);
  for (size_t i = 0; i < graph_->inputs().size(); ++i) {
    const Value* v = graph_->inputs()[i];
    if (v->type()->kind() != TypeKind::Class) inputs_.push_back({v->debugName(), v->type(), writers[i]});
  }
  plan_ = Plan::build(graph_, weights);  // the plan holds the weights it reads; the map goes
  // Weights the plan lets go (only their reordered copies are used) leave the
  // graph too: its tensor constants keep shape and dtype, not the data.
  std::unordered_map<const void*, std::vector<Node*>> holders;
  graph_->forEachNode([&](Node* n) {
    if (n->kind() != prim::Constant) return;
    const AttrValue* a = n->attributes().find(attr::value);
    if (a && a->is<TensorRef>() && a->get<TensorRef>()->hasData()) holders[a->get<TensorRef>()->data].push_back(n);
  });
  plan_->setReleaseHook([this, holders = std::move(holders)](const void* data, size_t bytes) {
    if (auto it = holders.find(data); it != holders.end())
      for (Node* n : it->second) {
        const ConstantTensor& c = *n->attributes().find(attr::value)->get<TensorRef>();
        auto shell = std::make_shared<ConstantTensor>();
        shell->dtype = c.dtype;
        shell->sizes = c.sizes;
        shell->strides = c.strides;
        n->setAttr(attr::value, AttrValue(TensorRef(std::move(shell))));
      }
    std::lock_guard<std::mutex> lock(mu_);
    released_bytes_ += static_cast<int64_t>(bytes);
  });
}

std::string InputSpec::writerText() const {
  if (!writer) return "";
  std::string op = writer->kind().toQualString();
  if (!writer->source().empty()) op += " at " + writer->source();
  return op;
}

size_t CompiledGraph::weightBytes() const { return plan_->constantBytes(); }

void CompiledGraph::checkInputs(const std::vector<RtValue>& in) const {
  if (in.size() != inputs_.size()) {
    std::string names;
    for (const auto& s : inputs_) names += (names.empty() ? "" : ", ") + s.name;
    throw std::invalid_argument("the graph takes " + std::to_string(inputs_.size()) + " input(s) (" + names + "), got " +
                                std::to_string(in.size()));
  }
  for (size_t i = 0; i < in.size(); ++i) {
    const InputSpec& spec = inputs_[i];
    const RtValue& v = in[i];
    auto fail = [&](const std::string& what) {
      throw std::invalid_argument("input " + std::to_string(i) + " ('" + spec.name + "' : " + spec.type->str() + "): " + what);
    };
    if (spec.type->isTensor()) {
      if (!v.isTensor()) fail(std::string("expected a tensor, got ") + v.kindName());
      const TensorInfo& info = spec.type->tensorInfo();
      const Tensor& t = v.tensor();
      if (info.dtype && *info.dtype != t.dtype())
        fail("expected dtype " + std::string(scalarTypeName(*info.dtype)) + ", got " + t.describe());
      if (info.sizes && static_cast<int64_t>(info.sizes->size()) != t.dim())
        fail("expected rank " + std::to_string(info.sizes->size()) + ", got " + t.describe());
      if (spec.writer) {
        const std::string op = spec.writerText();
        if (t.storage() && !t.storage()->writable)
          fail("the graph writes into this input in place (" + op +
               "), but the array is read-only; pass a writeable copy (numpy.array(x))");
        if (t.mayOverlapItself()) {
          std::string strides;
          for (int64_t st : t.strides()) strides += (strides.empty() ? "" : ", ") + std::to_string(st);
          fail("the graph writes into this input in place (" + op + "), but its elements overlap (element strides [" +
               strides + "]); pass a copy (numpy.array(x))");
        }
      }
    } else if (spec.type->isSimple("int") && !v.isInt()) {
      fail(std::string("expected an int, got ") + v.kindName());
    } else if (spec.type->isSimple("float") && !(v.isDouble() || v.isInt())) {
      fail(std::string("expected a float, got ") + v.kindName());
    } else if (spec.type->isSimple("bool") && !v.isBool()) {
      fail(std::string("expected a bool, got ") + v.kindName());
    }
  }
}

namespace {

std::string signature(const std::vector<RtValue>& inputs) {
  std::string s;
  for (const RtValue& v : inputs) {
    if (!s.empty()) s += ", ";
    if (!v.isTensor()) {
      s += v.kindName();
      continue;
    }
    s += v.tensor().shapeKey();
  }
  return s;
}

}  // namespace

std::vector<RtValue> CompiledGraph::run(std::vector<RtValue> inputs, const NodeObserver* observer) const {
  checkInputs(inputs);
  std::string sig = signature(inputs);
  auto activations = std::make_shared<MemoryMeter>();
  std::vector<RtValue> out;
  Profiler* prof = Profiler::active();
  const int64_t t0 = prof ? Profiler::nowNs() : 0;
  std::shared_ptr<ArenaPlanner> planner = plannerFor(sig);
  {
    MeterScope scope(activations, cache_meter_);
    ArenaPlanner::Call call(*planner);
    out = plan_->run(std::move(inputs), observer);
  }
  if (prof) {
    ProfileEvent e;
    e.name = "llga::call";
    e.depth = -1;
    e.start_ns = t0;
    e.dur_ns = Profiler::nowNs() - t0;
    e.source = sig;
    prof->record(std::move(e));
  }
  int64_t peak = activations->peak.load();
  std::lock_guard<std::mutex> lock(mu_);
  PeakSlot& p = peaks_[sig];
  p.bytes = std::max(p.bytes, peak);
  p.last_used = ++calls_;
  if (peaks_.size() > kMaxPeakSignatures)
    peaks_.erase(std::min_element(peaks_.begin(), peaks_.end(), [](const auto& a, const auto& b) {
      return a.second.last_used < b.second.last_used;
    }));
  return out;
}

std::shared_ptr<ArenaPlanner> CompiledGraph::plannerFor(const std::string& sig) const {
  constexpr size_t kMaxPlanners = 8;  // like the primitive caches: a bounded number of shapes keep their arena
  std::lock_guard<std::mutex> lock(mu_);
  PlannerSlot& slot = planners_[sig];
  if (!slot.planner) slot.planner = std::make_shared<ArenaPlanner>();
  slot.last_used = ++calls_;
  if (planners_.size() > kMaxPlanners) {
    auto oldest = std::min_element(planners_.begin(), planners_.end(),
                                   [](const auto& a, const auto& b) { return a.second.last_used < b.second.last_used; });
    planners_.erase(oldest);
  }
  return slot.planner;
}

MemoryReport CompiledGraph::memory() const {
  MemoryReport r;
  r.weights = static_cast<int64_t>(plan_->constantBytes());
  r.weight_cache = cache_meter_->live.load();
  std::lock_guard<std::mutex> lock(mu_);
  r.released = released_bytes_;
  for (const auto& [sig, slot] : peaks_) r.peak_activations[sig] = slot.bytes;
  for (const auto& [sig, slot] : planners_) r.arenas[sig] = slot.planner->stats();
  return r;
}

}  // namespace llga
