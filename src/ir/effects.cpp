#include "ir/effects.h"

#include <string>
#include <string_view>
#include <unordered_set>

#include "ir/ops.h"

namespace llga {
namespace {

// aten::add_, aten::copy_, ... (not the dunder methods: aten::__and__).
bool isInPlaceKind(const Node& n) {
  std::string_view ns = n.kind().ns(), name = n.kind().name();
  if (ns != "aten" || name.empty()) return false;
  bool dunder = name.size() > 4 && name.substr(0, 2) == "__" && name.substr(name.size() - 2) == "__";
  return !dunder && name.back() == '_';
}

}  // namespace

bool hasSideEffects(const Node& n) {
  if (isInPlaceKind(n)) return true;
  std::string_view ns = n.kind().ns(), name = n.kind().name();
  if (ns == "aten") {
    for (std::string_view k : {"append", "insert", "pop", "clear", "extend", "remove", "warn", "copy_", "_set_item",
                               "rand", "randn", "randint", "rand_like", "randn_like", "bernoulli", "normal", "multinomial"})
      if (name == k) return true;
  }
  if (ns == "prim") {
    for (std::string_view k : {"RaiseException", "Print", "SetAttr", "Store", "Load", "Enter", "Exit", "CallFunction",
                               "CallMethod", "Uninitialized"})
      if (name == k) return true;
  }
  if (ns == "llga" && name == "Guard") return true;  // checks the call's inputs: never dropped
  for (const Block* b : n.blocks())
    for (const Node* inner : b->nodes())
      if (hasSideEffects(*inner)) return true;
  return false;
}

bool isMutableType(const Type& t) { return t.kind() == TypeKind::List || t.kind() == TypeKind::Dict; }

bool hasMutatingUse(const Value& v) {
  for (const Use& u : v.uses())
    if (hasSideEffects(*u.user)) return true;
  return false;
}

bool isAliasing(const Node& n) {
  return hasTrait(n.kind(), op_trait::View) || !n.blocks().empty();  // control flow passes values through
}

namespace {

bool containsInPlace(const Node& n) {
  if (isInPlaceKind(n)) return true;
  for (const Block* b : n.blocks())
    for (const Node* inner : b->nodes())
      if (containsInPlace(*inner)) return true;
  if (auto sub = n.subgraph())
    for (const Node* inner : sub->block()->nodes())
      if (containsInPlace(*inner)) return true;
  return false;
}

}  // namespace

bool writesInput(const Node& n, size_t input) {
  if (isInPlaceKind(n)) return input == 0;
  return (!n.blocks().empty() || n.subgraph() != nullptr) && containsInPlace(n);
}

const Use* findAliasUse(const Value& v, const std::function<bool(const Use&)>& hit) {
  std::unordered_set<const Value*> aliases{&v};
  std::vector<const Value*> work{&v};
  auto add = [&](const Value* x) {
    if (aliases.insert(x).second) work.push_back(x);
  };
  while (!work.empty()) {
    const Value* x = work.back();
    work.pop_back();
    for (const Use& u : x->uses()) {
      if (hit(u)) return &u;
      const Block* owner = u.user->owningBlock();
      if (owner && u.user == owner->returnNode() && owner->owningNode())
        for (const Value* out : owner->owningNode()->outputs()) add(out);
      if (isInPlaceKind(*u.user) && u.offset == 0)  // x.add_(y) returns x
        for (const Value* out : u.user->outputs()) add(out);
      if (!isAliasing(*u.user)) continue;
      for (const Value* out : u.user->outputs()) add(out);
      for (const Block* b : u.user->blocks())  // loop-carried and block parameters
        for (const Value* p : b->inputs()) add(p);
    }
  }
  return nullptr;
}

const Node* writerOf(const Value& v) {
  const Use* u = findAliasUse(v, [](const Use& u) { return writesInput(*u.user, u.offset); });
  return u ? u->user : nullptr;
}

const Value* aliasRoot(const Value& v) {
  const Value* r = &v;
  while (r->node()->kind() != prim::Param && isAliasing(*r->node()) && r->node()->blocks().empty() &&
         !r->node()->inputs().empty())
    r = r->node()->input(0);
  return r;
}

bool reachesGraphOutput(const Value& v) {
  const Node* ret = v.owningGraph()->block()->returnNode();
  return findAliasUse(v, [ret](const Use& u) { return u.user == ret; }) != nullptr;
}

std::vector<const Node*> inputWriters(const Graph& g) {
  std::vector<const Node*> written;
  for (const Value* in : g.inputs()) written.push_back(writerOf(*in));
  return written;
}

}  // namespace llga
