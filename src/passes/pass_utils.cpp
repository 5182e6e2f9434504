#include "passes/pass_utils.h"

#include <cctype>
#include <utility>

namespace llga {

const ConstantTensor* boundTensor(const Value* v) {
  const Node* n = v->node();
  if (n->kind() != prim::Constant) return nullptr;
  const AttrValue* a = n->attributes().find(attr::value);
  if (!a || !a->is<TensorRef>() || !a->get<TensorRef>()->hasData()) return nullptr;
  return a->get<TensorRef>().get();
}

bool isNone(const Value* v) { return v->type()->isSimple("NoneType"); }

std::optional<double> constantNumber(const Value* v) {
  const Node* n = v->node();
  if (n->kind() != prim::Constant) return std::nullopt;
  const AttrValue* a = n->attributes().find(attr::value);
  if (!a) return std::nullopt;
  if (a->is<double>()) return a->get<double>();
  if (a->is<int64_t>()) return static_cast<double>(a->get<int64_t>());
  if (a->is<bool>()) return a->get<bool>() ? 1.0 : 0.0;
  return std::nullopt;
}

std::optional<int64_t> constantInt(const Value* v) {
  const Node* n = v->node();
  if (n->kind() != prim::Constant) return std::nullopt;
  const AttrValue* a = n->attributes().find(attr::value);
  if (!a) return std::nullopt;
  if (a->is<int64_t>()) return a->get<int64_t>();
  if (a->is<bool>()) return a->get<bool>() ? 1 : 0;
  return std::nullopt;
}

std::optional<std::string> constantString(const Value* v) {
  const Node* n = v->node();
  if (n->kind() != prim::Constant) return std::nullopt;
  const AttrValue* a = n->attributes().find(attr::value);
  if (!a || !a->is<std::string>()) return std::nullopt;
  return a->get<std::string>();
}

bool wholeSlice(const Node& n) {
  if (n.inputs().size() != 5) return false;
  auto start = constantInt(n.input(2)), end = constantInt(n.input(3)), step = constantInt(n.input(4));
  return (isNone(n.input(2)) || start == 0) && (isNone(n.input(3)) || (end && *end >= (int64_t{1} << 62))) &&
         step == 1;
}

std::optional<int64_t> constantDim(const Value* v, std::optional<size_t> rank) {
  auto d = constantInt(v);
  if (!d || !rank) return std::nullopt;
  const int64_t r = static_cast<int64_t>(*rank);
  if (*d < -r || *d >= r) return std::nullopt;
  return *d < 0 ? *d + r : *d;
}

bool readsMetadataOnly(const Node& n) {
  static const std::unordered_set<std::string> kinds = {
      "aten::size",    "aten::dim",     "aten::numel",      "prim::dtype",     "prim::device",   "aten::new_zeros",
      "aten::new_ones", "aten::new_full", "aten::zeros_like", "aten::ones_like", "aten::full_like"};
  return kinds.count(n.kind().toQualString()) > 0;
}

std::optional<std::vector<int64_t>> permutationOf(const Node* n, int64_t rank) {
  std::vector<int64_t> perm(static_cast<size_t>(rank));
  for (int64_t d = 0; d < rank; ++d) perm[static_cast<size_t>(d)] = d;
  auto norm = [rank](int64_t d) { return d < 0 ? d + rank : d; };
  if (n->kind().toQualString() == "aten::transpose") {
    const auto a = constantInt(n->input(1)), b = constantInt(n->input(2));
    if (!a || !b || norm(*a) < 0 || norm(*a) >= rank || norm(*b) < 0 || norm(*b) >= rank) return std::nullopt;
    std::swap(perm[static_cast<size_t>(norm(*a))], perm[static_cast<size_t>(norm(*b))]);
    return perm;
  }
  const auto dims = constantInts(n->input(1));
  if (!dims || static_cast<int64_t>(dims->size()) != rank) return std::nullopt;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t s = norm((*dims)[static_cast<size_t>(d)]);
    if (s < 0 || s >= rank || seen[static_cast<size_t>(s)]) return std::nullopt;
    seen[static_cast<size_t>(s)] = true;
    perm[static_cast<size_t>(d)] = s;
  }
  return perm;
}

std::optional<std::vector<int64_t>> constantInts(const Value* v) {
  const Node* n = v->node();
  std::vector<int64_t> out;
  if (n->kind() == prim::Constant) {
    const AttrValue* a = n->attributes().find(attr::value);
    if (!a || !a->is<AttrList>()) return std::nullopt;
    for (const AttrValue& x : a->get<AttrList>()) {
      if (!x.is<int64_t>()) return std::nullopt;
      out.push_back(x.get<int64_t>());
    }
    return out;
  }
  if (n->kind() != prim::ListConstruct) return std::nullopt;
  for (const Value* x : n->inputs()) {
    auto i = constantInt(x);
    if (!i) return std::nullopt;
    out.push_back(*i);
  }
  return out;
}

std::string where(const Node& n) {
  std::string s = n.kind().toQualString();
  if (!n.source().empty()) s += " at " + n.source();
  if (!n.outputs().empty()) s += " (%" + n.output()->debugName() + ")";
  return s;
}

TypePtr constantTensorType(const ConstantTensor& t) {
  TensorInfo info;
  info.dtype = t.dtype;
  info.sizes.emplace(t.sizes.begin(), t.sizes.end());
  info.strides = t.strides;
  info.requires_grad = false;
  info.device = "cpu";
  return Type::tensor(info);
}

std::optional<ScalarType> knownDtype(const Value* v) {
  if (!v->type()->isTensor()) return std::nullopt;
  return v->type()->tensorInfo().dtype;
}

Node* Emitter::place(Node* n) {
  n->setScope(origin_->scope());
  n->setSource(origin_->source());
  n->insertBefore(at_);
  return n;
}

Node* Emitter::node(const char* kind, const std::vector<Value*>& inputs, size_t outputs) {
  return place(g_.create(Symbol::fromQualString(kind), inputs, outputs));
}

Value* Emitter::op(const char* kind, const std::vector<Value*>& inputs, TypePtr type) {
  Node* n = node(kind, inputs, 1);
  n->output()->setType(type ? std::move(type) : Type::tensor());
  return n->output();
}

Value* Emitter::constant(AttrValue v, TypePtr type) {
  Node* n = g_.create(prim::Constant, 1);
  if (!type->isSimple("NoneType")) n->setAttr(attr::value, std::move(v));
  n->output()->setType(std::move(type));
  return place(n)->output();
}

Value* Emitter::i(int64_t v) { return constant(AttrValue(v), Type::Int()); }
Value* Emitter::f(double v) { return constant(AttrValue(v), Type::Float()); }
Value* Emitter::b(bool v) { return constant(AttrValue(int64_t{v ? 1 : 0}), Type::Bool()); }  // printed value=0|1, as TorchScript does
Value* Emitter::none() { return constant(AttrValue(), Type::None()); }

Value* Emitter::ints(const std::vector<int64_t>& v) {
  AttrList items;
  for (int64_t x : v) items.emplace_back(x);
  return constant(AttrValue(std::move(items)), Type::list(Type::Int()));
}

Value* Emitter::list(const std::vector<Value*>& items, TypePtr elem) {
  return op("prim::ListConstruct", items, Type::list(std::move(elem)));
}

void replaceKeepingName(Graph& g, Value* from, Value* to) {
  from->replaceAllUsesWith(to);
  if (!to->debugName().empty() && !std::isdigit(static_cast<unsigned char>(to->debugName()[0]))) return;
  std::string name = from->debugName();
  from->setDebugName(g.freshName());
  to->setDebugName(name);
}

namespace {

void collectUsesInside(Block* b, std::unordered_set<const Value*>& used) {
  for (const Value* v : b->outputs()) used.insert(v);
  for (Node* n : b->nodes()) {
    for (const Value* v : n->inputs()) used.insert(v);
    for (Block* sub : n->blocks()) collectUsesInside(sub, used);
  }
}

}  // namespace

std::unordered_set<const Value*> valuesLeavingOps(Block* b) {
  std::unordered_set<const Value*> out(b->outputs().begin(), b->outputs().end());
  for (Node* n : b->nodes())
    for (Block* sub : n->blocks()) collectUsesInside(sub, out);
  return out;
}

}  // namespace llga
