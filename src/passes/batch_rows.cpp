// batch-rows: proves that a graph computes every item of a batch alone, so
// that the runtime may run a large batch as several smaller calls (whichever
// chunk it measures fastest) and concatenate their outputs, with the same
// result as one call. The proof follows each value's "rows": the dim along
// which its slices belong to one batch item each, starting from dim 0 of
// every tensor input, through a rule per op kind (convolutions, pooling and
// linears keep an image's rows apart; a softmax over the batch dim, a view
// with a traced-in batch size or a reduction across images do not). An op
// with no rule that reads rows ends the proof. Where it holds with every
// output's rows at dim 0, the return node records it; otherwise a note says
// which op stopped it.
//
//   Given:  %y = aten::_convolution(%x, %w, ...); %z = aten::flatten(%y, 1, -1)
//           return (%z)
//   Result: return[batch_dim=0] (%z)
//
//   Given:  %m = aten::mean(%x, [0], false, %none); return (%m)
//   Result: return (%m)   note: aten::mean (%m) reduces over the batch dim
#include <algorithm>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/effects.h"
#include "ir/ops.h"
#include "ir/precision.h"
#include "passes/pass.h"
#include "passes/pass_utils.h"

namespace llga {
namespace {

// What a value is with respect to the batch.
struct Rows {
  enum Kind {
    Invariant,  // the same whichever items are in the batch (constants, weights, scalars)
    Dim,        // a tensor whose slices along `dim` are one batch item each
    Count,      // an int (or 0-dim tensor) equal to the number of items
    List,       // a list or tuple: `items` say what each element is
    Mixed,      // depends on several items at once, or unknown
  } kind = Invariant;
  int64_t dim = 0;
  std::vector<Rows> items;
  bool each = false;  // List: of any length, every element is items[0] (aten::chunk's pieces)

  static Rows at(int64_t d) { return {Dim, d, {}}; }
  static Rows count() { return {Count, 0, {}}; }
  static Rows listOf(Rows item) { return {List, 0, {std::move(item)}, true}; }
  const Rows* item(size_t i) const {
    if (kind != List) return nullptr;
    if (each) return &items[0];
    return i < items.size() ? &items[i] : nullptr;
  }
  bool invariant() const {
    if (kind == List) return std::all_of(items.begin(), items.end(), [](const Rows& r) { return r.invariant(); });
    return kind == Invariant;
  }
};

std::optional<size_t> rankOf(const Value* v) {
  if (!v->type()->isTensor()) return std::nullopt;
  return v->type()->tensorInfo().rank();
}

// The length of an int[] given as a constant or a prim::ListConstruct.
std::optional<size_t> listLength(const Value* v) {
  if (auto c = constantInts(v)) return c->size();
  if (v->node()->kind() == prim::ListConstruct) return v->node()->inputs().size();
  return std::nullopt;
}

std::optional<int64_t> knownExtent(const Value* v, int64_t dim) {
  if (!v->type()->isTensor()) return std::nullopt;
  const auto& sizes = v->type()->tensorInfo().sizes;
  if (!sizes || dim < 0 || dim >= static_cast<int64_t>(sizes->size())) return std::nullopt;
  return (*sizes)[static_cast<size_t>(dim)];
}

const std::set<std::string>& randomKinds() {
  static const std::set<std::string> k = {"aten::rand",        "aten::randn",  "aten::rand_like", "aten::randn_like",
                                          "aten::randint",     "aten::randint_like", "aten::bernoulli", "aten::normal",
                                          "aten::multinomial", "aten::uniform_", "aten::normal_",  "aten::randperm",
                                          "aten::dropout",     "aten::feature_dropout"};
  return k;
}

// Ops whose output has input 0's rows when every other input is invariant.
const std::set<std::string>& passThroughKinds() {
  static const std::set<std::string> k = {"aten::contiguous", "aten::clone", "aten::detach", "aten::to",
                                          "aten::type_as", "aten::quantize_per_tensor", "aten::dequantize",
                                          "aten::quantize_per_channel", "aten::hardswish", "aten::log_sigmoid",
                                          "aten::reciprocal", "aten::rsqrt", "aten::sin", "aten::cos", "aten::erf",
                                          "aten::pow", "aten::softplus", "aten::prelu", "aten::sign",
                                          "aten::floor", "aten::ceil", "aten::alias", "aten::float",
                                          "aten::lgamma", "aten::digamma", "aten::nan_to_num"};
  return k;
}

// Elementwise ops whose every tensor operand broadcasts against the others
// (besides the Binary group): rows may come in any of them.
const std::set<std::string>& broadcastingKinds() {
  static const std::set<std::string> k = {"aten::where", "aten::masked_fill", "aten::clamp", "aten::pow",
                                          "aten::atan2", "aten::fmod", "aten::remainder", "aten::lerp"};
  return k;
}

// Per-image spatial ops on a batched input of rank `spatial + 2`.
const std::unordered_map<std::string, size_t>& imageOps() {
  static const std::unordered_map<std::string, size_t> k = {
      {"aten::upsample_nearest1d", 1}, {"aten::upsample_nearest2d", 2}, {"aten::upsample_nearest3d", 3},
      {"aten::upsample_linear1d", 1},  {"aten::upsample_bilinear2d", 2}, {"aten::upsample_trilinear3d", 3},
      {"aten::upsample_bicubic2d", 2}, {"aten::adaptive_max_pool2d", 2}, {"aten::adaptive_avg_pool1d", 1},
      {"aten::adaptive_avg_pool3d", 3}, {"aten::adaptive_max_pool1d", 1}, {"aten::pixel_shuffle", 2},
      {"aten::pixel_unshuffle", 2},     {"aten::channel_shuffle", 2}};
  return k;
}

class BatchRows final : public Pass {
 public:
  std::string_view name() const override { return "batch-rows"; }
  std::string_view description() const override {
    return "prove each batch item is computed alone (batch_dim on the return: the runtime may split a batch)";
  }

  bool run(Graph& g) override {
    rows_.clear();
    stopped_.clear();
    for (Value* in : g.inputs()) {
      if (!in->type()->isTensor()) continue;  // self, ints, floats: the same for every chunk
      auto r = rankOf(in);
      if (r && *r == 0) return stop("input %" + in->debugName() + " is a 0-dim tensor", g);
      rows_[in] = Rows::at(0);
    }
    block(*g.block());
    if (!stopped_.empty()) return stop(stopped_, g);
    for (const Value* out : g.outputs())
      if (!batchedOutput(of(out))) return stop("output %" + out->debugName() + " is not split along dim 0", g);
    const bool had = g.returnNode()->hasAttribute(attrBatchDim());
    g.returnNode()->setAttr(attrBatchDim(), AttrValue(int64_t{0}));
    return !had;
  }

 private:
  static Symbol attrBatchDim() { return Symbol::attr("batch_dim"); }

  bool stop(const std::string& why, Graph& g) {
    note("not split by batch: " + why);
    Node* ret = g.returnNode();
    if (!ret->hasAttribute(attrBatchDim())) return false;
    ret->attributes().remove(attrBatchDim());
    return true;
  }

  static bool batchedOutput(const Rows& r) {
    if (r.kind == Rows::List) return !r.items.empty() && std::all_of(r.items.begin(), r.items.end(), batchedOutput);
    // (a list from aten::chunk of any length is fine too: every element has rows at dim 0)
    return r.kind == Rows::Dim && r.dim == 0;
  }

  Rows of(const Value* v) const {
    auto it = rows_.find(v);
    return it == rows_.end() ? Rows{} : it->second;
  }

  void block(const Block& b) {
    for (const Node* n : b.nodes()) {
      if (!stopped_.empty()) return;
      visit(*n);
      // A rule covers every output of a node that reads rows (an output left
      // out would pass for invariant: adaptive_max_pool2d's indices).
      bool reads_rows = false;
      for (const Value* in : n->inputs()) reads_rows |= !of(in).invariant();
      if (reads_rows && stopped_.empty())
        for (const Value* out : n->outputs())
          if (!rows_.count(out)) return mixed(*n, "gives an output no batch rule covers");
    }
  }

  void mixed(const Node& n, const std::string& why) {
    if (stopped_.empty()) stopped_ = where(n) + ": " + why;
  }

  void set(const Node& n, Rows r, size_t out = 0) {
    if (out < n.outputs().size()) rows_[n.output(out)] = std::move(r);
  }

  bool othersInvariant(const Node& n, size_t keep) const {
    for (size_t i = 0; i < n.inputs().size(); ++i)
      if (i != keep && !of(n.input(i)).invariant()) return false;
    return true;
  }

  void visit(const Node& n) {
    const std::string kind = n.kind().toQualString();
    bool all_invariant = true;
    for (const Value* in : n.inputs()) all_invariant &= of(in).invariant();
    if (dynamicActivation(n) && !all_invariant)  // llga.quantize(mode="dynamic"), PyTorch's dynamic linears
      return mixed(n, "quantizes its activation with one scale over the whole call (dynamic int8)");
    if (n.subgraph()) return group(n);
    if (!n.blocks().empty()) return control(n);
    if (randomKinds().count(kind)) return mixed(n, "draws random numbers (a chunk would draw its own)");
    if (hasSideEffects(n) && !all_invariant) return mixed(n, "has side effects on batch rows");
    if (all_invariant && kind != "aten::size") return;  // outputs invariant (the default)
    const Rows x = n.inputs().empty() ? Rows{} : of(n.input(0));
    const std::optional<size_t> rank = n.inputs().empty() ? std::nullopt : rankOf(n.input(0));
    const uint32_t traits = opTraits(n.kind());

    if (kind == "prim::ListConstruct" || kind == "prim::TupleConstruct") {
      Rows r{Rows::List, 0, {}};
      for (const Value* in : n.inputs()) r.items.push_back(of(in));
      return set(n, r);
    }
    if (kind == "prim::ListUnpack" || kind == "prim::TupleUnpack") {
      if (x.kind != Rows::List || (!x.each && x.items.size() != n.outputs().size()))
        return mixed(n, "unpacks an unknown list");
      for (size_t i = 0; i < n.outputs().size(); ++i) set(n, *x.item(i), i);
      return;
    }
    if (kind == "prim::TupleIndex" || kind == "aten::__getitem__") {
      auto i = constantInt(n.input(1));
      const Rows* item = i && *i >= 0 ? x.item(static_cast<size_t>(*i)) : nullptr;
      if (!item) return mixed(n, "indexes a list of batch rows");
      return set(n, *item);
    }
    if (kind == "aten::size") {
      if (n.inputs().size() == 2) {
        if (x.kind != Rows::Dim) return;  // invariant
        auto d = constantDim(n.input(1), rank);
        if (!d) return mixed(n, "asks for the size of an unknown dim");
        return set(n, *d == x.dim ? Rows::count() : Rows{});
      }
      if (x.kind != Rows::Dim) return;
      if (!rank) return mixed(n, "asks for the sizes of a tensor of unknown rank");
      Rows r{Rows::List, 0, std::vector<Rows>(*rank)};
      r.items[static_cast<size_t>(x.dim)] = Rows::count();
      return set(n, r);
    }
    if (kind == "prim::NumToTensor" || kind == "aten::Int" || kind == "aten::ScalarImplicit") {
      if (x.kind == Rows::Count) return set(n, x);
      return mixed(n, "turns batch rows into a number");
    }
    if (kind == "llga::Guard") return;  // checks rank, dtype and memory order, which chunks keep

    if (x.kind == Rows::Count || x.kind == Rows::List) {
      if (kind == "aten::cat" || kind == "aten::stack") return concat(n, kind == "aten::stack");
      return mixed(n, "computes with the batch size");
    }
    if (kind == "aten::expand") return expand(n);
    if (kind == "aten::embedding") {  // embedding(weight, indices): a row of the table per index
      const Rows idx = of(n.input(1));
      if (!x.invariant() || idx.kind != Rows::Dim || !othersInvariant(n, 1)) return mixed(n, "looks up batch rows");
      return set(n, idx);
    }
    if (x.kind != Rows::Dim) {
      if (opTraits(n.kind()) & op_trait::Binary || broadcastingKinds().count(kind)) return binaryLike(n, kind);
      return mixed(n, "no batch rule for " + kind);
    }
    const int64_t d = x.dim;

    if (kind == "aten::softmax" || kind == "aten::log_softmax") {
      auto dim = constantDim(n.input(1), rank);
      if (!othersInvariant(n, 0) || !dim || *dim == d) return mixed(n, "normalizes over the batch dim");
      return set(n, x);
    }
    if (kind == "aten::layer_norm") {
      auto shape = constantInts(n.input(1));
      if (!othersInvariant(n, 0) || !shape || !rank || d >= static_cast<int64_t>(*rank - shape->size()))
        return mixed(n, "normalizes over the batch dim");
      return set(n, x);
    }
    if (kind == "aten::group_norm") {
      if (!othersInvariant(n, 0) || d != 0 || !rank || *rank < 2) return mixed(n, "normalizes over the batch dim");
      return set(n, x);
    }
    if (kind == "aten::batch_norm") {
      auto training = constantInt(n.input(5));
      if (!othersInvariant(n, 0) || !training || *training != 0 || d == 1)
        return mixed(n, "takes batch statistics (training mode)");
      return set(n, x);
    }
    if (traits & (op_trait::Eltwise | op_trait::SameShape) || passThroughKinds().count(kind)) {
      if (othersInvariant(n, 0)) return set(n, x);
      if (broadcastingKinds().count(kind)) return binaryLike(n, kind);
      return mixed(n, "reads batch rows in a second operand");  // prelu's weight, to()'s other, ...
    }
    if (traits & op_trait::Binary || broadcastingKinds().count(kind)) return binaryLike(n, kind);
    if (traits & op_trait::Conv) {
      auto wrank = rankOf(n.input(1));
      if (!othersInvariant(n, 0) || d != 0 || !rank || !wrank || *rank != *wrank)
        return mixed(n, "convolves across the batch dim (or an unbatched input)");
      return set(n, x);
    }
    if (traits & op_trait::Pool || imageOps().count(kind)) {
      size_t spatial = imageOps().count(kind) ? imageOps().at(kind) : 0;
      if (!spatial) spatial = kind.find("1d") != std::string::npos ? 1 : kind.find("3d") != std::string::npos ? 3 : 2;
      if (!othersInvariant(n, 0) || d != 0 || !rank || *rank != spatial + 2)
        return mixed(n, "pools across the batch dim (or an unbatched input)");
      for (size_t i = 0; i < n.outputs().size(); ++i) set(n, x, i);  // values and (max) indices
      return;
    }
    if (traits & op_trait::Matmul) return matmul(n, kind);
    if (kind == "aten::mean" || kind == "aten::sum" || kind == "aten::amax" || kind == "aten::amin" ||
        kind == "aten::logsumexp" || kind == "aten::norm")
      return reduce(n);
    if (kind == "aten::flatten") {
      if (!rank) return mixed(n, "flattens a tensor of unknown rank");
      auto start = constantDim(n.input(1), rank), end = constantDim(n.input(2), rank);
      if (*rank == 0) return mixed(n, "flattens a 0-dim tensor");
      if (!start || !end) return mixed(n, "flattens unknown dims");
      if (d < *start) return set(n, x);
      if (d > *end) return set(n, Rows::at(d - (*end - *start)));
      if (*start == *end) return set(n, x);
      return mixed(n, "merges the batch dim with others");
    }
    if (kind == "aten::view" || kind == "aten::reshape") {
      const Rows sizes = of(n.input(1));
      if (d != 0 || sizes.kind != Rows::List || sizes.items.empty() || sizes.items[0].kind != Rows::Count)
        return mixed(n, "reshapes with the batch size written in (trace at batch 1 with a dynamic size, or "
                        "use flatten)");
      for (size_t i = 1; i < sizes.items.size(); ++i)
        if (!sizes.items[i].invariant()) return mixed(n, "reshapes with the batch size in a later dim");
      return set(n, x);
    }
    if (kind == "aten::permute") {
      auto dims = constantInts(n.input(1));
      if (!dims || !rank || dims->size() != *rank) return mixed(n, "permutes unknown dims");
      for (size_t i = 0; i < dims->size(); ++i) {
        int64_t p = (*dims)[i] < 0 ? (*dims)[i] + static_cast<int64_t>(*rank) : (*dims)[i];
        if (p == d) return set(n, Rows::at(static_cast<int64_t>(i)));
      }
      return mixed(n, "permutes unknown dims");
    }
    if (kind == "aten::transpose") {
      auto a = constantDim(n.input(1), rank), b = constantDim(n.input(2), rank);
      if (!a || !b) return mixed(n, "transposes unknown dims");
      return set(n, Rows::at(d == *a ? *b : d == *b ? *a : d));
    }
    if (kind == "aten::slice" && wholeSlice(n) && othersInvariant(n, 0)) return set(n, x);  // x[:, ...]
    if (kind == "aten::select" || kind == "aten::slice" || kind == "aten::narrow") {
      auto dim = constantDim(n.input(1), rank);
      if (!othersInvariant(n, 0) || !dim || *dim == d) return mixed(n, "selects batch items");
      return set(n, Rows::at(kind == "aten::select" && *dim < d ? d - 1 : d));
    }
    if (kind == "aten::unsqueeze") {
      auto dim = constantDim(n.input(1), rank ? std::optional<size_t>(*rank + 1) : std::nullopt);
      if (!dim) return mixed(n, "unsqueezes an unknown dim");
      return set(n, Rows::at(*dim <= d ? d + 1 : d));
    }
    if (kind == "aten::squeeze" && n.inputs().size() == 2) {
      auto dim = constantDim(n.input(1), rank);
      if (!dim || *dim == d || knownExtent(n.input(0), *dim) != 1) return mixed(n, "squeezes the batch dim");
      return set(n, Rows::at(*dim < d ? d - 1 : d));
    }
    if (kind == "aten::pad" || kind == "aten::constant_pad_nd" || kind == "aten::reflection_pad2d" ||
        kind == "aten::replication_pad2d") {
      auto pads = listLength(n.input(1));  // two per padded dim, from the last dim back
      if (!othersInvariant(n, 0) || !pads || !rank || *pads % 2 ||
          d >= static_cast<int64_t>(*rank) - static_cast<int64_t>(*pads / 2))
        return mixed(n, "pads the batch dim");
      return set(n, x);
    }
    if (kind == "aten::chunk" || kind == "aten::split" || kind == "aten::split_with_sizes" ||
        kind == "aten::tensor_split" || kind == "aten::unbind") {
      const size_t dim_at = kind == "aten::unbind" ? 1 : 2;
      const int64_t dim = dim_at < n.inputs().size() ? constantDim(n.input(dim_at), rank).value_or(d) : d;
      if (!othersInvariant(n, 0) || dim == d) return mixed(n, "splits along the batch dim (or an unknown dim)");
      return set(n, Rows::listOf(Rows::at(kind == "aten::unbind" && dim < d ? d - 1 : d)));
    }
    mixed(n, "no batch rule for " + kind);
  }

  // Elementwise ops with broadcasting: every operand with rows must put them
  // at the same dim of the result, and an invariant operand may only
  // broadcast along it (extent 1 or absent).
  void binaryLike(const Node& n, const std::string& kind) {
    std::vector<const Value*> tensors;
    for (const Value* in : n.inputs()) {
      const Rows r = of(in);
      if (in->type()->isTensor()) {
        tensors.push_back(in);
        if (r.kind != Rows::Dim && r.kind != Rows::Invariant) return mixed(n, "mixes batch rows with the batch size");
      } else if (!r.invariant()) {
        return mixed(n, "computes with the batch size");
      }
    }
    size_t out_rank = 0;
    for (const Value* t : tensors) {
      auto r = rankOf(t);
      if (!r) return mixed(n, "broadcasts a tensor of unknown rank");
      out_rank = std::max(out_rank, *r);
    }
    std::optional<int64_t> at;
    for (const Value* t : tensors) {
      const Rows r = of(t);
      if (r.kind != Rows::Dim) continue;
      const int64_t aligned = r.dim + static_cast<int64_t>(out_rank - *rankOf(t));
      if (at && *at != aligned) return mixed(n, "combines batch rows along different dims");
      at = aligned;
    }
    if (!at) return mixed(n, "no batch rule for " + kind);
    for (const Value* t : tensors) {
      if (of(t).kind == Rows::Dim) continue;
      const int64_t own = *at - static_cast<int64_t>(out_rank - *rankOf(t));
      if (own >= 0 && knownExtent(t, own) != 1)
        return mixed(n, "combines batch rows with a tensor as long as the batch (not broadcast)");
    }
    set(n, Rows::at(*at));
  }

  void matmul(const Node& n, const std::string& kind) {
    const Rows a = of(n.input(0)), b = of(n.input(1));
    auto ra = rankOf(n.input(0)), rb = rankOf(n.input(1));
    if (kind == "aten::linear") {
      if (!othersInvariant(n, 0) || !ra || a.dim >= static_cast<int64_t>(*ra) - 1)
        return mixed(n, "multiplies along the batch dim");
      return set(n, a);
    }
    if (!ra || !rb || *ra < 2) return mixed(n, "multiplies tensors of unknown rank");
    if (a.kind == Rows::Dim && b.invariant() && *rb <= 2 && a.dim <= static_cast<int64_t>(*ra) - 2)
      return set(n, a);
    if (a.kind == Rows::Dim && b.kind == Rows::Dim && *ra == *rb && *ra >= 3 && a.dim == b.dim &&
        a.dim < static_cast<int64_t>(*ra) - 2)
      return set(n, a);
    mixed(n, "multiplies along the batch dim");
  }

  void reduce(const Node& n) {
    const Rows x = of(n.input(0));
    auto rank = rankOf(n.input(0));
    if (n.inputs().size() < 2 || !rank) return mixed(n, "reduces over every dim, the batch's too");
    // mean/sum/amax(x, dims, keepdim, ...): the dims are input 1 (norm: input 2)
    const size_t at = n.kind().toQualString() == std::string("aten::norm") ? 2 : 1;
    if (n.inputs().size() <= at + 1) return mixed(n, "reduces over every dim, the batch's too");
    auto dims = constantInts(n.input(at));
    auto keep = constantInt(n.input(at + 1));
    if (!dims || dims->empty() || !keep || !othersInvariant(n, 0)) return mixed(n, "reduces over unknown dims");
    int64_t below = 0;
    for (int64_t dim : *dims) {
      const int64_t c = dim < 0 ? dim + static_cast<int64_t>(*rank) : dim;
      if (c == x.dim) return mixed(n, "reduces over the batch dim");
      below += c < x.dim;
    }
    set(n, Rows::at(*keep ? x.dim : x.dim - below));
  }

  void concat(const Node& n, bool stack) {
    const Rows list = of(n.input(0));
    auto dim = constantDim(n.input(1), rankOf(n.output()));  // cat keeps the rank, stack adds the new dim
    if (list.kind != Rows::List || list.items.empty() || !dim) return mixed(n, "concatenates an unknown list");
    const int64_t d = list.items[0].dim;
    for (const Rows& r : list.items)
      if (r.kind != Rows::Dim || r.dim != d) return mixed(n, "concatenates batch rows with other tensors");
    if (!stack && *dim == d) return mixed(n, "concatenates along the batch dim");
    set(n, Rows::at(stack && *dim <= d ? d + 1 : d));
  }

  // expand(invariant, [count, -1, ...]): one copy per item (ViT's class token).
  void expand(const Node& n) {
    const Rows x = of(n.input(0)), sizes = of(n.input(1));
    auto rank = rankOf(n.input(0));
    if (!x.invariant() || sizes.kind != Rows::List || sizes.items.empty() || sizes.items[0].kind != Rows::Count ||
        !rank)
      return mixed(n, "expands batch rows");
    for (size_t i = 1; i < sizes.items.size(); ++i)
      if (!sizes.items[i].invariant()) return mixed(n, "expands with the batch size in a later dim");
    const int64_t own = static_cast<int64_t>(*rank) - static_cast<int64_t>(sizes.items.size());
    if (own >= 0 && knownExtent(n.input(0), own) != 1) return mixed(n, "expands a tensor as long as the batch");
    set(n, Rows::at(0));
  }

  // A fusion group: its subgraph's inputs take the group inputs' rows.
  void group(const Node& n) {
    const Graph& sub = *n.subgraph();
    if (sub.inputs().size() != n.inputs().size() || sub.outputs().size() != n.outputs().size())
      return mixed(n, "a group whose subgraph does not match it");
    for (size_t i = 0; i < n.inputs().size(); ++i) rows_[sub.inputs()[i]] = of(n.input(i));
    block(*sub.block());
    for (size_t i = 0; i < n.outputs().size(); ++i) set(n, of(sub.outputs()[i]), i);
  }

  // prim::If / prim::Loop: fine when nothing inside touches batch rows.
  void control(const Node& n) {
    for (const Value* in : n.inputs())
      if (!of(in).invariant()) return mixed(n, "branches or loops on batch rows");
    bool clean = true;
    std::function<void(const Block&)> scan = [&](const Block& b) {
      for (const Node* m : b.nodes()) {
        for (const Value* in : m->inputs()) clean &= of(in).invariant();
        clean &= !randomKinds().count(m->kind().toQualString());
        for (const Block* sub : m->blocks()) scan(*sub);
      }
    };
    for (const Block* b : n.blocks()) scan(*b);
    if (!clean) return mixed(n, "branches or loops on batch rows");
  }

  std::unordered_map<const Value*, Rows> rows_;
  std::string stopped_;
};

}  // namespace

LLGA_REGISTER_PASS(BatchRows);

}  // namespace llga
