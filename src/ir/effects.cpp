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

std::vector<const Node*> inputWriters(const Graph& g) {
  std::vector<const Node*> written;
  for (const Value* in : g.inputs()) {
    // Everything that may share memory with `in`, following views and
    // aliases forward (into nested blocks too, where they read it directly).
    std::unordered_set<const Value*> aliases{in};
    std::vector<const Value*> work{in};
    const Node* w = nullptr;
    while (!work.empty() && !w) {
      const Value* v = work.back();
      work.pop_back();
      for (const Use& u : v->uses()) {
        if (writesInput(*u.user, u.offset)) {
          w = u.user;
          break;
        }
        if (!isAliasing(*u.user)) continue;
        for (const Value* out : u.user->outputs())
          if (aliases.insert(out).second) work.push_back(out);
        for (const Block* b : u.user->blocks())  // loop-carried and block parameters
          for (const Value* p : b->inputs())
            if (aliases.insert(p).second) work.push_back(p);
      }
    }
    written.push_back(w);
  }
  return written;
}

}  // namespace llga
