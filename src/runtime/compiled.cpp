#include "runtime/compiled.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <set>
#include <unordered_map>

#include "ir/effects.h"
#include "runtime/profiler.h"
#include "runtime/shape_tags.h"
#include "runtime/threads.h"

namespace llga {

CompiledGraph::CompiledGraph(std::shared_ptr<Graph> graph, WeightMap weights) : graph_(std::move(graph)) {
  const std::vector<const Node*> writers = inputWriters(*graph_);
  for (size_t i = 0; i < graph_->inputs().size(); ++i) {
    const Value* v = graph_->inputs()[i];
    if (v->type()->kind() != TypeKind::Class) inputs_.push_back({v->debugName(), v->type(), writers[i]});
  }
  if (graph_->returnNode()->hasAttribute(Symbol::attr("batch_dim"))) {
    batch_split_ = std::make_unique<BatchSplit>();
    // Chunks could write into their rows of an input correctly, but a call
    // that stops splitting after its first chunk (an output turns out to be a
    // view) runs whole and would write those rows twice.
    for (const InputSpec& in : inputs_)
      if (in.writer) {
        batch_split_->refuse("the graph writes into input '" + in.name + "' in place (" + in.writerText() + ")");
        break;
      }
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
        // llga orders reads of one input and writes into another freely
        // (PyTorch runs them as written, so a write shows in an input
        // sharing the memory): such a call is refused, not answered wrongly
        for (size_t j = 0; j < in.size(); ++j)
          if (j != i && in[j].isTensor() && t.spanOverlaps(in[j].tensor()))
            fail("the graph writes into this input in place (" + op + "), and input " + std::to_string(j) + " ('" +
                 inputs_[j].name + "') shares memory with it (the same array, or views of one); llga compiles "
                 "inputs as separate memory: pass a copy of one (numpy.array(x))");
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

// The number of rows every tensor input has (dim 0), or 0 when they differ
// or there is no tensor input.
int64_t batchItems(const std::vector<RtValue>& inputs) {
  int64_t items = 0;
  for (const RtValue& v : inputs) {
    if (!v.isTensor()) continue;
    const Tensor& t = v.tensor();
    if (t.dim() == 0 || t.isBlocked() || (items && t.size(0) != items)) return 0;
    items = t.size(0);
  }
  return items;
}

// The call's inputs for rows [start, start + rows): views of its tensors'
// rows, other values as they are.
std::vector<RtValue> rowsOf(const std::vector<RtValue>& inputs, int64_t start, int64_t rows) {
  std::vector<RtValue> part = inputs;
  for (RtValue& v : part)
    if (v.isTensor()) v = v.tensor().slice(0, start, start + rows, 1);
  return part;
}

// The buffers of the tensors in `v`, nested tuples and lists included.
void storagesOf(const RtValue& v, std::vector<const void*>& out) {
  if (v.isTensor()) {
    if (v.tensor().storage()) out.push_back(v.tensor().storage().get());
  } else if (v.isTuple()) {
    for (const RtValue& x : v.tuple()->items) storagesOf(x, out);
  } else if (v.isList()) {
    for (const RtValue& x : *v.list()) storagesOf(x, out);
  }
}

// Why a chunk's outputs cannot be assembled by rows into fresh arrays: one
// is a view of an input, or two share memory (a concatenation of chunks
// would be a copy where PyTorch's result is a view); "" when they can.
std::string aliasingOutputs(const std::vector<RtValue>& outs, const std::vector<RtValue>& inputs) {
  std::vector<const void*> in;
  for (const RtValue& v : inputs) storagesOf(v, in);
  std::vector<const void*> seen;
  for (size_t i = 0; i < outs.size(); ++i) {
    std::vector<const void*> mine;
    storagesOf(outs[i], mine);
    for (const void* s : mine) {
      if (std::find(in.begin(), in.end(), s) != in.end())
        return "output " + std::to_string(i) + " is a view of an input (a chunked call would copy it)";
      if (std::find(seen.begin(), seen.end(), s) != seen.end())
        return "output " + std::to_string(i) + " shares memory with another output (chunks would copy them apart)";
      seen.push_back(s);
    }
  }
  return "";
}

// The whole batch's output shaped like one chunk's (`rows` of them at dim 0)
// with `items` rows; false when a tensor in it does not have `rows` rows.
bool allocateRows(const RtValue& part, int64_t rows, int64_t items, RtValue& whole) {
  if (part.isTensor()) {
    const Tensor& t = part.tensor();
    if (t.dim() == 0 || t.size(0) != rows || t.isBlocked()) return false;
    Shape sizes = t.sizes();
    sizes[0] = items;
    whole = Tensor::empty(t.dtype(), sizes);
    return true;
  }
  std::vector<RtValue> items_out;
  const std::vector<RtValue>* parts = part.isTuple() ? &part.tuple()->items : part.isList() ? part.list().get() : nullptr;
  if (!parts || parts->empty()) return false;
  for (const RtValue& x : *parts) {
    items_out.emplace_back();
    if (!allocateRows(x, rows, items, items_out.back())) return false;
  }
  whole = part.isTuple() ? makeTuple(std::move(items_out)) : makeList(std::move(items_out));
  return true;
}

// A whole call's event (depth -1; -2: a call split into chunks, each of
// which is an llga::call) from t0 until now.
void recordCall(Profiler& prof, const char* name, int depth, int64_t t0, std::string source) {
  ProfileEvent e;
  e.name = name;
  e.depth = depth;
  e.start_ns = t0;
  e.dur_ns = Profiler::nowNs() - t0;
  e.source = std::move(source);
  prof.record(std::move(e));
}

std::string describeValue(const RtValue& v) {
  if (v.isTensor()) return v.tensor().describe();
  return v.kindName();
}

void copyRows(const RtValue& part, int64_t start, const RtValue& whole) {
  if (part.isTensor()) {
    const Tensor& t = part.tensor();
    Tensor rows = whole.tensor().slice(0, start, start + t.size(0), 1);
    rows.copyFrom(t);
    return;
  }
  const auto& parts = part.isTuple() ? part.tuple()->items : *part.list();
  const auto& wholes = whole.isTuple() ? whole.tuple()->items : *whole.list();
  for (size_t i = 0; i < parts.size(); ++i) copyRows(parts[i], start, wholes[i]);
}

}  // namespace

std::vector<RtValue> CompiledGraph::run(std::vector<RtValue> inputs, const NodeObserver* observer) const {
  checkInputs(inputs);
  if (batch_split_ && !observer)
    if (const int64_t items = batchItems(inputs); items > 1) {
      std::vector<RtValue> out;
      try {
        if (runSplit(inputs, items, out)) return out;
      } catch (const ExecutionError&) {
        throw;
      } catch (const std::bad_alloc&) {
        throw OutOfMemory("batch split of a " + std::to_string(items) + "-item call: out of memory");
      }
    }
  return runWhole(std::move(inputs), observer);
}

bool CompiledGraph::runSplit(const std::vector<RtValue>& inputs, int64_t items, std::vector<RtValue>& out) const {
  const BatchSplit::Pick pick = batch_split_->pick(items, getNumThreads());
  const int64_t chunk = pick.chunk;
  if (chunk >= items) {
    if (!pick.timed) return false;
    const int64_t t0 = Profiler::nowNs();
    out = runWhole(inputs, nullptr);
    dropChunkState(inputs, items,
                 batch_split_->record(items, chunk, -1,
                                      static_cast<double>(Profiler::nowNs() - t0) / static_cast<double>(items)));
    return true;
  }
  Profiler* prof = Profiler::active();
  const int64_t t_start = Profiler::nowNs();
  int64_t timed_ns = 0, timed_items = 0;
  // Side by side (lanes > 1): the first chunk runs alone (it checks the
  // outputs and makes them), then the others `lanes` at a time, each on one
  // thread (runSideBySide). Never more lanes than the threads set now:
  // llga.set_num_threads(1) after a side-by-side choice runs the chunks one
  // after another, unmeasured.
  const int lanes = std::min(pick.lanes, getNumThreads());
  const int64_t alone_until = lanes > 1 ? chunk : items;
  for (int64_t start = 0; start < alone_until; start += chunk) {
    const int64_t rows = std::min(chunk, items - start);
    std::vector<RtValue> part_in = rowsOf(inputs, start, rows);
    const int64_t t0 = Profiler::nowNs();
    std::vector<RtValue> part = runWhole(part_in, nullptr);
    if (start == 0) {
      // Running the call whole after its first chunk is safe: a graph that
      // writes into its inputs is never split (the constructor).
      if (std::string why = aliasingOutputs(part, part_in); !why.empty()) {
        batch_split_->refuse(std::move(why));
        out.clear();
        return false;
      }
      out.resize(part.size());
      for (size_t i = 0; i < part.size(); ++i) {
        bool shaped = false;
        try {
          shaped = allocateRows(part[i], rows, items, out[i]);
        } catch (const std::bad_alloc&) {
          throw OutOfMemory("batch split: output " + std::to_string(i) + " of the whole " + std::to_string(items) +
                            "-item batch (its " + std::to_string(rows) + "-item chunk's: " + describeValue(part[i]) +
                            "): out of memory");
        }
        if (!shaped) {  // a rule of batch-rows is wrong: say so where it shows (batch_split.why_not), run whole
          batch_split_->refuse("output " + std::to_string(i) + " of a " + std::to_string(rows) + "-item chunk (" +
                               describeValue(part[i]) + ") does not have " + std::to_string(rows) +
                               " rows at dim 0, which batch-rows proved it would (a bug: please report it)");
          out.clear();
          return false;
        }
      }
    }
    for (size_t i = 0; i < part.size(); ++i) copyRows(part[i], start, out[i]);
    if (start >= 2 * chunk && rows == chunk) {  // the first two made this shape's primitives and memory plan
      timed_ns += Profiler::nowNs() - t0;
      timed_items += rows;
    }
  }
  double side_ns = -1.0;  // side by side: ns per item of the chunks after the first
  if (alone_until < items) {
    const int64_t t0 = Profiler::nowNs();
    runSideBySide(inputs, items, chunk, lanes, out);
    side_ns = static_cast<double>(Profiler::nowNs() - t0) / static_cast<double>(items - chunk);
  }
  if (pick.timed && lanes == pick.lanes) {
    const double whole_ns = static_cast<double>(Profiler::nowNs() - t_start) / static_cast<double>(items);
    // side by side, a candidate's first call makes each lane's memory plan: its second counts
    dropChunkState(inputs, items,
                 pick.lanes > 1 ? batch_split_->record(items, chunk, -1.0, side_ns, pick.lanes)
                                : batch_split_->record(items, chunk,
                                                       timed_items ? static_cast<double>(timed_ns) /
                                                                         static_cast<double>(timed_items)
                                                                   : -1.0,
                                                       whole_ns));
  }
  if (prof)
    recordCall(*prof, "llga::batch_split", -2, t_start,
               std::to_string(items) + " items in chunks of " + std::to_string(chunk) +
                   (lanes > 1 ? ", " + std::to_string(lanes) + " side by side" : ""));
  return true;
}

// The chunks after the first of a split call, `lanes` at a time, each on one
// thread of an OpenMP team (nested regions inside run on their caller: llga's
// loops, and oneDNN's primitives, which run sequentially inside a parallel
// region). Each chunk's rows go into `out` (made by the first chunk). The
// first error stops the other lanes' next chunks and is thrown here.
void CompiledGraph::runSideBySide(const std::vector<RtValue>& inputs, int64_t items, int64_t chunk, int lanes,
                                  std::vector<RtValue>& out) const {
  const int64_t n = (items + chunk - 1) / chunk;
  std::atomic<int64_t> next{1};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mu;
#pragma omp parallel num_threads(lanes)
  {
    for (int64_t k = next++; k < n && !failed.load(); k = next++) {
      try {
        const int64_t start = k * chunk, rows = std::min(chunk, items - start);
        std::vector<RtValue> part = runWhole(rowsOf(inputs, start, rows), nullptr);
        for (size_t i = 0; i < part.size(); ++i) copyRows(part[i], start, out[i]);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (!error) error = std::current_exception();
        failed = true;
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

std::set<std::string> CompiledGraph::chunkSignatures(const std::vector<RtValue>& inputs, int64_t items,
                                                     int64_t chunk) {
  std::set<std::string> sigs;
  for (int64_t rows : {chunk, items % chunk}) {
    if (rows) sigs.insert(signature(rowsOf(inputs, 0, rows)));
  }
  return sigs;
}

// What chunk shapes a batch size will not run again made goes: their memory
// plans (arenas), primitives and weight copies, so that measuring leaves
// only the chosen chunk's behind.
void CompiledGraph::dropChunkState(const std::vector<RtValue>& inputs, int64_t items,
                                 const BatchSplit::Recorded& r) const {
  if (r.dropped.empty()) return;
  const std::set<std::string> keep = r.settled ? chunkSignatures(inputs, items, r.best) : std::set<std::string>{};
  std::vector<std::string> gone;
  for (int64_t chunk : r.dropped)
    for (const std::string& sig : chunkSignatures(inputs, items, chunk))
      if (!keep.count(sig)) gone.push_back(sig);
  for (const std::string& sig : gone) forgetShapeTag(shapeTag(sig));  // its primitives and weight copies
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& sig : gone) planners_.erase(sig);
  }
#ifdef __GLIBC__
  malloc_trim(0);  // the freed weight copies and arenas go back to the system, not only to malloc
#endif
}

uint64_t CompiledGraph::shapeTag(const std::string& sig) const {
  const uint64_t h = std::hash<std::string>()(sig) ^ (reinterpret_cast<uintptr_t>(this) * 0x9E3779B97F4A7C15ull);
  return h ? h : 1;
}

std::vector<RtValue> CompiledGraph::runWhole(std::vector<RtValue> inputs, const NodeObserver* observer) const {
  std::string sig = signature(inputs);
  ShapeTagScope tag(shapeTag(sig));
  auto activations = std::make_shared<MemoryMeter>();
  std::vector<RtValue> out;
  Profiler* prof = Profiler::active();
  const int64_t t0 = prof ? Profiler::nowNs() : 0;
  const PlannerSlot slot = plannerFor(sig);
  try {
    MeterScope scope(activations, cache_meter_);
    ArenaPlanner::Call call(*slot.planner);
    out = plan_->run(std::move(inputs), observer, slot.shape_values.get());
  } catch (const ExecutionError&) {
    throw;  // an op's, naming it
  } catch (const std::bad_alloc&) {
    throw OutOfMemory("the memory plan for a call with " + sig + ": out of memory");
  }
  if (prof) recordCall(*prof, "llga::call", -1, t0, sig);
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

CompiledGraph::PlannerSlot CompiledGraph::plannerFor(const std::string& sig) const {
  constexpr size_t kMaxPlanners = 8;  // like the primitive caches: a bounded number of shapes keep their arena
  std::lock_guard<std::mutex> lock(mu_);
  PlannerSlot& slot = planners_[sig];
  if (!slot.planner) {
    slot.planner = std::make_shared<ArenaPlanner>();
    slot.shape_values = std::make_shared<ShapeValues>();
  }
  slot.last_used = ++calls_;
  const PlannerSlot mine = slot;
  if (planners_.size() > kMaxPlanners) {
    auto oldest = std::min_element(planners_.begin(), planners_.end(),
                                   [](const auto& a, const auto& b) { return a.second.last_used < b.second.last_used; });
    planners_.erase(oldest);
  }
  return mine;
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
