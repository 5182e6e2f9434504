// remove-mutation: an in-place op (aten::relu_, add_, hardtanh_, ...) becomes
// its functional form when nobody could observe the difference:
//   * the written tensor is a fresh buffer: made by a node of this block that
//     is not a view or alias op nor an in-place op left in place (not a graph
//     input, block parameter, constant or weight, whose memory the caller or
//     other calls own);
//   * no view or alias of it was taken (a write through it would be seen
//     there);
//   * nothing reads it after the in-place op (it would now read the old value).
// Otherwise the op stays, and the pass notes why.
//
// List mutation: aten::append on a list made by prim::ListConstruct in the
// same block, when every other reader of the list comes after the last
// append (and none is inside a nested block or aliases it first), folds
// into the construct:
//   %l = prim::ListConstruct(%a); aten::append(%l, %b); f(%l)
//     ->  %l = prim::ListConstruct(%a, %b); f(%l)
//
//   Given:   %b = aten::batch_norm(...)       Result:  %b = aten::batch_norm(...)
//            %r = aten::relu_(%b)                      %r = aten::relu(%b)
#include <algorithm>
#include <unordered_set>

#include "ir/effects.h"
#include "passes/pass.h"
#include "passes/pass_utils.h"

namespace llga {
namespace {

class RemoveMutation final : public Pass {
 public:
  std::string_view name() const override { return "remove-mutation"; }
  std::string_view description() const override { return "in-place ops to functional ones where no alias can tell"; }
  bool run(Graph& g) override {
    bool changed = visit(g, g.block());
    refuseWritesIntoConstants(g);
    return foldAppends(g) || changed;
  }

 private:
  std::string whyNot(const Node& n) {
    const Value* self = n.input(0);
    const Node* producer = self->node();
    if (producer->kind() == prim::Param) return "it writes into an input of the graph or block";
    if (producer->kind() == prim::Constant || producer->kind() == prim::GetAttr) return "it writes into a constant or weight";
    if (producer->owningBlock() != n.owningBlock()) return "its input comes from another block";
    if (isAliasing(*producer)) return "its input is a view or alias (" + producer->kind().toQualString() + ")";
    if (writesInput(*producer, 0))  // the result of an in-place op is its input: a view's write reaches the base
      return "its input is the result of " + producer->kind().toQualString() + ", which stayed in place";
    for (const Use& u : self->uses()) {
      if (u.user == &n) continue;
      if (u.user->owningBlock() != n.owningBlock()) return "its input is read inside another block";
      if (isAliasing(*u.user)) return "a view or alias of its input exists (" + u.user->kind().toQualString() + ")";
      if (hasSideEffects(*u.user)) return "its input is also mutated by " + u.user->kind().toQualString();
      if (n.isBefore(u.user)) return "its input is read afterwards by " + u.user->kind().toQualString();
    }
    for (const Use& u : n.output()->uses())
      if (u.user->owningBlock() != n.owningBlock() && u.user->kind() != prim::Return)
        return "";  // uses of the result elsewhere are fine: the result is the same value
    return "";
  }

  // An in-place op left writing into a module's buffer or parameter (or
  // another tensor constant): PyTorch keeps what it writes for the next call
  // (a counter, a running state), and the constant's memory is the module's
  // own. llga binds such tensors as constants and keeps no state between
  // calls, so it refuses the program rather than answer the first call's
  // result every time, or write into the module.
  static void refuseWritesIntoConstants(Graph& g) {
    g.forEachNode([](Node* n) {
      for (size_t i = 0; i < n->inputs().size(); ++i) {
        if (!n->input(i)->type()->isTensor() || !writesInput(*n, i) || !n->blocks().empty()) continue;
        const Value* root = aliasRoot(*n->input(i));
        if (root->node()->kind() != prim::Constant && root->node()->kind() != prim::GetAttr) continue;
        throw std::invalid_argument(
            where(*n) + ": " + n->kind().toQualString() + " writes into '" + root->debugName() +
            "', a module buffer or parameter (or a tensor constant): PyTorch keeps what it writes for the next "
            "call, and llga, which compiles module tensors as constants, keeps no state between calls. Compute "
            "the new value out of place and return it (keep the state outside the model), or leave the module "
            "in PyTorch");
      }
    });
  }

  bool foldAppends(Graph& g) {
    static const Symbol append = Symbol::fromQualString("aten::append");
    std::vector<Node*> lists;
    g.forEachNode([&](Node* n) {
      if (n->kind() == prim::ListConstruct) lists.push_back(n);
    });
    bool changed = false;
    for (Node* l : lists) {
      std::vector<Node*> appends, others;
      for (const Use& u : l->output()->uses()) (u.user->kind() == append && u.offset == 0 ? appends : others).push_back(u.user);
      if (appends.empty()) continue;
      auto fail = [&](const std::string& why) { note(where(*appends.front()) + ": list append kept: " + why); };
      bool ok = true;
      for (Node* a : appends)
        if (a->owningBlock() != l->owningBlock()) { fail("it appends inside another block (a loop or branch)"); ok = false; break; }
      if (!ok) continue;
      std::sort(appends.begin(), appends.end(), [](Node* a, Node* b) { return a->isBefore(b); });
      Node* last = appends.back();
      for (Node* o : others) {
        Node* top = o;  // o, or the node of l's block that contains it
        while (top->owningBlock() != l->owningBlock()) top = top->owningBlock()->owningNode();
        if (!last->isBefore(top)) { fail("the list is read (by " + o->kind().toQualString() + ") before its last append"); ok = false; break; }
      }
      if (!ok) continue;
      for (Node* a : appends) {
        if (a->outputs().size() == 1 && a->output()->hasUses()) { fail("the append's result is read"); ok = false; break; }
      }
      if (!ok) continue;
      l->moveBefore(last);  // after every appended value's definition, before every reader
      for (Node* a : appends) {
        l->addInput(a->input(1));
        a->destroy();
      }
      changed = true;
    }
    return changed;
  }

  bool visit(Graph& g, Block* b) {
    bool changed = false;
    for (Node* n = b->paramNode()->next(); n != b->returnNode();) {
      Node* next = n->next();
      for (Block* sub : n->blocks()) changed |= visit(g, sub);
      std::string_view name = n->kind().name();
      bool inplace = n->kind().ns() == "aten" && name.size() > 1 && name.back() == '_' && name.substr(0, 2) != "__" &&
                     n->outputs().size() == 1 && !n->inputs().empty();
      if (inplace) {
        Symbol functional = Symbol::fromQualString("aten::" + std::string(name.substr(0, name.size() - 1)));
        if (!evaluator()) {
          note(where(*n) + ": kept (no evaluator in the pass context to say whether " + functional.toQualString() + " runs)");
        } else if (!evaluator()->supports(functional)) {
          note(where(*n) + ": no functional form " + functional.toQualString());
        } else if (std::string why = whyNot(*n); !why.empty()) {
          note(where(*n) + ": " + why);
        } else {
          Node* f = g.create(functional, 0);
          for (Value* in : n->inputs()) f->addInput(in);
          for (const auto& [k, v] : n->attributes()) f->setAttr(k, v);
          f->setScope(n->scope());
          f->setSource(n->source());
          f->insertBefore(n);
          Value* out = n->output();
          Value* fout = f->addOutput(out->type());
          out->replaceAllUsesWith(fout);
          std::string keep = out->debugName();
          n->destroy();
          fout->setDebugName(keep);
          changed = true;
        }
      }
      n = next;
    }
    return changed;
  }
};

}  // namespace

LLGA_REGISTER_PASS(RemoveMutation);

}  // namespace llga
