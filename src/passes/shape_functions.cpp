// The shape functions of the ops real models use, grouped as ir/ops.def
// groups them: integer arithmetic on sizes, elementwise and binary ops,
// convolution, matrix products, pooling, reductions, concatenation, and views
// (whose strides are the view's). Each says nothing (nullopt) outside the
// cases it models; see shape_functions.h.
#include "passes/shape_functions.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <unordered_map>

#include "ir/ops.h"
#include "ir/strides.h"
#include "passes/pass_utils.h"

namespace llga {

// ---- the registry and the arguments ----

namespace {

std::unordered_map<Symbol, ShapeFn>& registry() {
  static std::unordered_map<Symbol, ShapeFn> r;
  return r;
}

using Out = std::optional<std::vector<Known>>;

Out one(Known k) { return std::vector<Known>{std::move(k)}; }
Out oneTensor(TensorInfo t) { return one(Known::ofTensor(std::move(t))); }

bool isFloating(ScalarType t) {
  return t == ScalarType::Float || t == ScalarType::Double || t == ScalarType::Half || t == ScalarType::BFloat16;
}
bool isIntegral(ScalarType t) {
  return t == ScalarType::Byte || t == ScalarType::Char || t == ScalarType::Short || t == ScalarType::Int ||
         t == ScalarType::Long;
}

std::vector<int64_t> sizesOf(const TensorInfo& t) { return *t.concreteSizes(); }

// A dimension argument, wrapped into [0, rank).
std::optional<size_t> wrapDim(std::optional<int64_t> d, size_t rank) {
  if (!d) return std::nullopt;
  int64_t r = static_cast<int64_t>(rank);
  int64_t v = *d < 0 ? *d + r : *d;
  if (v < 0 || v >= r) return std::nullopt;
  return static_cast<size_t>(v);
}

}  // namespace

std::optional<std::vector<int64_t>> Known::ints() const {
  if (!items) return std::nullopt;
  std::vector<int64_t> out;
  for (const Known& k : *items) {
    if (!k.i) return std::nullopt;
    out.push_back(*k.i);
  }
  return out;
}

const TensorInfo* ShapeArgs::tensor(size_t i) const {
  return i < in_.size() && in_[i]->tensor ? &*in_[i]->tensor : nullptr;
}

std::optional<int64_t> ShapeArgs::i(size_t i) const {
  if (i >= in_.size()) return std::nullopt;
  return in_[i]->i;
}

std::optional<std::vector<int64_t>> ShapeArgs::ints(size_t i, size_t repeat) const {
  if (i >= in_.size()) return std::nullopt;
  if (auto v = in_[i]->ints()) {
    if (repeat > 0 && v->size() == 1) return std::vector<int64_t>(repeat, (*v)[0]);
    return v;
  }
  if (repeat > 0 && in_[i]->i) return std::vector<int64_t>(repeat, *in_[i]->i);
  return std::nullopt;
}

void registerShapeFn(std::string_view kind, ShapeFn fn) {
  registry()[Symbol::fromQualString(std::string(kind))] = std::move(fn);
}

void registerShapeFnForTraits(uint32_t traits, ShapeFn fn) {
  for (const std::string& kind : opsWith(traits)) registerShapeFn(kind, fn);
}

TensorInfo stridedInfo(ScalarType dtype, const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  TensorInfo t;
  t.dtype = dtype;
  t.sizes.emplace(sizes.begin(), sizes.end());
  t.strides = strides;
  t.requires_grad = false;
  t.device = "cpu";
  return t;
}

TensorInfo contiguousInfo(ScalarType dtype, const std::vector<int64_t>& sizes) {
  return stridedInfo(dtype, sizes, contiguousStrides(sizes));
}

bool isContiguous(const TensorInfo& t) {
  auto sizes = t.concreteSizes();
  if (!sizes || !t.strides) return false;
  // Extents of 1 may carry any stride (PyTorch's rule).
  int64_t acc = 1;
  for (size_t i = sizes->size(); i-- > 0;) {
    if ((*sizes)[i] != 1 && (*t.strides)[i] != acc) return false;
    acc *= (*sizes)[i];
  }
  return true;
}

namespace {

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
  if (kind == "aten::div" && !isFloating(dtype)) {
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
  if (!s || *s != sizesOf(*x)) return std::nullopt;  // masked_fill does not grow x
  return oneTensor(contiguousInfo(*x->dtype, *s));
}
LLGA_SHAPE_FN("aten::masked_fill", maskedFillShape);

// ---- convolution, matrix products, pooling ----

// Output extent of a window op along one dimension.
std::optional<int64_t> windowOut(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  if (s <= 0 || d <= 0 || k <= 0) return std::nullopt;
  int64_t span = in + 2 * p - d * (k - 1) - 1;
  if (span < 0) return std::nullopt;
  int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;  // the last window must start inside the input or left padding
  return out;
}

// conv{1,2,3}d(x, w, b, stride, padding, dilation, groups) and
// _convolution(x, w, b, stride, padding, dilation, transposed, output_padding, groups, ...).
Out convShape(const ShapeArgs& a) {
  const TensorInfo* x = a.tensor(0);
  const TensorInfo* w = a.tensor(1);
  if (!x || !w || !isFloating(*x->dtype) || !isContiguous(*x)) return std::nullopt;
  std::vector<int64_t> xs = sizesOf(*x), ws = sizesOf(*w);
  if (ws.size() < 3 || xs.size() != ws.size()) return std::nullopt;  // unbatched input: not modelled
  const size_t spatial = ws.size() - 2;
  const std::string_view kind = a.node().kind().toQualString();
  const bool full = kind == "aten::_convolution";
  bool transposed = kind.find("transpose") != std::string_view::npos;
  if (full) {
    if (a.size() < 9 || !a.i(6)) return std::nullopt;
    transposed = *a.i(6) != 0;
  }
  auto stride = a.ints(3, spatial), padding = a.ints(4, spatial);
  std::optional<std::vector<int64_t>> dilation, out_pad;
  std::optional<int64_t> groups;
  if (full) {
    dilation = a.ints(5, spatial);
    out_pad = a.ints(7, spatial);
    groups = a.i(8);
  } else if (transposed) {  // conv_transpose(x, w, b, stride, padding, output_padding, groups, dilation)
    out_pad = a.ints(5, spatial);
    groups = a.i(6);
    dilation = a.ints(7, spatial);
  } else {
    dilation = a.ints(5, spatial);
    groups = a.i(6);
  }
  if (!stride || !padding || !dilation || !groups || *groups <= 0 || stride->size() != spatial ||
      padding->size() != spatial || dilation->size() != spatial)
    return std::nullopt;
  std::vector<int64_t> out{xs[0], transposed ? ws[1] * *groups : ws[0]};
  for (size_t i = 0; i < spatial; ++i) {
    int64_t in = xs[i + 2], k = ws[i + 2], s = (*stride)[i], p = (*padding)[i], d = (*dilation)[i];
    if (transposed) {
      if (!out_pad || out_pad->size() != spatial) return std::nullopt;
      out.push_back((in - 1) * s - 2 * p + d * (k - 1) + (*out_pad)[i] + 1);
    } else {
      auto o = windowOut(in, k, s, p, d, false);
      if (!o) return std::nullopt;
      out.push_back(*o);
    }
  }
  return oneTensor(contiguousInfo(*x->dtype, out));
}
LLGA_SHAPE_FN_FOR_TRAITS(op_trait::Conv, convShape);

// linear(x, w, b): x[..., in] -> [..., out].
Out linearShape(const ShapeArgs& a) {
  const TensorInfo* x = a.tensor(0);
  const TensorInfo* w = a.tensor(1);
  if (!x || !w || !isFloating(*x->dtype)) return std::nullopt;
  std::vector<int64_t> xs = sizesOf(*x), ws = sizesOf(*w);
  if (xs.empty() || ws.size() != 2 || xs.back() != ws[1]) return std::nullopt;
  xs.back() = ws[0];
  return oneTensor(contiguousInfo(*x->dtype, xs));
}
LLGA_SHAPE_FN("aten::linear", linearShape);

// matmul / mm / bmm: torch.matmul's rules (1-D operands, broadcast batch).
Out matmulShape(const ShapeArgs& a) {
  const TensorInfo* x = a.tensor(0);
  const TensorInfo* y = a.tensor(1);
  if (!x || !y || x->dtype != y->dtype || !isFloating(*x->dtype)) return std::nullopt;
  std::vector<int64_t> xs = sizesOf(*x), ys = sizesOf(*y);
  const std::string_view kind = a.node().kind().toQualString();
  if ((kind == "aten::mm" && (xs.size() != 2 || ys.size() != 2)) ||
      (kind == "aten::bmm" && (xs.size() != 3 || ys.size() != 3 || xs[0] != ys[0])))
    return std::nullopt;
  if (xs.empty() || ys.empty()) return std::nullopt;
  const bool x1 = xs.size() == 1, y1 = ys.size() == 1;
  if (x1) xs.insert(xs.begin(), 1);
  if (y1) ys.push_back(1);
  if (xs.back() != ys[ys.size() - 2]) return std::nullopt;
  auto batch = broadcast(std::vector<int64_t>(xs.begin(), xs.end() - 2), std::vector<int64_t>(ys.begin(), ys.end() - 2));
  if (!batch) return std::nullopt;
  std::vector<int64_t> out = *batch;
  if (!x1) out.push_back(xs[xs.size() - 2]);
  if (!y1) out.push_back(ys.back());
  return oneTensor(contiguousInfo(*x->dtype, out));
}
LLGA_SHAPE_FN("aten::matmul", matmulShape);
LLGA_SHAPE_FN("aten::mm", matmulShape);
LLGA_SHAPE_FN("aten::bmm", matmulShape);

// max_poolNd(x, kernel, stride, padding, dilation, ceil_mode) and
// avg_poolNd(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor).
Out poolShape(const ShapeArgs& a, size_t spatial, bool is_max) {
  const TensorInfo* x = a.tensor(0);
  if (!x || !isFloating(*x->dtype) || !isContiguous(*x)) return std::nullopt;
  std::vector<int64_t> xs = sizesOf(*x);
  if (xs.size() != spatial + 2) return std::nullopt;  // unbatched: not modelled
  auto kernel = a.ints(1, spatial);
  if (!kernel || kernel->size() != spatial) return std::nullopt;
  auto stride = a.ints(2, spatial);
  if (stride && stride->empty()) stride = kernel;  // an empty stride means the kernel's
  auto padding = a.ints(3, spatial);
  auto dilation = is_max ? a.ints(4, spatial) : std::optional<std::vector<int64_t>>(std::vector<int64_t>(spatial, 1));
  auto ceil_mode = a.i(is_max ? 5 : 4);
  if (!stride || !padding || !dilation || !ceil_mode || stride->size() != spatial || padding->size() != spatial ||
      dilation->size() != spatial)
    return std::nullopt;
  std::vector<int64_t> out{xs[0], xs[1]};
  for (size_t i = 0; i < spatial; ++i) {
    auto o = windowOut(xs[i + 2], (*kernel)[i], (*stride)[i], (*padding)[i], (*dilation)[i], *ceil_mode != 0);
    if (!o) return std::nullopt;
    out.push_back(*o);
  }
  return oneTensor(contiguousInfo(*x->dtype, out));
}
LLGA_SHAPE_FN("aten::max_pool1d", [](const ShapeArgs& a) { return poolShape(a, 1, true); });
LLGA_SHAPE_FN("aten::max_pool2d", [](const ShapeArgs& a) { return poolShape(a, 2, true); });
LLGA_SHAPE_FN("aten::max_pool3d", [](const ShapeArgs& a) { return poolShape(a, 3, true); });
LLGA_SHAPE_FN("aten::avg_pool1d", [](const ShapeArgs& a) { return poolShape(a, 1, false); });
LLGA_SHAPE_FN("aten::avg_pool2d", [](const ShapeArgs& a) { return poolShape(a, 2, false); });
LLGA_SHAPE_FN("aten::avg_pool3d", [](const ShapeArgs& a) { return poolShape(a, 3, false); });

// adaptive_avg_poolNd(x, output_size): None entries keep the input's extent.
Out adaptivePoolShape(const ShapeArgs& a, size_t spatial) {
  const TensorInfo* x = a.tensor(0);
  if (!x || !isFloating(*x->dtype) || !isContiguous(*x)) return std::nullopt;
  std::vector<int64_t> xs = sizesOf(*x);
  if (xs.size() != spatial + 2 || !a[1].items || a[1].items->size() != spatial) return std::nullopt;
  std::vector<int64_t> out{xs[0], xs[1]};
  for (size_t i = 0; i < spatial; ++i) {
    const Known& k = (*a[1].items)[i];
    if (k.none) out.push_back(xs[i + 2]);
    else if (k.i && *k.i >= 0) out.push_back(*k.i);
    else return std::nullopt;
  }
  return oneTensor(contiguousInfo(*x->dtype, out));
}
LLGA_SHAPE_FN("aten::adaptive_avg_pool1d", [](const ShapeArgs& a) { return adaptivePoolShape(a, 1); });
LLGA_SHAPE_FN("aten::adaptive_avg_pool2d", [](const ShapeArgs& a) { return adaptivePoolShape(a, 2); });
LLGA_SHAPE_FN("aten::adaptive_avg_pool3d", [](const ShapeArgs& a) { return adaptivePoolShape(a, 3); });

// ---- reductions ----

// mean/sum(x, dims, keepdim, dtype) over floating inputs.
Out reduceShape(const ShapeArgs& a) {
  const TensorInfo* x = a.tensor(0);
  if (!x || !isFloating(*x->dtype) || !isContiguous(*x)) return std::nullopt;
  if (a.size() < 4 || !a.none(3)) return std::nullopt;  // the full reduction and dtype arguments: not modelled
  std::vector<int64_t> xs = sizesOf(*x);
  auto dims = a.ints(1);
  auto keep = a.i(2);
  if (!dims || !keep) return std::nullopt;
  std::vector<bool> reduced(xs.size(), dims->empty());
  for (int64_t d : *dims) {
    auto w = wrapDim(d, xs.size());
    if (!w) return std::nullopt;
    reduced[*w] = true;
  }
  std::vector<int64_t> out;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!reduced[i]) out.push_back(xs[i]);
    else if (*keep) out.push_back(1);
  }
  return oneTensor(contiguousInfo(*x->dtype, out));
}
LLGA_SHAPE_FN("aten::mean", reduceShape);
LLGA_SHAPE_FN("aten::sum", reduceShape);

// max/min(x) -> 0-dim; max/min(x, dim, keepdim) -> (values, Long indices);
// argmax/argmin(x, dim?, keepdim) -> Long indices.
std::optional<std::vector<int64_t>> reducedAlong(const TensorInfo& x, const ShapeArgs& a, size_t dim_at, bool keep) {
  std::vector<int64_t> xs = sizesOf(x), out;
  if (a.none(dim_at)) {
    if (keep) out.assign(xs.size(), 1);
    return out;
  }
  auto d = wrapDim(a.i(dim_at), std::max<size_t>(xs.size(), 1));
  if (!d || (!xs.empty() && xs[*d] == 0)) return std::nullopt;
  for (size_t i = 0; i < xs.size(); ++i)
    if (i != *d) out.push_back(xs[i]);
    else if (keep) out.push_back(1);
  return out;
}

Out maxMinShape(const ShapeArgs& a) {
  const TensorInfo* x = a.tensor(0);
  if (!x || a.size() == 2) return std::nullopt;  // the binary overload becomes maximum/minimum (decompose)
  if (a.size() == 1) return oneTensor(contiguousInfo(*x->dtype, {}));
  auto keep = a.i(2);
  if (!keep || a.none(1)) return std::nullopt;
  auto out = reducedAlong(*x, a, 1, *keep != 0);
  if (!out) return std::nullopt;
  return std::vector<Known>{Known::ofTensor(contiguousInfo(*x->dtype, *out)),
                            Known::ofTensor(contiguousInfo(ScalarType::Long, *out))};
}
LLGA_SHAPE_FN("aten::max", maxMinShape);
LLGA_SHAPE_FN("aten::min", maxMinShape);

Out argMaxMinShape(const ShapeArgs& a) {
  const TensorInfo* x = a.tensor(0);
  auto keep = a.size() > 2 ? a.i(2) : std::optional<int64_t>(0);
  if (!x || !keep) return std::nullopt;
  auto out = reducedAlong(*x, a, 1, *keep != 0);
  if (!out) return std::nullopt;
  return oneTensor(contiguousInfo(ScalarType::Long, *out));
}
LLGA_SHAPE_FN("aten::argmax", argMaxMinShape);
LLGA_SHAPE_FN("aten::argmin", argMaxMinShape);

// ---- concatenation, padding, embedding, fills ----

Out catShape(const ShapeArgs& a, bool stack) {
  if (!a[0].items || a[0].items->empty()) return std::nullopt;
  for (const Known& k : *a[0].items)
    if (!k.tensor) return std::nullopt;
  const TensorInfo& first = *(*a[0].items)[0].tensor;
  std::vector<int64_t> out = sizesOf(first);
  auto d = wrapDim(a.i(1), out.size() + (stack ? 1 : 0));
  if (!d) return std::nullopt;
  std::optional<ScalarType> dtype;
  for (const Known& k : *a[0].items) {
    dtype = promote(dtype, k.tensor->dtype);
    if (!dtype || sizesOf(*k.tensor).size() != out.size()) return std::nullopt;
    std::vector<int64_t> s = sizesOf(*k.tensor);
    for (size_t i = 0; i < s.size(); ++i)
      if ((stack || i != *d) && s[i] != out[i]) return std::nullopt;
    if (!stack && &k != &(*a[0].items)[0]) out[*d] += s[*d];
  }
  if (stack) out.insert(out.begin() + static_cast<std::ptrdiff_t>(*d), static_cast<int64_t>(a[0].items->size()));
  return oneTensor(contiguousInfo(*dtype, out));
}
LLGA_SHAPE_FN("aten::cat", [](const ShapeArgs& a) { return catShape(a, false); });
LLGA_SHAPE_FN("aten::stack", [](const ShapeArgs& a) { return catShape(a, true); });

// pad(x, pad, mode, value) / constant_pad_nd(x, pad, value): pairs from the last dimension.
Out padShape(const ShapeArgs& a) {
  const TensorInfo* x = a.tensor(0);
  auto pad = a.ints(1);
  if (!x || !pad || pad->size() % 2 || !isContiguous(*x)) return std::nullopt;
  std::vector<int64_t> xs = sizesOf(*x);
  if (pad->size() / 2 > xs.size()) return std::nullopt;
  if (a.node().kind().toQualString() == std::string_view("aten::pad")) {
    const Value* mode = a.node().inputs().size() > 2 ? a.node().input(2) : nullptr;
    const Node* m = mode ? mode->node() : nullptr;
    if (!m || m->kind() != prim::Constant || !m->hasAttribute(attr::value) || !m->attr(attr::value).is<std::string>() ||
        m->attr(attr::value).get<std::string>() != "constant")
      return std::nullopt;
  }
  for (size_t i = 0; i < pad->size() / 2; ++i) {
    int64_t& e = xs[xs.size() - 1 - i];
    e += (*pad)[2 * i] + (*pad)[2 * i + 1];
    if (e < 0) return std::nullopt;
  }
  return oneTensor(contiguousInfo(*x->dtype, xs));
}
LLGA_SHAPE_FN("aten::pad", padShape);
LLGA_SHAPE_FN("aten::constant_pad_nd", padShape);

// embedding(weight, indices, ...): indices' sizes + [dim].
Out embeddingShape(const ShapeArgs& a) {
  const TensorInfo* w = a.tensor(0);
  const TensorInfo* idx = a.tensor(1);
  if (!w || !idx || !isIntegral(*idx->dtype)) return std::nullopt;
  std::vector<int64_t> ws = sizesOf(*w), out = sizesOf(*idx);
  if (ws.size() != 2) return std::nullopt;
  out.push_back(ws[1]);
  return oneTensor(contiguousInfo(*w->dtype, out));
}
LLGA_SHAPE_FN("aten::embedding", embeddingShape);

// The dtype argument at `i`: `fallback` when absent or None; nullopt when
// it is not a known dtype code.
std::optional<ScalarType> dtypeArg(const ShapeArgs& a, size_t i, ScalarType fallback) {
  if (a.size() <= i || a.none(i)) return fallback;
  auto code = a.i(i);
  return code ? scalarTypeFromCode(*code) : std::nullopt;
}

// zeros_like/ones_like(x, dtype, layout, device, pin_memory, memory_format).
Out likeShape(const ShapeArgs& a) {
  const TensorInfo* x = a.tensor(0);
  if (!x || !isContiguous(*x)) return std::nullopt;
  const std::optional<ScalarType> dtype = dtypeArg(a, 1, *x->dtype);
  if (!dtype) return std::nullopt;
  return oneTensor(contiguousInfo(*dtype, sizesOf(*x)));
}
LLGA_SHAPE_FN("aten::zeros_like", likeShape);
LLGA_SHAPE_FN("aten::ones_like", likeShape);

// new_zeros/new_ones(x, size, dtype, ...).
Out newShape(const ShapeArgs& a) {
  const TensorInfo* x = a.tensor(0);
  auto size = a.ints(1);
  if (!x || !size) return std::nullopt;
  const std::optional<ScalarType> dtype = dtypeArg(a, 2, *x->dtype);
  if (!dtype) return std::nullopt;
  for (int64_t s : *size)
    if (s < 0) return std::nullopt;
  return oneTensor(contiguousInfo(*dtype, *size));
}
LLGA_SHAPE_FN("aten::new_zeros", newShape);
LLGA_SHAPE_FN("aten::new_ones", newShape);

// fill_(x, v) writes into x and returns it (remove-mutation leaves it where x
// is a fresh view of a fresh tensor).
LLGA_SHAPE_FN("aten::fill_", identity);

// roll(x, shifts, dims): same shape, a fresh tensor.
Out rollShape(const ShapeArgs& a) {
  const TensorInfo* x = a.tensor(0);
  if (!x || !isContiguous(*x)) return std::nullopt;
  return oneTensor(contiguousInfo(*x->dtype, sizesOf(*x)));
}
LLGA_SHAPE_FN("aten::roll", rollShape);

// arange(end | start, end | start, end, step, dtype, layout, device, pin_memory):
// Long when every bound is an int and no dtype is given, else the default Float.
Out arangeShape(const ShapeArgs& a) {
  const size_t bounds = a.size() >= 7 ? 3 : a.size() == 6 ? 2 : a.size() == 5 ? 1 : 0;
  if (bounds == 0) return std::nullopt;
  double b[3] = {0, 0, 1};
  bool integral = true;
  for (size_t i = 0; i < bounds; ++i) {
    const Known& k = a[i];
    if (k.i && !k.tensor) b[bounds == 1 ? 1 : i] = static_cast<double>(*k.i);
    else if (k.f) b[bounds == 1 ? 1 : i] = *k.f, integral = false;
    else return std::nullopt;
  }
  const std::optional<ScalarType> dtype = dtypeArg(a, bounds, integral ? ScalarType::Long : ScalarType::Float);
  if (!dtype) return std::nullopt;
  if (b[2] == 0) return std::nullopt;
  const double n = std::ceil((b[1] - b[0]) / b[2]);
  if (n < 0 || n > static_cast<double>(std::numeric_limits<int64_t>::max() / 2)) return std::nullopt;
  return oneTensor(contiguousInfo(*dtype, {static_cast<int64_t>(n)}));
}
LLGA_SHAPE_FN("aten::arange", arangeShape);

// index(x, [idx]): one integer index tensor on the first dimension (a lookup
// table read through an index map); boolean masks are data-dependent.
Out indexShape(const ShapeArgs& a) {
  const TensorInfo* x = a.tensor(0);
  if (!x || !a[1].items || a[1].items->size() != 1 || !(*a[1].items)[0].tensor) return std::nullopt;
  const TensorInfo& idx = *(*a[1].items)[0].tensor;
  if (!isIntegral(*idx.dtype) || sizesOf(*x).empty()) return std::nullopt;
  std::vector<int64_t> out = sizesOf(idx), xs = sizesOf(*x);
  out.insert(out.end(), xs.begin() + 1, xs.end());
  return oneTensor(contiguousInfo(*x->dtype, out));
}
LLGA_SHAPE_FN("aten::index", indexShape);

// _native_multi_head_attention(q, k, v, embed_dim, heads, qkv_w, qkv_b, proj_w,
// proj_b, mask, need_weights, average_attn_weights, mask_type): batched [B, L, E].
Out mhaShape(const ShapeArgs& a) {
  const TensorInfo* q = a.tensor(0);
  const TensorInfo* k = a.tensor(1);
  const TensorInfo* proj = a.tensor(7);
  auto heads = a.i(4);
  if (!q || !k || !proj || !heads || !isFloating(*q->dtype) || sizesOf(*q).size() != 3 || sizesOf(*k).size() != 3)
    return std::nullopt;
  std::vector<int64_t> qs = sizesOf(*q), ks = sizesOf(*k);
  const bool need = a.size() > 10 ? a.i(10).value_or(-1) : 1;
  const bool average = a.size() > 11 ? a.i(11).value_or(-1) : 1;
  if ((a.size() > 10 && !a.i(10)) || (a.size() > 11 && !a.i(11))) return std::nullopt;
  std::vector<Known> out{Known::ofTensor(contiguousInfo(*q->dtype, {qs[0], qs[1], sizesOf(*proj)[0]}))};
  if (!need) out.push_back(Known::ofTensor(contiguousInfo(ScalarType::Float, {0})));
  else if (average) out.push_back(Known::ofTensor(contiguousInfo(ScalarType::Float, {qs[0], qs[1], ks[1]})));
  else out.push_back(Known::ofTensor(contiguousInfo(ScalarType::Float, {qs[0], *heads, qs[1], ks[1]})));
  return out;
}
LLGA_SHAPE_FN("aten::_native_multi_head_attention", mhaShape);

// ---- views: the output shares the input's storage; strides are the view's ----

Out viewOf(const TensorInfo& x, std::vector<int64_t> sizes, std::vector<int64_t> strides) {
  return oneTensor(stridedInfo(*x.dtype, sizes, strides));
}

// view/reshape(x, shape) with one -1 allowed: a view where the strides allow
// one (ir/strides.h), else reshape copies into a contiguous tensor.
Out reshapeShape(const ShapeArgs& a) {
  const TensorInfo* x = a.tensor(0);
  auto shape = a.ints(1);
  if (!x || !shape) return std::nullopt;
  std::vector<int64_t> xs = sizesOf(*x);
  int64_t numel = 1, known = 1;
  for (int64_t s : xs) numel *= s;
  std::optional<size_t> infer;
  for (size_t i = 0; i < shape->size(); ++i) {
    if ((*shape)[i] == -1) {
      if (infer) return std::nullopt;
      infer = i;
    } else if ((*shape)[i] < 0) {
      return std::nullopt;
    } else {
      known *= (*shape)[i];
    }
  }
  if (infer) {
    if (known == 0 || numel % known) return std::nullopt;
    (*shape)[*infer] = numel / known;
  } else if (known != numel) {
    return std::nullopt;
  }
  if (numel == 0) return std::nullopt;
  if (auto st = viewStrides(xs, *x->strides, *shape)) return viewOf(*x, *shape, *st);
  if (a.node().kind().toQualString() == std::string_view("aten::view")) return std::nullopt;  // fails at run time
  return oneTensor(contiguousInfo(*x->dtype, *shape));
}
LLGA_SHAPE_FN("aten::view", reshapeShape);
LLGA_SHAPE_FN("aten::reshape", reshapeShape);

// flatten(x, start, end): a reshape.
Out flattenShape(const ShapeArgs& a) {
  const TensorInfo* x = a.tensor(0);
  if (!x) return std::nullopt;
  std::vector<int64_t> xs = sizesOf(*x);
  if (xs.empty()) return oneTensor(contiguousInfo(*x->dtype, {1}));
  auto s = wrapDim(a.i(1), xs.size()), e = wrapDim(a.i(2), xs.size());
  if (!s || !e || *s > *e) return std::nullopt;
  std::vector<int64_t> out(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(*s));
  int64_t m = 1;
  for (size_t i = *s; i <= *e; ++i) m *= xs[i];
  out.push_back(m);
  out.insert(out.end(), xs.begin() + static_cast<std::ptrdiff_t>(*e) + 1, xs.end());
  if (m == 0) return std::nullopt;
  if (auto st = viewStrides(xs, *x->strides, out)) return viewOf(*x, out, *st);
  return oneTensor(contiguousInfo(*x->dtype, out));
}
LLGA_SHAPE_FN("aten::flatten", flattenShape);

Out permuteBy(const TensorInfo& x, const std::vector<size_t>& order) {
  std::vector<int64_t> xs = sizesOf(x), sizes, strides;
  for (size_t d : order) {
    sizes.push_back(xs[d]);
    strides.push_back((*x.strides)[d]);
  }
  return viewOf(x, sizes, strides);
}

Out transposeShape(const ShapeArgs& a) {
  const TensorInfo* x = a.tensor(0);
  if (!x) return std::nullopt;
  size_t rank = sizesOf(*x).size();
  std::vector<size_t> order(rank);
  for (size_t i = 0; i < rank; ++i) order[i] = i;
  if (a.node().kind().toQualString() == std::string_view("aten::t")) {
    if (rank < 2) return oneTensor(*x);
    std::swap(order[0], order[1]);
    return permuteBy(*x, order);
  }
  if (rank == 0) return std::nullopt;
  auto d0 = wrapDim(a.i(1), rank), d1 = wrapDim(a.i(2), rank);
  if (!d0 || !d1) return std::nullopt;
  std::swap(order[*d0], order[*d1]);
  return permuteBy(*x, order);
}
LLGA_SHAPE_FN("aten::transpose", transposeShape);
LLGA_SHAPE_FN("aten::t", transposeShape);

Out permuteShape(const ShapeArgs& a) {
  const TensorInfo* x = a.tensor(0);
  auto dims = a.ints(1);
  if (!x || !dims) return std::nullopt;
  size_t rank = sizesOf(*x).size();
  if (dims->size() != rank) return std::nullopt;
  std::vector<size_t> order;
  std::vector<bool> seen(rank, false);
  for (int64_t d : *dims) {
    auto w = wrapDim(d, rank);
    if (!w || seen[*w]) return std::nullopt;
    seen[*w] = true;
    order.push_back(*w);
  }
  return permuteBy(*x, order);
}
LLGA_SHAPE_FN("aten::permute", permuteShape);

Out unsqueezeShape(const ShapeArgs& a) {
  const TensorInfo* x = a.tensor(0);
  if (!x) return std::nullopt;
  std::vector<int64_t> sizes = sizesOf(*x), strides = *x->strides;
  auto d = wrapDim(a.i(1), sizes.size() + 1);
  if (!d) return std::nullopt;
  int64_t stride = *d >= sizes.size() ? 1 : sizes[*d] * strides[*d];
  sizes.insert(sizes.begin() + static_cast<std::ptrdiff_t>(*d), 1);
  strides.insert(strides.begin() + static_cast<std::ptrdiff_t>(*d), stride);
  return viewOf(*x, sizes, strides);
}
LLGA_SHAPE_FN("aten::unsqueeze", unsqueezeShape);

Out squeezeShape(const ShapeArgs& a) {
  const TensorInfo* x = a.tensor(0);
  if (!x) return std::nullopt;
  std::vector<int64_t> xs = sizesOf(*x), sizes, strides;
  std::optional<size_t> only;
  if (a.size() > 1) {
    only = wrapDim(a.i(1), std::max<size_t>(xs.size(), 1));
    if (!only) return std::nullopt;
  }
  for (size_t i = 0; i < xs.size(); ++i) {
    if (xs[i] == 1 && (!only || *only == i)) continue;
    sizes.push_back(xs[i]);
    strides.push_back((*x->strides)[i]);
  }
  return viewOf(*x, sizes, strides);
}
LLGA_SHAPE_FN("aten::squeeze", squeezeShape);

// select(x, dim, index): the dimension goes.
Out selectShape(const ShapeArgs& a) {
  const TensorInfo* x = a.tensor(0);
  if (!x) return std::nullopt;
  std::vector<int64_t> sizes = sizesOf(*x), strides = *x->strides;
  auto d = wrapDim(a.i(1), sizes.size());
  auto idx = a.i(2);
  if (!d || !idx || *idx < -sizes[*d] || *idx >= sizes[*d]) return std::nullopt;
  sizes.erase(sizes.begin() + static_cast<std::ptrdiff_t>(*d));
  strides.erase(strides.begin() + static_cast<std::ptrdiff_t>(*d));
  return viewOf(*x, sizes, strides);
}
LLGA_SHAPE_FN("aten::select", selectShape);

// slice(x, dim, start, end, step): clamped as PyTorch clamps.
Out sliceShape(const ShapeArgs& a) {
  const TensorInfo* x = a.tensor(0);
  if (!x || a.size() < 5) return std::nullopt;
  std::vector<int64_t> sizes = sizesOf(*x), strides = *x->strides;
  auto d = wrapDim(a.i(1), sizes.size());
  if (!d) return std::nullopt;
  const int64_t n = sizes[*d];
  std::optional<int64_t> start = a.none(2) ? std::optional<int64_t>(0) : a.i(2);
  std::optional<int64_t> end = a.none(3) ? std::optional<int64_t>(n) : a.i(3);
  auto step = a.i(4);
  if (!start || !end || !step || *step <= 0) return std::nullopt;
  auto clamp = [n](int64_t v) {
    if (v < 0) v += n;
    return std::clamp<int64_t>(v, 0, n);
  };
  int64_t s = clamp(*start), e = std::max(clamp(*end), s);
  sizes[*d] = (e - s + *step - 1) / *step;
  strides[*d] *= *step;
  return viewOf(*x, sizes, strides);
}
LLGA_SHAPE_FN("aten::slice", sliceShape);

// expand(x, sizes, implicit): new and size-1 dimensions get stride 0.
Out expandShape(const ShapeArgs& a) {
  const TensorInfo* x = a.tensor(0);
  auto want = a.ints(1);
  if (!x || !want || want->size() < sizesOf(*x).size()) return std::nullopt;
  std::vector<int64_t> xs = sizesOf(*x), sizes(want->size()), strides(want->size());
  const size_t lead = want->size() - xs.size();
  for (size_t i = 0; i < want->size(); ++i) {
    int64_t w = (*want)[i];
    if (i < lead) {
      if (w < 0) return std::nullopt;
      sizes[i] = w;
      strides[i] = 0;
      continue;
    }
    int64_t have = xs[i - lead], st = (*x->strides)[i - lead];
    if (w == -1 || w == have) {
      sizes[i] = have;
      strides[i] = st;
    } else if (have == 1 && w >= 0) {
      sizes[i] = w;
      strides[i] = 0;
    } else {
      return std::nullopt;
    }
  }
  return viewOf(*x, sizes, strides);
}
LLGA_SHAPE_FN("aten::expand", expandShape);

// chunk(x, chunks, dim) / split(x, size, dim) / split_with_sizes(x, sizes, dim): a Tensor[].
Out splitInto(const TensorInfo& x, size_t d, const std::vector<int64_t>& lengths) {
  Known list;
  list.items.emplace();
  std::vector<int64_t> sizes = sizesOf(x);
  for (int64_t len : lengths) {
    sizes[d] = len;
    list.items->push_back(Known::ofTensor(stridedInfo(*x.dtype, sizes, *x.strides)));
  }
  return one(std::move(list));
}

Out chunkShape(const ShapeArgs& a) {
  const TensorInfo* x = a.tensor(0);
  auto chunks = a.i(1);
  if (!x || !chunks || *chunks <= 0) return std::nullopt;
  auto d = wrapDim(a.i(2), sizesOf(*x).size());
  if (!d) return std::nullopt;
  const int64_t n = sizesOf(*x)[*d], each = (n + *chunks - 1) / *chunks;
  std::vector<int64_t> lengths;
  for (int64_t at = 0; at < n || (n == 0 && lengths.empty()); at += each) {
    lengths.push_back(std::min(each, n - at));
    if (each == 0) break;
  }
  return splitInto(*x, *d, lengths);
}
LLGA_SHAPE_FN("aten::chunk", chunkShape);

Out splitShape(const ShapeArgs& a) {
  const TensorInfo* x = a.tensor(0);
  if (!x) return std::nullopt;
  auto d = wrapDim(a.i(2), sizesOf(*x).size());
  if (!d) return std::nullopt;
  const int64_t n = sizesOf(*x)[*d];
  std::vector<int64_t> lengths;
  if (a.node().input(1)->type()->isSimple("int")) {
    auto each = a.i(1);
    if (!each || *each <= 0) return std::nullopt;
    for (int64_t at = 0; at < n; at += *each) lengths.push_back(std::min(*each, n - at));
  } else {
    auto given = a.ints(1);
    if (!given) return std::nullopt;
    int64_t total = 0;
    for (int64_t l : *given) total += l;
    if (total != n) return std::nullopt;
    lengths = *given;
  }
  return splitInto(*x, *d, lengths);
}
LLGA_SHAPE_FN("aten::split", splitShape);
LLGA_SHAPE_FN("aten::split_with_sizes", splitShape);

// to(x, dtype, non_blocking, copy, memory_format): the dtype overload on a contiguous input.
Out toShape(const ShapeArgs& a) {
  const TensorInfo* x = a.tensor(0);
  if (!x || a.size() < 2 || !a.node().input(1)->type()->isSimple("int") || !a.i(1)) return std::nullopt;
  auto dtype = scalarTypeFromCode(*a.i(1));
  if (!dtype || !isContiguous(*x)) return std::nullopt;
  if (*dtype == *x->dtype) return oneTensor(*x);
  return oneTensor(contiguousInfo(*dtype, sizesOf(*x)));
}
LLGA_SHAPE_FN("aten::to", toShape);

// ---- lists and tuples ----

Out constructShape(const ShapeArgs& a) {
  Known k;
  k.items.emplace();
  for (size_t i = 0; i < a.size(); ++i) k.items->push_back(a[i]);
  return one(std::move(k));
}
LLGA_SHAPE_FN("prim::ListConstruct", constructShape);
LLGA_SHAPE_FN("prim::TupleConstruct", constructShape);

Out unpackShape(const ShapeArgs& a) {
  if (!a[0].items || a[0].items->size() != a.node().outputs().size()) return std::nullopt;
  return *a[0].items;
}
LLGA_SHAPE_FN("prim::ListUnpack", unpackShape);
LLGA_SHAPE_FN("prim::TupleUnpack", unpackShape);

Out getItemShape(const ShapeArgs& a) {
  auto i = a.i(1);
  if (!a[0].items || !i) return std::nullopt;
  int64_t n = static_cast<int64_t>(a[0].items->size()), at = *i < 0 ? *i + n : *i;
  if (at < 0 || at >= n) return std::nullopt;
  return one((*a[0].items)[static_cast<size_t>(at)]);
}
LLGA_SHAPE_FN("aten::__getitem__", getItemShape);

}  // namespace

const ShapeFn* findShapeFn(Symbol kind) {
  auto& r = registry();
  auto it = r.find(kind);
  if (it != r.end()) return &it->second;
  if (hasTrait(kind, op_trait::SameShape | op_trait::Eltwise) && !hasTrait(kind, op_trait::View)) {
    static const ShapeFn same = sameShape;
    return &same;
  }
  return nullptr;
}

}  // namespace llga
