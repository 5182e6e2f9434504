// Types of IR values, as TorchScript prints them.
//
//   Tensor                                   TensorType with nothing known
//   Float(1, 3, strides=[3, 1], requires_grad=0, device=cpu)
//   Long(requires_grad=0, device=cpu)        0-dim tensor
//   Float(*, 3)                              unknown extent
//   int float bool str NoneType Device ...   simple types (SimpleType names below)
//   int[]  Tensor?  (Tensor, int)            list, optional, tuple
//   Dict(str, Tensor) Union(int, str) Future(int) RRef(int)
//   __torch__.torchvision.models.resnet.ResNet   class types (dotted names)
//
// Types are immutable and shared (TypePtr). Structural equality is `equals`.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace llga {

// Element types PyTorch prints in tensor types ("Float", "Long", ...).
enum class ScalarType : uint8_t {
  Byte, Char, Short, Int, Long, Half, Float, Double, ComplexHalf, ComplexFloat, ComplexDouble,
  Bool, QInt8, QUInt8, QInt32, BFloat16, QUInt4x2, QUInt2x4,
};
// PyTorch's integer codes for dtypes (what `prim::Constant[value=6]` means as a dtype).
int scalarTypeCode(ScalarType t);
std::optional<ScalarType> scalarTypeFromCode(int64_t code);
std::string_view scalarTypeName(ScalarType t);  // "Float"
std::optional<ScalarType> scalarTypeFromName(std::string_view name);
size_t scalarTypeSize(ScalarType t);  // bytes per element
bool isFloatingType(ScalarType t);    // Float, Double, Half, BFloat16

enum class TypeKind : uint8_t {
  Tensor, Simple, List, Optional, Tuple, Dict, Union, Future, RRef, Class,
};

class Type;
using TypePtr = std::shared_ptr<const Type>;

// What a TensorType knows. Every field is optional, as in TorchScript.
struct TensorInfo {
  std::optional<ScalarType> dtype;
  // Rank known iff sizes has a value; an unknown extent is nullopt.
  std::optional<std::vector<std::optional<int64_t>>> sizes;
  // Printed only when rank > 0 and complete.
  std::optional<std::vector<int64_t>> strides;
  std::optional<bool> requires_grad;
  std::optional<std::string> device;
  bool undefined = false;  // "[Undefined]" suffix

  bool operator==(const TensorInfo&) const = default;
  std::optional<size_t> rank() const { return sizes ? std::optional<size_t>(sizes->size()) : std::nullopt; }
  // All extents known.
  std::optional<std::vector<int64_t>> concreteSizes() const;
};

class Type {
 public:
  // Factories. Simple types must be one of knownSimpleTypeNames().
  static TypePtr tensor();  // plain "Tensor"
  static TypePtr tensor(TensorInfo info);
  static TypePtr simple(std::string_view name);  // "int", "float", "NoneType", ...
  static TypePtr list(TypePtr elem);
  static TypePtr optional(TypePtr elem);
  static TypePtr tuple(std::vector<TypePtr> elems);
  // A tuple whose items have names (what builtin ops such as max(x, dim)
  // return in scripted graphs): "NamedTuple(values : Tensor, indices : Tensor)".
  static TypePtr namedTuple(std::vector<std::string> names, std::vector<TypePtr> elems);
  static TypePtr dict(TypePtr key, TypePtr value);
  static TypePtr unionOf(std::vector<TypePtr> elems);
  static TypePtr future(TypePtr elem);
  static TypePtr rref(TypePtr elem);
  static TypePtr classType(std::string qualified_name);

  static TypePtr Int() { return simple("int"); }
  static TypePtr Float() { return simple("float"); }
  static TypePtr Bool() { return simple("bool"); }
  static TypePtr Str() { return simple("str"); }
  static TypePtr None() { return simple("NoneType"); }

  // Names accepted by simple(): int float bool str NoneType Device Generator ...
  static const std::vector<std::string_view>& knownSimpleTypeNames();
  static bool isKnownSimpleName(std::string_view name);

  TypeKind kind() const { return kind_; }
  bool isTensor() const { return kind_ == TypeKind::Tensor; }
  bool isSimple(std::string_view name) const { return kind_ == TypeKind::Simple && name_ == name; }
  const std::string& name() const { return name_; }  // Simple and Class types
  const std::vector<TypePtr>& contained() const { return contained_; }
  const std::vector<std::string>& fieldNames() const { return field_names_; }  // named tuples
  const TensorInfo& tensorInfo() const { return tensor_; }  // meaningful for Tensor

  std::string str() const;
  bool equals(const Type& other) const;

 private:
  Type(TypeKind k) : kind_(k) {}
  TypeKind kind_;
  std::string name_;
  std::vector<TypePtr> contained_;
  std::vector<std::string> field_names_;
  TensorInfo tensor_;
};

}  // namespace llga
