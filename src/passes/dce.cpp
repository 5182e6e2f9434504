// dce: deletes nodes whose outputs nobody reads and that have no side effects
// (including prim::If / prim::Loop whose blocks are pure).
#include "ir/effects.h"
#include "passes/pass.h"

namespace llga {
namespace {

bool sweep(Block* b) {
  bool changed = false;
  for (Node* n = b->returnNode()->prev(); n != b->paramNode();) {
    Node* prev = n->prev();
    for (Block* sub : n->blocks()) changed |= sweep(sub);
    bool used = false;
    for (const Value* o : n->outputs()) used |= o->hasUses();
    if (!used && !hasSideEffects(*n)) {
      n->destroy();
      changed = true;
    }
    n = prev;
  }
  return changed;
}

class Dce final : public Pass {
 public:
  std::string_view name() const override { return "dce"; }
  std::string_view description() const override { return "delete unused nodes without side effects"; }
  bool run(Graph& g) override { return sweep(g.block()); }
};

}  // namespace

LLGA_REGISTER_PASS(Dce);

}  // namespace llga
