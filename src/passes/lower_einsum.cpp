// lower-einsum: an einsum of two float32 operands that is one batched matrix
// product becomes permutes, unsqueezes and one aten::matmul, so the fuser
// sees the product: attention written with einsum ("bqhd,bkhd->bhqk", then
// softmax, then "bhqk,bkhd->bqhd") fuses as attention, a projection
// ("bnd,de->bne") as a matmul with its post-ops.
//
//   Given:  %s = aten::einsum("bqhd,bkhd->bhqk", [%q, %k], None)
//   Result: %a = aten::permute(%q, [0, 2, 1, 3])          [b, h, q, d]
//           %b = aten::permute(%k, [0, 2, 3, 1])          [b, h, d, k]
//           %s = aten::matmul(%a, %b)                     [b, h, q, k]
//
// Labels fall into four roles: batch (both operands and the output),
// contracted (both operands, not the output), left (left operand and the
// output) and right (right operand and the output). The left operand is
// permuted to [batch, left..., contracted], the right one to [batch,
// contracted, right...]; with more than one left (right) label, all but the
// last become batch dims of the product, the other operand taking a size-1
// dim there (unsqueeze), so that matmul's broadcasting computes the outer
// product without copying; no left (right) label: a size-1 dim, squeezed off
// after. The product's dims are then [batch, left-but-last, right-but-last,
// last left, last right], permuted into the output's order. Every step is a
// view except the matmul, which reads strided operands as they are.
//
// Left alone (the runtime einsum, which plans any equation, runs them): an
// implicit output ("ij,jk"), "...", a label twice in one term, a label
// summed out of one operand only, more than one contracted label (the
// operands would need a reshape that copies), other operand counts, operand
// dtypes not known to be float32 or ranks not known to be their terms', a
// contracted label whose sizes are not known equal in the two operands
// (einsum broadcasts 1 against n there, matmul does not; a later call with
// such sizes gets matmul's size error, naming the einsum). Batch labels of
// size 1 broadcast in both. The ops emitted keep the einsum's source, with
// the equation after it, so errors and reports name the einsum they came
// from.
#include <algorithm>
#include <cctype>

#include "passes/pass.h"
#include "passes/pass_utils.h"

namespace llga {
namespace {

const Symbol kEinsum = Symbol::fromQualString("aten::einsum");

using Labels = std::string;

// "ab,bc->ac" into its terms, spaces dropped; nothing if it is not two letter-only terms with an explicit output.
bool parse(const std::string& eq, Labels& l, Labels& r, Labels& out, std::string& why) {
  std::string s;
  for (char c : eq)
    if (c != ' ') s.push_back(c);
  const size_t arrow = s.find("->"), comma = s.find(',');
  if (arrow == std::string::npos) return why = "the output is implicit", false;
  if (comma == std::string::npos || comma > arrow || s.find(',', comma + 1) < arrow)
    return why = "not two operands", false;
  l = s.substr(0, comma);
  r = s.substr(comma + 1, arrow - comma - 1);
  out = s.substr(arrow + 2);
  for (const Labels* t : {&l, &r, &out}) {
    for (size_t i = 0; i < t->size(); ++i) {
      const char c = (*t)[i];
      if (!std::isalpha(static_cast<unsigned char>(c))) return why = "a term has '" + std::string(1, c) + "'", false;
      if (t->find(c, i + 1) != std::string::npos)
        return why = "label '" + std::string(1, c) + "' twice in one term", false;
    }
  }
  return true;
}

bool has(const Labels& t, char c) { return t.find(c) != std::string::npos; }

// The permutation taking a term's dims into `order` (every label of the term, once).
std::vector<int64_t> permutation(const Labels& term, const Labels& order) {
  std::vector<int64_t> p;
  for (char c : order) p.push_back(static_cast<int64_t>(term.find(c)));
  return p;
}

bool identity(const std::vector<int64_t>& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

class LowerEinsum final : public Pass {
 public:
  std::string_view name() const override { return "lower-einsum"; }
  std::string_view description() const override {
    return "an einsum that is one batched matrix product -> permute/unsqueeze views and aten::matmul";
  }

  bool run(Graph& g) override {
    std::vector<Node*> todo;
    g.forEachNode([&](Node* n) {
      if (n->kind() == kEinsum) todo.push_back(n);
    });
    bool changed = false;
    for (Node* n : todo) changed |= lower(g, n);
    return changed;
  }

 private:
  bool skip(const Node* n, const std::string& why) {
    note(where(*n) + ": left as einsum, " + why);
    return false;
  }

  bool lower(Graph& g, Node* n) {
    if (n->inputs().size() < 2 || n->outputs().size() != 1) return skip(n, "unexpected arity");
    if (n->inputs().size() > 2 && !isNone(n->input(2))) return skip(n, "a contraction path is given");
    const std::optional<std::string> eq_constant = constantString(n->input(0));
    if (!eq_constant) return skip(n, "the equation is not a constant");
    const std::string& eq = *eq_constant;
    const Node* list = n->input(1)->node();
    if (list->kind() != prim::ListConstruct || list->inputs().size() != 2) return skip(n, "not two listed operands");
    Value* a = list->input(0);
    Value* b = list->input(1);
    for (const Value* v : {a, b})
      if (knownDtype(v) != ScalarType::Float) return skip(n, "operand %" + v->debugName() + " is not known float32");
    Labels l, r, out;
    std::string why;
    if (!parse(eq, l, r, out, why)) return skip(n, "\"" + eq + "\": " + why);
    for (const auto& [v, term] : {std::pair<const Value*, const Labels*>{a, &l}, {b, &r}}) {
      const std::optional<size_t> rank = v->type()->isTensor() ? v->type()->tensorInfo().rank() : std::nullopt;
      if (rank != term->size())  // (the runtime einsum says what does not fit)
        return skip(n, "operand %" + v->debugName() + " is not known to have " + std::to_string(term->size()) + " dims");
    }
    Labels batch, contracted, left, right;
    for (char c : out) {
      if (!has(l, c) && !has(r, c))
        return skip(n, "\"" + eq + "\": output label '" + std::string(1, c) + "' in no operand");
      (has(l, c) && has(r, c) ? batch : has(l, c) ? left : right).push_back(c);
    }
    for (char c : l)
      if (!has(out, c)) {
        if (!has(r, c)) return skip(n, "\"" + eq + "\": '" + std::string(1, c) + "' is summed out of one operand");
        contracted.push_back(c);
      }
    for (char c : r)
      if (!has(out, c) && !has(l, c))
        return skip(n, "\"" + eq + "\": '" + std::string(1, c) + "' is summed out of one operand");
    if (contracted.size() > 1) return skip(n, "\"" + eq + "\": more than one contracted label");
    // einsum broadcasts a contracted label of size 1 against n; matmul does not.
    for (char c : contracted) {
      const auto& la = *a->type()->tensorInfo().sizes;
      const auto& lb = *b->type()->tensorInfo().sizes;
      const std::optional<int64_t> sa = la[l.find(c)], sb = lb[r.find(c)];
      if (!sa || !sb || *sa != *sb)
        return skip(n, "\"" + eq + "\": the sizes of contracted label '" + std::string(1, c) + "' are not known equal");
    }

    Node* const before = n->prev();  // the nodes emitted go between it and n
    Emitter e(g, n, n);
    const int64_t nb = static_cast<int64_t>(batch.size());
    const int64_t extra_l = std::max<int64_t>(0, static_cast<int64_t>(left.size()) - 1);
    const int64_t extra_r = std::max<int64_t>(0, static_cast<int64_t>(right.size()) - 1);
    auto permute = [&](Value* v, const Labels& term, const Labels& order) {
      const std::vector<int64_t> p = permutation(term, order);
      return identity(p) ? v : e.op("aten::permute", {v, e.ints(p)});
    };
    auto unsqueeze = [&](Value* v, int64_t dim, int64_t count) {
      for (int64_t i = 0; i < count; ++i) v = e.op("aten::unsqueeze", {v, e.i(dim)});
      return v;
    };
    // Left: [batch, left-but-last, 1 x extra_r, last left (or 1), contracted (or 1)].
    Value* x = permute(a, l, batch + left + contracted);
    x = unsqueeze(x, nb + extra_l, extra_r);
    if (left.empty()) x = unsqueeze(x, nb + extra_r, 1);
    if (contracted.empty()) x = unsqueeze(x, -1, 1);
    // Right: [batch, 1 x extra_l, right-but-last, contracted (or 1), last right (or 1)].
    Value* y = permute(b, r, batch + right.substr(0, static_cast<size_t>(extra_r)) + contracted +
                                 right.substr(static_cast<size_t>(extra_r)));
    y = unsqueeze(y, nb, extra_l);
    if (contracted.empty()) y = unsqueeze(y, nb + extra_l + extra_r, 1);
    if (right.empty()) y = unsqueeze(y, -1, 1);
    Value* prod = e.op("aten::matmul", {x, y});
    if (right.empty()) prod = e.op("aten::squeeze", {prod, e.i(-1)});
    if (left.empty()) prod = e.op("aten::squeeze", {prod, e.i(right.empty() ? -1 : -2)});
    const Labels dims = batch + left.substr(0, static_cast<size_t>(extra_l)) +
                        right.substr(0, static_cast<size_t>(extra_r)) + left.substr(static_cast<size_t>(extra_l)) +
                        right.substr(static_cast<size_t>(extra_r));
    Value* result = permute(prod, dims, out);
    // Errors and reports name the einsum these ops came from (a matmul's
    // size mismatch is the equation's).
    const std::string origin = "einsum \"" + eq + "\"";
    for (Node* k = before->next(); k != n; k = k->next())
      k->setSource(n->source().empty() ? origin : n->source() + ", " + origin);
    TensorInfo info = n->output()->type()->isTensor() ? n->output()->type()->tensorInfo() : TensorInfo{};
    info.strides.reset();  // a view's strides, not the runtime einsum's
    result->setType(Type::tensor(info));
    replaceKeepingName(g, n->output(), result);
    n->destroy();
    return true;
  }
};

}  // namespace

LLGA_REGISTER_PASS(LowerEinsum);

}  // namespace llga
