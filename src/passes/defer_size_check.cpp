// defer-size-check: an aten::size read of a tensor that also feeds a
// shape-preserving op (relu, add with a same-shaped operand, ...) reads the
// op's result instead, after it. The tensor then has one consumer less, so
// the op chain can become one fusion group instead of being split to hand
// the intermediate out for its size.
//
//   Given:  %c = aten::_convolution(...)          Result:  %c = aten::_convolution(...)
//           %n = aten::size(%c, %zero)                     %r = aten::relu(%c)
//           %r = aten::relu(%c)                            %n = aten::size(%r, %zero)
// Left alone: a size of a tensor whose consumers all change its shape
// (view, conv, pooling, ...), or whose shape-preserving consumer lives in
// another block.

#include "ir/ops.h"
#include "passes/pass.h"
#include "passes/pass_utils.h"

namespace llga {
namespace {

// Ops whose output has their first input's shape (ir/ops.def: unary
// elementwise and the SameShape group).
bool preservesShape(const Node& n) {
  if (hasTrait(n.kind(), op_trait::Eltwise | op_trait::SameShape)) return true;
  // Binary ops keep the shape when the other operand cannot make it grow at
  // any input shape: a scalar, the same tensor, or a constant of one element.
  // (Recorded shapes are those of one call; an operand that happens to have
  // the same shape could broadcast x at another.)
  if (!hasTrait(n.kind(), op_trait::Binary) || n.inputs().size() < 2) return false;
  const Value* other = n.input(1);
  if (!other->type()->isTensor() || other == n.input(0)) return true;
  const ConstantTensor* c = boundTensor(other);
  return c && c->numel() == 1;
}

class DeferSizeCheck final : public Pass {
 public:
  std::string_view name() const override { return "defer-size-check"; }
  std::string_view description() const override { return "read sizes after shape-preserving ops, not before"; }

  bool run(Graph& g) override {
    static const Symbol size = Symbol::fromQualString("aten::size");
    std::vector<Node*> sizes;
    g.forEachNode([&](Node* n) {
      if (n->kind() == size) sizes.push_back(n);
    });
    bool changed = false;
    for (Node* s : sizes) changed |= defer(s);
    return changed;
  }

 private:
  bool defer(Node* s) {
    bool moved = false;
    for (;;) {
      Value* x = s->input(0);
      if (x->uses().size() < 2) return moved;  // the size is its only reader: nothing to gain
      Node* next = nullptr;
      for (const Use& u : x->uses())
        // (a reader whose result nothing reads is dead, left for dce: reading
        // its size would keep it, and its work, alive)
        if (u.user != s && u.offset == 0 && u.user->owningBlock() == s->owningBlock() && preservesShape(*u.user) &&
            u.user->outputs().size() == 1 && u.user->output()->type()->isTensor() && u.user->output()->hasUses()) {
          next = u.user;
          break;
        }
      if (!next) {
        if (!moved) note(where(*s) + ": no shape-preserving reader of %" + x->debugName() + " in its block");
        return moved;
      }
      if (s->isBefore(next))
        for (const Use& u : s->output()->uses())
          if (u.user->owningBlock() != s->owningBlock() || !next->isBefore(u.user)) {
            if (!moved) note(where(*s) + ": its size is read before " + next->kind().toQualString() + " runs");
            return moved;
          }
      s->replaceInputWith(x, next->output());
      if (s->isBefore(next)) s->moveAfter(next);
      moved = true;
    }
  }
};

}  // namespace

LLGA_REGISTER_PASS(DeferSizeCheck);

}  // namespace llga
