// remove-dropout: dropout is the identity in eval mode (train == False) and
// for p == 0; its uses read the input instead.
#include "passes/pass.h"

namespace llga {
namespace {

std::optional<AttrValue> constantOf(const Value* v) {
  const Node* n = v->node();
  if (n->kind() != prim::Constant) return std::nullopt;
  if (const AttrValue* a = n->attributes().find(attr::value)) return *a;
  return std::nullopt;
}

bool isIdentity(const Node& n) {
  if (n.inputs().size() < 3) return false;
  auto train = constantOf(n.input(2)), p = constantOf(n.input(1));
  bool eval = train && ((train->is<int64_t>() && train->get<int64_t>() == 0) || (train->is<bool>() && !train->get<bool>()));
  bool zero = p && ((p->is<double>() && p->get<double>() == 0.0) || (p->is<int64_t>() && p->get<int64_t>() == 0));
  // a p outside [0, 1] stays, for the kernel to reject as PyTorch does
  const double pv = !p ? 0.0 : p->is<double>() ? p->get<double>() : p->is<int64_t>() ? static_cast<double>(p->get<int64_t>()) : 0.0;
  return (eval || zero) && pv >= 0.0 && pv <= 1.0;
}

bool visit(Block* b) {
  static const Symbol kinds[] = {
      Symbol::fromQualString("aten::dropout"), Symbol::fromQualString("aten::dropout_"),
      Symbol::fromQualString("aten::feature_dropout"), Symbol::fromQualString("aten::feature_dropout_"),
      Symbol::fromQualString("aten::alpha_dropout"), Symbol::fromQualString("aten::alpha_dropout_"),
      Symbol::fromQualString("aten::feature_alpha_dropout"), Symbol::fromQualString("aten::feature_alpha_dropout_")};
  bool changed = false;
  for (Node* n = b->paramNode()->next(); n != b->returnNode();) {
    Node* next = n->next();
    for (Block* sub : n->blocks()) changed |= visit(sub);
    if (std::find(std::begin(kinds), std::end(kinds), n->kind()) != std::end(kinds) && isIdentity(*n)) {
      n->output()->replaceAllUsesWith(n->input(0));
      n->destroy();
      changed = true;
    }
    n = next;
  }
  return changed;
}

class RemoveDropout final : public Pass {
 public:
  std::string_view name() const override { return "remove-dropout"; }
  std::string_view description() const override { return "drop dropout in eval mode (or with p = 0)"; }
  bool run(Graph& g) override { return visit(g.block()); }
};

}  // namespace

LLGA_REGISTER_PASS(RemoveDropout);

}  // namespace llga
