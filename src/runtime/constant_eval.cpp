#include "runtime/constant_eval.h"

#include "runtime/exec_context.h"
#include "runtime/kernel.h"

namespace llga {

namespace {

// An attribute value as the runtime value of type `type` (ints read as bools
// where the type says bool); nullopt for what a constant cannot hold at run
// time (tensors inside containers, types, graphs).
std::optional<RtValue> attrToRuntime(const AttrValue& a, const Type* type) {
  const bool as_bool = type && type->isSimple("bool");
  if (a.is<std::monostate>()) return RtValue();
  if (a.is<int64_t>()) return as_bool ? RtValue(a.get<int64_t>() != 0) : RtValue(a.get<int64_t>());
  if (a.is<double>()) return RtValue(a.get<double>());
  if (a.is<bool>()) return RtValue(a.get<bool>());
  if (a.is<std::string>())
    return type && type->isSimple("Device") ? RtValue(RtDevice{a.get<std::string>()}) : RtValue(a.get<std::string>());
  if (!a.is<AttrList>()) return std::nullopt;
  const AttrList& items = a.get<AttrList>();
  // The element type of item i, when the declared type says it.
  auto elem = [&](size_t i) -> const Type* {
    if (!type) return nullptr;
    const auto& c = type->contained();
    if (type->kind() == TypeKind::List && !c.empty()) return c[0].get();
    if (type->kind() == TypeKind::Tuple && i < c.size()) return c[i].get();
    if (type->kind() == TypeKind::Dict && c.size() == 2) return c[i % 2].get();
    return nullptr;
  };
  std::vector<RtValue> out;
  for (size_t i = 0; i < items.size(); ++i) {
    auto v = attrToRuntime(items[i], elem(i));
    if (!v) return std::nullopt;
    out.push_back(std::move(*v));
  }
  if (a.seq == AttrValue::Seq::Tuple) return makeTuple(std::move(out));
  if (a.seq == AttrValue::Seq::Dict) {
    auto d = std::make_shared<std::vector<std::pair<RtValue, RtValue>>>();
    for (size_t i = 0; i + 1 < out.size(); i += 2) d->emplace_back(std::move(out[i]), std::move(out[i + 1]));
    return RtValue(RtDict(std::move(d)));
  }
  return makeList(std::move(out));
}

}  // namespace

std::optional<RtValue> constantValue(const Node& n) {
  if (n.kind() != prim::Constant || n.outputs().size() != 1) return std::nullopt;
  const TypePtr& type = n.output()->type();
  const AttrValue* a = n.attributes().find(attr::value);
  if (!a) {
    if (type->isSimple("Function")) return std::nullopt;
    return RtValue();
  }
  return attrToRuntime(*a, type.get());
}

std::optional<AttrValue> toAttr(const RtValue& v, const Type& type) {
  if (v.isBool()) return type.isSimple("bool") ? AttrValue(int64_t{v.toBool()}) : std::optional<AttrValue>();
  if (v.isInt()) return AttrValue(v.toInt());
  if (v.isDouble()) return AttrValue(v.toDouble());
  if (std::holds_alternative<std::string>(v.v)) return AttrValue(v.str());
  if (std::holds_alternative<RtDevice>(v.v)) return AttrValue(std::get<RtDevice>(v.v).name);
  if (v.isList() && type.kind() == TypeKind::List) {
    AttrList items;
    for (const RtValue& x : *v.list()) {
      if (x.isBool()) items.emplace_back(x.toBool());
      else if (x.isInt()) items.emplace_back(x.toInt());
      else if (x.isDouble()) items.emplace_back(x.toDouble());
      else if (std::holds_alternative<std::string>(x.v)) items.emplace_back(x.str());
      else return std::nullopt;
    }
    AttrValue a(std::move(items));
    if (v.list()->empty()) return std::nullopt;  // empty lists need a type annotation: leave them alone
    return a;
  }
  return std::nullopt;
}

std::optional<std::vector<RtValue>> evaluateNode(const Node& n, std::vector<RtValue> inputs) {
  const OpDef* def = OpRegistry::global().find(n.kind());
  if (!def || inputs.size() < def->min_inputs || inputs.size() > def->max_inputs) return std::nullopt;
  auto kernel = def->make(n);
  std::vector<RtValue> outputs(n.outputs().size());
  std::vector<RtValue*> in, out;
  for (auto& v : inputs) in.push_back(&v);
  for (auto& v : outputs) out.push_back(&v);
  ExecContext ctx;
  kernel->run(KernelArgs{in.data(), in.size(), out.data(), out.size(), ctx});
  return outputs;
}

}  // namespace llga
