// freeze: tensors read through prim::GetAttr chains from the module become
// constants bound to their weights (the context's, by qualified path); the
// module objects left unused go with dce. Attributes with no weight stay.
// Tensor constants whose values came from printed text (about 4 digits) or
// are missing get the weight of their name, if one is bound, so constant
// propagation folds exact values (a traced `w.abs() + 0.5`: the 0.5 is a
// printed tensor constant the importer also passes exactly).
//
//   Given:  %conv1 : Conv2d = prim::GetAttr[name="conv1"](%self)
//           %w : Tensor = prim::GetAttr[name="weight"](%conv1)
//   Result: %w : Float(64, 3, 7, 7) = prim::Constant[value=<Tensor>]()     (bound to conv1.weight)
#include <unordered_map>

#include "passes/pass.h"
#include "passes/pass_utils.h"

namespace llga {
namespace {

class Freeze final : public Pass {
 public:
  std::string_view name() const override { return "freeze"; }
  std::string_view description() const override { return "bind module weights as constants"; }

  bool run(Graph& g) override {
    bool changed = false;
    g.forEachNode([&](Node* n) {
      if (n->kind() != prim::Constant) return;
      const AttrValue* a = n->attributes().find(attr::value);
      if (!a || !a->is<TensorRef>() || (a->get<TensorRef>()->hasData() && !a->get<TensorRef>()->approximate)) return;
      auto w = context().weights.find(n->output()->debugName());
      if (w == context().weights.end() || !w->second) return;
      n->setAttr(attr::value, AttrValue(w->second));
      changed = true;
    });
    std::unordered_map<const Value*, std::string> paths;
    for (const Value* in : g.inputs())
      if (in->type()->kind() == TypeKind::Class) paths[in] = "";
    if (paths.empty()) return changed;
    std::vector<Node*> getattrs;
    g.forEachNode([&](Node* n) {
      if (n->kind() == prim::GetAttr) getattrs.push_back(n);
    });
    for (Node* n : getattrs) {  // program order: parents before children
      auto it = paths.find(n->input(0));
      if (it == paths.end()) continue;
      const std::string& attr_name = n->attr(attr::name).get<std::string>();
      std::string path = it->second.empty() ? attr_name : it->second + "." + attr_name;
      if (n->output()->type()->kind() == TypeKind::Class) {
        paths[n->output()] = path;
        continue;
      }
      auto w = context().weights.find(path);
      if (w == context().weights.end()) {
        note("prim::GetAttr '" + path + "': no weight bound to it");
        continue;
      }
      Node* c = g.create(prim::Constant, 1);
      c->setAttr(attr::value, AttrValue(w->second));
      c->output()->setType(constantTensorType(*w->second));
      c->setScope(n->scope());
      c->insertBefore(n);
      Value* out = n->output();
      out->replaceAllUsesWith(c->output());
      std::string keep = out->debugName();
      n->destroy();
      c->output()->setDebugName(keep);
      changed = true;
    }
    return changed;
  }
};

}  // namespace

LLGA_REGISTER_PASS(Freeze);

}  // namespace llga
