// propagate-layouts: decides, for every op output, in which layouts its
// producer may hand it to its readers, and writes the decision on the IR as
// `out_layouts` (one entry per output) for dumps, golden tests and the plan,
// which only applies it:
//   "any"      every reader accepts the backend's blocked layout (oneDNN's
//              nChw16c) and strided tensors: the producer keeps its primitive's
//              layout, no reorder to plain and back between them;
//   "blocked"  blocked accepted, strided not;
//   "strided"  dense in any dimension order (channels-last stays so);
//   "plain"    row-major contiguous, what a reader that looks at strides needs.
// An output is considered only when every reader is an op of the same block
// (not a block output, not read inside a nested block). Readers are asked
// through the context's Evaluator (the kernels that will run them), readers
// first, so a reader that passes values on (prim::ListConstruct) has heard
// from its own readers. Fusion subgraphs and nested blocks get their own
// decisions. A node where every output is "plain" carries no attribute.
//
//   Given:  %a = llga::FusionGroup_0[pattern="conv_post_ops"](%x, %w)
//           %b = llga::FusionGroup_1[pattern="conv_post_ops"](%a, %v)
//   Result: %a = llga::FusionGroup_0[pattern="conv_post_ops", out_layouts=["any"]](%x, %w)
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "ir/out_layouts.h"
#include "passes/pass.h"
#include "passes/pass_utils.h"

namespace llga {
namespace {

class PropagateLayouts final : public Pass {
 public:
  std::string_view name() const override { return "propagate-layouts"; }
  std::string_view description() const override {
    return "which outputs may stay blocked or strided between kernels, as out_layouts on the IR";
  }

  bool run(Graph& g) override {
    if (!evaluator()) {
      note("no evaluator in the pass context: every value stays plain");
      return false;
    }
    return visit(g.block());
  }

 private:
  bool visit(Block* b) {
    bool changed = false;
    std::vector<Node*> nodes;
    for (Node* n : b->nodes()) {
      nodes.push_back(n);
      for (Block* sub : n->blocks()) changed |= visit(sub);
      if (auto sub = n->subgraph()) changed |= visit(sub->block());
    }
    // Values the pass may not touch: block outputs and values read inside nested blocks.
    const std::unordered_set<const Value*> barred = valuesLeavingOps(b);
    std::unordered_map<const Node*, std::unique_ptr<LayoutQuery>> queries;
    for (Node* n : nodes)
      if (auto q = evaluator()->layoutQuery(*n)) queries.emplace(n, std::move(q));
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
      Node* n = *it;
      auto q = queries.find(n);
      if (q == queries.end()) continue;
      std::vector<OutLayout> layouts;
      for (size_t j = 0; j < n->outputs().size(); ++j) {
        const Value* v = n->output(j);
        // Python scalars (int, float, bool) have no layout.
        bool blocked = !barred.count(v) && v->hasUses() && v->type()->kind() != TypeKind::Simple, strided = blocked;
        for (const Use& u : v->uses()) {
          auto r = queries.find(u.user);
          const bool op = r != queries.end() && u.user->owningBlock() == b;
          blocked = blocked && op && r->second->acceptsBlocked(u.offset);
          strided = strided && op && r->second->acceptsStrided(u.offset);
        }
        if (blocked) q->second->allowBlockedOutput(j);
        if (strided) q->second->allowStridedOutput(j);
        layouts.push_back({blocked, strided});
      }
      changed |= setOutLayouts(*n, layouts);
    }
    return changed;
  }

};

}  // namespace

LLGA_REGISTER_PASS(PropagateLayouts);

}  // namespace llga
