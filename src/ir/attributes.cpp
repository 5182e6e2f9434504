#include "ir/attributes.h"

#include <cmath>
#include <cstring>
#include <stdexcept>

namespace llga {

int64_t ConstantTensor::numel() const {
  int64_t n = 1;
  for (auto s : sizes) n *= s;
  return n;
}

std::shared_ptr<ConstantTensor> ConstantTensor::owned(ScalarType dtype, std::vector<int64_t> sizes) {
  auto t = std::make_shared<ConstantTensor>();
  t->dtype = dtype;
  t->sizes = std::move(sizes);
  t->strides.assign(t->sizes.size(), 1);
  for (size_t i = t->sizes.size(); i-- > 1;) t->strides[i - 1] = t->strides[i] * std::max<int64_t>(t->sizes[i], 1);
  size_t bytes = static_cast<size_t>(std::max<int64_t>(t->numel(), 1)) * scalarTypeSize(dtype);
  auto buf = std::shared_ptr<unsigned char[]>(new unsigned char[bytes]());
  t->data = buf.get();
  t->owner = std::shared_ptr<void>(buf, buf.get());
  return t;
}

double ConstantTensor::scalarAsDouble(size_t i) const {
  if (!data) throw std::logic_error("tensor constant has no data bound");
  // Map a linear (row-major) index to the strided offset.
  int64_t off = 0;
  for (size_t d = sizes.size(); d-- > 0;) {
    int64_t idx = static_cast<int64_t>(i) % sizes[d];
    i /= static_cast<size_t>(sizes[d]);
    off += idx * strides[d];
  }
  const auto* p = static_cast<const unsigned char*>(data) + off * static_cast<int64_t>(scalarTypeSize(dtype));
  auto load = [p](auto tag) { decltype(tag) x; std::memcpy(&x, p, sizeof x); return static_cast<double>(x); };
  switch (dtype) {
    case ScalarType::Float: return load(float{});
    case ScalarType::Double: return load(double{});
    case ScalarType::Long: return load(int64_t{});
    case ScalarType::Int: return load(int32_t{});
    case ScalarType::Short: return load(int16_t{});
    case ScalarType::Char: return load(int8_t{});
    case ScalarType::Byte: return load(uint8_t{});
    case ScalarType::Bool: return load(uint8_t{});
    case ScalarType::Half: {
      uint16_t h; std::memcpy(&h, p, 2);
      uint32_t sign = uint32_t(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
      if (exp == 0) {  // zero or subnormal
        float f = std::ldexp(static_cast<float>(mant), -24);
        std::memcpy(&bits, &f, 4);
        bits |= sign;
      } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
      } else {
        bits = sign | ((exp + 112) << 23) | (mant << 13);
      }
      float f; std::memcpy(&f, &bits, 4);
      return f;
    }
    case ScalarType::BFloat16: {
      uint16_t h; std::memcpy(&h, p, 2);
      uint32_t bits = uint32_t(h) << 16; float f; std::memcpy(&f, &bits, 4);
      return f;
    }
    default: throw std::invalid_argument(std::string("cannot read elements of dtype ") + std::string(scalarTypeName(dtype)));
  }
}

const char* AttrValue::kindName() const {
  static const char* names[] = {"int", "float", "bool", "str", "tensor", "type", "graph", "list", "None"};
  if (is<AttrList>() && seq != Seq::List) return seq == Seq::Tuple ? "tuple" : "dict";
  return names[v.index()];
}

const AttrValue* Attributes::find(Symbol name) const {
  for (const auto& [k, v] : items_)
    if (k == name) return &v;
  return nullptr;
}
const AttrValue& Attributes::get(Symbol name) const {
  if (const AttrValue* v = find(name)) return *v;
  throw std::out_of_range("no attribute '" + std::string(name.name()) + "'");
}
void Attributes::set(Symbol name, AttrValue value) {
  for (auto& [k, v] : items_)
    if (k == name) { v = std::move(value); return; }
  items_.emplace_back(name, std::move(value));
}
bool Attributes::remove(Symbol name) {
  for (auto it = items_.begin(); it != items_.end(); ++it)
    if (it->first == name) { items_.erase(it); return true; }
  return false;
}

}  // namespace llga
