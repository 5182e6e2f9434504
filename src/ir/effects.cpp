#include "ir/effects.h"

#include <algorithm>
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
                               "Delete", "update", "setdefault", "popitem", "rand", "randn", "randint", "rand_like",
                               "randn_like", "bernoulli", "normal", "multinomial"})
      if (name == k) return true;
    // list.sort() and list.reverse() work on the list in place (a tensor's sort is pure)
    if ((name == "sort" || name == "reverse") && !n.inputs().empty() && n.input(0)->type()->kind() == TypeKind::List)
      return true;
  }
  if (ns == "prim") {
    for (std::string_view k : {"RaiseException", "Print", "SetAttr", "Store", "Load", "Enter", "Exit", "CallFunction",
                               "CallMethod", "Uninitialized"})
      if (name == k) return true;
  }
  if (ns == "llga" && name == "Guard") return true;  // checks the call's inputs: never dropped
  // An op that returns nothing (or None) is called for what it does: a
  // mutation this list does not name yet is kept, and reported if llga
  // cannot run it, rather than dropped as dead (a silent wrong answer).
  if (n.kind() != prim::Constant && n.blocks().empty() &&
      std::all_of(n.outputs().begin(), n.outputs().end(), [](const Value* o) { return o->type()->isSimple("NoneType"); }))
    return true;
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

namespace {

bool isContainerConstruct(const Node& n) {
  return n.kind() == prim::ListConstruct || n.kind() == prim::TupleConstruct || n.kind() == prim::DictConstruct;
}

// The element a value is of the list or tuple its node takes apart
// (prim::ListUnpack's k-th output, aten::__getitem__ at a constant index),
// or -1 when it is no such element or its index is not known here.
int64_t elementIndex(const Value& v) {
  const Node& n = *v.node();
  if (n.kind() == prim::ListUnpack || n.kind() == prim::TupleUnpack)
    for (size_t k = 0; k < n.outputs().size(); ++k)
      if (n.output(k) == &v) return static_cast<int64_t>(k);
  if (n.kind().toQualString() == "aten::__getitem__" && n.inputs().size() == 2 &&
      n.input(0)->type()->kind() == TypeKind::List && n.input(1)->node()->kind() == prim::Constant)
    if (const AttrValue* a = n.input(1)->node()->attributes().find(attr::value); a && a->is<int64_t>())
      return a->get<int64_t>();
  return -1;
}

}  // namespace

const Value* aliasRoot(const Value& v) {
  const Value* r = &v;
  int64_t element = -1;  // r's element of the container walked back to next, when known
  for (;;) {
    const Node& n = *r->node();
    if (n.kind() == prim::Param || !isAliasing(n) || !n.blocks().empty() || n.inputs().empty()) break;
    if (isContainerConstruct(n)) {
      // the element taken apart, not the first one (a list's first element
      // is not the memory of its second); the container itself otherwise
      if (n.kind() == prim::DictConstruct || element < 0 || element >= static_cast<int64_t>(n.inputs().size())) break;
      r = n.input(static_cast<size_t>(element));
      element = -1;
      continue;
    }
    if (n.kind() == prim::ListUnpack || n.kind() == prim::TupleUnpack || n.kind().toQualString() == "aten::__getitem__") {
      if (element >= 0) break;  // an element of an element: stop at the inner container
      element = elementIndex(*r);  // -1 (not known here): the walk stops at a container built in the block
    } else {
      element = -1;  // a view of a tensor: not an element
    }
    r = n.input(0);
  }
  return r;
}

namespace {

// Whether a value of this type can be or hold a tensor (what memory is
// about): not a number, bool, string, None or a list of such.
bool mayHoldTensor(const Type& t) {
  if (t.isTensor()) return true;
  for (const TypePtr& c : t.contained())
    if (c && mayHoldTensor(*c)) return true;
  return t.kind() == TypeKind::Class || t.kind() == TypeKind::Union || t.isSimple("Any");
}

}  // namespace

void memoryRoots(const Value& v, std::set<const Value*>& roots) {
  std::vector<const Value*> work{&v};
  std::unordered_set<const Value*> seen;
  while (!work.empty()) {
    const Value* r = work.back();
    work.pop_back();
    if (!seen.insert(r).second) continue;
    const Node* n = r->node();
    if (n->kind() == prim::Param || n->inputs().empty() || !n->blocks().empty()) {
      roots.insert(r);
    } else if (isAliasing(*n)) {
      for (const Value* in : n->inputs())  // not a view's sizes or dims: they share no memory
        if (mayHoldTensor(*in->type())) work.push_back(in);
    } else if (n->outputs().size() == 1 && writesInput(*n, 0)) {
      work.push_back(n->input(0));
    } else {
      roots.insert(r);
    }
  }
}

bool writesInto(const Node& k, const std::set<const Value*>& roots) {
  // writesInput, not hasSideEffects, decides: the latter does not look into a
  // fusion group's subgraph
  for (size_t i = 0; i < k.inputs().size(); ++i) {
    if (!writesInput(k, i)) continue;
    std::set<const Value*> written;
    memoryRoots(*k.input(i), written);
    for (const Value* r : written)
      if (roots.count(r)) return true;
  }
  return false;
}

const Node* writeBetween(const Value& v, const Node* after, const Node* before) {
  std::set<const Value*> read;
  memoryRoots(v, read);
  for (const Node* k = after->next(); k; k = k->next()) {
    if (k == before) return nullptr;
    if (k == after->owningBlock()->returnNode()) break;
    if (writesInto(*k, read)) return k;
  }
  return before;
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
