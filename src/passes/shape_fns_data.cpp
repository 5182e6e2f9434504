// Shape functions of the data-movement ops: concatenation, padding, creation
// and indexing, views (whose strides are the view's, by ir/strides.h), lists
// and tuples (shape_functions.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "ir/strides.h"
#include "passes/pass_utils.h"
#include "passes/shape_fn_helpers.h"

namespace llga::shape_fn {

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
    const std::optional<std::string> mode =
        a.node().inputs().size() > 2 ? constantString(a.node().input(2)) : std::nullopt;
    if (!mode) return std::nullopt;
    const std::string& mode_name = *mode;
    if (mode_name != "constant" && mode_name != "reflect" && mode_name != "replicate" && mode_name != "circular")
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
[[maybe_unused]] const bool kPadShapes = [] {
  for (const char* k : {"aten::reflection_pad1d", "aten::reflection_pad2d", "aten::reflection_pad3d", "aten::replication_pad1d",
                        "aten::replication_pad2d", "aten::replication_pad3d"})
    registerShapeFn(k, padShape);
  return true;
}();

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

// zeros/ones/empty(size, dtype, layout, device, pin_memory[, memory_format]): float unless dtype says.
Out factoryShape(const ShapeArgs& a) {
  auto size = a.ints(0);
  if (!size) return std::nullopt;
  const std::optional<ScalarType> dtype = dtypeArg(a, 1, ScalarType::Float);
  if (!dtype) return std::nullopt;
  for (int64_t s : *size)
    if (s < 0) return std::nullopt;
  return oneTensor(contiguousInfo(*dtype, *size));
}
LLGA_SHAPE_FN("aten::zeros", factoryShape);
LLGA_SHAPE_FN("aten::ones", factoryShape);
LLGA_SHAPE_FN("aten::empty", factoryShape);

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
LLGA_SHAPE_FN("aten::unsafe_chunk", chunkShape);

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
LLGA_SHAPE_FN("aten::unsafe_split", splitShape);
LLGA_SHAPE_FN("aten::unsafe_split_with_sizes", splitShape);

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

}  // namespace llga::shape_fn
