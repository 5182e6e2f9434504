#include "ir/type.h"

#include <algorithm>
#include <array>
#include <sstream>
#include <stdexcept>

namespace llga {
namespace {

struct ScalarTypeEntry {
  ScalarType type;
  std::string_view name;
  int code;  // c10::ScalarType numbering
  size_t size;
};

constexpr std::array<ScalarTypeEntry, 18> kScalarTypes{{
    {ScalarType::Byte, "Byte", 0, 1},           {ScalarType::Char, "Char", 1, 1},
    {ScalarType::Short, "Short", 2, 2},         {ScalarType::Int, "Int", 3, 4},
    {ScalarType::Long, "Long", 4, 8},           {ScalarType::Half, "Half", 5, 2},
    {ScalarType::Float, "Float", 6, 4},         {ScalarType::Double, "Double", 7, 8},
    {ScalarType::ComplexHalf, "ComplexHalf", 8, 4}, {ScalarType::ComplexFloat, "ComplexFloat", 9, 8},
    {ScalarType::ComplexDouble, "ComplexDouble", 10, 16}, {ScalarType::Bool, "Bool", 11, 1},
    {ScalarType::QInt8, "QInt8", 12, 1},        {ScalarType::QUInt8, "QUInt8", 13, 1},
    {ScalarType::QInt32, "QInt32", 14, 4},      {ScalarType::BFloat16, "BFloat16", 15, 2},
    {ScalarType::QUInt4x2, "QUInt4x2", 16, 1},  {ScalarType::QUInt2x4, "QUInt2x4", 17, 1},
}};

const ScalarTypeEntry& entry(ScalarType t) { return kScalarTypes[static_cast<size_t>(t)]; }

// Simple (non-parametric, non-class) type names that TorchScript prints.
const std::vector<std::string_view> kSimpleNames = {
    "int", "float", "bool", "str", "NoneType", "Device", "Generator", "Layout", "ScalarType",
    "MemoryFormat", "Scalar", "number", "complex", "Any", "Storage", "Stream", "Capsule",
    "QScheme", "AnyEnumType", "AnyClassType", "tuple", "list", "Quantizer",
    "SymInt", "PyObject", "Function"};

void joinTypes(std::ostream& os, const std::vector<TypePtr>& ts) {
  for (size_t i = 0; i < ts.size(); ++i) os << (i ? ", " : "") << ts[i]->str();
}

}  // namespace

int scalarTypeCode(ScalarType t) { return entry(t).code; }
std::optional<ScalarType> scalarTypeFromCode(int64_t code) {
  for (const auto& e : kScalarTypes)
    if (e.code == code) return e.type;
  return std::nullopt;
}
std::string_view scalarTypeName(ScalarType t) { return entry(t).name; }
std::optional<ScalarType> scalarTypeFromName(std::string_view name) {
  for (const auto& e : kScalarTypes)
    if (e.name == name) return e.type;
  return std::nullopt;
}
size_t scalarTypeSize(ScalarType t) { return entry(t).size; }
bool isFloatingType(ScalarType t) {
  return t == ScalarType::Float || t == ScalarType::Double || t == ScalarType::Half || t == ScalarType::BFloat16;
}

std::optional<std::vector<int64_t>> TensorInfo::concreteSizes() const {
  if (!sizes) return std::nullopt;
  std::vector<int64_t> out;
  for (const auto& s : *sizes) {
    if (!s) return std::nullopt;
    out.push_back(*s);
  }
  return out;
}

TypePtr Type::tensor() {
  static const TypePtr plain(new Type(TypeKind::Tensor));
  return plain;
}
TypePtr Type::tensor(TensorInfo info) {
  if (info.strides && (!info.sizes || info.strides->size() != info.sizes->size()))
    throw std::invalid_argument("tensor type: strides must match a known rank");
  auto t = std::shared_ptr<Type>(new Type(TypeKind::Tensor));
  t->tensor_ = std::move(info);
  return t;
}
const std::vector<std::string_view>& Type::knownSimpleTypeNames() { return kSimpleNames; }
bool Type::isKnownSimpleName(std::string_view name) {
  return std::find(kSimpleNames.begin(), kSimpleNames.end(), name) != kSimpleNames.end();
}
TypePtr Type::simple(std::string_view name) {
  // One shared instance per simple type.
  static const std::vector<TypePtr> instances = [] {
    std::vector<TypePtr> out;
    for (std::string_view n : kSimpleNames) {
      auto t = std::shared_ptr<Type>(new Type(TypeKind::Simple));
      t->name_ = std::string(n);
      out.push_back(std::move(t));
    }
    return out;
  }();
  for (size_t i = 0; i < kSimpleNames.size(); ++i)
    if (kSimpleNames[i] == name) return instances[i];
  throw std::invalid_argument("unknown type '" + std::string(name) + "'");
}

#define LLGA_CONTAINER_FACTORY(fn, KIND)                   \
  TypePtr Type::fn(TypePtr elem) {                         \
    auto t = std::shared_ptr<Type>(new Type(TypeKind::KIND)); \
    t->contained_ = {std::move(elem)};                     \
    return t;                                              \
  }
LLGA_CONTAINER_FACTORY(list, List)
LLGA_CONTAINER_FACTORY(optional, Optional)
LLGA_CONTAINER_FACTORY(future, Future)
LLGA_CONTAINER_FACTORY(rref, RRef)
#undef LLGA_CONTAINER_FACTORY

TypePtr Type::tuple(std::vector<TypePtr> elems) {
  auto t = std::shared_ptr<Type>(new Type(TypeKind::Tuple));
  t->contained_ = std::move(elems);
  return t;
}
TypePtr Type::namedTuple(std::vector<std::string> names, std::vector<TypePtr> elems) {
  if (names.size() != elems.size()) throw std::invalid_argument("a named tuple needs one name per item");
  auto t = std::shared_ptr<Type>(new Type(TypeKind::Tuple));
  t->contained_ = std::move(elems);
  t->field_names_ = std::move(names);
  return t;
}
TypePtr Type::unionOf(std::vector<TypePtr> elems) {
  auto t = std::shared_ptr<Type>(new Type(TypeKind::Union));
  t->contained_ = std::move(elems);
  return t;
}
TypePtr Type::dict(TypePtr key, TypePtr value) {
  auto t = std::shared_ptr<Type>(new Type(TypeKind::Dict));
  t->contained_ = {std::move(key), std::move(value)};
  return t;
}
TypePtr Type::classType(std::string qualified_name) {
  if (qualified_name.find('.') == std::string::npos)
    throw std::invalid_argument("class type needs a qualified name, got '" + qualified_name + "'");
  auto t = std::shared_ptr<Type>(new Type(TypeKind::Class));
  t->name_ = std::move(qualified_name);
  return t;
}

// TorchScript's tensor type printing: dtype name (or "Tensor"), then, when the rank
// is known, "(sizes, strides=[..], requires_grad=.., device=..)"; when it is not,
// "(requires_grad=.., device=..)" if either is known.
static void printTensor(std::ostream& os, const TensorInfo& t) {
  os << (t.dtype ? scalarTypeName(*t.dtype) : "Tensor");
  if (t.dtype && !t.sizes) os << "Tensor";
  size_t n = 0;
  auto sep = [&]() -> std::ostream& { return os << (n++ ? ", " : ""); };
  if (t.sizes) {
    os << "(";
    for (const auto& s : *t.sizes) {
      sep();
      if (s) os << *s; else os << "*";
    }
    if (t.strides && !t.sizes->empty()) {
      sep() << "strides=[";
      for (size_t i = 0; i < t.strides->size(); ++i) os << (i ? ", " : "") << (*t.strides)[i];
      os << "]";
    }
    if (t.requires_grad) sep() << "requires_grad=" << int(*t.requires_grad);
    if (t.device) sep() << "device=" << *t.device;
    os << ")";
  } else if (t.requires_grad || t.device) {
    os << "(";
    if (t.requires_grad) sep() << "requires_grad=" << int(*t.requires_grad);
    if (t.device) sep() << "device=" << *t.device;
    os << ")";
  }
  if (t.undefined) os << "[Undefined]";
}

std::string Type::str() const {
  std::ostringstream os;
  switch (kind_) {
    case TypeKind::Tensor: printTensor(os, tensor_); break;
    case TypeKind::Simple:
    case TypeKind::Class: os << name_; break;
    case TypeKind::List: os << contained_[0]->str() << "[]"; break;
    case TypeKind::Optional: os << contained_[0]->str() << "?"; break;
    case TypeKind::Tuple:
      if (!field_names_.empty()) {
        os << "NamedTuple(";
        for (size_t i = 0; i < contained_.size(); ++i)
          os << (i ? ", " : "") << field_names_[i] << " : " << contained_[i]->str();
        os << ")";
        break;
      }
      os << "(";
      joinTypes(os, contained_);
      os << ")";
      break;
    case TypeKind::Dict: os << "Dict("; joinTypes(os, contained_); os << ")"; break;
    case TypeKind::Union: os << "Union("; joinTypes(os, contained_); os << ")"; break;
    case TypeKind::Future: os << "Future(" << contained_[0]->str() << ")"; break;
    case TypeKind::RRef: os << "RRef(" << contained_[0]->str() << ")"; break;
  }
  return os.str();
}

bool Type::equals(const Type& o) const {
  if (kind_ != o.kind_ || name_ != o.name_ || contained_.size() != o.contained_.size() ||
      field_names_ != o.field_names_)
    return false;
  if (kind_ == TypeKind::Tensor && !(tensor_ == o.tensor_)) return false;
  for (size_t i = 0; i < contained_.size(); ++i)
    if (!contained_[i]->equals(*o.contained_[i])) return false;
  return true;
}

}  // namespace llga
