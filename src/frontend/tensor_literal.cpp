#include "frontend/tensor_literal.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace llga {

bool canStoreElements(ScalarType t) {
  switch (t) {
    case ScalarType::Float: case ScalarType::Double: case ScalarType::Half: case ScalarType::BFloat16:
    case ScalarType::Long: case ScalarType::Int: case ScalarType::Short: case ScalarType::Char:
    case ScalarType::Byte: case ScalarType::Bool:
      return true;
    default:
      return false;
  }
}

// IEEE binary16, round to nearest even.
static uint16_t floatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) return static_cast<uint16_t>(sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (x >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflows to inf
  if (x < 0x38800000u) {                                              // subnormal or zero
    float a;
    std::memcpy(&a, &x, 4);
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(a * 16777216.0f)));
  }
  uint32_t mant_odd = (x >> 13) & 1u;
  x += 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round
  return static_cast<uint16_t>(sign | (x >> 13));
}

void storeElement(ConstantTensor& t, size_t i, double v, int64_t iv) {
  auto* base = static_cast<unsigned char*>(t.data) + i * scalarTypeSize(t.dtype);
  auto put = [base](auto x) { std::memcpy(base, &x, sizeof x); };
  switch (t.dtype) {
    case ScalarType::Float: put(static_cast<float>(v)); break;
    case ScalarType::Double: put(v); break;
    case ScalarType::Long: put(iv); break;
    case ScalarType::Int: put(static_cast<int32_t>(iv)); break;
    case ScalarType::Short: put(static_cast<int16_t>(iv)); break;
    case ScalarType::Char: put(static_cast<int8_t>(iv)); break;
    case ScalarType::Byte: put(static_cast<uint8_t>(iv)); break;
    case ScalarType::Bool: put(static_cast<uint8_t>(iv != 0)); break;
    case ScalarType::Half: put(floatToHalf(static_cast<float>(v))); break;
    case ScalarType::BFloat16: {
      float f = static_cast<float>(v);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      put(static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16));
      break;
    }
    default: throw std::invalid_argument("cannot store elements of dtype " + std::string(scalarTypeName(t.dtype)));
  }
}

namespace {

bool isFloating(ScalarType t) {
  return t == ScalarType::Float || t == ScalarType::Double || t == ScalarType::Half || t == ScalarType::BFloat16;
}

// "[ CPUFloatType{2,3} ]" at text[p]: dtype and sizes; sets *end after ']'.
bool parseTrailer(std::string_view text, size_t p, ScalarType* dtype, std::vector<int64_t>* sizes, size_t* end,
                  const LiteralErrorFn& error) {
  if (text.substr(p, 2) != "[ ") return false;
  size_t q = p + 2;
  size_t name_start = q;
  while (q < text.size() && std::isalnum(static_cast<unsigned char>(text[q]))) ++q;
  std::string_view name = text.substr(name_start, q - name_start);
  if (q >= text.size() || text[q] != '{' || name.size() < 5 || name.substr(name.size() - 4) != "Type") return false;
  for (std::string_view backend : {"CPU", "CUDA", "Meta", "MkldnnCPU"}) {
    if (name.substr(0, backend.size()) == backend) { name.remove_prefix(backend.size()); break; }
  }
  name.remove_suffix(4);
  auto dt = scalarTypeFromName(name);
  if (!dt) error(name_start, "unknown dtype '" + std::string(name) + "' in tensor literal");
  if (!canStoreElements(*dt)) error(name_start, "cannot read " + std::string(name) + " tensor literals");
  *dtype = *dt;
  ++q;  // '{'
  while (q < text.size() && text[q] != '}') {
    int64_t v = 0;
    auto r = std::from_chars(text.data() + q, text.data() + text.size(), v);
    if (r.ec != std::errc() || v < 0) error(q, "bad size in tensor literal");
    sizes->push_back(v);
    q = static_cast<size_t>(r.ptr - text.data());
    if (q < text.size() && text[q] == ',') ++q;
    else if (q < text.size() && text[q] != '}') error(q, "expected ',' or '}' in tensor literal sizes");
  }
  if (text.substr(q, 3) != "} ]") error(q, "expected '} ]' closing the tensor literal");
  *end = q + 3;
  return true;
}

}  // namespace

std::shared_ptr<ConstantTensor> tryParseTensorLiteral(std::string_view text, size_t pos, size_t* end,
                                                      const LiteralErrorFn& error) {
  // A literal is body text with no brackets or quotes, then "[ <Dtype>Type{..} ]".
  size_t p = pos;
  while (p < text.size() && text[p] != '[' && text[p] != ']' && text[p] != '"' && text[p] != '\n' && text[p] != '<' &&
         text[p] != '{')
    ++p;
  ScalarType dtype;
  std::vector<int64_t> sizes;
  if (p >= text.size() || text[p] != '[' || !parseTrailer(text, p, &dtype, &sizes, end, error)) return nullptr;

  // Each value takes at least one character: sizes asking for more values
  // than the text can hold are an error before anything is allocated.
  const int64_t limit = static_cast<int64_t>(p - pos) + 1;
  for (int64_t need = 1; int64_t s : sizes) {
    if (s != 0 && need > limit / s) error(pos, "tensor literal sizes ask for more values than it holds");
    need *= s;
  }
  auto t = ConstantTensor::owned(dtype, sizes);
  const int64_t numel = t->numel();
  const int64_t cols = sizes.empty() ? 1 : sizes.back();
  const int64_t rows = sizes.size() >= 2 ? sizes[sizes.size() - 2] : 1;

  // Walk the body's words: numbers, "s *" scales, "(i,.,.) =" slice headers,
  // and "Columns a to b" chunk headers.
  std::vector<std::pair<std::string_view, size_t>> words;
  for (size_t i = pos; i < p;) {
    while (i < p && text[i] == ' ') ++i;
    size_t s = i;
    while (i < p && text[i] != ' ') ++i;
    if (i > s) words.emplace_back(text.substr(s, i - s), s);
  }
  int64_t slice = -1, chunk_first = 0, chunk_width = cols, in_chunk = 0, filled = 0;
  double scale = 1.0;
  // PyTorch prints a float tensor whose values are all whole numbers without
  // a decimal point ("1 -2"): those values are exact, where the others carry
  // ~4 significant digits.
  bool whole = true;
  auto number = [&](std::string_view w, size_t at, double* d, int64_t* iv) {
    std::string s(w);
    bool neg = !s.empty() && s[0] == '-';
    std::string body = neg ? s.substr(1) : s;
    if (body == "nan") { *d = std::nan(""); *iv = 0; return; }
    if (body == "inf") { *d = neg ? -HUGE_VAL : HUGE_VAL; *iv = 0; return; }
    char* e = nullptr;
    *d = std::strtod(s.c_str(), &e);
    if (e != s.c_str() + s.size() || s.empty()) error(at, "bad number '" + s + "' in tensor literal");
    *iv = std::strtoll(s.c_str(), nullptr, 10);
  };
  for (size_t i = 0; i < words.size(); ++i) {
    auto [w, at] = words[i];
    if (w.front() == '(') {  // slice header "(2,.,.)" followed by "="
      ++slice;
      if (i + 1 >= words.size() || words[i + 1].first != "=") error(at, "expected '=' after the slice header");
      ++i;
      chunk_first = 0; chunk_width = cols; in_chunk = 0; scale = 1.0;
      continue;
    }
    if (w == "Columns") {
      if (i + 3 >= words.size() || words[i + 2].first != "to") error(at, "bad 'Columns a to b' header");
      double a, b; int64_t ia, ib;
      number(words[i + 1].first, words[i + 1].second, &a, &ia);
      number(words[i + 3].first, words[i + 3].second, &b, &ib);
      if (ia < 1 || ib < ia || ib > cols) error(at, "bad 'Columns a to b' header");
      chunk_first = ia - 1; chunk_width = ib - ia + 1; in_chunk = 0; scale = 1.0;
      i += 3;
      continue;
    }
    double d; int64_t iv;
    number(w, at, &d, &iv);
    if (i + 1 < words.size() && words[i + 1].first == "*") {  // scale factor
      scale = d;
      whole = false;
      ++i;
      continue;
    }
    whole = whole && w.find_first_not_of("-0123456789") == std::string_view::npos && std::fabs(d) <= 16777216.0;
    if (numel == 0 || chunk_width <= 0) error(at, "tensor literal has more values than its sizes allow");
    int64_t base = std::max<int64_t>(slice, 0) * rows * cols;
    int64_t row = in_chunk / chunk_width, col = chunk_first + in_chunk % chunk_width;
    int64_t idx = base + row * cols + col;
    if (row >= rows || idx >= numel) error(at, "tensor literal has more values than its sizes allow");
    storeElement(*t, static_cast<size_t>(idx), d * scale, iv);
    ++in_chunk;
    ++filled;
  }
  if (filled != numel)
    error(pos, "tensor literal has " + std::to_string(filled) + " values, its sizes need " + std::to_string(numel));
  t->approximate = isFloating(dtype) && !whole;
  t->literal = std::string(text.substr(pos, *end - pos));
  return t;
}

}  // namespace llga
