#include "runtime/constant_eval.h"

#include "runtime/exec_context.h"
#include "runtime/kernel.h"

namespace llga {

std::optional<RtValue> constantValue(const Node& n) {
  if (n.kind() != prim::Constant || n.outputs().size() != 1) return std::nullopt;
  const TypePtr& type = n.output()->type();
  const AttrValue* a = n.attributes().find(attr::value);
  if (!a) {
    if (type->isSimple("Function")) return std::nullopt;
    return RtValue();
  }
  if (a->is<int64_t>()) return type->isSimple("bool") ? RtValue(a->get<int64_t>() != 0) : RtValue(a->get<int64_t>());
  if (a->is<double>()) return RtValue(a->get<double>());
  if (a->is<bool>()) return RtValue(a->get<bool>());
  if (a->is<std::string>())
    return type->isSimple("Device") ? RtValue(RtDevice{a->get<std::string>()}) : RtValue(a->get<std::string>());
  if (a->is<AttrList>()) {
    bool bools = type->kind() == TypeKind::List && type->contained()[0]->isSimple("bool");
    std::vector<RtValue> items;
    for (const AttrValue& x : a->get<AttrList>()) {
      if (x.is<int64_t>()) items.emplace_back(bools ? RtValue(x.get<int64_t>() != 0) : RtValue(x.get<int64_t>()));
      else if (x.is<double>()) items.emplace_back(x.get<double>());
      else if (x.is<bool>()) items.emplace_back(x.get<bool>());
      else if (x.is<std::string>()) items.emplace_back(x.get<std::string>());
      else return std::nullopt;  // tensors in lists
    }
    return makeList(std::move(items));
  }
  return std::nullopt;
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
