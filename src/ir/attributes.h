// Node attributes: `aten::foo[name=value, ...]`.
//
// An attribute value is one of: int, float, bool, string, a tensor held by
// reference, a type, a subgraph, or a list of values. TorchScript prints bool
// constants as 0/1 (ints) but bool lists as [True, False]; both survive a round trip.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "ir/symbol.h"
#include "ir/type.h"

namespace llga {

class Graph;

// A constant tensor referenced by an attribute (frozen weights, tensor literals).
// The IR does not own tensor semantics: this is dtype, shape, strides and a
// pointer kept alive by `owner` (a numpy array, a torch tensor, or our own vector).
struct ConstantTensor {
  ScalarType dtype = ScalarType::Float;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;  // in elements
  std::shared_ptr<void> owner;   // keeps `data` alive; null when data is null
  void* data = nullptr;          // null: shape known, contents not bound yet ("<Tensor>")
  // Where the contents came from. A tensor printed by PyTorch inside IR text
  // carries about 4 significant digits: `approximate` says so.
  bool approximate = false;
  std::string literal;  // the text PyTorch printed for it, when parsed from one

  int64_t numel() const;
  bool hasData() const { return data != nullptr; }
  // Contiguous constant with its own storage.
  static std::shared_ptr<ConstantTensor> owned(ScalarType dtype, std::vector<int64_t> sizes);
  double scalarAsDouble(size_t linear_index) const;  // for small tensors and printing
};
using TensorRef = std::shared_ptr<const ConstantTensor>;

struct AttrValue;
using AttrList = std::vector<AttrValue>;

struct AttrValue {
  using Variant = std::variant<int64_t, double, bool, std::string, TensorRef, TypePtr,
                               std::shared_ptr<Graph>, AttrList, std::monostate>;  // monostate: None
  Variant v;
  // How an AttrList reads: [a, b], (a, b) or {k: v} (keys and values alternate),
  // as prim::Constant prints list, tuple and dict IValues.
  enum class Seq : uint8_t { List, Tuple, Dict };
  Seq seq = Seq::List;
  // TorchScript prints some constants with their type: `annotate(List[int], [])`.
  // The annotation's text, kept so that they print back the same.
  std::string annotation;

  AttrValue() : v(int64_t{0}) {}
  template <typename T, typename = std::enable_if_t<std::is_constructible_v<Variant, T>>>
  AttrValue(T&& x) : v(std::forward<T>(x)) {}
  AttrValue(int x) : v(int64_t{x}) {}
  AttrValue(const char* s) : v(std::string(s)) {}

  template <typename T> bool is() const { return std::holds_alternative<T>(v); }
  template <typename T> const T& get() const { return std::get<T>(v); }
  const char* kindName() const;  // "int", "float", "tensor", ...
};

// Attribute list in insertion order (the order TorchScript prints them in).
class Attributes {
 public:
  bool has(Symbol name) const { return find(name) != nullptr; }
  const AttrValue* find(Symbol name) const;
  const AttrValue& get(Symbol name) const;  // throws std::out_of_range naming the attribute
  void set(Symbol name, AttrValue value);
  bool remove(Symbol name);
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  std::vector<std::pair<Symbol, AttrValue>> items_;
};

}  // namespace llga
