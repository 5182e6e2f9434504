// Runtime values: everything a TorchScript graph carries between nodes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "runtime/tensor.h"

namespace llga {

struct RtValue;
// Lists are shared and mutable (aten::append mutates them in place), as in TorchScript.
using RtList = std::shared_ptr<std::vector<RtValue>>;
struct RtTuple {
  std::vector<RtValue> items;
};
using RtTuplePtr = std::shared_ptr<const RtTuple>;
struct RtNone {
  bool operator==(const RtNone&) const { return true; }
};
struct RtDevice {
  std::string name;  // "cpu"
};
// Dicts keep insertion order, as Python's do; keys are str, int, float or bool.
using RtDict = std::shared_ptr<std::vector<std::pair<RtValue, RtValue>>>;

struct RtValue {
  using Variant =
      std::variant<RtNone, Tensor, int64_t, double, bool, std::string, RtList, RtTuplePtr, RtDevice, RtDict>;
  Variant v;

  RtValue() = default;
  RtValue(Tensor t) : v(std::move(t)) {}
  RtValue(int64_t i) : v(i) {}
  RtValue(int i) : v(int64_t{i}) {}
  RtValue(double d) : v(d) {}
  RtValue(bool b) : v(b) {}
  RtValue(std::string s) : v(std::move(s)) {}
  RtValue(RtList l) : v(std::move(l)) {}
  RtValue(RtTuplePtr t) : v(std::move(t)) {}
  RtValue(RtDevice d) : v(std::move(d)) {}
  RtValue(RtDict d) : v(std::move(d)) {}

  bool isNone() const { return std::holds_alternative<RtNone>(v); }
  bool isTensor() const { return std::holds_alternative<Tensor>(v); }
  bool isInt() const { return std::holds_alternative<int64_t>(v); }
  bool isDouble() const { return std::holds_alternative<double>(v); }
  bool isBool() const { return std::holds_alternative<bool>(v); }
  bool isList() const { return std::holds_alternative<RtList>(v); }
  bool isTuple() const { return std::holds_alternative<RtTuplePtr>(v); }
  const char* kindName() const;

  // Accessors throw std::invalid_argument naming the kinds when they do not match.
  const Tensor& tensor() const;
  int64_t toInt() const;      // int or bool
  double toDouble() const;    // float, int or bool
  bool toBool() const;
  const std::string& str() const;
  const RtList& list() const;
  const RtTuplePtr& tuple() const;
  const RtDict& dict() const;
  // Equality of dict keys (str, int, float, bool).
  bool sameKey(const RtValue& o) const;
  Shape intList() const;  // int[] (also accepts a single int)
};

RtValue makeList(std::vector<RtValue> items);
RtValue makeTuple(std::vector<RtValue> items);

}  // namespace llga
