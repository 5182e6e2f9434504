#include "runtime/value.h"

#include <cmath>
#include <optional>
#include <stdexcept>

namespace llga {

const char* RtValue::kindName() const {
  static const char* names[] = {"None", "Tensor", "int", "float", "bool", "str", "list", "tuple", "Device", "dict"};
  return names[v.index()];
}

[[noreturn]] static void wrongKind(const RtValue& v, const char* want) {
  throw std::invalid_argument(std::string("expected ") + want + ", got " + v.kindName());
}

const Tensor& RtValue::tensor() const {
  if (auto* t = std::get_if<Tensor>(&v)) return *t;
  wrongKind(*this, "a Tensor");
}
int64_t RtValue::toInt() const {
  if (auto* i = std::get_if<int64_t>(&v)) return *i;
  if (auto* b = std::get_if<bool>(&v)) return *b;
  wrongKind(*this, "an int");
}
double RtValue::toDouble() const {
  if (auto* d = std::get_if<double>(&v)) return *d;
  if (auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  if (auto* b = std::get_if<bool>(&v)) return *b;
  wrongKind(*this, "a float");
}
bool RtValue::toBool() const {
  if (auto* b = std::get_if<bool>(&v)) return *b;
  if (auto* i = std::get_if<int64_t>(&v)) return *i != 0;
  wrongKind(*this, "a bool");
}
const std::string& RtValue::str() const {
  if (auto* s = std::get_if<std::string>(&v)) return *s;
  wrongKind(*this, "a str");
}
const RtList& RtValue::list() const {
  if (auto* l = std::get_if<RtList>(&v)) return *l;
  wrongKind(*this, "a list");
}
const RtTuplePtr& RtValue::tuple() const {
  if (auto* t = std::get_if<RtTuplePtr>(&v)) return *t;
  wrongKind(*this, "a tuple");
}
const RtDict& RtValue::dict() const {
  if (auto* d = std::get_if<RtDict>(&v)) return *d;
  wrongKind(*this, "a dict");
}
namespace {
// Python's equality of an int and a float: exact, not through a double
// (2**53 + 1 != float(2**53)).
bool intEqualsDouble(int64_t i, double d) {
  if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0) || d != std::trunc(d)) return false;
  return static_cast<int64_t>(d) == i;
}
}  // namespace

bool RtValue::sameKey(const RtValue& o) const {
  if (auto* s = std::get_if<std::string>(&v)) return std::holds_alternative<std::string>(o.v) && *s == o.str();
  auto asInt = [](const RtValue& x) -> std::optional<int64_t> {  // ints and bools (True == 1)
    if (auto* i = std::get_if<int64_t>(&x.v)) return *i;
    if (auto* b = std::get_if<bool>(&x.v)) return *b ? 1 : 0;
    return std::nullopt;
  };
  const std::optional<int64_t> a = asInt(*this), b = asInt(o);
  if (a && b) return *a == *b;  // the common case (Dict[int, ...]), exact beyond 2**53
  if (a && o.isDouble()) return intEqualsDouble(*a, o.toDouble());
  if (b && isDouble()) return intEqualsDouble(*b, toDouble());
  if (isDouble()) return o.isDouble() && toDouble() == o.toDouble();
  if (a) return false;  // an int against a string or anything else
  throw std::invalid_argument(std::string("unsupported dict key type ") + kindName());
}
Shape RtValue::intList() const {
  if (isInt()) return {toInt()};
  Shape out;
  for (const RtValue& x : *list()) out.push_back(x.toInt());
  return out;
}

RtValue makeList(std::vector<RtValue> items) { return RtValue(std::make_shared<std::vector<RtValue>>(std::move(items))); }
RtValue makeTuple(std::vector<RtValue> items) { return RtValue(RtTuplePtr(std::make_shared<RtTuple>(RtTuple{std::move(items)}))); }

}  // namespace llga
