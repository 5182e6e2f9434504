#include "ir/verifier.h"

#include <unordered_map>
#include <unordered_set>

#include "ir/ir.h"

namespace llga {
namespace {

class Verifier {
 public:
  explicit Verifier(const Graph& g) : g_(g) {}

  std::vector<std::string> run() {
    block(g_.block(), nullptr);
    checkUseCounts();
    return std::move(errors_);
  }

 private:
  void error(const Node* n, const std::string& what) {
    errors_.push_back(n ? what + "\n  at: " + n->str() : what);
  }

  void value(const Value* v, const Node* producer, size_t offset) {
    if (v->node() != producer || v->offset() != offset)
      error(producer, "%" + v->debugName() + " has a wrong producer or offset");
    if (g_.findValue(v->debugName()) != v) error(producer, "%" + v->debugName() + " is not registered under its name");
    if (!v->type()) error(producer, "%" + v->debugName() + " has no type");
    for (const Use& u : v->uses()) {
      if (u.offset >= u.user->inputs().size() || u.user->inputs()[u.offset] != v)
        error(producer, "use-list of %" + v->debugName() + " names a use that does not exist");
    }
    visible_.insert(v);
  }

  // Inputs must be visible here. Use-lists are checked in total: every Use
  // points at a real input slot (value()), and each value has exactly as many
  // uses as input slots that name it (checkUseCounts()).
  void inputs(const Node* n) {
    for (const Value* in : n->inputs()) {
      if (!visible_.count(in)) error(n, "input %" + in->debugName() + " is not defined before its use");
      ++slots_[in];
    }
  }

  void checkUseCounts() {
    for (const auto& [v, slots] : slots_)
      if (v->uses().size() != slots)
        error(v->node(), "use-list of %" + v->debugName() + " has " + std::to_string(v->uses().size()) +
                             " entries for " + std::to_string(slots) + " uses");
  }

  void block(const Block* b, const Node* owner) {
    if (b->owningNode() != owner) error(owner, "block has a wrong owning node");
    const Node* param = b->paramNode();
    for (size_t i = 0; i < param->outputs().size(); ++i) value(param->outputs()[i], param, i);
    std::vector<const Value*> defined;
    const Node* prev = param;
    for (const Node* n : b->nodes()) {
      if (n->owningBlock() != b) error(n, "node has a wrong owning block");
      if (n->prev() != prev) error(n, "broken node list");
      if (prev != param && !prev->isBefore(n)) error(n, "topological positions out of order");
      inputs(n);
      nodeShape(n);
      for (const Block* sub : n->blocks()) {
        auto saved = visible_;
        block(sub, n);
        visible_ = std::move(saved);
      }
      for (size_t i = 0; i < n->outputs().size(); ++i) value(n->outputs()[i], n, i);
      if (auto sg = n->subgraph()) {
        for (auto& e : verify(*sg)) error(n, "in subgraph: " + e);
      }
      prev = n;
    }
    if (b->returnNode()->prev() != prev) error(owner, "broken node list at block end");
    inputs(b->returnNode());
  }

  void nodeShape(const Node* n) {
    if (std::string e = checkNodeShape(*n); !e.empty()) error(n, e);
  }

  const Graph& g_;
  std::unordered_set<const Value*> visible_;
  std::unordered_map<const Value*, size_t> slots_;  // input slots naming each value
  std::vector<std::string> errors_;
};

}  // namespace

bool canHaveBlocks(const Node& n) {
  const std::string& k = n.kind().toQualString();
  return k == "prim::If" || k == "prim::Loop" || k == "prim::Closure" || k == "prim::With";
}

std::string checkNodeShape(const Node& node) {
  const Node* n = &node;
  const Symbol k = n->kind();
  if (k == prim::Constant) {
    if (!n->inputs().empty() || n->outputs().size() != 1) return "prim::Constant takes no inputs and has one output";
    const TypePtr& t = n->output()->type();
    if (!n->hasAttribute(attr::value) && !t->isSimple("NoneType") && t->kind() != TypeKind::Optional &&
        !t->isSimple("Function"))
      return "prim::Constant without a value must be None (or name a Function)";
  } else if (k == prim::If) {
    if (n->inputs().size() != 1 || n->blocks().size() != 2) return "prim::If needs one condition and two blocks";
    for (const Block* b : n->blocks())
      if (!b->inputs().empty() || b->outputs().size() != n->outputs().size())
        return "prim::If blocks take no inputs and return one value per output of the node";
  } else if (k == prim::Loop) {
    if (n->inputs().size() < 2 || n->blocks().size() != 1)
      return "prim::Loop needs (max_trip_count, condition, carried...) and one block";
    size_t carried = n->inputs().size() - 2;
    const Block* b = n->blocks()[0];
    if (n->outputs().size() != carried || b->inputs().size() != carried + 1 || b->outputs().size() != carried + 1)
      return "prim::Loop carries " + std::to_string(carried) +
             " values: it has one output per carried value, and its block takes (i, carried...) and returns "
             "(condition, carried...)";
  } else if (!n->blocks().empty() && !canHaveBlocks(*n)) {
    return n->kind().toQualString() + " cannot have blocks";
  }
  return "";
}

std::vector<std::string> verify(const Graph& g) { return Verifier(g).run(); }

void verifyOrThrow(const Graph& g) {
  auto errors = verify(g);
  if (errors.empty()) return;
  std::string msg = "IR verification failed:";
  for (const auto& e : errors) msg += "\n- " + e;
  throw VerifyError(msg);
}

}  // namespace llga
