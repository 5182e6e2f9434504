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

const Symbol& actScaleName() {
  static const Symbol s = Symbol::fromQualString("attr::act_scale");
  return s;
}

const Symbol& actDtypeName() {
  static const Symbol s = Symbol::fromQualString("attr::act_dtype");
  return s;
}

const Symbol& outScaleName() {
  static const Symbol s = Symbol::fromQualString("attr::out_scale");
  return s;
}

// The (scale, dtype) attribute pair as a quantization, if both are there and valid.
std::optional<ActivationQuant> quantPair(const Node& n, const Symbol& scale_name, const Symbol& dtype_name) {
  const AttrValue* scale = n.attributes().find(scale_name);
  const AttrValue* dtype = n.attributes().find(dtype_name);
  if (!scale || !dtype || !dtype->is<std::string>()) return std::nullopt;
  const double s = scale->is<double>() ? scale->get<double>() : scale->is<int64_t>() ? static_cast<double>(scale->get<int64_t>()) : 0.0;
  const std::string& d = dtype->get<std::string>();
  if (!(s > 0) || (d != "u8" && d != "s8")) return std::nullopt;
  return ActivationQuant{s, d == "u8"};
}

bool setQuantPair(Node& n, const Symbol& scale_name, const Symbol& dtype_name, std::optional<ActivationQuant> q) {
  if (!q) {
    const bool a = n.attributes().remove(scale_name);
    return n.attributes().remove(dtype_name) || a;
  }
  std::optional<ActivationQuant> now = quantPair(n, scale_name, dtype_name);
  if (now && now->scale == q->scale && now->is_unsigned == q->is_unsigned) return false;
  n.setAttr(scale_name, AttrValue(q->scale));
  n.setAttr(dtype_name, AttrValue(std::string(q->is_unsigned ? "u8" : "s8")));
  return true;
}

}  // namespace

std::string_view precisionName(Precision p) {
  switch (p) {
    case Precision::BF16: return "bf16";
    case Precision::INT8: return "int8";
    case Precision::F32: break;
  }
  return "fp32";
}

Precision precisionOf(const Node& n) {
  const AttrValue* a = n.attributes().find(attrName());
  if (!a || !a->is<std::string>()) return Precision::F32;
  const std::string& s = a->get<std::string>();
  return s == "bf16" ? Precision::BF16 : s == "int8" ? Precision::INT8 : Precision::F32;
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

std::optional<ActivationQuant> activationQuantOf(const Node& n) { return quantPair(n, actScaleName(), actDtypeName()); }

bool setActivationQuant(Node& n, std::optional<ActivationQuant> q) {
  return setQuantPair(n, actScaleName(), actDtypeName(), q);
}

bool dynamicActivation(const Node& n) {
  const AttrValue* scale = n.attributes().find(actScaleName());
  return scale && scale->is<std::string>() && scale->get<std::string>() == "dynamic";
}

bool setDynamicActivation(Node& n) {
  if (dynamicActivation(n)) return false;
  n.setAttr(actScaleName(), AttrValue(std::string("dynamic")));
  n.setAttr(actDtypeName(), AttrValue(std::string("s8")));
  return true;
}

std::optional<ActivationQuant> int8OutputOf(const Node& n) { return quantPair(n, outScaleName(), outDtypeName()); }

bool setInt8Output(Node& n, std::optional<ActivationQuant> q) {
  if (!q && !int8OutputOf(n)) return false;  // leaves a bf16 out_dtype alone
  return setQuantPair(n, outScaleName(), outDtypeName(), q);
}

}  // namespace llga
