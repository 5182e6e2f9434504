#include "ir/precision.h"

#include <string>

namespace llga {
namespace {

const Symbol& attrName() {
  static const Symbol s = Symbol::fromQualString("attr::precision");
  return s;
}

}  // namespace

std::string_view precisionName(Precision p) { return p == Precision::BF16 ? "bf16" : "fp32"; }

Precision precisionOf(const Node& n) {
  const AttrValue* a = n.attributes().find(attrName());
  return a && a->is<std::string>() && a->get<std::string>() == "bf16" ? Precision::BF16 : Precision::F32;
}

bool setPrecision(Node& n, Precision p) {
  if (p == Precision::F32) return n.attributes().remove(attrName());
  if (precisionOf(n) == p) return false;
  n.setAttr(attrName(), AttrValue(std::string(precisionName(p))));
  return true;
}

}  // namespace llga
