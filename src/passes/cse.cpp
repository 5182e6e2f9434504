// cse: a pure node computing what an earlier, visible node computes (same
// kind, same inputs, same attributes) is replaced by it.
//
// Only values that cannot be mutated are merged: scalars, strings, tuples of
// them; tensors only in graphs with no side-effecting node at all (two equal
// computations may produce buffers that are later written separately).
#include <unordered_map>

#include "ir/printer.h"
#include "ir/effects.h"
#include "passes/pass.h"

namespace llga {
namespace {

bool graphHasEffects(const Block* b) {
  for (const Node* n : b->nodes())
    if (hasSideEffects(*n)) return true;
  return false;
}

std::string keyOf(const Node& n) {
  std::string k = n.kind().toQualString() + "(";
  for (const Value* v : n.inputs()) k += std::to_string(reinterpret_cast<uintptr_t>(v)) + ",";
  k += ")[";
  for (const auto& [name, value] : n.attributes()) {
    k += std::string(name.name()) + "=";
    if (value.is<TensorRef>()) k += "tensor@" + std::to_string(reinterpret_cast<uintptr_t>(value.get<TensorRef>().get()));
    else if (value.is<std::shared_ptr<Graph>>()) return "";  // never merge subgraph nodes
    else k += value.annotation + formatAttr(value);
    k += ";";
  }
  k += "]";
  for (const Value* o : n.outputs()) k += o->type()->str() + ";";
  return k;
}

class Cse final : public Pass {
 public:
  std::string_view name() const override { return "cse"; }
  std::string_view description() const override { return "merge identical pure computations"; }
  bool run(Graph& g) override {
    allow_tensors_ = !graphHasEffects(g.block());
    std::vector<std::unordered_map<std::string, Node*>> scopes;
    return visit(g.block(), scopes);
  }

 private:
  bool mergeable(const Node& n) const {
    if (hasSideEffects(n) || !n.blocks().empty() || n.outputs().empty()) return false;
    for (const Value* o : n.outputs()) {
      const Type& t = *o->type();
      if (isMutableType(t)) return false;
      if (t.isTensor() && !allow_tensors_) return false;
    }
    return true;
  }

  bool visit(Block* b, std::vector<std::unordered_map<std::string, Node*>>& scopes) {
    bool changed = false;
    scopes.emplace_back();
    for (Node* n = b->paramNode()->next(); n != b->returnNode();) {
      Node* next = n->next();
      for (Block* sub : n->blocks()) changed |= visit(sub, scopes);
      if (mergeable(*n)) {
        std::string key = keyOf(*n);
        Node* twin = nullptr;
        if (!key.empty()) {
          for (auto it = scopes.rbegin(); it != scopes.rend() && !twin; ++it)
            if (auto f = it->find(key); f != it->end()) twin = f->second;
        }
        if (twin) {
          for (size_t i = 0; i < n->outputs().size(); ++i) n->output(i)->replaceAllUsesWith(twin->output(i));
          n->destroy();
          changed = true;
        } else if (!key.empty()) {
          scopes.back().emplace(std::move(key), n);
        }
      }
      n = next;
    }
    scopes.pop_back();
    return changed;
  }

  bool allow_tensors_ = false;
};

}  // namespace

LLGA_REGISTER_PASS(Cse);

}  // namespace llga
