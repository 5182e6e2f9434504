// Interned operator and attribute names ("aten::relu", "attr::value").
//
// A Symbol is a 32-bit handle into a process-wide table, so comparing two
// symbols is an integer compare and a Node carries no string for its kind.
// Interning is thread-safe; handles are never invalidated.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace llga {

class Symbol {
 public:
  constexpr Symbol() = default;

  // "aten::relu" -> handle. The text must contain "::" (a namespace).
  static Symbol fromQualString(std::string_view qual);
  // Attribute names have no namespace in the text ("value"); they live in attr::.
  static Symbol attr(std::string_view name);

  const std::string& toQualString() const;  // "aten::relu"
  std::string_view ns() const;              // "aten"
  std::string_view name() const;            // "relu"

  uint32_t id() const { return id_; }
  bool valid() const { return id_ != 0; }
  bool operator==(const Symbol& o) const { return id_ == o.id_; }
  bool operator!=(const Symbol& o) const { return id_ != o.id_; }
  bool operator<(const Symbol& o) const { return id_ < o.id_; }

 private:
  explicit Symbol(uint32_t id) : id_(id) {}
  uint32_t id_ = 0;
};

// Well-known symbols. Add here what passes and the printer refer to by name.
namespace prim {
extern const Symbol Constant, Param, Return, If, Loop, GetAttr, CallMethod, CallFunction,
    ListConstruct, ListUnpack, TupleConstruct, TupleUnpack, DictConstruct;
}  // namespace prim
namespace attr {
extern const Symbol value, name, Subgraph;
}  // namespace attr

}  // namespace llga

template <>
struct std::hash<llga::Symbol> {
  size_t operator()(const llga::Symbol& s) const noexcept { return s.id(); }
};
