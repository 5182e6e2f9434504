#include "ir/precision.h"

#include <string>

namespace llga {
namespace {

const Symbol& attrName() {
  static const Symbol s = Symbol::fromQualString("attr::precision");
  return s;
}

const Symbol& outDtypeName() {
  static const Symbol s = Symbol::fromQualString("attr::out_dtype");
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

bool bf16Output(const Node& n) {
  const AttrValue* a = n.attributes().find(outDtypeName());
  return a && a->is<std::string>() && a->get<std::string>() == "bf16";
}

bool setBf16Output(Node& n, bool on) {
  if (!on) return n.attributes().remove(outDtypeName());
  if (bf16Output(n)) return false;
  n.setAttr(outDtypeName(), AttrValue(std::string("bf16")));
  return true;
}

}  // namespace llga
