#include "runtime/evaluator.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "passes/pass.h"
#include "runtime/constant_eval.h"
#include "runtime/kernel.h"
#include "runtime/plan.h"

namespace llga {
namespace {

TensorInfo infoOf(const Tensor& t) {
  TensorInfo info;
  info.dtype = t.dtype();
  info.sizes.emplace(t.sizes().begin(), t.sizes().end());
  info.strides = std::vector<int64_t>(t.strides().begin(), t.strides().end());
  info.requires_grad = false;
  info.device = "cpu";
  return info;
}

// Widens r by t's finite values.
void accumulateRange(const Tensor& t_in, ValueRange& r) {
  const Tensor t = t_in.contiguous();
  const float* p = static_cast<const float*>(t.data());
  const int64_t n = t.numel();
  float lo = std::numeric_limits<float>::infinity(), hi = -lo;
  int64_t bad = 0;
#pragma omp simd reduction(min : lo) reduction(max : hi) reduction(+ : bad)
  for (int64_t i = 0; i < n; ++i) {
    const float v = p[i];
    const bool finite = v - v == 0.0f;  // false for NaN and infinities
    bad += !finite;
    lo = finite && v < lo ? v : lo;
    hi = finite && v > hi ? v : hi;
  }
  r.min = std::min(r.min, static_cast<double>(lo));
  r.max = std::max(r.max, static_cast<double>(hi));
  r.elements += n - bad;
  r.non_finite += bad;
}

// One input set for a graph whose inputs have complete float types: each
// tensor's values spread evenly over [-1, 1] in a fixed order, so that a
// calibration without inputs (llga-opt's golden tests) has a range to see.
std::vector<TensorRef> rampInputs(const Graph& g) {
  std::vector<TensorRef> out;
  for (const Value* in : g.inputs()) {
    if (in->type()->kind() == TypeKind::Class) continue;
    std::optional<std::vector<int64_t>> sizes;
    if (in->type()->isTensor()) sizes = in->type()->tensorInfo().concreteSizes();
    if (!sizes || in->type()->tensorInfo().dtype != ScalarType::Float)
      throw std::runtime_error("no calibration inputs, and %" + in->debugName() + " has no complete float tensor type");
    auto c = ConstantTensor::owned(ScalarType::Float, *sizes);
    float* p = static_cast<float*>(c->data);
    const int64_t n = c->numel();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>((i * 37) % 201 - 100) / 100.0f;
    out.push_back(std::move(c));
  }
  return out;
}

// Adds t's finite magnitudes to r's histogram (bins over [0, max |x| of r]).
void accumulateHistogram(const Tensor& t_in, ValueRange& r) {
  if (r.histogram.empty()) return;
  const Tensor t = t_in.contiguous();
  const float* p = static_cast<const float*>(t.data());
  const int64_t n = t.numel(), bins = static_cast<int64_t>(r.histogram.size());
  const double top = std::max(std::abs(r.min), std::abs(r.max));
  if (!(top > 0)) {
    r.histogram[0] += n;
    return;
  }
  const float per = static_cast<float>(static_cast<double>(bins) / top);
  int64_t* h = r.histogram.data();
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(p[i]);
    if (!(a - a == 0.0f)) continue;  // NaN, infinities
    h[std::min<int64_t>(static_cast<int64_t>(a * per), bins - 1)]++;
  }
}

// What two observations agree on.
TensorInfo meet(TensorInfo a, const TensorInfo& b) {
  if (a.dtype != b.dtype) a.dtype.reset();
  if (!a.sizes || !b.sizes || a.sizes->size() != b.sizes->size()) {
    a.sizes.reset();
  } else {
    for (size_t i = 0; i < a.sizes->size(); ++i)
      if ((*a.sizes)[i] != (*b.sizes)[i]) (*a.sizes)[i].reset();
  }
  if (a.strides != b.strides) a.strides.reset();
  return a;
}

std::vector<RtValue> exampleInputs(const Graph& g, const PassContext& ctx,
                                   const std::vector<TensorRef>* inputs = nullptr) {
  std::vector<RtValue> out;
  const auto& given = inputs ? *inputs : ctx.example_inputs;
  if (!given.empty()) {
    size_t expected = 0;
    for (const Value* in : g.inputs()) expected += in->type()->kind() != TypeKind::Class;
    if (given.size() != expected)
      throw std::runtime_error("expected " + std::to_string(expected) + " example inputs, got " + std::to_string(given.size()));
    for (const auto& t : given) out.emplace_back(tensorFromConstant(*t));
    return out;
  }
  for (const Value* in : g.inputs()) {
    if (in->type()->kind() == TypeKind::Class) continue;  // the module: not a runtime input
    std::optional<std::vector<int64_t>> sizes;
    std::optional<ScalarType> dtype;
    if (in->type()->isTensor()) {
      sizes = in->type()->tensorInfo().concreteSizes();
      dtype = in->type()->tensorInfo().dtype;
    }
    if (!sizes || !dtype)
      throw std::runtime_error("no example inputs, and %" + in->debugName() + " has no complete tensor type");
    out.emplace_back(Tensor::zeros(*dtype, Shape(sizes->begin(), sizes->end())));
  }
  return out;
}

// A kernel of the op library, asked about layouts.
class KernelLayoutQuery final : public LayoutQuery {
 public:
  explicit KernelLayoutQuery(std::unique_ptr<Kernel> k) : k_(std::move(k)) {}
  bool acceptsBlocked(size_t i) const override { return k_->acceptsBlocked(i); }
  bool acceptsStrided(size_t i) const override { return k_->acceptsStrided(i); }
  void allowBlockedOutput(size_t j) override { k_->allowBlockedOutput(j); }
  void allowStridedOutput(size_t j) override { k_->allowStridedOutput(j); }

 private:
  std::unique_ptr<Kernel> k_;
};

class RuntimeEvaluator final : public Evaluator {
 public:
  bool supports(Symbol kind) const override { return OpRegistry::global().find(kind) != nullptr; }

  std::optional<std::vector<AttrValue>> evaluateConstant(const Node& n, size_t max_tensor_bytes) const override {
    const bool tensors = max_tensor_bytes > 0;
    std::vector<RtValue> inputs;
    std::vector<const Storage*> input_storage;  // of tensor inputs: a result there is a view, not folded
    bool approximate = false;
    auto constant = [&](const Node& c) -> std::optional<RtValue> {
      const AttrValue* a = c.kind() == prim::Constant ? c.attributes().find(attr::value) : nullptr;
      if (a && a->is<TensorRef>()) {
        const ConstantTensor& t = *a->get<TensorRef>();
        if (!tensors || !t.hasData()) return std::nullopt;
        approximate |= t.approximate;
        RtValue v(tensorFromConstant(t));
        input_storage.push_back(v.tensor().storage().get());
        return v;
      }
      return constantValue(c);
    };
    for (const Value* in : n.inputs()) {
      const Node& p = *in->node();
      std::optional<RtValue> c;
      if (tensors && p.kind() == prim::ListConstruct) {  // [c0, c1, ...] of constants
        std::vector<RtValue> items;
        for (const Value* item : p.inputs()) {
          auto v = constant(*item->node());
          if (!v) return std::nullopt;
          items.push_back(std::move(*v));
        }
        c = makeList(std::move(items));
      } else {
        c = constant(p);
      }
      if (!c) return std::nullopt;
      inputs.push_back(std::move(*c));
    }
    std::optional<std::vector<RtValue>> outs;
    try {
      outs = evaluateNode(n, std::move(inputs));
    } catch (const std::exception&) {
      return std::nullopt;  // it would fail at run time too: leave it there, to fail with its message
    }
    if (!outs) return std::nullopt;
    std::vector<AttrValue> attrs;
    for (size_t i = 0; i < outs->size(); ++i) {
      const Value* o = n.output(i);
      if ((*outs)[i].isNone() && o->type()->isSimple("NoneType")) {
        attrs.emplace_back();
        continue;
      }
      const RtValue& v = (*outs)[i];
      if (v.isTensor()) {
        if (!tensors || v.tensor().isBlocked()) return std::nullopt;
        const Tensor t = v.tensor();
        const size_t bytes = static_cast<size_t>(t.numel()) * scalarTypeSize(t.dtype());
        for (const Storage* s : input_storage)
          if (t.storage().get() == s) return std::nullopt;  // a view of an input: free at run time anyway
        if (bytes > max_tensor_bytes) return std::nullopt;
        auto c = ConstantTensor::owned(t.dtype(), std::vector<int64_t>(t.sizes().begin(), t.sizes().end()));
        const Tensor dense = t.contiguous();
        if (bytes) std::memcpy(c->data, dense.data(), bytes);
        c->approximate = approximate;
        attrs.emplace_back(TensorRef(std::move(c)));
        continue;
      }
      auto a = toAttr(v, *o->type());
      if (!a) return std::nullopt;
      attrs.push_back(std::move(*a));
    }
    return attrs;
  }

  std::unordered_map<const Value*, TensorInfo> observeTensors(const Graph& g, const PassContext& ctx) const override {
    std::vector<RtValue> inputs = exampleInputs(g, ctx);
    WeightMap weights;
    for (const auto& [k, v] : ctx.weights) weights.emplace(k, tensorFromConstant(*v));
    // The plan only reads the graph; it does not own it here.
    std::shared_ptr<const Graph> view(&g, [](const Graph*) {});
    std::unordered_map<const Value*, TensorInfo> seen;
    NodeObserver observe = [&](const Node& n, RtValue* const* outs, size_t count) {
      for (size_t i = 0; i < count && i < n.outputs().size(); ++i) {
        if (!outs[i]->isTensor()) continue;
        TensorInfo info = infoOf(outs[i]->tensor());
        auto [it, fresh] = seen.emplace(n.output(i), info);
        if (!fresh) it->second = meet(it->second, info);
      }
    };
    try {
      PlainWeightsScope plain;  // one run: no reordered weight copies (they would only raise the compile's peak)
      Plan::build(view, weights)->run(std::move(inputs), &observe);
    } catch (const std::exception& e) {
      throw std::runtime_error(std::string("the graph could not run on its example inputs: ") + e.what());
    }
    return seen;
  }

  std::unordered_map<const Value*, ValueRange> observeRanges(const Graph& g, const PassContext& ctx,
                                                             const std::unordered_set<const Value*>& values,
                                                             const std::unordered_set<const Node*>& readers,
                                                             int histogram_bins) const override {
    WeightMap weights;
    for (const auto& [k, v] : ctx.weights) weights.emplace(k, tensorFromConstant(*v));
    std::shared_ptr<const Graph> view(&g, [](const Graph*) {});
    std::unordered_map<const Value*, ValueRange> ranges;
    bool second = false;  // the run over the sets that fills histograms
    auto see = [&](const Value* v, const RtValue& rv) {
      if (!values.count(v) || !rv.isTensor()) return;
      const Tensor& t = rv.tensor();
      if (t.dtype() != ScalarType::Float || t.isBlocked()) return;
      if (second) accumulateHistogram(t, ranges[v]);
      else accumulateRange(t, ranges[v]);
    };
    // A value as the readers read it, just before they run: after any write
    // into it (an in-place op the graph kept).
    NodeObserver observe = [&](const Node& n, RtValue* const* ins, size_t count) {
      if (!readers.count(&n)) return;
      for (size_t i = 0; i < count && i < n.inputs().size(); ++i) see(n.input(i), *ins[i]);
    };
    std::vector<std::vector<TensorRef>> sets = ctx.calibration;
    if (sets.empty() && !ctx.example_inputs.empty()) sets.push_back(ctx.example_inputs);
    if (sets.empty()) sets.push_back(rampInputs(g));
    PlainWeightsScope plain;
    std::shared_ptr<const Plan> plan = Plan::build(view, weights);
    auto runAll = [&] {
      for (size_t k = 0; k < sets.size(); ++k) {
        try {
          plan->run(exampleInputs(g, ctx, &sets[k]), nullptr, nullptr, &observe);
        } catch (const std::exception& e) {
          throw std::runtime_error("calibration input set " + std::to_string(k) + ": the graph could not run on it: " +
                                   e.what());
        }
      }
    };
    runAll();
    if (histogram_bins > 0) {  // the bins span what the first run saw
      for (auto& [v, r] : ranges) r.histogram.assign(static_cast<size_t>(histogram_bins), 0);
      second = true;
      runAll();
    }
    return ranges;
  }

  std::unique_ptr<LayoutQuery> layoutQuery(const Node& n) const override {
    if (n.kind() == prim::Constant || n.kind() == prim::GetAttr || !n.blocks().empty()) return nullptr;
    const OpDef* def = OpRegistry::global().find(n.kind());
    if (!def || n.inputs().size() < def->min_inputs || n.inputs().size() > def->max_inputs) return nullptr;
    try {
      return std::make_unique<KernelLayoutQuery>(def->make(n));
    } catch (const std::exception&) {
      return nullptr;  // the plan reports it, with the node's source
    }
  }
};

}  // namespace

std::shared_ptr<const Evaluator> runtimeEvaluator() {
  static const auto e = std::make_shared<const RuntimeEvaluator>();
  return e;
}

}  // namespace llga
