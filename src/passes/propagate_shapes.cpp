// propagate-shapes: every tensor value gets the dtype, sizes and strides it
// has for the graph's example inputs (the context's, else zero tensors
// shaped by the graph inputs' complete types). The graph is run once with
// the op library and each executed node's outputs are recorded, so what the
// dumps show is what the kernels produce, for every op llga runs. A value
// that takes several shapes (inside a loop) keeps only what they agree on;
// values of branches not taken keep their types.
//
//   Given:  %y : Tensor = aten::relu(%x)    (%x : Float(1, 8, 4, 4))
//   Result: %y : Float(1, 8, 4, 4, strides=[128, 16, 4, 1], requires_grad=0, device=cpu) = aten::relu(%x)
#include <unordered_map>

#include "passes/pass.h"
#include "passes/pass_utils.h"
#include "runtime/dnnl_utils.h"
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

class PropagateShapes final : public Pass {
 public:
  std::string_view name() const override { return "propagate-shapes"; }
  std::string_view description() const override { return "dtypes and shapes from the example inputs, on every value"; }

  bool run(Graph& g) override {
    if (context().example_inputs.empty() && allComplete(g)) {
      note("every tensor value already has a complete type: nothing to run");
      return false;
    }
    std::vector<RtValue> inputs;
    if (!exampleInputs(g, inputs)) return false;
    WeightMap weights;
    for (const auto& [k, v] : context().weights) weights.emplace(k, tensorFromConstant(*v));
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
      note(std::string("the graph could not run on its example inputs, shapes left as they were: ") + e.what());
      return false;
    }
    bool changed = false;
    for (const auto& [v, info] : seen) {
      const Type& t = *v->type();
      if (t.isTensor() && t.tensorInfo() == info) continue;
      if (!t.isTensor()) continue;  // Optional[Tensor] and the like keep their declarations
      const_cast<Value*>(v)->setType(Type::tensor(info));
      changed = true;
    }
    return changed;
  }

 private:
  static bool allComplete(const Graph& g) {
    bool all = true;
    g.forEachNode([&](Node* n) {
      for (const Value* o : n->outputs())
        if (o->type()->isTensor() && (!o->type()->tensorInfo().dtype || !o->type()->tensorInfo().concreteSizes())) all = false;
    });
    return all;
  }

  bool exampleInputs(const Graph& g, std::vector<RtValue>& out) {
    const auto& given = context().example_inputs;
    if (!given.empty()) {
      size_t expected = 0;
      for (const Value* in : g.inputs()) expected += in->type()->kind() != TypeKind::Class;
      if (given.size() != expected) {
        note("expected " + std::to_string(expected) + " example inputs, got " + std::to_string(given.size()));
        return false;
      }
      for (const auto& t : given) out.emplace_back(tensorFromConstant(*t));
      return true;
    }
    for (const Value* in : g.inputs()) {
      if (in->type()->kind() == TypeKind::Class) continue;  // the module: not a runtime input
      std::optional<std::vector<int64_t>> sizes;
      if (in->type()->isTensor()) sizes = in->type()->tensorInfo().concreteSizes();
      auto dtype = knownDtype(in);
      if (!sizes || !dtype) {
        note("no example inputs, and %" + in->debugName() + " has no complete tensor type: shapes left as they were");
        return false;
      }
      out.emplace_back(Tensor::zeros(*dtype, Shape(sizes->begin(), sizes->end())));
    }
    return true;
  }
};

}  // namespace

LLGA_REGISTER_PASS(PropagateShapes);

}  // namespace llga
