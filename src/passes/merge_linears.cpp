// merge-linears: aten::linear nodes of one block that read the same input,
// with constant, bound float32 weights of the same in-features (attention's
// query, key and value projections), become one linear over the weights
// stacked along the out-features, and each former output a slice of its
// result along the last dim: one matrix product with N = N1 + N2 + ... that
// reads the input once and has more parallel work, instead of several
// (concat-linear, as Intel's extension for PyTorch does).
//
//   Given:  %q = aten::linear(%x, %Wq, %bq)     Result:  %m = aten::linear(%x, %Wq_merged, %bq_merged)
//           %k = aten::linear(%x, %Wk, %bk)              %q = aten::slice(%m, -1, 0, 768, 1)
//                                                        %k = aten::slice(%m, -1, 768, 1536, 1)
// The slices are views with a longer row stride than the linears' own
// outputs had. Readers take strided tensors; an aten::view among the values
// derived from them by view ops becomes aten::reshape (a view that merges the
// last dim with another cannot be taken of a slice; reshape copies there).
// That is only unobservable when nothing writes into that memory, so a
// linear whose output is written in place (through any view), reaches the
// graph's outputs, or whose input is written, is left out, with a note; so
// is one read by batch_norm (fold-batchnorm, later, folds that into it).
#include <cstring>
#include <map>
#include <sstream>

#include "ir/effects.h"
#include "ir/precision.h"
#include "passes/pass.h"
#include "passes/pass_utils.h"

namespace llga {
namespace {

const Symbol kLinear = Symbol::fromQualString("aten::linear");
const Symbol kView = Symbol::fromQualString("aten::view");

class MergeLinears final : public Pass {
 public:
  std::string_view name() const override { return "merge-linears"; }
  std::string_view description() const override {
    return "linears reading one input with constant weights -> one linear over stacked weights, sliced";
  }

  bool run(Graph& g) override { return visit(g, g.block()); }

 private:
  bool visit(Graph& g, Block* b) {
    bool changed = false;
    // Candidates by input and quantization; inputs in the order their first candidate comes.
    using Key = std::pair<Value*, std::string>;
    std::vector<Key> inputs;
    std::map<Key, std::vector<Node*>> by_input;
    for (Node* n : b->nodes()) {
      for (Block* sub : n->blocks()) changed |= visit(g, sub);
      if (n->kind() != kLinear || !mergeable(*n)) continue;
      const Key key{n->input(0), quantKey(*n)};
      auto& group = by_input[key];
      if (group.empty()) inputs.push_back(key);
      group.push_back(n);
    }
    for (const Key& key : inputs) {
      Value* x = key.first;
      std::vector<Node*>& group = by_input[key];
      if (group.size() < 2) continue;
      if (const Node* w = writerOf(*aliasRoot(*x))) {
        note(std::to_string(group.size()) + " linears reading %" + x->debugName() + ": not merged, " + where(*w) +
             " writes into its memory");
        continue;
      }
      // Same in-features as the first; others stay as they are.
      const int64_t k = boundTensor(group[0]->input(1))->sizes[1];
      std::vector<Node*> same;
      for (Node* n : group)
        if (boundTensor(n->input(1))->sizes[1] == k) same.push_back(n);
      if (same.size() >= 2) {
        merge(g, same);
        changed = true;
      }
    }
    return changed;
  }

  // How a linear is quantized (the graph's own int8, import-quantization):
  // only linears quantized alike merge, and the merged one is quantized so,
  // with their weight scales stacked. Empty for fp32.
  static std::string quantKey(const Node& n) {
    if (precisionOf(n) == Precision::F32) return "";
    std::string key(precisionName(precisionOf(n)));
    if (dynamicActivation(n)) {
      key += " dynamic " + std::to_string(dynamicU8Qmax(n).value_or(0));
    } else if (std::optional<ActivationQuant> q = activationQuantOf(n)) {
      std::ostringstream s;
      s.precision(17);
      s << " " << q->scale << " " << q->is_unsigned << " " << q->zero_point;
      key += s.str();
    }
    return key + (weightScalesOf(n) ? " w_scale" : "");
  }

  // Weight [N, K] and bias [N] (or None) constant, bound, float32; the output
  // neither written nor returned.
  bool mergeable(const Node& n) {
    if (n.inputs().size() != 3) return false;
    const ConstantTensor* w = boundTensor(n.input(1));
    if (!w || !w->hasData() || w->dtype != ScalarType::Float || w->sizes.size() != 2 || w->strides.size() != 2)
      return false;
    if (!isNone(n.input(2))) {
      const ConstantTensor* bias = boundTensor(n.input(2));
      if (!bias || !bias->hasData() || bias->dtype != ScalarType::Float || bias->sizes != std::vector<int64_t>{w->sizes[0]})
        return false;
    }
    if (const Node* wr = writerOf(*n.output())) {
      note(where(n) + ": not merged, " + where(*wr) + " writes into its result");
      return false;
    }
    for (const Use& u : n.output()->uses())
      if (u.user->kind().toQualString() == "aten::batch_norm") return false;  // fold-batchnorm folds it into this linear
    if (reachesGraphOutput(*n.output())) {
      note(where(n) + ": not merged, its result is a graph output");
      return false;
    }
    return true;
  }

  void merge(Graph& g, const std::vector<Node*>& group) {
    Node* first = group.front();
    const std::string x_name = first->input(0)->debugName();
    const int64_t k = boundTensor(first->input(1))->sizes[1];
    int64_t n_total = 0;
    bool any_bias = false;
    for (Node* n : group) {
      n_total += boundTensor(n->input(1))->sizes[0];
      any_bias |= !isNone(n->input(2));
    }
    auto w = ConstantTensor::owned(ScalarType::Float, {n_total, k});
    auto bias = any_bias ? ConstantTensor::owned(ScalarType::Float, {n_total}) : nullptr;
    auto* wp = static_cast<float*>(w->data);
    float* bp = bias ? static_cast<float*>(bias->data) : nullptr;
    int64_t row = 0;
    for (Node* n : group) {
      const ConstantTensor* wi = boundTensor(n->input(1));
      const auto* src = static_cast<const float*>(wi->data);
      for (int64_t r = 0; r < wi->sizes[0]; ++r)
        for (int64_t c = 0; c < k; ++c) wp[(row + r) * k + c] = src[r * wi->strides[0] + c * wi->strides[1]];
      if (bp) {
        if (const ConstantTensor* bi = isNone(n->input(2)) ? nullptr : boundTensor(n->input(2)))
          for (int64_t r = 0; r < wi->sizes[0]; ++r) bp[row + r] = static_cast<float>(bi->scalarAsDouble(r));
        else
          std::memset(bp + row, 0, sizeof(float) * static_cast<size_t>(wi->sizes[0]));
      }
      if (wi->approximate) w->approximate = true;
      row += wi->sizes[0];
    }
    Emitter e(g, first, first);
    auto constant = [&](const std::shared_ptr<ConstantTensor>& c, const Value* like) {
      Value* v = e.constant(AttrValue(TensorRef(c)), constantTensorType(*c));
      if (std::string name = like->debugName() + "_merged"; !g.findValue(name)) v->setDebugName(name);
      return v;
    };
    Value* merged = e.op("aten::linear", {first->input(0), constant(w, first->input(1)),
                                          bias ? constant(bias, first->input(2)) : e.none()});
    if (std::string name = first->output()->debugName() + "_merged"; !g.findValue(name)) merged->setDebugName(name);
    if (Node& m = *merged->node(); precisionOf(*first) != Precision::F32) {  // quantized alike (quantKey)
      setPrecision(m, precisionOf(*first));
      if (dynamicActivation(*first))
        setDynamicActivation(m, dynamicU8Qmax(*first));
      else
        setActivationQuant(m, activationQuantOf(*first));
      if (weightScalesOf(*first)) {
        std::vector<float> scales;
        for (Node* n : group) {
          const std::vector<float> s = *weightScalesOf(*n);
          scales.insert(scales.end(), s.begin(), s.end());
        }
        setWeightScales(m, scales);
      }
    }
    std::vector<Value*> slices;  // all emitted before `first` goes
    row = 0;
    for (Node* n : group) {
      const int64_t rows = boundTensor(n->input(1))->sizes[0];
      slices.push_back(e.op("aten::slice", {merged, e.i(-1), e.i(row), e.i(row + rows), e.i(1)}));
      row += rows;
    }
    std::string names;
    for (size_t i = 0; i < group.size(); ++i) {
      Node* n = group[i];
      viewsToReshapes(g, n->output());
      names += (names.empty() ? "%" : ", %") + n->output()->debugName();
      replaceKeepingName(g, n->output(), slices[i]);
      n->destroy();
    }
    note("merged " + std::to_string(group.size()) + " linears reading %" + x_name + " (" + names +
         ") into one of " + std::to_string(n_total) + " out-features");
  }

  // aten::view among the values derived from v through view ops -> aten::reshape.
  static void viewsToReshapes(Graph& g, Value* v) {
    std::vector<Node*> views;
    for (const Use& u : v->uses()) {
      Node* r = u.user;
      if (!isAliasing(*r) || r->outputs().empty()) continue;
      for (Value* o : r->outputs()) viewsToReshapes(g, o);
      if (r->kind() == kView) views.push_back(r);
    }
    for (Node* r : views) {
      Emitter e(g, r, r);
      Value* reshaped = e.op("aten::reshape", {r->input(0), r->input(1)}, r->output()->type());
      replaceKeepingName(g, r->output(), reshaped);
      r->destroy();
    }
  }
};

}  // namespace

LLGA_REGISTER_PASS(MergeLinears);

}  // namespace llga
