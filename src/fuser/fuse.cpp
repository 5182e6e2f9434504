// fuse: partitions the graph into llga::FusionGroup nodes by the pattern
// table (fuser/patterns.cpp). Greedy, in program order, highest tier first:
// an anchor takes its entry's `then` op if the entry names one (an entry
// whose `then` op is not there is skipped: the next entry with that anchor
// is tried), then the chain of post-ops after it while each link is the only
// reader of the value before it (so no intermediate is needed outside) and
// backend/dnnl/post_ops.cpp can express it. Partitions stay inside one block (never
// across control flow) and never take side-effecting ops.
//
//   Given:  %c = aten::_convolution(%x, %w, %b, ...)     Result:  %r = llga::FusionGroup_0(%x, %y)
//           %a = aten::add(%c, %y, %one)                           with llga::FusionGroup_0 = graph(%x, %y):
//           %r = aten::relu(%a)                                      (the three ops, constants inside)
//
// x * sigmoid(x) in a chain is glued into one aten::silu inside the group
// (here, and nowhere else): the backend sees a swish post-op like any other.
//
// Every op left outside is reported as an Unfused record (kind, source,
// value, reason) in the pass's record.
#include <algorithm>
#include <map>
#include <set>

#include "fuser/patterns.h"
#include "ir/effects.h"
#include "passes/pass.h"
#include "passes/pass_utils.h"
#include "fuser/post_ops.h"

namespace llga {
namespace {

const Symbol kFusionGroup = Symbol::fromQualString("llga::FusionGroup");
const Symbol kPattern = Symbol::fromQualString("attr::pattern");
const Symbol kSigmoid = Symbol::fromQualString("aten::sigmoid");
const Symbol kSilu = Symbol::fromQualString("aten::silu");

// The patterns `n` anchors, in table order (highest tier first).
std::vector<const FusionPattern*> patternsFor(const Node& n) {
  const std::string k = n.kind().toQualString();
  std::vector<const FusionPattern*> out;
  for (const FusionPattern& p : fusionPatterns())
    if (std::find(p.anchors.begin(), p.anchors.end(), k) != p.anchors.end()) out.push_back(&p);
  return out;
}

// Ops the matcher never considers (bookkeeping, not compute): prim ops, sizes,
// and arithmetic on Python scalars (int, float, bool) in scripted code.
bool isBookkeeping(const Node& n) {
  if (n.kind().ns() == "prim" || n.kind().toQualString() == "aten::size" || n.kind().toQualString() == "aten::Int")
    return true;
  auto scalar = [](const Value* v) { return v->type()->kind() == TypeKind::Simple; };
  return std::all_of(n.inputs().begin(), n.inputs().end(), scalar) &&
         std::all_of(n.outputs().begin(), n.outputs().end(), scalar);
}

class Fuse final : public Pass {
 public:
  std::string_view name() const override { return "fuse"; }
  std::string_view description() const override { return "partition into llga::FusionGroup nodes by the pattern table"; }

  bool run(Graph& g) override {
    return visit(g, g.block());
  }

 private:
  bool visit(Graph& g, Block* b) {
    bool changed = false;
    std::vector<Node*> order;  // a snapshot: partitions remove nodes ahead of the walk
    for (Node* n : b->nodes()) order.push_back(n);
    for (Node* n : order) {
      if (gone_.count(n)) continue;
      for (Block* sub : n->blocks()) changed |= visit(g, sub);
      if (!isBookkeeping(*n)) changed |= tryPartition(g, n) != nullptr;
    }
    return changed;
  }

  // Absorbs the chain after `anchor`; returns the group node, or null.
  Node* tryPartition(Graph& g, Node* anchor) {
    std::vector<const FusionPattern*> ps = patternsFor(*anchor);
    if (ps.empty()) {
      if (anchor->kind().ns() == "aten") unfused(*anchor, "no fusion pattern for this op");
      return nullptr;
    }
    if (routedOff(anchor->kind().toQualString())) return unfused(*anchor, "routed off the fused path (route)");
    if (hasSideEffects(*anchor)) return unfused(*anchor, "it has side effects");
    if (anchor->outputs().size() != 1) return unfused(*anchor, "more than one output");
    if (auto dt = knownDtype(anchor->output()); dt && *dt != ScalarType::Float) return unfused(*anchor, "dtype is not float32");
    bool tried = false;
    for (const FusionPattern* cand : ps) {
      if (routedOff(cand->name) || ((context().int8 || context().bf16) && cand->fp32_only)) continue;
      Node* then = nullptr;
      if (cand->then && !(then = follower({anchor}, cand->then))) continue;
      tried = true;
      const std::map<Node*, Value*> silu_before = silu_of_;
      std::string stop;
      std::vector<Node*> chain = buildChain(anchor, then, *cand, stop);
      if (!cand->closing.empty() || cand->check) {
        std::string why;
        for (const std::string& kinds : cand->closing) {
          Node* n = follower(chain, kinds);
          if (!n) {
            why = "no " + kinds + " closes the chain";
            break;
          }
          chain.push_back(n);
        }
        if (why.empty() && cand->check) why = cand->check(std::vector<const Node*>(chain.begin(), chain.end()));
        if (why.empty() && cand->may_close)
          if (Node* n = follower(chain, cand->may_close)) {
            chain.push_back(n);
            if (cand->check && !cand->check(std::vector<const Node*>(chain.begin(), chain.end())).empty())
              chain.pop_back();
          }
        if (!why.empty()) {  // not this pattern: the anchor tries the next one
          silu_of_ = silu_before;
          continue;
        }
      }
      if (chain.size() == 1 && !cand->lone_ok)
        return unfused(*anchor, "a lone " + anchor->kind().toQualString() + " is not a partition" +
                                    (stop.empty() ? "" : " (" + stop + ")"));
      return makeGroup(g, chain, *cand);
    }
    return unfused(*anchor, tried ? "no pattern's ops follow it" : "routed off the fused path (route)");
  }

  // The anchor (and its `then` op) followed by the post-op chain the
  // pattern allows; `stop` says why the chain ended, when it says anything.
  std::vector<Node*> buildChain(Node* anchor, Node* then, const FusionPattern& pattern, std::string& stop) {
    const FusionPattern* p = &pattern;
    std::vector<Node*> chain = {anchor};
    if (then) chain.push_back(then);
    std::vector<PostOp> chain_ops;  // the chain's post-ops so far, translated
    Value* v = chain.back()->output();
    int post = 0;
    int max_post = p->max_post_ops;
    if (std::string(p->name) == "matmul_post_ops" && anchor->kind().toQualString() != "aten::linear")
      for (const Value* in : {anchor->input(0), anchor->input(1)}) {
        auto rank = in->type()->isTensor() ? in->type()->tensorInfo().rank() : std::nullopt;
        if (!rank || *rank < 2) {
          max_post = 0;  // 1-D (or unknown) operands: the product alone
          stop = "matmul operand %" + in->debugName() + " is not known to have 2+ dims";
        }
      }
    while (post < max_post) {
      Node* next = nullptr;
      std::vector<Node*> take;
      const auto& uses = v->uses();
      if (uses.size() == 2) {  // x * sigmoid(x)
        Node* s = nullptr;
        Node* m = nullptr;
        for (const Use& u : uses)
          if (u.user->kind().toQualString() == "aten::sigmoid") s = u.user;
          else if (u.user->kind().toQualString() == "aten::mul") m = u.user;
        if (s && m && !routedOff("aten::sigmoid") && !routedOff("aten::mul") && !routedOff("aten::silu") &&
            s->output()->uses().size() == 1 && s->output()->uses()[0].user == m && s->isBefore(m) &&
            s->owningBlock() == anchor->owningBlock() && m->owningBlock() == anchor->owningBlock()) {
          take = {s, m};
          next = m;
          silu_of_[m] = v;  // the group holds it as one aten::silu(v)
        }
      }
      if (!next) {
        if (uses.size() != 1) {
          if (uses.size() > 1) stop = "%" + v->debugName() + " is read by " + std::to_string(uses.size()) + " ops";
          break;
        }
        next = uses[0].user;
        if (next->owningBlock() != anchor->owningBlock() || next->kind() == prim::Return) break;
        if (routedOff(next->kind().toQualString())) {
          stop = next->kind().toQualString() + " is routed off the fused path";
          break;
        }
        PostOpMatch m = translatePostOp(*next, v);
        if (!m.ok()) {
          stop = m.why_not;
          break;
        }
        if (auto dt = knownDtype(next->output()); dt && *dt != ScalarType::Float) break;
        if (!p->selects && std::any_of(m.ops.begin(), m.ops.end(), [](const PostOp& op) {
              return op.kind == PostOp::Kind::Select;
            })) {
          stop = "no " + std::string(p->name) + " kernel applies " + next->kind().toQualString();
          break;
        }
        if (p->one_primitive)
          if (std::string why = sameAlgorithmTwice(chain_ops, m); !why.empty()) {
            stop = why;
            break;
          }
        const std::string link = next->kind().toQualString();
        const bool may_grow = p->chain_may_grow && (link == "aten::add" || link == "aten::mul");
        if (std::string why = operandFits(m, v, may_grow); !why.empty()) {
          stop = why;
          break;
        }
        take = {next};
        chain_ops.insert(chain_ops.end(), m.ops.begin(), m.ops.end());
      }
      // The group runs where its last op was: nothing between may write the
      // memory of what the group reads (a graph input written in place after
      // the conv read it).
      if (const Node* w = writeBetween(chain, next, take)) {
        stop = w->kind().toQualString() + " writes in place between %" + v->debugName() + " and its reader";
        break;
      }
      for (Node* t : take) chain.push_back(t);
      v = next->output();
      ++post;
    }
    return chain;
  }

  // The op after the chain's last (a pattern's `then` or closing op): the
  // only reader of its result, as first operand, of one of `kinds`
  // ("a|b"), in its block, float32, not routed off, with nothing writing in
  // place between the two; or null.
  Node* follower(const std::vector<Node*>& chain, const std::string& kinds) const {
    const auto& uses = chain.back()->output()->uses();
    if (uses.size() != 1 || uses[0].offset != 0) return nullptr;
    Node* n = uses[0].user;
    const std::string kind = n->kind().toQualString();
    bool listed = false;
    for (size_t at = 0; at <= kinds.size();) {
      const size_t bar = std::min(kinds.find('|', at), kinds.size());
      listed |= kinds.compare(at, bar - at, kind) == 0 && bar - at == kind.size();
      at = bar + 1;
    }
    if (!listed || n->owningBlock() != chain.front()->owningBlock() || routedOff(kind) || hasSideEffects(*n) ||
        n->outputs().size() != 1)
      return nullptr;
    if (auto dt = knownDtype(n->output()); !dt || *dt != ScalarType::Float) return nullptr;
    if (writeBetween(chain, n, {n})) return nullptr;
    return n;
  }

  // oneDNN 2.6 keeps one set of parameters per eltwise algorithm in a
  // primitive's post-ops: a second op of an algorithm already in the chain
  // with other parameters (relu6 then clamp: two clips) must not join it.
  static std::string sameAlgorithmTwice(const std::vector<PostOp>& chain_ops, const PostOpMatch& m) {
    for (size_t i = 0; i < m.ops.size(); ++i) {
      const PostOp& op = m.ops[i];
      if (op.kind != PostOp::Kind::Eltwise) continue;
      std::vector<PostOp> before(chain_ops);
      before.insert(before.end(), m.ops.begin(), m.ops.begin() + static_cast<std::ptrdiff_t>(i));
      for (const PostOp& had : before)
        if (had.kind == PostOp::Kind::Eltwise && had.alg == op.alg && (had.alpha != op.alpha || had.beta != op.beta))
          return op.name + " would be a second " + had.name + "-like post-op with other parameters (oneDNN 2.6 "
                 "applies one set per algorithm)";
    }
    return "";
  }

  // The first node strictly between the chain's last op and `to` (same block),
  // not taken into the chain, that writes into the memory of a value the
  // chain or `take` reads; or null. (Other writes, into a mask being built,
  // may stay between: the group reads nothing they change.) What a value's
  // memory is: effects' memoryRoots, every element of a list included (a
  // cat of a split of y moved past y.mul_(y) when only the list's first
  // element counted: graph fuzzer seed 414668), and an in-place op's result
  // (a chain reading x.unsqueeze(3) must not move past x.add_(c).add_(m)).
  static const Node* writeBetween(const std::vector<Node*>& chain, const Node* to, const std::vector<Node*>& take) {
    std::set<const Value*> read;
    for (const std::vector<Node*>* ns : {&chain, &take})
      for (const Node* n : *ns)
        for (const Value* in : n->inputs()) memoryRoots(*in, read);
    for (const Node* k = chain.back()->next(); k && k != to; k = k->next())
      if (std::find(take.begin(), take.end(), k) == take.end() && writesInto(*k, read)) return k;
    return nullptr;
  }

  // A binary post-op's operand must broadcast to the chain value without
  // making it grow (the primitive writes the chain's shape): known from the
  // recorded types, and checked again by the kernels on every call.
  // With `may_grow` (a commutative link of a chain that runs op by op), the
  // operand may instead broadcast the chain value up to its own shape.
  static std::string operandFits(const PostOpMatch& m, const Value* chain, bool may_grow = false) {
    for (const PostOp& op : m.ops) {
      if (!op.operand) continue;
      const Value* o = op.operand;
      if (!o->type()->isTensor() || !chain->type()->isTensor()) return "operand shapes unknown";
      auto os = o->type()->tensorInfo().concreteSizes(), cs = chain->type()->tensorInfo().concreteSizes();
      if (!os || !cs) return "the shape of %" + o->debugName() + " or %" + chain->debugName() + " is unknown";
      if (may_grow) {
        for (size_t i = 0; i < std::min(os->size(), cs->size()); ++i) {
          int64_t od = (*os)[os->size() - 1 - i], cd = (*cs)[cs->size() - 1 - i];
          if (od != 1 && cd != 1 && od != cd) return "%" + o->debugName() + " does not broadcast with the chain value";
        }
      } else {
        if (os->size() > cs->size()) return "%" + o->debugName() + " has more dims than the chain";
        for (size_t i = 0; i < os->size(); ++i) {
          int64_t od = (*os)[os->size() - 1 - i], cd = (*cs)[cs->size() - 1 - i];
          if (od != 1 && od != cd) return "%" + o->debugName() + " would broadcast the chain value";
        }
      }
      // float32, or a 0-dim number (PyTorch computes in float32 then too);
      // a select's mask bool.
      auto dt = knownDtype(o);
      if (op.kind == PostOp::Kind::Select) {
        if (dt != ScalarType::Bool) return "mask %" + o->debugName() + " is not known bool";
        continue;
      }
      bool zero_dim_number = os->empty() && dt && *dt != ScalarType::Bool && scalarTypeSize(*dt) <= 8 &&
                             *dt != ScalarType::ComplexHalf && *dt != ScalarType::ComplexFloat;
      if (!zero_dim_number && (!dt || *dt != ScalarType::Float))
        return "operand %" + o->debugName() + " is not known float32";
    }
    return "";
  }

  Node* makeGroup(Graph& g, const std::vector<Node*>& chain, const FusionPattern& p) {
    auto sub = std::make_shared<Graph>();
    std::unordered_map<const Value*, Value*> map;
    std::set<const Node*> members(chain.begin(), chain.end());
    Node* group = g.create(kFusionGroup, 0);
    for (Node* n : chain) {
      auto silu = silu_of_.find(n);
      if (n->kind() == kSigmoid && std::any_of(chain.begin(), chain.end(), [&](Node* m) {
            auto it = silu_of_.find(m);
            return it != silu_of_.end() && it->second == n->input(0) && n->output()->uses()[0].user == m;
          }))
        continue;  // glued into the aten::silu of its mul
      Node* c = sub->create(silu != silu_of_.end() ? kSilu : n->kind(), 0);
      std::vector<Value*> inputs = silu != silu_of_.end() ? std::vector<Value*>{silu->second} : n->inputs();
      for (Value* in : inputs) {
        auto it = map.find(in);
        if (it == map.end()) {
          Value* inner;
          // Non-tensor constants live inside the group; tensors (weights) stay
          // outside, where the plan binds them (by name, when PyTorch printed
          // only their first digits).
          if (in->node()->kind() == prim::Constant && !in->type()->isTensor()) {
            Node* k = sub->create(prim::Constant, 1);
            for (const auto& [name, val] : in->node()->attributes()) k->setAttr(name, val);
            k->output()->setType(in->type());
            sub->appendNode(k);
            inner = k->output();
          } else {
            inner = sub->addInput("", in->type());
            group->addInput(in);
          }
          if (!sub->findValue(in->debugName())) inner->setDebugName(in->debugName());
          it = map.emplace(in, inner).first;
        }
        c->addInput(it->second);
      }
      for (Value* o : n->outputs()) {
        Value* inner = c->addOutput(o->type());
        if (!sub->findValue(o->debugName())) inner->setDebugName(o->debugName());
        map[o] = inner;
      }
      if (silu == silu_of_.end())
        for (const auto& [k, v] : n->attributes()) c->setAttr(k, v);
      c->setScope(n->scope());
      c->setSource(n->source());
      sub->appendNode(c);
    }
    Node* last = chain.back();
    sub->registerOutput(map.at(last->output()));
    group->setAttr(attr::Subgraph, AttrValue(sub));
    group->setAttr(kPattern, AttrValue(std::string(p.name)));
    group->setScope(chain.front()->scope());
    group->setSource(chain.front()->source());
    Value* out = group->addOutput(last->output()->type());
    group->insertBefore(last);
    replaceKeepingName(g, last->output(), out);
    std::set<Node*> constants;
    for (Node* n : chain)
      for (Value* in : n->inputs())
        if (in->node()->kind() == prim::Constant && !in->type()->isTensor()) constants.insert(in->node());
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      gone_.insert(*it);
      (*it)->destroy();
    }
    for (Node* c : constants)  // copied into the group; the outer ones may now be unused
      if (!c->output()->hasUses()) {
        gone_.insert(c);
        c->destroy();
      }
    return group;
  }

  bool routedOff(const std::string& name) const { return context().route_off.count(name) > 0; }

  Node* unfused(const Node& n, std::string why) {
    reportUnfused(n, std::move(why));
    return nullptr;
  }

  std::set<Node*> gone_;
  std::map<Node*, Value*> silu_of_;  // mul(x, sigmoid(x)) taken into a chain -> x  // destroyed by partitioning: skipped in the walk's snapshot
};

}  // namespace

LLGA_REGISTER_PASS(Fuse);

}  // namespace llga
