// constant-propagation: evaluates pure nodes whose inputs are all constants
// (with the pass context's evaluator) and replaces them by constants; inlines
// the taken block of a prim::If whose condition is constant. Repeats to a
// fixed point (bounded).
//
// Tensor results fold too, up to PassContext::fold_tensor_bytes each, from
// tensor constants and lists of them, when their size is known before
// evaluating, nothing writes into them (or into a view of them), and the graph
// does not return them: the caller owns what a call returns, and a constant
// would be the same buffer every call. Views of a constant input are not
// folded (free at run time anyway).
#include "ir/effects.h"
#include "ir/strides.h"
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

  // A tensor result that may become a constant: see the header.
  bool foldableTensor(const Value& o) const {
    const size_t limit = context().fold_tensor_bytes;
    if (!limit) return false;
    const TensorInfo& info = o.type()->tensorInfo();
    std::optional<std::vector<int64_t>> sizes = info.concreteSizes();
    if (!info.dtype || !sizes) return false;
    size_t bytes = scalarTypeSize(*info.dtype);
    for (int64_t s : *sizes) bytes *= static_cast<size_t>(std::max<int64_t>(s, 0));
    return bytes <= limit && !writerOf(o) && !reachesGraphOutput(o);
  }

  bool foldableResults(const Node& n) const {
    if (n.kind() == prim::Constant || n.kind() == prim::GetAttr || !n.blocks().empty() || hasSideEffects(n)) return false;
    if (n.outputs().empty()) return false;
    for (const Value* o : n.outputs()) {
      if (o->type()->kind() == TypeKind::Optional) return false;
      if (o->type()->isTensor()) {
        if (!foldableTensor(*o)) return false;
      } else if (isMutableType(*o->type()) && hasMutatingUse(*o)) {
        return false;
      }
    }
    return true;
  }

  // Tensor, or Optional[Tensor]: the element type of aten::index's indices
  // (Tensor?[], whose None items are constants too).
  static bool tensorOrOptionalTensor(const Type& t) {
    return t.isTensor() || (t.kind() == TypeKind::Optional && t.contained().at(0)->isTensor());
  }

  // A constant input: a prim::Constant, or (with tensor folding) a list of
  // tensor (or optional tensor) constants, or an empty list, that is only
  // read, never changed or passed on (lists of other constants are
  // constants themselves once folded; an empty one is not, as its element
  // type would be lost: torch.full([], v) keeps its prim::ListConstruct()).
  bool constantInput(const Value& in) const {
    const Node& p = *in.node();
    if (p.kind() == prim::Constant) return !in.type()->isTensor() || context().fold_tensor_bytes;
    if (p.kind() != prim::ListConstruct || !context().fold_tensor_bytes) return false;
    if (in.type()->kind() != TypeKind::List ||
        (!tensorOrOptionalTensor(*in.type()->contained().at(0)) && !p.inputs().empty()))
      return false;
    for (const Use& u : in.uses()) {
      const Block* b = u.user->owningBlock();
      if (hasSideEffects(*u.user) || isAliasing(*u.user) || (b && u.user == b->returnNode())) return false;
    }
    for (const Value* item : p.inputs())
      if (item->node()->kind() != prim::Constant) return false;
    return true;
  }

  // The type of a folded tensor: the result's dtype and sizes, contiguous (as
  // the constant is), the rest as the node's output said.
  static TypePtr foldedType(const Value& o, const ConstantTensor& t) {
    TensorInfo info = o.type()->tensorInfo();
    info.dtype = t.dtype;
    info.sizes.emplace(t.sizes.begin(), t.sizes.end());
    info.strides = contiguousStrides(t.sizes);
    return Type::tensor(std::move(info));
  }

  // n's inputs are constants (checked first: cheap) and its results may fold.
  bool foldable(const Node& n) const {
    for (const Value* in : n.inputs())
      if (!constantInput(*in)) return false;
    return foldableResults(n);
  }

  bool fold(Graph& g, Node* n) {
    if (!evaluator()) return false;
    std::optional<std::vector<AttrValue>> outs = evaluator()->evaluateConstant(*n, context().fold_tensor_bytes);
    if (!outs) return false;
    std::vector<AttrValue>& attrs = *outs;
    for (size_t i = 0; i < attrs.size(); ++i) {
      Value* o = n->output(i);
      Node* c = g.create(prim::Constant, 1);
      c->output()->setType(attrs[i].is<TensorRef>() ? foldedType(*o, *attrs[i].get<TensorRef>()) : o->type());
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
