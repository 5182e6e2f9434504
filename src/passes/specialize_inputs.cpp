// specialize-inputs: what scripted code asks about its input tensors' kind
// (x.dim(), x.dtype, x.is_floating_point()) is answered from the example
// inputs, so that constant-propagation then drops the branches these inputs
// never take (F.interpolate's 3-d/5-d paths, dtype checks) before the
// unsupported-op check. The answers hold only for inputs of the same rank
// and dtype: an llga::Guard at the start of the graph checks each call's
// inputs and raises a specialization mismatch otherwise (the Python layer
// then compiles another specialization). Graphs without example inputs,
// and inputs nobody asks about, are left alone.
//
//   Given:  %r : int = aten::dim(%x)                (example input: Float of rank 4)
//   Result: llga::Guard[inputs=[0], ranks=[4], dtypes=[6]](%x)
//           %r : int = prim::Constant[value=4]()
#include "passes/pass.h"
#include "passes/pass_utils.h"

namespace llga {
namespace {

const Symbol kDim = Symbol::fromQualString("aten::dim");
const Symbol kDtype = Symbol::fromQualString("prim::dtype");
const Symbol kIsFloating = Symbol::fromQualString("aten::is_floating_point");
const Symbol kGuard = Symbol::fromQualString("llga::Guard");

class SpecializeInputs final : public Pass {
 public:
  std::string_view name() const override { return "specialize-inputs"; }
  std::string_view description() const override { return "answer rank/dtype queries from the example inputs, guarded"; }

  bool run(Graph& g) override {
    const auto& examples = context().example_inputs;
    if (examples.empty()) return false;
    std::vector<Value*> inputs;  // graph inputs that have examples, in order
    for (Value* in : g.inputs())
      if (in->type()->kind() != TypeKind::Class) inputs.push_back(in);
    if (inputs.size() != examples.size()) {
      note("graph inputs and example inputs differ in number: nothing specialized");
      return false;
    }
    std::vector<Node*> queries;
    g.forEachNode([&](Node* n) {
      if ((n->kind() == kDim || n->kind() == kDtype || n->kind() == kIsFloating) && n->inputs().size() == 1)
        queries.push_back(n);
    });
    AttrList guarded, ranks, dtypes;
    std::vector<Value*> guard_inputs;
    bool changed = false;
    for (Node* n : queries) {
      auto at = std::find(inputs.begin(), inputs.end(), n->input(0));
      if (at == inputs.end()) continue;
      const size_t i = static_cast<size_t>(at - inputs.begin());
      const ConstantTensor& ex = *examples[i];
      if (std::find(guard_inputs.begin(), guard_inputs.end(), *at) == guard_inputs.end()) {
        guard_inputs.push_back(*at);
        guarded.emplace_back(static_cast<int64_t>(i));
        ranks.emplace_back(static_cast<int64_t>(ex.sizes.size()));
        dtypes.emplace_back(static_cast<int64_t>(scalarTypeCode(ex.dtype)));
      }
      Emitter e(g, n, n);
      Value* answer = n->kind() == kDim ? e.i(static_cast<int64_t>(ex.sizes.size()))
                      : n->kind() == kDtype ? e.i(static_cast<int64_t>(scalarTypeCode(ex.dtype)))
                                            : e.b(isFloatingType(ex.dtype));
      replaceKeepingName(g, n->output(), answer);
      n->destroy();
      changed = true;
    }
    if (!changed) return false;
    Node* guard = g.create(kGuard, 0);
    for (Value* v : guard_inputs) guard->addInput(v);
    guard->setAttr(Symbol::attr("inputs"), AttrValue(std::move(guarded)));
    guard->setAttr(Symbol::attr("ranks"), AttrValue(std::move(ranks)));
    guard->setAttr(Symbol::attr("dtypes"), AttrValue(std::move(dtypes)));
    g.block()->prependNode(guard);
    note("specialized on the example inputs' rank and dtype (" + std::to_string(guard_inputs.size()) +
         " input(s)), guarded by llga::Guard");
    return true;
  }
};

}  // namespace

LLGA_REGISTER_PASS(SpecializeInputs);

}  // namespace llga
