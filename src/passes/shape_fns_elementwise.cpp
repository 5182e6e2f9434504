// Shape functions of elementwise ops: those that keep their input's shape,
// the integer arithmetic traced graphs compute sizes with, and binary ops
// with broadcasting and PyTorch's type promotion (shape_functions.h).
#include <algorithm>

#include "ir/ops.h"
#include "passes/shape_fn_helpers.h"

namespace llga::shape_fn {

// ---- ops that keep their input's shape (ops.def SameShape / Eltwise) ----

// A floating, contiguous input: the kernels write a fresh contiguous output.
Out sameShape(const ShapeArgs& a) {
  const TensorInfo* x = a.tensor(0);
  if (!x || !isFloating(*x->dtype)) return std::nullopt;
  return oneTensor(contiguousInfo(*x->dtype, sizesOf(*x)));
}

// Normalizations write a fresh contiguous output whatever the input's strides.
Out normShape(const ShapeArgs& a) {
  const TensorInfo* x = a.tensor(0);
  if (!x || !isFloating(*x->dtype)) return std::nullopt;
  return oneTensor(contiguousInfo(*x->dtype, sizesOf(*x)));
}
LLGA_SHAPE_FN("aten::layer_norm", normShape);
LLGA_SHAPE_FN("aten::batch_norm", normShape);

// softmax(x, dim, dtype): a dtype argument changes the output's.
Out softmaxShape(const ShapeArgs& a) {
  if (a.size() > 2 && !a.none(2)) return std::nullopt;
  return normShape(a);
}
LLGA_SHAPE_FN("aten::softmax", softmaxShape);
LLGA_SHAPE_FN("aten::log_softmax", softmaxShape);

// The value itself (eval-mode dropout, detach): the same tensor.
Out identity(const ShapeArgs& a) {
  if (!a.tensor(0)) return std::nullopt;
  return oneTensor(*a.tensor(0));
}
LLGA_SHAPE_FN("aten::dropout", identity);
LLGA_SHAPE_FN("aten::feature_dropout", identity);
LLGA_SHAPE_FN("aten::detach", identity);
LLGA_SHAPE_FN("aten::alias", identity);

// Unary ops outside the Eltwise group (no post-op of oneDNN's): a floating input
// gives a fresh contiguous tensor of its shape.
[[maybe_unused]] const bool kUnaryShapes = [] {
  for (const char* k : {"aten::celu", "aten::selu", "aten::softplus", "aten::hardshrink", "aten::softshrink",
                        "aten::threshold", "aten::rrelu", "aten::log_sigmoid", "aten::prelu", "aten::erf", "aten::erfinv", "aten::rsqrt",
                        "aten::lgamma", "aten::digamma", "aten::nan_to_num",
                        "aten::sin", "aten::cos", "aten::reciprocal", "aten::log2", "aten::log10", "aten::log1p",
                        "aten::expm1", "aten::exp2", "aten::sinc", "aten::i0", "aten::floor", "aten::ceil", "aten::trunc", "aten::frac", "aten::sign",
                        "aten::fake_quantize_per_tensor_affine", "aten::fake_quantize_per_channel_affine"})
    registerShapeFn(k, sameShape);
  return true;
}();

Out contiguousShape(const ShapeArgs& a) {
  const TensorInfo* x = a.tensor(0);
  if (!x) return std::nullopt;
  if (isContiguous(*x)) return oneTensor(*x);
  return oneTensor(contiguousInfo(*x->dtype, sizesOf(*x)));
}
LLGA_SHAPE_FN("aten::contiguous", contiguousShape);

// ---- integer arithmetic on sizes (traced graphs compute shapes with it) ----

Out sizeShape(const ShapeArgs& a) {
  const TensorInfo* x = a.tensor(0);
  if (!x) return std::nullopt;
  std::vector<int64_t> s = sizesOf(*x);
  if (a.size() == 1) {
    Known list;
    list.items.emplace();
    for (int64_t v : s) list.items->push_back(Known::ofInt(v));
    return one(std::move(list));
  }
  auto d = wrapDim(a.i(1), s.size());
  if (!d) return std::nullopt;
  return one(Known::ofInt(s[*d]));
}
LLGA_SHAPE_FN("aten::size", sizeShape);

// int -> 0-dim Long tensor holding it (and back).
Out numToTensor(const ShapeArgs& a) {
  if (!a.i(0) || a.node().input(0)->type()->isSimple("float")) return std::nullopt;
  Known k = Known::ofTensor(contiguousInfo(ScalarType::Long, {}));
  k.i = a.i(0);
  return one(std::move(k));
}
LLGA_SHAPE_FN("prim::NumToTensor", numToTensor);

Out tensorToInt(const ShapeArgs& a) {
  if (!a.i(0)) return std::nullopt;
  return one(Known::ofInt(*a.i(0)));
}
LLGA_SHAPE_FN("aten::Int", tensorToInt);
LLGA_SHAPE_FN("aten::IntImplicit", tensorToInt);
LLGA_SHAPE_FN("aten::ScalarImplicit", tensorToInt);

int64_t floorDiv(int64_t x, int64_t y) {
  int64_t q = x / y;
  return (x % y != 0 && ((x < 0) != (y < 0))) ? q - 1 : q;
}

// The value of an integer op on known ints; nullopt for anything else.
std::optional<int64_t> intArith(Symbol k, int64_t x, int64_t y) {
  const std::string_view s = k.toQualString();
  if (s == "aten::add") return x + y;
  if (s == "aten::sub") return x - y;
  if (s == "aten::rsub") return y - x;
  if (s == "aten::mul") return x * y;
  if (y == 0) return std::nullopt;
  if (s == "aten::floor_divide" || s == "aten::floordiv") return floorDiv(x, y);
  if (s == "aten::remainder") return x - floorDiv(x, y) * y;
  return std::nullopt;
}

// ---- binary elementwise ops: broadcasting and PyTorch's type promotion ----

enum class Category { Bool, Integral, Floating };
std::optional<Category> categoryOf(ScalarType t) {
  if (t == ScalarType::Bool) return Category::Bool;
  if (isIntegral(t)) return Category::Integral;
  if (isFloating(t)) return Category::Floating;
  return std::nullopt;
}

// promoteTypes for the dtypes modelled here (nullopt for the rest).
std::optional<ScalarType> promote(std::optional<ScalarType> a, std::optional<ScalarType> b) {
  if (!a) return b;
  if (!b || *a == *b) return a;
  auto ca = categoryOf(*a), cb = categoryOf(*b);
  if (!ca || !cb) return std::nullopt;
  if (*ca != *cb) return *ca > *cb ? a : b;
  if (*ca == Category::Floating) {
    if (*a == ScalarType::Double || *b == ScalarType::Double) return ScalarType::Double;
    return ScalarType::Float;  // Float with Half or BFloat16, and Half with BFloat16
  }
  auto rank = [](ScalarType t) {
    switch (t) {
      case ScalarType::Long: return 4;
      case ScalarType::Int: return 3;
      case ScalarType::Short: return 2;
      default: return 1;
    }
  };
  if (rank(*a) == 1 && rank(*b) == 1) return ScalarType::Short;  // Byte with Char
  return rank(*a) >= rank(*b) ? a : b;
}

// Where a lower-priority operand (a 0-dim tensor, a number) of a higher
// category decides the result (PyTorch's result_type).
std::optional<ScalarType> combine(std::optional<ScalarType> higher, std::optional<ScalarType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (*higher == ScalarType::Bool || isFloating(*lower)) {
    if (isFloating(*higher)) return higher;
    return promote(higher, lower);
  }
  return higher;
}

struct Operand {
  std::optional<ScalarType> dtype;  // numbers: Long, Float (the default dtype) or Bool
  std::vector<int64_t> sizes;       // numbers: []
  int priority = 0;                 // 2: a tensor with dims, 1: a 0-dim tensor, 0: a number
  const TensorInfo* info = nullptr;
  std::optional<int64_t> value;
};

std::optional<Operand> operand(const ShapeArgs& a, size_t i) {
  Operand o;
  const Value* v = a.node().input(i);
  if (const TensorInfo* t = a.tensor(i)) {
    o.info = t;
    o.dtype = t->dtype;
    o.sizes = sizesOf(*t);
    o.priority = o.sizes.empty() ? 1 : 2;
  } else if (v->type()->isSimple("int") && a[i].i) {
    o.dtype = ScalarType::Long;
  } else if (v->type()->isSimple("float") && a[i].f) {
    o.dtype = ScalarType::Float;
  } else if (v->type()->isSimple("bool") && a[i].i) {
    o.dtype = ScalarType::Bool;
  } else {
    return std::nullopt;
  }
  o.value = a[i].i;
  return o;
}

std::optional<std::vector<int64_t>> broadcast(const std::vector<int64_t>& x, const std::vector<int64_t>& y) {
  std::vector<int64_t> out(std::max(x.size(), y.size()));
  for (size_t k = 0; k < out.size(); ++k) {
    int64_t a = k < x.size() ? x[x.size() - 1 - k] : 1;
    int64_t b = k < y.size() ? y[y.size() - 1 - k] : 1;
    if (a != b && a != 1 && b != 1) return std::nullopt;
    out[out.size() - 1 - k] = a == 1 ? b : a;
  }
  return out;
}

// The result dtype and sizes of an elementwise op over `ops`.
std::optional<std::pair<ScalarType, std::vector<int64_t>>> elementwise(const std::vector<Operand>& ops) {
  std::optional<ScalarType> by[3];
  std::vector<int64_t> sizes;
  for (const Operand& o : ops) {
    auto s = broadcast(sizes, o.sizes);
    if (!s) return std::nullopt;  // the op fails at run time, with its own message
    sizes = *s;
    by[o.priority] = promote(by[o.priority], o.dtype);
    if (!by[o.priority]) return std::nullopt;
  }
  auto dt = combine(by[2], combine(by[1], by[0]));
  if (!dt) return std::nullopt;
  return std::make_pair(*dt, sizes);
}

// add/sub/mul/div/... (alpha and rounding mode are later arguments).
Out binaryShape(const ShapeArgs& a) {
  auto x = operand(a, 0), y = operand(a, 1);
  if (!x || !y) return std::nullopt;
  if (x->priority == 0 && y->priority == 0) {  // int arithmetic (scripted graphs)
    if (!x->value || !y->value || !a.node().output()->type()->isSimple("int")) return std::nullopt;
    auto v = intArith(a.node().kind(), *x->value, *y->value);
    if (!v) return std::nullopt;
    return one(Known::ofInt(*v));
  }
  auto r = elementwise({*x, *y});
  if (!r) return std::nullopt;
  auto [dtype, sizes] = *r;
  const std::string_view kind = a.node().kind().toQualString();
  const bool float_result = kind == "aten::div" || kind == "aten::atan2" || kind == "aten::copysign" ||
                            kind == "aten::hypot" || kind == "aten::xlogy";
  if (float_result && !isFloating(dtype)) {
    if (a.size() < 3 || a.none(2)) dtype = ScalarType::Float;  // true division
    else return std::nullopt;                                    // rounding modes: not modelled
  }
  Known k = Known::ofTensor(contiguousInfo(dtype, sizes));
  if (isIntegral(dtype) && sizes.empty() && x->value && y->value) {  // a size computed as a 0-dim tensor
    int64_t alpha = 1;
    if ((kind == "aten::add" || kind == "aten::sub" || kind == "aten::rsub") && a.size() > 2) {
      if (!a.i(2)) return one(std::move(k));
      alpha = *a.i(2);
    }
    const bool scaled = kind == "aten::add" || kind == "aten::sub";
    k.i = kind == "aten::rsub" ? *y->value - alpha * *x->value
                               : intArith(a.node().kind(), *x->value, scaled ? alpha * *y->value : *y->value);
  }
  return one(std::move(k));
}
LLGA_SHAPE_FN_FOR_TRAITS(op_trait::Binary, binaryShape);
LLGA_SHAPE_FN("aten::rsub", binaryShape);
LLGA_SHAPE_FN("aten::floor_divide", binaryShape);
LLGA_SHAPE_FN("aten::floordiv", binaryShape);
LLGA_SHAPE_FN("aten::remainder", binaryShape);
LLGA_SHAPE_FN("aten::atan2", binaryShape);
[[maybe_unused]] const bool kMoreBinaryShapes = [] {
  for (const char* k : {"aten::fmod", "aten::copysign", "aten::hypot", "aten::nextafter", "aten::logaddexp",
                        "aten::fmax", "aten::fmin", "aten::gcd", "aten::xlogy", "aten::heaviside"})
    registerShapeFn(k, binaryShape);
  return true;
}();

// pow(x, exponent): a float exponent makes an integral base floating.
Out powShape(const ShapeArgs& a) {
  auto x = operand(a, 0), y = operand(a, 1);
  if (!x || !y || x->priority == 0) return std::nullopt;
  auto r = elementwise({*x, *y});
  if (!r) return std::nullopt;
  return oneTensor(contiguousInfo(r->first, r->second));
}
LLGA_SHAPE_FN("aten::pow", powShape);

Out compareShape(const ShapeArgs& a) {
  auto x = operand(a, 0), y = operand(a, 1);
  if (!x || !y || (x->priority == 0 && y->priority == 0)) return std::nullopt;
  auto r = elementwise({*x, *y});
  if (!r) return std::nullopt;
  return oneTensor(contiguousInfo(ScalarType::Bool, r->second));
}
LLGA_SHAPE_FN("aten::eq", compareShape);
LLGA_SHAPE_FN("aten::ne", compareShape);
LLGA_SHAPE_FN("aten::lt", compareShape);
LLGA_SHAPE_FN("aten::le", compareShape);
LLGA_SHAPE_FN("aten::gt", compareShape);
LLGA_SHAPE_FN("aten::ge", compareShape);

// masked_fill(x, mask, value): x's dtype over the broadcast of x and mask.
Out maskedFillShape(const ShapeArgs& a) {
  const TensorInfo* x = a.tensor(0);
  const TensorInfo* m = a.tensor(1);
  if (!x || !m || !isContiguous(*x) || !isContiguous(*m)) return std::nullopt;
  auto s = broadcast(sizesOf(*x), sizesOf(*m));
  if (!s) return std::nullopt;  // out of place, x and the mask broadcast together
  return oneTensor(contiguousInfo(*x->dtype, *s));
}
LLGA_SHAPE_FN("aten::masked_fill", maskedFillShape);

}  // namespace llga::shape_fn
