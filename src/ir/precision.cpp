#include "ir/precision.h"

#include <algorithm>
#include <cmath>
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

const Symbol& actZeroPointName() {
  static const Symbol s = Symbol::fromQualString("attr::act_zero_point");
  return s;
}

const Symbol& outZeroPointName() {
  static const Symbol s = Symbol::fromQualString("attr::out_zero_point");
  return s;
}

const Symbol& actQmaxName() {
  static const Symbol s = Symbol::fromQualString("attr::act_qmax");
  return s;
}

const Symbol& weightScaleName() {
  static const Symbol s = Symbol::fromQualString("attr::w_scale");
  return s;
}

// The (scale, dtype[, zero point]) attributes as a quantization, if scale
// and dtype are there and valid (a missing zero point is 0; one outside the
// dtype's range makes the whole invalid).
std::optional<ActivationQuant> quantPair(const Node& n, const Symbol& scale_name, const Symbol& dtype_name,
                                         const Symbol& zp_name) {
  const AttrValue* scale = n.attributes().find(scale_name);
  const AttrValue* dtype = n.attributes().find(dtype_name);
  if (!scale || !dtype || !dtype->is<std::string>()) return std::nullopt;
  const double s = scale->is<double>() ? scale->get<double>() : scale->is<int64_t>() ? static_cast<double>(scale->get<int64_t>()) : 0.0;
  const std::string& d = dtype->get<std::string>();
  if (!(s > 0) || (d != "u8" && d != "s8")) return std::nullopt;
  ActivationQuant q{s, d == "u8"};
  if (const AttrValue* zp = n.attributes().find(zp_name)) {
    if (!zp->is<int64_t>()) return std::nullopt;
    const int64_t z = zp->get<int64_t>();
    if (q.is_unsigned ? (z < 0 || z > 255) : (z < -128 || z > 127)) return std::nullopt;
    q.zero_point = static_cast<int32_t>(z);
  }
  return q;
}

bool setQuantPair(Node& n, const Symbol& scale_name, const Symbol& dtype_name, const Symbol& zp_name,
                  std::optional<ActivationQuant> q) {
  if (!q) {
    const bool a = n.attributes().remove(scale_name);
    const bool b = n.attributes().remove(zp_name);
    return n.attributes().remove(dtype_name) || a || b;
  }
  std::optional<ActivationQuant> now = quantPair(n, scale_name, dtype_name, zp_name);
  if (now && *now == *q) return false;
  n.setAttr(scale_name, AttrValue(q->scale));
  n.setAttr(dtype_name, AttrValue(std::string(q->is_unsigned ? "u8" : "s8")));
  if (q->zero_point != 0)
    n.setAttr(zp_name, AttrValue(int64_t{q->zero_point}));
  else
    n.attributes().remove(zp_name);
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

std::optional<ActivationQuant> activationQuantOf(const Node& n) {
  return quantPair(n, actScaleName(), actDtypeName(), actZeroPointName());
}

bool setActivationQuant(Node& n, std::optional<ActivationQuant> q) {
  return setQuantPair(n, actScaleName(), actDtypeName(), actZeroPointName(), q);
}

bool dynamicActivation(const Node& n) {
  const AttrValue* scale = n.attributes().find(actScaleName());
  return scale && scale->is<std::string>() && scale->get<std::string>() == "dynamic";
}

bool setDynamicActivation(Node& n, std::optional<int> u8_qmax) {
  if (dynamicActivation(n) && dynamicU8Qmax(n) == u8_qmax) return false;
  n.setAttr(actScaleName(), AttrValue(std::string("dynamic")));
  n.setAttr(actDtypeName(), AttrValue(std::string(u8_qmax ? "u8" : "s8")));
  if (u8_qmax)
    n.setAttr(actQmaxName(), AttrValue(int64_t{*u8_qmax}));
  else
    n.attributes().remove(actQmaxName());
  return true;
}

std::optional<int> dynamicU8Qmax(const Node& n) {
  if (!dynamicActivation(n)) return std::nullopt;
  const AttrValue* d = n.attributes().find(actDtypeName());
  const AttrValue* q = n.attributes().find(actQmaxName());
  if (!d || !d->is<std::string>() || d->get<std::string>() != "u8" || !q || !q->is<int64_t>()) return std::nullopt;
  const int64_t v = q->get<int64_t>();
  if (v < 1 || v > 255) return std::nullopt;
  return static_cast<int>(v);
}

std::optional<ActivationQuant> int8OutputOf(const Node& n) {
  return quantPair(n, outScaleName(), outDtypeName(), outZeroPointName());
}

bool setInt8Output(Node& n, std::optional<ActivationQuant> q) {
  if (!q && !int8OutputOf(n)) return false;  // leaves a bf16 out_dtype alone
  return setQuantPair(n, outScaleName(), outDtypeName(), outZeroPointName(), q);
}

std::optional<std::vector<float>> weightScalesOf(const Node& n) {
  const AttrValue* a = n.attributes().find(weightScaleName());
  if (!a || !a->is<TensorRef>()) return std::nullopt;
  const TensorRef& t = a->get<TensorRef>();
  if (!t || !t->hasData() || t->sizes.size() != 1 || t->sizes[0] < 1) return std::nullopt;
  std::vector<float> out(static_cast<size_t>(t->sizes[0]));
  for (size_t i = 0; i < out.size(); ++i) {
    const double s = t->scalarAsDouble(i);
    if (!(s > 0) || !std::isfinite(s)) return std::nullopt;
    out[i] = static_cast<float>(s);
  }
  return out;
}

bool setWeightScales(Node& n, const std::vector<float>& scales) {
  if (weightScalesOf(n) == scales) return false;
  auto t = ConstantTensor::owned(ScalarType::Float, {static_cast<int64_t>(scales.size())});
  std::copy(scales.begin(), scales.end(), static_cast<float*>(t->data));
  n.setAttr(weightScaleName(), AttrValue(TensorRef(t)));
  return true;
}

}  // namespace llga
