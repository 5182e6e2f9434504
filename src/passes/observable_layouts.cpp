// observable-layouts: x.contiguous(), x.reshape(...) and x.flatten() return x
// itself (or a view of it) when x's strides allow and a copy otherwise, so
// whether a later in-place write reaches both depends on x's memory order.
// PyTorch lays out an op's result in its operand's order (an elementwise op
// of a transposed or channels-last tensor gives a transposed or
// channels-last result); llga's kernels write row-major unless every reader
// takes strided tensors. Where the difference can be seen (such an op reads
// the value or a view of it, and something writes into that memory), the
// value is laid out in PyTorch's order first, so the kernels' decisions
// (alias or copy) follow PyTorch's at every shape:
//   %r' = permute(clone(permute(%r, order), 0), inverse(order))
// PyTorch's order comes from the traced strides, else from the op that made
// the value (views permute their input's order, elementwise ops take their
// first full-rank operand's, contiguous/clone make it row-major) down to the
// graph inputs' example strides, or without examples (a scripted program
// compiled alone) row-major, the order of numpy's arrays. Values that are
// views of a graph input are left alone: the kernels see the caller's
// strides, as PyTorch does.
//
// A decision taken from an input's order holds for inputs in that order
// only: an llga::Guard[inputs, orders] checks each call's (a call in another
// order raises a specialization mismatch, and the Python layer compiles
// another specialization with that call's inputs as examples). Before, such
// a call was silently answered as the examples would have been.
//
//   Given:  %v : Float(2, 8, 12, strides=[96, 1, 8]) = aten::div(%t, %two)
//           %c = aten::contiguous(%v, %fmt); ... aten::mul_(%v, %k)
//   Result: %v' = aten::permute(aten::clone(aten::permute(%v, [0, 2, 1]), 0), [0, 2, 1])
//           %c = aten::contiguous(%v', %fmt); ... aten::mul_(%v', %k)
#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "ir/effects.h"
#include "ir/ops.h"
#include "passes/pass.h"
#include "passes/pass_utils.h"

namespace llga {
namespace {

using Order = std::vector<int64_t>;  // dims from the outermost in memory to the innermost

// Row-major at a rank not known (a scripted program's input without an
// example): permute and the like make it a rank's order.
const Order kRowMajor = {-1};
bool rowMajor(const Order& o) { return o == kRowMajor; }

Order identity(size_t rank) {
  Order o(rank);
  std::iota(o.begin(), o.end(), int64_t{0});
  return o;
}

// Dims by decreasing stride; equal strides (extent-1 dims) keep dim order.
Order orderOfStrides(const std::vector<int64_t>& strides) {
  Order o = identity(strides.size());
  std::stable_sort(o.begin(), o.end(), [&](int64_t a, int64_t b) {
    return strides[static_cast<size_t>(a)] > strides[static_cast<size_t>(b)];
  });
  return o;
}

// Ops that make a fresh row-major tensor of the sizes in their first input.
bool isFactory(const Node& n) {
  static const std::set<std::string> kinds = {"aten::zeros", "aten::ones", "aten::full", "aten::empty",
                                              "aten::rand", "aten::randn"};
  return !n.inputs().empty() && kinds.count(n.kind().toQualString());
}

class ObservableLayouts final : public Pass {
 public:
  std::string_view name() const override { return "observable-layouts"; }
  std::string_view description() const override {
    return "values whose aliasing a write can show get PyTorch's memory order";
  }

  bool run(Graph& g) override {
    static const Symbol kinds[] = {Symbol::fromQualString("aten::contiguous"), Symbol::fromQualString("aten::reshape"),
                                   Symbol::fromQualString("aten::flatten")};
    examples_.clear();
    size_t k = 0;
    for (Value* in : g.inputs())
      if (in->type()->kind() != TypeKind::Class && k < context().example_inputs.size())
        examples_[in] = context().example_inputs[k++];
    std::vector<Node*> found;
    g.forEachNode([&](Node* n) {
      if (std::find(std::begin(kinds), std::end(kinds), n->kind()) != std::end(kinds)) found.push_back(n);
    });
    bool changed = false;
    std::unordered_set<const Value*> done;
    std::map<Value*, Order> guarded;  // graph inputs whose order a decision took, by that order
    for (Node* n : found) {
      Value* root = const_cast<Value*>(aliasRoot(*n->input(0)));
      if (root->node()->kind() == prim::Param || root->type()->kind() != TypeKind::Tensor || done.count(root)) continue;
      const Node* writer = writerOf(*root);
      if (!writer) continue;
      done.insert(root);
      used_.clear();
      const std::optional<Order> order = pytorchOrder(root, 0);
      if (!order) {
        note(where(*n) + ": PyTorch's memory order of its input is unknown; whether it copies follows llga's layout");
        continue;
      }
      for (const auto& [param, o] : used_) guarded.emplace(param, o);
      if (rowMajor(*order) || *order == identity(order->size())) continue;
      relayout(g, root, *order);
      note(where(*n) + " and " + where(*writer) + ": the value they see is laid out in PyTorch's order first");
      changed = true;
    }
    if (!guarded.empty()) guard(g, guarded);
    return changed || !guarded.empty();
  }

 private:
  // PyTorch's memory order of v, as far as the graph tells.
  std::optional<Order> pytorchOrder(const Value* v, int depth) {
    if (depth > 64 || v->type()->kind() != TypeKind::Tensor) return std::nullopt;
    const TensorInfo& t = v->type()->tensorInfo();
    // Traced strides: the order at the trace, which a traced module keeps
    // for inputs in any order (its in-place ops were recorded on what
    // aliased then), so nothing is guarded.
    if (t.sizes && t.strides && t.strides->size() == t.sizes->size()) return orderOfStrides(*t.strides);
    const Node* n = v->node();
    if (n->kind() == prim::Param) {  // the example's, else row-major: guarded
      Value* param = const_cast<Value*>(v);
      auto e = examples_.find(v);
      if (e != examples_.end()) {
        if (e->second->strides.size() != e->second->sizes.size()) return std::nullopt;
        return used_[param] = orderOfStrides(e->second->strides);
      }
      if (!examples_.empty()) return std::nullopt;  // examples for some inputs only
      return used_[param] = kRowMajor;
    }
    const std::string kind = n->kind().toQualString();
    if (n->inputs().empty()) return std::nullopt;
    if (kind == "aten::contiguous" || kind == "aten::clone") {
      const bool preserve = kind == "aten::clone" && (n->inputs().size() < 2 || isNone(n->input(1)));
      const auto format = preserve ? std::optional<int64_t>(1)
                          : n->inputs().size() > 1 ? constantInt(n->input(1))
                                                   : std::optional<int64_t>(0);
      if (!format) return std::nullopt;
      // channels_last (2) and channels_last_3d (3) are 4-d and 5-d orders
      // whatever the input's (fuzzer seed 144350: a linear's result, whose
      // order is not followed, made contiguous channels-last)
      if (*format == 2 || *format == 3) {
        Order o = identity(*format == 2 ? 4 : 5);
        o.erase(o.begin() + 1);
        o.push_back(1);
        return o;
      }
      auto in = pytorchOrder(n->input(0), depth + 1);
      if (!in) {  // contiguous_format needs only the rank
        auto sizes = knownSizes(n->input(0));
        if (*format != 0 || !sizes) return std::nullopt;
        return identity(sizes->size());
      }
      if (rowMajor(*in)) return in;
      return *format == 1 ? in : identity(in->size());
    }
    if (kind == "aten::transpose" || kind == "aten::t") {
      auto in = pytorchOrder(n->input(0), depth + 1);
      if (!in) return std::nullopt;
      if (rowMajor(*in)) {
        auto sizes = knownSizes(n->input(0));
        if (!sizes) return std::nullopt;  // which dims a transpose swaps needs the rank
        in = identity(sizes->size());
      }
      if (kind == "aten::t" && in->size() < 2) return in;
      const auto a = kind == "aten::t" ? std::optional<int64_t>(0) : constantDim(n->input(1), in->size());
      const auto b = kind == "aten::t" ? std::optional<int64_t>(1) : constantDim(n->input(2), in->size());
      if (!a || !b) return std::nullopt;
      for (int64_t& d : *in) d = d == *a ? *b : d == *b ? *a : d;
      return in;
    }
    if (kind == "aten::permute") {
      auto in = pytorchOrder(n->input(0), depth + 1);
      const auto perm = constantInts(n->input(1));
      if (in && perm && rowMajor(*in)) in = identity(perm->size());
      if (!in || !perm || perm->size() != in->size()) return std::nullopt;
      std::vector<int64_t> where_new(in->size());  // input dim -> output dim
      for (size_t i = 0; i < perm->size(); ++i) {
        const int64_t r = static_cast<int64_t>(perm->size());
        const int64_t pd = (*perm)[i] < 0 ? (*perm)[i] + r : (*perm)[i];
        if (pd < 0 || pd >= r) return std::nullopt;
        where_new[static_cast<size_t>(pd)] = static_cast<int64_t>(i);
      }
      for (int64_t& d : *in) d = where_new[static_cast<size_t>(d)];
      return in;
    }
    // Views that keep their input's dims in its order (a slice with a step
    // keeps the strides' ranking), and a piece of a split or chunk taken out
    // of its list (a scripted program's pieces: graph fuzzer seed 454649,
    // split -> permute -> relu6 -> contiguous, then a write through the relu6:
    // the pieces' order was unknown, so llga's layout decided alias or copy)
    if (kind == "aten::slice" || kind == "aten::narrow" || kind == "aten::detach" || kind == "aten::alias")
      return pytorchOrder(n->input(0), depth + 1);
    if (n->kind() == prim::ListUnpack || kind == "aten::__getitem__") {
      const Node* src = n->input(0)->node();
      const std::string sk = src->kind().toQualString();
      if (!src->inputs().empty() && (sk == "aten::split" || sk == "aten::split_with_sizes" || sk == "aten::chunk" ||
                                     sk == "aten::unsafe_split" || sk == "aten::unsafe_chunk"))
        return pytorchOrder(src->input(0), depth + 1);
      return std::nullopt;
    }
    if (isFactory(*n)) {
      auto sizes = constantInts(n->input(0));
      if (!sizes) return std::nullopt;
      return identity(sizes->size());
    }
    if (hasTrait(n->kind(), op_trait::Eltwise | op_trait::Binary)) {
      // PyTorch's TensorIterator orders the result's dims by its operands'
      // strides, the first operand first, skipping the dims an operand
      // broadcasts. Here: the operands of the result's rank, without those
      // known to broadcast a dim when another may not; they must agree.
      struct Operand {
        Order order;
        bool broadcasts;
      };
      std::vector<Operand> ops;
      size_t rank = 0;
      bool row_major = false;  // an operand is row-major at a rank not known
      for (const Value* in : n->inputs()) {
        if (in->type()->kind() != TypeKind::Tensor) continue;
        auto o = pytorchOrder(in, depth + 1);
        if (!o) return std::nullopt;
        if (rowMajor(*o)) {
          row_major = true;
          continue;
        }
        auto sizes = knownSizes(in);
        const bool broadcasts = sizes && std::count(sizes->begin(), sizes->end(), 1) > 0;
        rank = std::max(rank, o->size());
        ops.push_back({std::move(*o), broadcasts});
      }
      if (row_major && ops.empty()) return kRowMajor;
      std::erase_if(ops, [rank](const Operand& o) { return o.order.size() != rank; });
      if (std::any_of(ops.begin(), ops.end(), [](const Operand& o) { return !o.broadcasts; }))
        std::erase_if(ops, [](const Operand& o) { return o.broadcasts; });
      if (ops.empty()) return std::nullopt;
      for (const Operand& o : ops)
        if (o.order != ops.front().order) return std::nullopt;
      // a row-major operand of unknown rank agrees with a row-major result
      // (of the result's rank or broadcast into it); with another order,
      // which one PyTorch follows depends on its rank
      if (row_major && ops.front().order != identity(rank)) return std::nullopt;
      return ops.front().order;
    }
    return std::nullopt;
  }

  // v's sizes where its type or its factory op tells.
  static std::optional<std::vector<int64_t>> knownSizes(const Value* v) {
    if (auto s = v->type()->tensorInfo().concreteSizes()) return s;
    const Node* n = v->node();
    if (!isFactory(*n)) return std::nullopt;
    return constantInts(n->input(0));
  }

  // Every reader of `root` reads root' = permute(clone(permute(root, order), 0), inverse).
  static void relayout(Graph& g, Value* root, const Order& order) {
    Order inverse(order.size());
    for (size_t i = 0; i < order.size(); ++i) inverse[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
    Node* after = root->node()->next();
    Emitter e(g, after, root->node());
    Value* seen = e.op("aten::permute", {root, e.ints(order)});
    Value* copy = e.op("aten::clone", {seen, e.i(0)});
    Value* laid = e.op("aten::permute", {copy, e.ints(inverse)}, root->type());
    const Node* first = seen->node();
    std::vector<Use> uses(root->uses().begin(), root->uses().end());
    for (const Use& u : uses)
      if (u.user != first) u.user->replaceInput(u.offset, laid);
  }

  // An llga::Guard[inputs, orders] on the inputs a decision took the order of
  // (an empty order: row-major at any rank), at the start of the graph.
  void guard(Graph& g, const std::map<Value*, Order>& guarded) {
    std::vector<Value*> tensors;  // graph inputs as the Guard numbers them (not the module)
    for (Value* in : g.inputs())
      if (in->type()->kind() != TypeKind::Class) tensors.push_back(in);
    AttrList inputs, orders;
    Node* node = g.create(Symbol::fromQualString("llga::Guard"), 0);
    for (size_t i = 0; i < tensors.size(); ++i) {
      const auto found = guarded.find(tensors[i]);
      if (found == guarded.end()) continue;
      inputs.emplace_back(static_cast<int64_t>(i));
      AttrList dims;
      if (!rowMajor(found->second))
        for (int64_t d : found->second) dims.emplace_back(d);
      orders.emplace_back(std::move(dims));
      node->addInput(tensors[i]);
    }
    node->setAttr(Symbol::attr("inputs"), AttrValue(std::move(inputs)));
    node->setAttr(Symbol::attr("orders"), AttrValue(std::move(orders)));
    g.block()->prependNode(node);
    note("the decisions hold for inputs in the memory order they were taken from (" +
         std::to_string(node->inputs().size()) + " input(s)), guarded by llga::Guard");
  }

  std::unordered_map<const Value*, TensorRef> examples_;
  std::map<Value*, Order> used_;  // the graph inputs whose order pytorchOrder took, and that order
};

}  // namespace

LLGA_REGISTER_PASS(ObservableLayouts);

}  // namespace llga
