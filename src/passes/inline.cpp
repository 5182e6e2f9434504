// inline: a prim::CallMethod on a submodule becomes the body of that
// submodule's method (the context's methods, by "<class>.<method>"), until no
// call is left. The callee's `self` is the submodule value, so its
// prim::GetAttr chains continue the caller's: freeze then resolves
// `self.layer1.0.conv1.weight` to the named weight.
//
//   Given:  %l1 : __torch__.Seq = prim::GetAttr[name="layer1"](%self)
//           %y : Tensor = prim::CallMethod[name="forward"](%l1, %x)
//   Result: (the body of __torch__.Seq.forward, with %self := %l1, %x := %x)
//           uses of %y read what that body returned
// Left alone, with a note: calls whose method graph is unknown.
#include "passes/pass.h"
#include "passes/pass_utils.h"

namespace llga {
namespace {

constexpr int kMaxDepth = 64;  // deeper nesting is a recursion, not a module tree

class Inline final : public Pass {
 public:
  std::string_view name() const override { return "inline"; }
  std::string_view description() const override { return "inline prim::CallMethod calls into submodule methods"; }

  bool run(Graph& g) override {
    bool changed = false;
    for (int depth = 0; depth < kMaxDepth; ++depth) {
      std::vector<Node*> calls;
      g.forEachNode([&](Node* n) {
        if (n->kind() == prim::CallMethod) calls.push_back(n);
      });
      bool round = false;
      for (Node* call : calls) round |= inlineCall(g, call);
      changed |= round;
      if (!round) return changed;
    }
    throw std::runtime_error("inline: calls still left after " + std::to_string(kMaxDepth) +
                             " rounds (recursive methods are not supported)");
  }

 private:
  bool inlineCall(Graph& g, Node* call) {
    const Type& self = *call->input(0)->type();
    const std::string method = call->attr(attr::name).get<std::string>();
    const std::string key = self.name() + "." + method;
    auto it = context().methods.find(key);
    if (self.kind() != TypeKind::Class || it == context().methods.end()) {
      if (reported_.insert(key).second) note(where(*call) + ": no graph for method " + key);
      return false;
    }
    const Graph& callee = *it->second;
    std::vector<Value*> outs = insertGraph(g, callee, call->inputs(), call);
    if (outs.size() != call->outputs().size())
      throw std::runtime_error(where(*call) + ": method " + key + " returns " + std::to_string(outs.size()) +
                               " values, the call expects " + std::to_string(call->outputs().size()));
    for (size_t i = 0; i < outs.size(); ++i) replaceKeepingName(g, call->output(i), outs[i]);
    call->destroy();
    return true;
  }

  std::set<std::string> reported_;
};

}  // namespace

LLGA_REGISTER_PASS(Inline);

}  // namespace llga
