// mark-shape-only: ops whose results depend on the call's input shapes
// alone (not on any input's values) are marked shape_only=1. The runtime
// runs them on the first call of each input signature (the shapes, dtypes
// and ranks it keys its primitives and memory plans by) and keeps what the
// rest of the graph reads of them; later calls of that signature skip them.
// A traced graph keeps its shape arithmetic (aten::size, NumToTensor,
// floor_divide, ...) so that it runs at other shapes, and some models build
// whole tensors from it: Swin's shifted-window attention mask (new_zeros,
// nine fill_s of slices, a subtraction and two masked_fills; about 1.5 ms of
// a 56 ms call) was rebuilt on every call.
//
// A node is marked when it is pure apart from in-place writes (no
// randomness, prints, exceptions, list mutation, control flow) and every
// input is a constant, a marked value, or a tensor read for its metadata
// alone (aten::size, dim, numel, prim::dtype, device, the new_zeros/
// zeros_like family) whose shape is itself fixed by the input shapes (through
// ops whose shapes follow from shapes: not after nonzero, masked_select,
// unique, _pack_padded_sequence or an op llga does not know). Not marked:
// - a node whose result (or a view of it) the graph returns: the caller
//   would get, and could write into, the kept tensor;
// - mutable containers that something mutates;
// - any value sharing memory with one that an unmarked node writes into,
//   or that an unmarked node reads before a marked one writes into it (the
//   kept value is the one after the marked writes).
// Only the graph's top-level block: nested blocks run per trip or branch.
//
//   Given:  %n : int = aten::size(%x, %c0)
//           %z : Float(*, *) = aten::zeros(%sizes, ...)   (%sizes from %n)
//           %y = aten::add(%x, %z, %one)
//   Result: %n : int = aten::size[shape_only=1](%x, %c0)
//           %z : Float(*, *) = aten::zeros[shape_only=1](%sizes, ...)
//           %y = aten::add(%x, %z, %one)
#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "ir/effects.h"
#include "ir/ops.h"
#include "passes/pass.h"
#include "passes/pass_utils.h"

namespace llga {
namespace {

const Symbol kShapeOnly = Symbol::attr("shape_only");

bool named(const Node& n, std::initializer_list<std::string_view> kinds) {
  const std::string k = n.kind().toQualString();
  return std::find(kinds.begin(), kinds.end(), k) != kinds.end();
}

bool isTensor(const Value* v) { return v->type()->isTensor(); }

// Ops whose results' shapes follow from their inputs' shapes and their
// non-tensor arguments alone: the op groups of ir/ops.def, fusion groups
// (the fuser's patterns) and the kinds below. Anything else (nonzero,
// masked_select, unique, bincount, _pack_padded_sequence, bool indexing, an
// op llga does not know) ends the chain: a size read after it is not marked.
bool shapeFollowsShapes(const Node& n) {
  if (n.subgraph()) return true;
  if (named(n, {"aten::where"})) return n.inputs().size() == 3;  // where(cond) alone is nonzero
  if (named(n, {"aten::tensor_split"})) return !isTensor(n.input(1));  // split at a tensor's values
  if (hasTrait(n.kind(), op_trait::Eltwise | op_trait::Binary | op_trait::Conv | op_trait::Matmul |
                             op_trait::Pool | op_trait::SameShape | op_trait::View))
    return true;
  return named(n, {"aten::pad", "aten::constant_pad_nd", "aten::roll", "aten::cat", "aten::stack", "aten::addmm",
                   "aten::baddbmm", "aten::einsum", "aten::embedding", "aten::index_select", "aten::gather",
                   "aten::mean", "aten::sum", "aten::amax", "aten::amin", "aten::argmax", "aten::argmin",
                   "aten::max", "aten::min", "aten::masked_fill", "aten::tril", "aten::triu", "aten::repeat",
                   "aten::tile", "aten::flip", "aten::cumsum", "aten::rsub", "aten::pow", "aten::floor_divide",
                   "aten::remainder", "aten::eq", "aten::ne", "aten::lt", "aten::gt", "aten::le", "aten::ge",
                   "aten::logical_not", "aten::logical_and", "aten::logical_or", "aten::rsqrt", "aten::erf",
                   "aten::reciprocal", "aten::sin", "aten::cos", "aten::floor", "aten::ceil", "aten::sign",
                   "aten::fill_", "aten::copy_", "aten::masked_fill_", "aten::zero_", "aten::var", "aten::std",
                   "aten::norm", "aten::prod", "aten::pixel_shuffle", "aten::channel_shuffle",
                   "aten::upsample_nearest2d", "aten::upsample_bilinear2d", "aten::adaptive_max_pool2d"});
}

// The tensor whose memory v views, back through view ops of tensors (not
// through containers, which effects' aliasRoot also walks: a list's first
// element is not its memory); v itself if none.
const Value* viewRoot(const Value* v) {
  while (isTensor(v) && hasTrait(v->node()->kind(), op_trait::View) && v->node()->blocks().empty() &&
         !v->node()->inputs().empty() && isTensor(v->node()->input(0)) &&
         !named(*v->node(), {"prim::ListConstruct", "prim::TupleConstruct", "prim::DictConstruct"}))
    v = v->node()->input(0);
  return v;
}

// Whether a value of this type can hold a tensor (which a caller handed it
// could write into, and which views can share).
bool mayHoldTensor(const Type& t) {
  if (t.isTensor()) return true;
  for (const TypePtr& c : t.contained())
    if (c && mayHoldTensor(*c)) return true;
  return t.kind() == TypeKind::Class || t.kind() == TypeKind::Union || t.isSimple("Any");
}

// Side effects other than writing into the first input (randomness, prints,
// exceptions, list mutation, attribute writes, control flow): never marked.
bool onlyWritesItsInput(const Node& n) {
  if (!hasSideEffects(n)) return true;
  if (!n.blocks().empty() || n.kind().ns() != "aten") return false;
  const std::string_view name = n.kind().name();
  if (name.empty() || name.back() != '_') return false;  // append, insert, warn, rand, ...
  for (std::string_view random : {"uniform_", "normal_", "bernoulli_", "exponential_", "random_", "cauchy_",
                                  "log_normal_", "geometric_"})
    if (name == random) return false;
  return true;
}

class MarkShapeOnly final : public Pass {
 public:
  std::string_view name() const override { return "mark-shape-only"; }
  std::string_view description() const override {
    return "mark ops whose results depend on the input shapes alone (kept per input signature)";
  }

  bool run(Graph& g) override {
    Block* b = g.block();
    std::vector<Node*> nodes;
    std::unordered_map<const Node*, size_t> pos;
    for (Node* n = b->paramNode()->next(); n != b->returnNode(); n = n->next()) {
      pos[n] = nodes.size();
      nodes.push_back(n);
    }
    // Tensors (and lists and tuples of them) whose shapes the input shapes
    // fix: the inputs, then what ops without data-dependent shapes make of
    // such tensors and fixed values (a concat of a list of them too).
    std::unordered_set<const Value*> fixed_shape;
    for (const Value* in : b->inputs())
      if (isTensor(in)) fixed_shape.insert(in);

    std::unordered_set<const Node*> marked, excluded;
    auto isFixed = [&](const Value* v) { return v->node()->kind() == prim::Constant || marked.count(v->node()); };
    auto candidate = [&](const Node& n) {
      if (n.kind() == prim::Constant || !n.blocks().empty() || n.outputs().empty() || !onlyWritesItsInput(n))
        return false;
      for (size_t i = 0; i < n.inputs().size(); ++i) {
        const Value* in = n.input(i);
        if (isFixed(in)) continue;
        if (i == 0 && readsMetadataOnly(n) && fixed_shape.count(in)) continue;
        return false;
      }
      return true;
    };

    bool again = true;
    while (again) {
      again = false;
      marked.clear();
      fixed_shape.clear();
      for (const Value* in : b->inputs())
        if (isTensor(in)) fixed_shape.insert(in);
      for (Node* n : nodes) {
        if (!excluded.count(n) && candidate(*n)) marked.insert(n);
        if (shapeFollowsShapes(*n) && n->blocks().empty()) {
          bool fixed = true;
          for (const Value* in : n->inputs()) fixed &= fixed_shape.count(in) > 0 || isFixed(in);
          if (fixed)
            for (const Value* out : n->outputs())
              if (mayHoldTensor(*out->type())) fixed_shape.insert(out);
        }
      }
      // What the graph returns, mutable containers something mutates, and
      // memory written by an unmarked node or read before a marked write.
      for (Node* n : nodes) {
        if (!marked.count(n)) continue;
        for (const Value* out : n->outputs()) {
          const bool returned = mayHoldTensor(*out->type()) && reachesGraphOutput(*viewRoot(out));
          const bool mutated_container = isMutableType(*out->type()) && hasMutatingUse(*out);
          if (returned || mutated_container || !writesAreSafe(*out, marked, pos)) {
            excluded.insert(n);
            again = true;
          }
        }
      }
    }

    bool changed = false;
    for (Node* n : nodes) {
      const AttrValue* a = n->attributes().find(kShapeOnly);
      const bool want = marked.count(n) > 0;
      const bool has = a && a->is<int64_t>() && a->get<int64_t>() == 1;
      if (want && !has) {
        n->setAttr(kShapeOnly, AttrValue(int64_t{1}));
        changed = true;
      } else if (!want && a) {  // a mark this pass does not make (IR text written by hand) is not trusted
        n->attributes().remove(kShapeOnly);
        changed = true;
      }
    }
    return changed;
  }

 private:
  // Every node that writes into v's memory (through views and aliases) is
  // marked, and no unmarked node reads that memory before the last of them.
  // A use inside a nested block counts at its top-level node, and as a write
  // if it may write.
  static bool writesAreSafe(const Value& v, const std::unordered_set<const Node*>& marked,
                            const std::unordered_map<const Node*, size_t>& pos) {
    size_t last_write = 0, first_unmarked_read = SIZE_MAX;
    bool written = false;
    const Use* unsafe = findAliasUse(*viewRoot(&v), [&](const Use& u) {
      const Node* user = u.user;
      const Node* top = user;
      while (top && !pos.count(top) && top->owningBlock() && top->owningBlock()->owningNode())
        top = top->owningBlock()->owningNode();
      auto at = top ? pos.find(top) : pos.end();
      if (at == pos.end()) return false;  // the graph's return node (returned values are not marked)
      const bool nested = top != user;
      if (writesInput(*user, u.offset) || (nested && hasSideEffects(*user))) {
        if (nested || !marked.count(user)) return true;
        written = true;
        last_write = std::max(last_write, at->second);
      } else if (nested || !marked.count(user)) {
        first_unmarked_read = std::min(first_unmarked_read, at->second);
      }
      return false;
    });
    return !unsafe && (!written || first_unmarked_read == SIZE_MAX || first_unmarked_read > last_write);
  }
};

}  // namespace

LLGA_REGISTER_PASS(MarkShapeOnly);

}  // namespace llga
