// canonicalize: peephole rewrites, one table entry per rule. A rule looks at
// one node (its root) and returns the value that replaces the root's output,
// the root's own output when it rewrote the root in place, or null. Rules never fire on a result that something writes in place.
// Runs to a fixed point (bounded).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "ir/effects.h"
#include "ir/strides.h"
#include "passes/pass.h"
#include "passes/pass_utils.h"

namespace llga {
namespace {

using RuleFn = Value* (*)(Node* root, Graph& g);

bool mayBeMutated(const Value& v);

struct Rule {
  const char* name;
  const char* root;     // the op kind the rule starts from
  const char* diagram;  // what it does
  RuleFn apply;
};

Node* producer(const Value* v, const char* kind) {
  Node* p = v->node();
  return p->kind().toQualString() == kind ? p : nullptr;
}

// v's one reader is a softmax (the attention chain a rule opens for the fuser).
bool readBySoftmaxAlone(const Value* v) {
  return v->uses().size() == 1 && v->uses()[0].user->kind().toQualString() == std::string("aten::softmax");
}

bool sameInts(const Value* a, const Value* b) {
  auto x = constantInt(a), y = constantInt(b);
  return x && y && *x == *y;
}

// Both transposes swap the same pair of dims (in either order), given as the
// same non-negative constants.
Value* transposeTranspose(Node* n, Graph&) {
  Node* p = producer(n->input(0), "aten::transpose");
  if (!p) return nullptr;
  auto a = constantInt(n->input(1)), b = constantInt(n->input(2));
  auto c = constantInt(p->input(1)), d = constantInt(p->input(2));
  if (!a || !b || !c || !d) return nullptr;
  if ((*a == *c && *b == *d) || (*a == *d && *b == *c)) return p->input(0);
  return nullptr;
}

Value* tT(Node* n, Graph&) {
  Node* p = producer(n->input(0), "aten::t");
  return p ? p->input(0) : nullptr;
}

// Whether x's memory is llga's own, not (a view of) a graph input or a
// constant: a rule that hands out x, or a view of it, where PyTorch makes a
// new tensor would otherwise give the caller an array sharing memory with
// one of theirs (neg(neg(x)) returned x's own array, graph fuzzer probe).
bool computedHere(const Value& x) {
  const Node* root = aliasRoot(x)->node();
  return root->kind() != prim::Param && root->kind() != prim::Constant;
}

// Whether x's recorded strides are row-major for its sizes (reshape is then a view).
bool knownContiguous(const Value& x) {
  if (!x.type()->isTensor()) return false;
  const TensorInfo& t = x.type()->tensorInfo();
  const auto sizes = t.concreteSizes();
  if (!sizes || !t.strides || t.strides->size() != sizes->size()) return false;
  const std::vector<int64_t> want = contiguousStrides(*sizes);
  for (size_t i = 0; i < sizes->size(); ++i)
    if ((*sizes)[i] != 1 && (*t.strides)[i] != want[i]) return false;  // a size-1 dim's stride says nothing
  return true;
}

// neg(neg(x)) is a new tensor holding x's values: x stands in for it only
// where nothing can tell them apart, x being llga's own, read by this neg
// alone and written by nothing.
Value* negNeg(Node* n, Graph&) {
  Node* p = producer(n->input(0), "aten::neg");
  if (!p) return nullptr;
  Value* x = p->input(0);
  if (!computedHere(*x) || aliasRoot(*x) != x || x->uses().size() != 1 || mayBeMutated(*x)) return nullptr;
  return x;
}

Value* detach(Node* n, Graph&) { return n->input(0); }

Value* squeezeUnsqueeze(Node* n, Graph&) {
  if (n->inputs().size() != 2) return nullptr;
  Node* p = producer(n->input(0), "aten::unsqueeze");
  return p && sameInts(p->input(1), n->input(1)) ? p->input(0) : nullptr;
}

Value* flattenOneDim(Node* n, Graph&) {
  return sameInts(n->input(1), n->input(2)) ? n->input(0) : nullptr;
}

// reshape(reshape(x, s1), s2) -> reshape(x, s2): the inner shape is never seen.
// Not where the inner result, or the memory x is, may be written: the inner
// reshape may be a copy (x not contiguous) whose view the outer result is, so
// a write into the inner one reaches the outer one (and one into x does not),
// while reshape(x, s2) may be a view of x or a copy where the two did
// otherwise (graph fuzzer seed 422060: reshape(narrow(x)) written by
// sigmoid_, its reshape returned). Nor where x is a caller's array or a
// weight not known to be contiguous: reshape(x, s2) could be a view of it
// where PyTorch's result was a copy.
Value* reshapeReshape(Node* n, Graph&) {
  Node* p = producer(n->input(0), "aten::reshape");
  if (!p) return nullptr;
  Value* x = p->input(0);
  if (mayBeMutated(*p->output()) || mayBeMutated(*aliasRoot(*x))) return nullptr;
  if (!computedHere(*x) && !knownContiguous(*x)) return nullptr;
  n->replaceInput(0, x);  // the inner reshape goes with dce if nothing else reads it
  return n->output();
}

// view(contiguous(x), s) -> reshape(x, s): the same values, and a view of x
// where x's strides allow one, a copy otherwise (the contiguous copy it
// replaces). nn.MultiheadAttention does this to each of q, k and v, chunks
// of one fused projection, before splitting the heads: three copies per
// layer that the attention kernel, which reads any strides, does not need.
// Only where the aliasing cannot show: the contiguous is read by this view
// alone, asks for the default format, nothing writes x or the results
// (mayBeMutated, checked for the root by the pass), and x is a value llga
// computed (not a caller's array or a weight, which a returned view would
// alias).
Value* contiguousView(Node* n, Graph& g) {
  Node* p = producer(n->input(0), "aten::contiguous");
  if (!p || n->input(0)->uses().size() != 1 || n->inputs().size() != 2) return nullptr;
  if (p->inputs().size() > 1) {
    auto format = constantInt(p->input(1));
    if (!format || *format != 0) return nullptr;  // torch.contiguous_format
  }
  Value* x = p->input(0);
  // (nor anything writing the tensor x views, through another view: the
  // result may now be a view of it, where PyTorch's was a copy)
  if (mayBeMutated(*x) || mayBeMutated(*p->output()) || mayBeMutated(*aliasRoot(*x))) return nullptr;
  if (!computedHere(*x)) return nullptr;
  TypePtr type = n->output()->type();
  if (type->isTensor()) {  // the result's strides are x's where it is a view: unknown here
    TensorInfo info = type->tensorInfo();
    info.strides.reset();
    type = Type::tensor(info);
  }
  Value* r = Emitter(g, n, n).op("aten::reshape", {x, n->input(1)}, type);
  replaceKeepingName(g, n->output(), r);  // dumps keep the view's name
  return r;
}

// softmax(matmul(q * c, k)) -> softmax(matmul(q, k) * c) (and / c), c one
// number: the scale then joins the attention partition as a score op instead
// of being a pass over q of its own (nn.MultiheadAttention scales q; exact
// for a power of two, as 1/sqrt(64), else within a rounding). Only where the
// product is read by the softmax alone and the scaled q by the product alone.
Value* scaleAfterProduct(Node* n, Graph& g) {
  const std::string k = n->kind().toQualString();
  if ((k != "aten::matmul" && k != "aten::bmm") || !readBySoftmaxAlone(n->output())) return nullptr;
  Node* s = n->input(0)->node();
  const std::string sk = s->kind().toQualString();
  if ((sk != "aten::mul" && sk != "aten::div") || s->inputs().size() != 2 || s->input(0) == s->input(1) ||
      n->input(0)->uses().size() != 1)
    return nullptr;
  Value* c = s->input(1);
  const bool number = c->type()->isSimple("float") || c->type()->isSimple("int");
  const bool zero_dim = c->type()->isTensor() && c->type()->tensorInfo().rank() == std::optional<size_t>(0) &&
                        knownDtype(c) == std::optional<ScalarType>(ScalarType::Float);
  if (!(number || zero_dim) || c->node()->kind() != prim::Constant) return nullptr;
  if (mayBeMutated(*s->input(0)) || mayBeMutated(*n->input(0)) || writeBetween(*s->input(0), s, n)) return nullptr;
  Node* product = Emitter(g, n, n).node(k.c_str(), {s->input(0), n->input(1)}, 1);
  product->output()->setType(n->output()->type());
  Value* scaled = Emitter(g, n, s).op(sk.c_str(), {product->output(), c}, n->output()->type());
  replaceKeepingName(g, n->output(), scaled);
  return scaled;
}

// softmax(view(view(a, s5) + m, s4)) -> softmax(a + reshape(expand(m, s5), s4)),
// s4 giving a's sizes: an add through a view that regroups a's leading
// dims, m broadcast in the regrouped shape. Swin's shifted windows add their
// mask so: the scores [B * nW, heads, N, N] viewed as [B, nW, heads, N, N]
// plus the mask [1, nW, 1, N, N], viewed back. Both views read a's elements
// in their row-major order, so the rewritten add sees the same pairs: the
// same bits. It reads the mask in a's own shape, a broadcast copy (a mask
// built from sizes alone, as Swin's, is made once per input signature:
// mark-shape-only), and the chain from the scores' product to the softmax
// has no view in it: the attention pattern takes it. Only where that is
// the gain: a softmax reads the result alone, and the views keep the last
// two dims (a copy of a mask read by every call otherwise costs more than
// the broadcast add). And only where the traced types show a's sizes, the
// view's and the result's, the result has a's sizes, m broadcasts into the
// view without growing it, m has a's dtype, and each step is read by the
// next alone.
Value* addThroughView(Node* n, Graph& g) {
  if (!readBySoftmaxAlone(n->output())) return nullptr;
  Node* add = n->input(0)->node();
  if (add->kind().toQualString() != std::string("aten::add") || add->inputs().size() != 3 ||
      n->input(0)->uses().size() != 1)
    return nullptr;
  Node* v = add->input(0)->node();
  const std::string vk = v->kind().toQualString();
  if ((vk != "aten::view" && vk != "aten::reshape") || add->input(0)->uses().size() != 1 || v->inputs().size() != 2)
    return nullptr;
  Value* a = v->input(0);
  Value* m = add->input(1);
  auto sizesOf = [](const Value* x) -> std::optional<std::vector<int64_t>> {
    if (!x->type()->isTensor()) return std::nullopt;
    return x->type()->tensorInfo().concreteSizes();
  };
  const auto sa = sizesOf(a), s5 = sizesOf(add->input(0)), sm = sizesOf(m), sr = sizesOf(n->output());
  if (!sa || !s5 || !sm || !sr || *sr != *sa || sa->size() < 2 || s5->size() < 2 || sm->size() > s5->size()) return nullptr;
  if ((*sa)[sa->size() - 1] != (*s5)[s5->size() - 1] || (*sa)[sa->size() - 2] != (*s5)[s5->size() - 2]) return nullptr;
  for (size_t i = 0; i < sm->size(); ++i) {  // m broadcasts into the view's shape without growing it
    const int64_t d = (*sm)[sm->size() - 1 - i], e = (*s5)[s5->size() - 1 - i];
    if (d != e && d != 1) return nullptr;
  }
  const std::optional<ScalarType> dt = knownDtype(a);
  if (!dt || knownDtype(m) != dt || knownDtype(add->input(0)) != dt) return nullptr;
  if (mayBeMutated(*a) || mayBeMutated(*m) || mayBeMutated(*add->input(0)) || mayBeMutated(*add->output()) ||
      writeBetween(*a, add, n) || writeBetween(*m, add, n))  // the new add reads a and m where n is
    return nullptr;
  // m expands to the view's size list itself (a read of the view's size
  // would keep a read outside the chain). expand keeps m's extent where the
  // list says -1 and view infers one: so no -1 may stand where m broadcasts
  // (a list item llga computes could only be -1 by arithmetic, and then the
  // reshape below fails loudly on the element count).
  Value* list = v->input(1);
  std::vector<std::optional<int64_t>> items;
  if (auto c = constantInts(list)) {
    items.assign(c->begin(), c->end());
  } else if (list->node()->kind() == prim::ListConstruct) {
    for (const Value* item : list->node()->inputs()) items.push_back(constantInt(item));
  } else {
    return nullptr;
  }
  if (items.size() != s5->size()) return nullptr;
  for (size_t i = 0; i < items.size(); ++i) {
    const size_t from_end = items.size() - 1 - i;
    const bool broadcast = from_end >= sm->size() || (*sm)[sm->size() - 1 - from_end] == 1;
    if (items[i] && *items[i] < 0 && broadcast) return nullptr;
  }
  Emitter e(g, n, n);
  TensorInfo wide = m->type()->tensorInfo();
  wide.sizes = add->input(0)->type()->tensorInfo().sizes;
  wide.strides.reset();
  Value* expanded = e.op("aten::expand", {m, list, e.b(false)}, Type::tensor(wide));
  TensorInfo flat = wide;
  flat.sizes = a->type()->tensorInfo().sizes;
  // (to the root's own list: its result has a's sizes, and a read of a's
  // size would be one more reader of the scores)
  Value* mask = e.op("aten::reshape", {expanded, n->input(1)}, Type::tensor(flat));
  TypePtr out = n->output()->type();
  if (out->isTensor()) {  // a fresh result: its strides are the add's, not the view's
    TensorInfo info = out->tensorInfo();
    info.strides.reset();
    out = Type::tensor(info);
  }
  Value* r = e.op("aten::add", {a, mask, add->input(2)}, out);
  replaceKeepingName(g, n->output(), r);
  return r;
}

// softmax(x - max(x, d, keepdim=True)[0], d) -> softmax(x, d) (and
// log_softmax, amax): the softmax subtracts the row's maximum itself, and the
// row's maximum of x - max(x) is exactly 0, so both compute exp(fl(x - m))
// from the same bits (for float and double x); a NaN or infinite row gives
// NaN either way. Models write the shift by hand against overflow
// (torchaudio's wav2vec2); without it the product, scale, softmax and product
// match the attention pattern.
std::optional<int64_t> normalizedDim(const Value* x, std::optional<int64_t> d) {
  if (!d) return std::nullopt;
  if (*d >= 0) return d;
  const TypePtr& t = x->type();
  if (!t->isTensor() || !t->tensorInfo().rank()) return std::nullopt;
  return *d + static_cast<int64_t>(*t->tensorInfo().rank());
}

Value* softmaxOfShifted(Node* n, Graph&) {
  if (n->inputs().size() != 3 || !isNone(n->input(2))) return nullptr;
  Node* sub = producer(n->input(0), "aten::sub");
  if (!sub || sub->inputs().size() != 3 || constantNumber(sub->input(2)) != std::optional<double>(1.0)) return nullptr;
  Value* x = sub->input(0);
  Node* mx = sub->input(1)->node();
  const std::string mk = mx->kind().toQualString();
  std::optional<int64_t> reduced;
  if (mk == "aten::max" && mx->inputs().size() == 3 && mx->outputs().size() == 2 && sub->input(1) == mx->output(0)) {
    reduced = constantInt(mx->input(1));
  } else if (mk == "aten::amax" && mx->inputs().size() == 3) {
    const auto dims = constantInts(mx->input(1));
    if (dims && dims->size() == 1) reduced = (*dims)[0];
  } else {
    return nullptr;
  }
  const std::optional<int64_t> keep = constantInt(mx->input(2));
  // (the softmax then reads x where it is, after the sub: not across a
  // write into x's memory, through any view of what x views, found by a
  // probe after graph fuzzer seed 422060: x = base.narrow(...), then
  // base.view(-1).mul_() before the softmax)
  if (mx->input(0) != x || !keep || *keep != 1 || mayBeMutated(*x) || writeBetween(*x, sub, n)) return nullptr;
  // Only where the sub rounds as the softmax's own subtraction does: a bf16
  // or half x - m is rounded to that type, the softmax's is computed in float.
  const std::optional<ScalarType> dt = knownDtype(x);
  if (dt != std::optional<ScalarType>(ScalarType::Float) && dt != std::optional<ScalarType>(ScalarType::Double))
    return nullptr;
  const std::optional<int64_t> d = normalizedDim(x, constantInt(n->input(1))), r = normalizedDim(x, reduced);
  if (!d || !r || *d != *r) return nullptr;
  n->replaceInput(0, x);  // the shift and the maximum go with dce if nothing else reads them
  return n->output();
}

// size(contiguous(x)[, d]) -> size(x[, d]): a copy has its source's sizes
// (the contiguous-view rule leaves such readers behind).
Value* sizeOfContiguous(Node* n, Graph&) {
  Node* p = producer(n->input(0), "aten::contiguous");
  if (!p) return nullptr;
  n->replaceInput(0, p->input(0));
  return n->output();
}

// to(x, dtype, non_blocking, copy=False[, None]) where x already has that dtype.
Value* toSameDtype(Node* n, Graph&) {
  if (n->inputs().size() != 5 && n->inputs().size() != 4) return nullptr;
  auto dt = knownDtype(n->input(0));
  auto want = constantInt(n->input(1));
  auto copy = constantInt(n->input(3));
  if (!dt || !want || !copy || *copy != 0 || !n->input(1)->type()->isSimple("int")) return nullptr;
  if (n->inputs().size() == 5 && !isNone(n->input(4))) return nullptr;  // a memory format asks for a copy
  return static_cast<int64_t>(*dt) == *want ? n->input(0) : nullptr;
}

// pow(x, c) of a floating x by a constant c that PyTorch computes without
// pow itself: 2 -> x * x, 3 -> x * x * x, 0.5 -> sqrt(x), -0.5 -> rsqrt(x),
// -1 -> reciprocal(x), the same arithmetic as its kernel's special cases.
// llga's pow is a scalar loop over std::pow; the rewritten ops run on
// oneDNN and join partitions (torchaudio's power spectrogram squares its
// magnitude: 0.5 of a 1.5 ms mel spectrogram call).
Value* powSmallExponent(Node* n, Graph& g) {
  if (n->inputs().size() != 2 || n->input(1)->type()->isTensor()) return nullptr;
  const auto dt = knownDtype(n->input(0));
  const auto c = constantNumber(n->input(1));
  if (!dt || (*dt != ScalarType::Float && *dt != ScalarType::Double) || !c) return nullptr;
  Value* x = n->input(0);
  const TypePtr type = n->output()->type();
  Emitter e(g, n, n);
  if (*c == 2.0) return e.op("aten::mul", {x, x}, type);
  if (*c == 3.0) return e.op("aten::mul", {e.op("aten::mul", {x, x}), x}, type);
  if (*c == 0.5) return e.op("aten::sqrt", {x}, type);
  if (*c == -0.5) return e.op("aten::rsqrt", {x}, type);
  if (*c == -1.0) return e.op("aten::reciprocal", {x}, type);
  return nullptr;
}

// slice(x, d, 0, past any extent or None, 1) -> x (wholeSlice): a trace
// writes x[:, i] as a slice of all of dim 0 before the index, and swin's
// windows carry a few dozen more. The same values and the same memory (a
// slice is a view of x); the index of a constant by constant indices then
// folds.
Value* fullSlice(Node* n, Graph&) {
  return n->input(0)->type()->isTensor() && wholeSlice(*n) ? n->input(0) : nullptr;
}

// x is None / x is not None where x's type cannot hold None (a tensor, a
// number, a list, an object): the answer is known (the Optional refinement
// scripted code does once a value is set, e.g. a lazily made object).
bool neverNone(const Value* v) {
  const Type& t = *v->type();
  if (t.kind() == TypeKind::Optional || t.kind() == TypeKind::Union) return false;
  if (t.kind() == TypeKind::Simple) return !t.isSimple("NoneType") && !t.isSimple("Any");
  return true;
}

Value* isNoneKnown(Node* n, Graph& g) {
  const Value *a = n->input(0), *b = n->input(1);
  if (!((isNone(a) && neverNone(b)) || (isNone(b) && neverNone(a)))) return nullptr;
  return Emitter(g, n, n).b(n->kind().toQualString() == "aten::__isnot__");
}

// The value a select op fills in, given as a 0-dim float constant tensor
// (GPT-2's torch.full([], finfo.min), folded), becomes a number: the op then
// joins attention's score chain (PostOp select takes constant numbers), and
// computes the same, as the selected-from tensor is a float32 tensor with
// dims (a 0-dim float tensor and a number both leave its dtype). Not for a
// constant parsed from PyTorch's 4-digit print (bound exactly later, by name).
//   where(c, x, t) / where(c, t, x) / masked_fill(x, m, t)  ->  the same with t's value
Value* selectScalarValue(Node* n, Graph& g) {
  const bool where = n->kind().toQualString() == "aten::where";
  if (n->inputs().size() != 3) return nullptr;
  for (size_t i : where ? std::vector<size_t>{1, 2} : std::vector<size_t>{2}) {
    const Value* t = n->input(i);
    const ConstantTensor* c = boundTensor(t);
    const Value* x = where ? n->input(3 - i) : n->input(0);
    const std::optional<size_t> rank = x->type()->isTensor() ? x->type()->tensorInfo().rank() : std::nullopt;
    if (!c || !c->sizes.empty() || !c->hasData() || c->approximate ||
        (c->dtype != ScalarType::Float && c->dtype != ScalarType::Double) || knownDtype(x) != ScalarType::Float ||
        !rank || *rank == 0)
      continue;
    n->replaceInput(i, Emitter(g, n, n).f(c->scalarAsDouble(0)));
    return n->output();
  }
  return nullptr;
}

// A traced model's shape arithmetic (nn.MultiheadAttention's head_dim =
// embed_dim // num_heads, bsz * num_heads) runs on 0-dim int64 tensors made
// from sizes: NumToTensor(size), mul, div(.., rounding_mode), then Int() back
// to a number for a reshape. Each of those allocated a tensor a call (41 ops
// of a 2+2-layer transformer's 280). Int() of such a chain becomes the same
// arithmetic on the ints, which runs as numbers; the tensor ops go with dce
// where nothing else reads them. int64 tensor arithmetic and TorchScript's
// int arithmetic agree (both wrap); a division rounds to floor as floordiv
// does, or to zero where both sides are known non-negative (sizes, products
// and floor quotients of them, non-negative constants).
struct IntChain {
  Value* value;   // the int
  bool nonneg;    // known >= 0
};

// The int a 0-dim int64 tensor (or an int) holds: with `e`, emitted before
// its node; without, only whether it is such a chain (nothing emitted).
std::optional<IntChain> intOf(Value* v, Emitter* e, int depth = 0) {
  if (depth > 16) return std::nullopt;
  if (v->type()->isSimple("int")) {
    const std::optional<int64_t> c = constantInt(v);
    const std::string_view from = v->node()->kind().toQualString();
    return IntChain{v, (c && *c >= 0) || from == "aten::size" || from == "aten::len"};
  }
  if (!v->type()->isTensor() || mayBeMutated(*v)) return std::nullopt;  // a write would change what Int() reads
  if (const ConstantTensor* c = boundTensor(v)) {  // a 0-dim int64 constant (nn.MultiheadAttention's num_heads)
    if (!c->sizes.empty() || !c->hasData() || c->dtype != ScalarType::Long) return std::nullopt;
    const auto k = static_cast<int64_t>(c->scalarAsDouble(0));
    if (std::abs(k) > (int64_t{1} << 52)) return std::nullopt;  // read back through a double: exact below 2^53
    return IntChain{e ? e->i(k) : v, k >= 0};
  }
  Node* p = v->node();
  const std::string_view kind = p->kind().toQualString();
  if (kind == "prim::NumToTensor" && p->input(0)->type()->isSimple("int")) return intOf(p->input(0), e, depth + 1);
  const bool add = kind == "aten::add" || kind == "aten::sub";
  if (kind != "aten::mul" && kind != "aten::div" && !add) return std::nullopt;
  if (add && (p->inputs().size() != 3 || constantInt(p->input(2)) != std::optional<int64_t>{1})) return std::nullopt;
  if (kind == "aten::mul" && p->inputs().size() != 2) return std::nullopt;
  std::string mode;
  if (kind == "aten::div") {
    const std::optional<std::string> m = p->inputs().size() == 3 ? constantString(p->input(2)) : std::nullopt;
    if (!m) return std::nullopt;  // true division: a float
    mode = *m;
    if (mode != "floor" && mode != "trunc") return std::nullopt;
  }
  const std::optional<IntChain> a = intOf(p->input(0), e, depth + 1);
  const std::optional<IntChain> b = a ? intOf(p->input(1), e, depth + 1) : std::nullopt;
  if (!a || !b) return std::nullopt;
  if (mode == "trunc" && !(a->nonneg && b->nonneg)) return std::nullopt;  // floor == trunc only then
  const bool both = a->nonneg && b->nonneg;
  const char* op = kind == "aten::div" ? "aten::floordiv" : kind == "aten::mul" ? "aten::mul"
                   : kind == "aten::add" ? "aten::add" : "aten::sub";
  return IntChain{e ? e->op(op, {a->value, b->value}, Type::Int()) : v, kind != "aten::sub" && both};
}

//   Int(NumToTensor(i))                          ->  i
//   Int(div(mul(NumToTensor(i), NumToTensor(j)), NumToTensor(k), "floor"))  ->  floordiv(mul(i, j), k)
Value* intOfTensorArithmetic(Node* n, Graph& g) {
  if (n->inputs().size() != 1 || !n->output()->type()->isSimple("int") || !intOf(n->input(0), nullptr)) return nullptr;
  Emitter e(g, n, n);
  return intOf(n->input(0), &e)->value;
}

// with torch.no_grad() / torch.enable_grad() (TorchScript's prim::Enter and
// prim::Exit of a grad-mode object): llga computes no gradients, so entering
// and leaving the context does nothing (and the object goes with dce).
Value* gradModeContext(Node* n, Graph& g) {
  if (n->inputs().size() != 1 || n->input(0)->type()->kind() != TypeKind::Class) return nullptr;
  const std::string type = n->input(0)->type()->str();
  static const char* const kContexts[] = {"torch.autograd.grad_mode.no_grad", "torch.autograd.grad_mode.enable_grad"};
  if (std::none_of(std::begin(kContexts), std::end(kContexts),
                   [&](const char* c) { return type.size() >= std::strlen(c) && type.ends_with(c); }))
    return nullptr;
  Emitter e(g, n, n);
  return e.none();
}

// clang-format off
const Rule kRules[] = {
  {"transpose-transpose", "aten::transpose", "transpose(transpose(x, a, b), a, b)  ->  x", transposeTranspose},
  {"t-t",                 "aten::t",         "t(t(x))  ->  x",                            tT},
  {"neg-neg",             "aten::neg",       "neg(neg(x))  ->  x",                        negNeg},
  {"detach",              "aten::detach",    "detach(x)  ->  x           (inference)",    detach},
  {"squeeze-unsqueeze",   "aten::squeeze",   "squeeze(unsqueeze(x, d), d)  ->  x",        squeezeUnsqueeze},
  {"flatten-one-dim",     "aten::flatten",   "flatten(x, d, d)  ->  x",                   flattenOneDim},
  {"contiguous-view",     "aten::view",      "view(contiguous(x), s)  ->  reshape(x, s)   (nothing writes them)", contiguousView},
  {"scale-after-product", "aten::matmul",    "softmax(matmul(q * c, k))  ->  softmax(matmul(q, k) * c)", scaleAfterProduct},
  {"scale-after-bmm",     "aten::bmm",       "softmax(bmm(q * c, k))  ->  softmax(bmm(q, k) * c)", scaleAfterProduct},
  {"add-through-view",    "aten::view",      "softmax(view(view(a, s) + m, t))  ->  softmax(a + reshape(expand(m, s), t))   (t: a's sizes; the view regroups leading dims)", addThroughView},
  {"add-through-reshape", "aten::reshape",   "softmax(reshape(reshape(a, s) + m, t))  ->  softmax(a + reshape(expand(m, s), t))", addThroughView},
  {"softmax-of-shifted",  "aten::softmax", "softmax(x - max(x, d, keepdim)[0], d)  ->  softmax(x, d)", softmaxOfShifted},
  {"log-softmax-of-shifted", "aten::log_softmax", "log_softmax(x - max(x, d, keepdim)[0], d)  ->  log_softmax(x, d)", softmaxOfShifted},
  {"size-of-contiguous",  "aten::size",      "size(contiguous(x), d)  ->  size(x, d)",    sizeOfContiguous},
  {"reshape-reshape",     "aten::reshape",   "reshape(reshape(x, s1), s2)  ->  reshape(x, s2)", reshapeReshape},
  {"pow-small-exponent",  "aten::pow",       "pow(x, 2 | 3 | 0.5 | -0.5 | -1)  ->  x * x | x * x * x | sqrt | rsqrt | reciprocal   (floating x)", powSmallExponent},
  {"to-same-dtype",       "aten::to",        "to(x, dtype(x), copy=False)  ->  x",         toSameDtype},
  {"full-slice",          "aten::slice",     "slice(x, d, 0, end past any extent or None, 1)  ->  x", fullSlice},
  {"is-none-known",       "aten::__is__",    "x is None  ->  False       (x's type holds no None)", isNoneKnown},
  {"isnot-none-known",    "aten::__isnot__", "x is not None  ->  True    (x's type holds no None)", isNoneKnown},
  {"where-scalar-value",  "aten::where",     "where(c, x, t0) -> where(c, x, value)  (t0 a 0-dim float constant)", selectScalarValue},
  {"masked-fill-scalar-value", "aten::masked_fill", "masked_fill(x, m, t0) -> masked_fill(x, m, value)", selectScalarValue},
  {"grad-mode-enter",     "prim::Enter",     "prim::Enter(no_grad or enable_grad object)  ->  None   (no autograd)", gradModeContext},
  {"grad-mode-exit",      "prim::Exit",      "prim::Exit(no_grad or enable_grad object)  ->  None", gradModeContext},
  {"int-of-tensor-arithmetic", "aten::Int", "Int(mul(NumToTensor(i), NumToTensor(j)))  ->  mul(i, j)   (and add, sub, floor division)", intOfTensorArithmetic},
};
// clang-format on

constexpr int kMaxRounds = 8;

// Something may write into the value, directly or through a view of it (an
// in-place op, or a node with effects that could): a rule replacing it by its
// input (neg(neg(x)) -> x) would let the write reach x. Only tensors and
// containers can be written; a number, bool, string or None read by an If
// that raises cannot. (A rule that reads a value later than the graph did
// asks writeBetween too: a write into the tensor it views, through another
// view, counts there.)
bool mayBeMutated(const Value& v) {
  const Type* t = v.type().get();
  while (t->kind() == TypeKind::Optional) t = t->contained()[0].get();
  return t->kind() != TypeKind::Simple && writerOf(v) != nullptr;
}

class Canonicalize final : public Pass {
 public:
  std::string_view name() const override { return "canonicalize"; }
  std::string_view description() const override { return "peephole rewrites from a rule table"; }

  bool run(Graph& g) override {
    bool any = false;
    for (int round = 0; round < kMaxRounds; ++round) {
      std::vector<Node*> nodes;
      g.forEachNode([&](Node* n) { nodes.push_back(n); });
      std::set<Node*> dead;
      bool changed = false;
      for (Node* n : nodes) {
        if (dead.count(n) || n->outputs().size() != 1) continue;
        for (const Rule& r : kRules) {
          if (n->kind().toQualString() != r.root) continue;
          if (mayBeMutated(*n->output())) break;
          Value* rep = r.apply(n, g);
          if (!rep) continue;
          if (rep != n->output()) {
            n->output()->replaceAllUsesWith(rep);
            dead.insert(n);
            n->destroy();
          }
          changed = true;
          ++fired_[r.name];
          break;
        }
      }
      any |= changed;
      if (!changed) break;
    }
    for (const auto& [rule, count] : fired_) note("rule " + rule + " fired " + std::to_string(count) + " time(s)");
    return any;
  }

 private:
  std::map<std::string, int> fired_;
};

}  // namespace

LLGA_REGISTER_PASS(Canonicalize);

}  // namespace llga
