// constant-propagation: evaluates pure nodes whose inputs are all non-tensor
// constants (with the pass context's evaluator) and replaces them by constants; inlines the
// taken block of a prim::If whose condition is constant. Repeats to a fixed
// point (bounded). Tensor results are left alone.
#include "ir/effects.h"
#include "passes/pass.h"
#include "passes/pass_utils.h"

namespace llga {
namespace {

constexpr int kMaxRounds = 16;

class ConstantPropagation final : public Pass {
 public:
  std::string_view name() const override { return "constant-propagation"; }
  std::string_view description() const override { return "evaluate nodes on constant inputs; fold constant branches"; }

  bool run(Graph& g) override {
    bool any = false;
    for (int round = 0; round < kMaxRounds; ++round) {
      bool changed = visit(g, g.block());
      any |= changed;
      if (!changed) break;
    }
    return any;
  }

 private:
  static std::optional<bool> constantBool(const Value* v) {
    const AttrValue* a = v->node()->kind() == prim::Constant ? v->node()->attributes().find(attr::value) : nullptr;
    if (!a || !(a->is<int64_t>() || a->is<bool>())) return std::nullopt;
    return a->is<bool>() ? a->get<bool>() : a->get<int64_t>() != 0;
  }

  // Moves the taken block's nodes before the If and drops the If.
  static void inlineIf(Node* n, bool cond) {
    Block* b = n->blocks()[cond ? 0 : 1];
    for (Node* inner = b->paramNode()->next(); inner != b->returnNode();) {
      Node* next = inner->next();
      inner->moveBefore(n);
      inner = next;
    }
    for (size_t i = 0; i < n->outputs().size(); ++i) n->output(i)->replaceAllUsesWith(b->outputs()[i]);
    n->destroy();
  }

  static bool foldable(const Node& n) {
    if (n.kind() == prim::Constant || n.kind() == prim::GetAttr || !n.blocks().empty() || hasSideEffects(n)) return false;
    if (n.outputs().empty()) return false;
    for (const Value* o : n.outputs()) {
      if (o->type()->isTensor() || o->type()->kind() == TypeKind::Optional) return false;
      if (isMutableType(*o->type()) && hasMutatingUse(*o)) return false;
    }
    return true;
  }

  bool fold(Graph& g, Node* n) {
    if (!evaluator()) return false;
    for (const Value* in : n->inputs())
      if (in->node()->kind() != prim::Constant || in->type()->isTensor()) return false;
    std::optional<std::vector<AttrValue>> outs = evaluator()->evaluateConstant(*n);
    if (!outs) return false;
    std::vector<AttrValue>& attrs = *outs;
    for (size_t i = 0; i < attrs.size(); ++i) {
      Value* o = n->output(i);
      Node* c = g.create(prim::Constant, 1);
      c->output()->setType(o->type());
      if (!o->type()->isSimple("NoneType")) c->setAttr(attr::value, std::move(attrs[i]));
      c->setScope(n->scope());
      c->setSource(n->source());
      c->insertBefore(n);
      o->replaceAllUsesWith(c->output());
      std::string name = o->debugName();
      o->setDebugName(g.freshName());
      c->output()->setDebugName(name);  // the folded value keeps its name
    }
    n->destroy();
    return true;
  }

  bool visit(Graph& g, Block* b) {
    bool changed = false;
    for (Node* n = b->paramNode()->next(); n != b->returnNode();) {
      Node* next = n->next();
      if (n->kind() == prim::If) {
        if (auto cond = constantBool(n->input(0))) {
          Node* before = n->prev();
          inlineIf(n, *cond);
          changed = true;
          n = before->next();  // continue with what was inlined
          continue;
        }
      }
      for (Block* sub : n->blocks()) changed |= visit(g, sub);
      if (foldable(*n)) changed |= fold(g, n);
      n = next;
    }
    return changed;
  }
};

}  // namespace

LLGA_REGISTER_PASS(ConstantPropagation);

}  // namespace llga
