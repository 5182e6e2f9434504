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
    sizes_.clear();
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
        // llga's layout decides, which is PyTorch's for row-major inputs;
        // calls in another order are refused (graph fuzzer seed 501131: a
        // where() of a channels-last input, then contiguous(channels_last)
        // and a write, answered as for a row-major input, 0.73 off)
        for (const Value* in : upstreamInputs(g, root)) guarded[const_cast<Value*>(in)] = kRowMajor;
        note(where(*n) + ": PyTorch's memory order of its input is not followed here; the graph is guarded to row-major "
             "inputs");
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
    // Ops whose result PyTorch lays out by the input's suggested memory
    // format (SuggestedFormat): channels-last (3d) where the input is, else
    // row-major (its CPU convolutions, batch norm and 2-d pooling; graph
    // fuzzer seed 501074).
    if (hasTrait(n->kind(), op_trait::SuggestedFormat)) {
      auto in = pytorchOrder(n->input(0), depth + 1);
      if (!in) return std::nullopt;
      if (rowMajor(*in)) return in;
      Order last = identity(in->size());
      if (in->size() == 4 || in->size() == 5) {
        last.erase(last.begin() + 1);
        last.push_back(1);
        if (*in == last) return last;
      }
      return identity(in->size());
    }
    // Ops whose result is a fresh row-major tensor whatever their inputs' order
    // (RowMajorResult).
    if (hasTrait(n->kind(), op_trait::RowMajorResult)) {
      if (auto sizes = knownSizes(v)) return identity(sizes->size());
      auto in = pytorchOrder(n->input(0), depth + 1);  // the same rank (linear, layer_norm, conv1d)
      if (in && (kind == "aten::linear" || kind == "aten::layer_norm" || kind == "aten::conv1d"))
        return rowMajor(*in) ? in : identity(in->size());
      return std::nullopt;
    }
    // The value of an if: both branches' order where they agree.
    if (n->kind() == prim::If && n->blocks().size() == 2) {
      const size_t k = static_cast<size_t>(std::find(n->outputs().begin(), n->outputs().end(), v) - n->outputs().begin());
      auto a = pytorchOrder(n->blocks()[0]->outputs()[k], depth + 1);
      auto b = pytorchOrder(n->blocks()[1]->outputs()[k], depth + 1);
      if (!a || !b || *a != *b) return std::nullopt;
      return a;
    }
    if (isFactory(*n)) {
      auto sizes = constantInts(n->input(0));
      if (!sizes) return std::nullopt;
      return identity(sizes->size());
    }
    // rsub(x, y) runs as sub(y, x) (a number y is not a tensor).
    if (hasTrait(n->kind(), op_trait::Eltwise | op_trait::Binary | op_trait::Pointwise) || kind == "aten::rsub") {
      // PyTorch's TensorIterator orders the result's dims by its operands'
      // strides, the first operand first, skipping the dims an operand
      // broadcasts. Here: a first operand of the result's rank known to have
      // no size-1 dim has distinct strides for every pair of dims, so its
      // order is the result's (x * w with x channels-last and w row-major is
      // channels-last: graph fuzzer seed 500944). Else the operands of the
      // result's rank, without those known to broadcast a dim when another
      // may not; they must agree.
      struct Operand {
        Order order;
        bool broadcasts;
        bool dense;  // sizes known, none of them 1
      };
      std::vector<Operand> ops;
      size_t rank = 0;
      bool row_major = false;  // an operand is row-major at a rank not known
      std::vector<const Value*> operands(n->inputs().begin(), n->inputs().end());
      if (kind == "aten::rsub" && operands.size() >= 2) std::swap(operands[0], operands[1]);
      for (const Value* in : operands) {
        if (in->type()->kind() != TypeKind::Tensor) continue;
        auto o = pytorchOrder(in, depth + 1);
        if (!o) return std::nullopt;
        if (rowMajor(*o)) {
          row_major = true;
          continue;
        }
        auto sizes = knownSizes(in);
        const bool broadcasts = sizes && std::count(sizes->begin(), sizes->end(), 1) > 0;
        const bool dense = sizes && std::count(sizes->begin(), sizes->end(), 1) == 0;
        rank = std::max(rank, o->size());
        ops.push_back({std::move(*o), broadcasts, dense});
      }
      if (row_major && ops.empty()) return kRowMajor;
      if (!row_major && !ops.empty() && ops.front().dense && ops.front().order.size() == rank)
        return ops.front().order;  // (an operand of unknown rank may make the result's rank larger)
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

  // The graph's tensor inputs v is computed from (through nested blocks).
  static std::vector<const Value*> upstreamInputs(const Graph& g, const Value* v) {
    std::unordered_set<const Value*> graph_inputs;
    for (const Value* in : g.inputs())
      if (in->type()->kind() == TypeKind::Tensor) graph_inputs.insert(in);
    std::vector<const Value*> found, todo = {v};
    std::unordered_set<const Value*> seen = {v};
    auto push = [&](const Value* x) {
      if (seen.insert(x).second) todo.push_back(x);
    };
    while (!todo.empty()) {
      const Value* at = todo.back();
      todo.pop_back();
      if (graph_inputs.count(at)) {
        found.push_back(at);
        continue;
      }
      const Node* p = at->node();
      for (const Value* in : p->inputs()) push(in);
      for (const Block* b : p->blocks())
        for (const Value* out : b->outputs()) push(out);
    }
    return found;
  }

  // v's sizes where its type, its example or its factory op tells, or an
  // elementwise op's operands (broadcast) or a copy's input do.
  std::optional<std::vector<int64_t>> knownSizes(const Value* v, int depth = 0) {
    if (auto s = v->type()->tensorInfo().concreteSizes()) return s;
    if (auto e = examples_.find(v); e != examples_.end()) return e->second->sizes;
    if (auto m = sizes_.find(v); m != sizes_.end()) return m->second;
    const Node* n = v->node();
    std::optional<std::vector<int64_t>> out;
    const std::string kind = n->kind().toQualString();
    if (isFactory(*n)) {
      out = constantInts(n->input(0));
    } else if (depth < 64 && (hasTrait(n->kind(), op_trait::Eltwise | op_trait::Binary | op_trait::Pointwise) ||
                              kind == "aten::rsub" || kind == "aten::contiguous" || kind == "aten::clone")) {
      std::vector<int64_t> shape;
      bool known = true;
      for (size_t i = 0; i < n->inputs().size() && known; ++i) {
        const Value* in = n->input(i);
        if (in->type()->kind() != TypeKind::Tensor) continue;
        if ((kind == "aten::contiguous" || kind == "aten::clone") && i > 0) break;
        auto s = knownSizes(in, depth + 1);
        if (!s) {
          known = false;
          break;
        }
        // broadcast, aligned at the last dim
        if (s->size() > shape.size()) shape.insert(shape.begin(), s->size() - shape.size(), 1);
        for (size_t k = 0; k < s->size(); ++k) {
          int64_t& d = shape[shape.size() - s->size() + k];
          const int64_t e = (*s)[k];
          if (d == 1) d = e;
          else if (e != 1 && e != d) known = false;
        }
      }
      if (known) out = shape;
    }
    sizes_[v] = out;
    return out;
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
  std::unordered_map<const Value*, std::optional<std::vector<int64_t>>> sizes_;  // knownSizes, memoised
};

}  // namespace

LLGA_REGISTER_PASS(ObservableLayouts);

}  // namespace llga
