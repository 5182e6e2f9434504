#include "passes/effects.h"

#include <string_view>

namespace llga {

bool hasSideEffects(const Node& n) {
  std::string_view ns = n.kind().ns(), name = n.kind().name();
  if (ns == "aten") {
    bool dunder = name.size() > 4 && name.substr(0, 2) == "__" && name.substr(name.size() - 2) == "__";
    if (!dunder && name.back() == '_') return true;  // in-place
    for (std::string_view k : {"append", "insert", "pop", "clear", "extend", "remove", "warn", "copy_", "_set_item",
                               "rand", "randn", "randint", "rand_like", "randn_like", "bernoulli", "normal", "multinomial"})
      if (name == k) return true;
  }
  if (ns == "prim") {
    for (std::string_view k : {"RaiseException", "Print", "SetAttr", "Store", "Load", "Enter", "Exit", "CallFunction",
                               "CallMethod", "Uninitialized"})
      if (name == k) return true;
  }
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

}  // namespace llga
