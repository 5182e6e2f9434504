// propagate-shapes: every tensor value gets the dtype, sizes and strides it
// has for the graph's example inputs (the context's, else zero tensors
// shaped by the graph inputs' complete types). The pass context's evaluator
// runs the graph once and reports each executed node's outputs, so what the
// dumps show is what the kernels produce, for every op llga runs. A value
// that takes several shapes (inside a loop) keeps only what they agree on;
// values of branches not taken keep their types.
//
//   Given:  %y : Tensor = aten::relu(%x)    (%x : Float(1, 8, 4, 4))
//   Result: %y : Float(1, 8, 4, 4, strides=[128, 16, 4, 1], requires_grad=0, device=cpu) = aten::relu(%x)
#include "passes/pass.h"
#include "passes/pass_utils.h"

namespace llga {
namespace {

class PropagateShapes final : public Pass {
 public:
  std::string_view name() const override { return "propagate-shapes"; }
  std::string_view description() const override { return "dtypes and shapes from the example inputs, on every value"; }

  bool run(Graph& g) override {
    if (context().example_inputs.empty() && allComplete(g)) {
      note("every tensor value already has a complete type: nothing to run");
      return false;
    }
    if (!evaluator()) {
      note("no evaluator in the pass context: shapes left as they were");
      return false;
    }
    std::unordered_map<const Value*, TensorInfo> seen;
    try {
      seen = evaluator()->observeTensors(g, context());
    } catch (const std::exception& e) {
      note(std::string(e.what()) + "; shapes left as they were");
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
};

}  // namespace

LLGA_REGISTER_PASS(PropagateShapes);

}  // namespace llga
