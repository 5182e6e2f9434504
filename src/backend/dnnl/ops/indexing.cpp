// Reading elements at positions held in an index tensor.
//   aten::index(x, indices[])                x[i, j, mask, ...]: advanced indexing
//   aten::index_select(x, dim, index)        whole slices along dim, one copy each
//   aten::gather(x, dim, index, sparse_grad=False)
//        out[..., j, ...] = x[..., index[..., j, ...], ...] along dim
//   aten::flip(x, dims)                      index_select with reversed positions, per dim
//   aten::take_along_dim(x, index, dim?)    gather after broadcasting x and index
//        (all but dim); without dim, over the flattened x
//   aten::scatter(x, dim, index, src | value[, reduce]), aten::scatter_add(x, dim, index, src)
//        out = x with out[..., index[..., j, ...], ...] = src[..., j, ...] (+= for add)
//   aten::index_put(x, indices[], values, accumulate=False)   x[indices] = values
//   aten::masked_select(x, mask)            the elements under mask, 1-D
//   aten::nonzero(x)                        [n, rank] coordinates of nonzero elements
//   aten::kthvalue(x, k, dim=-1, keepdim=False) -> (values, indices)
//   aten::embedding_bag(weight, indices, offsets, scale_grad, mode, sparse,
//        per_sample_weights?, include_last_offset, padding_idx?)  sum / mean / max per bag
// Indices are checked before anything is read (a clear error names the bad
// one); negative indices are out of range, as PyTorch has them for these two
// ops. Rows run in parallel.
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

#include "backend/dnnl/ops/functional.h"
#include "backend/dnnl/ops/op_utils.h"
#include "runtime/threads.h"

namespace llga {
namespace {

std::vector<int64_t> checkedIndices(const Tensor& index, int64_t n, const char* op) {
  if (!isIntegralType(index.dtype(), false))
    throw std::invalid_argument(std::string(op) + " expects an integer index tensor, got " + index.describe());
  Tensor idx = index.to(ScalarType::Long).contiguous();
  std::vector<int64_t> out(idx.data<int64_t>(), idx.data<int64_t>() + idx.numel());
  for (int64_t i : out)
    if (i < 0 || i >= n)
      throw std::invalid_argument(std::string(op) + ": index " + std::to_string(i) + " is out of range for a dimension of " +
                                  std::to_string(n));
  return out;
}

Tensor indexSelect(const Tensor& input, int64_t dim_arg, const Tensor& index) {
  if (index.dim() > 1) throw std::invalid_argument("index_select expects a 0-D or 1-D index, got " + index.describe());
  Tensor x = (input.dim() == 0 ? input.view({1}) : input).contiguous();
  const int64_t dim = x.wrapDim(dim_arg), n = x.size(dim);
  std::vector<int64_t> idx = checkedIndices(index, n, "index_select");
  Shape out_shape = x.sizes();
  out_shape[dim] = static_cast<int64_t>(idx.size());
  Tensor out = Tensor::empty(x.dtype(), out_shape);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (i < dim) outer *= x.size(i);
    if (i > dim) inner *= x.size(i);
  }
  const size_t row = static_cast<size_t>(inner) * x.itemsize();
  const auto* src = static_cast<const char*>(x.data());
  auto* dst = static_cast<char*>(out.data());
  const int64_t len = static_cast<int64_t>(idx.size());
  parallelFor(outer * len, len * inner >= kParallelGrain, [&](int64_t r) {
    const int64_t o = r / len, k = r % len;
    std::memcpy(dst + static_cast<size_t>(r) * row, src + static_cast<size_t>(o * n + idx[static_cast<size_t>(k)]) * row, row);
  });
  return input.dim() == 0 ? out.view({}) : out;
}

Tensor gather(const Tensor& input, int64_t dim_arg, const Tensor& index) {
  Tensor x = input.contiguous();
  const int64_t rank = std::max<int64_t>(x.dim(), 1);
  if (index.dim() != x.dim() && !(x.dim() == 0 && index.dim() <= 1))
    throw std::invalid_argument("gather: index " + index.describe() + " and input " + x.describe() + " differ in rank");
  const int64_t dim = x.dim() == 0 ? 0 : x.wrapDim(dim_arg);
  Shape xs = x.dim() == 0 ? Shape{1} : x.sizes(), is = index.dim() == 0 ? Shape{1} : index.sizes();
  for (int64_t d = 0; d < rank; ++d)
    if (d != dim && is[d] > xs[d])
      throw std::invalid_argument("gather: index " + index.describe() + " is larger than input " + x.describe() +
                                  " in dimension " + std::to_string(d));
  std::vector<int64_t> idx = checkedIndices(index, xs[dim], "gather");
  Tensor out = Tensor::empty(x.dtype(), index.sizes());
  if (out.numel() == 0) return out;
  Shape xstride(static_cast<size_t>(rank), 1);
  for (int64_t d = rank - 1; d > 0; --d) xstride[d - 1] = xstride[d] * xs[d];
  const int64_t last = is[rank - 1], rows = out.numel() / last;
  const size_t item = x.itemsize();
  const auto* src = static_cast<const char*>(x.data());
  auto* dst = static_cast<char*>(out.data());
  parallelFor(rows, out.numel() >= kParallelGrain, [&](int64_t r) {
    // The row's coordinates in every dimension but the last.
    int64_t base = 0, rest = r;
    for (int64_t d = rank - 2; d >= 0; --d) {
      const int64_t c = rest % is[d];
      rest /= is[d];
      if (d != dim) base += c * xstride[d];
    }
    for (int64_t j = 0; j < last; ++j) {
      const int64_t at = r * last + j;
      const int64_t off = base + idx[static_cast<size_t>(at)] * xstride[dim] + (dim == rank - 1 ? 0 : j * xstride[rank - 1]);
      std::memcpy(dst + static_cast<size_t>(at) * item, src + static_cast<size_t>(off) * item, item);
    }
  });
  return out;
}

Tensor flip(const Tensor& x, const Shape& dims) {
  Tensor out = x;
  std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(x.dim(), 1)), false);
  for (int64_t d : dims) {
    const int64_t w = x.dim() == 0 ? 0 : x.wrapDim(d);
    if (seen[static_cast<size_t>(w)]) throw std::invalid_argument("flip: dim " + std::to_string(d) + " appears twice");
    seen[static_cast<size_t>(w)] = true;
    const int64_t n = x.dim() == 0 ? 1 : x.size(w);
    Tensor rev = Tensor::empty(ScalarType::Long, {n});
    for (int64_t i = 0; i < n; ++i) rev.data<int64_t>()[i] = n - 1 - i;
    out = indexSelect(out, w, rev);
  }
  return dims.empty() ? x.clone() : out;
}

// Flat element offsets (in elements, contiguous order) of every position of `shape`.
Tensor positions(const Shape& shape) {
  Tensor pos = Tensor::empty(ScalarType::Long, shape);
  int64_t* p = pos.data<int64_t>();
  for (int64_t i = 0, n = pos.numel(); i < n; ++i) p[i] = i;
  return pos;
}

// scatter / scatter_add: `src` null means the scalar `value`.
Tensor scatter(const Tensor& input, int64_t dim_arg, const Tensor& index, const Tensor* src, double value,
               const std::string& reduce) {
  Tensor out = input.contiguous().clone();
  if (index.numel() == 0) return out;
  const int64_t rank = std::max<int64_t>(out.dim(), 1);
  if (std::max<int64_t>(index.dim(), 1) != rank)
    throw std::invalid_argument("scatter: index " + index.describe() + " and input " + input.describe() + " differ in rank");
  const int64_t dim = out.dim() == 0 ? 0 : out.wrapDim(dim_arg);
  Shape xs = out.dim() == 0 ? Shape{1} : out.sizes(), is = index.dim() == 0 ? Shape{1} : index.sizes();
  Tensor s;
  if (src) {
    s = src->to(out.dtype()).contiguous();
    Shape ss = s.dim() == 0 ? Shape{1} : s.sizes();
    if (static_cast<int64_t>(ss.size()) != rank)
      throw std::invalid_argument("scatter: src " + src->describe() + " and input " + input.describe() + " differ in rank");
    for (int64_t d = 0; d < rank; ++d)
      if (is[d] > ss[d]) throw std::invalid_argument("scatter: index " + index.describe() + " is larger than src " + src->describe());
  }
  for (int64_t d = 0; d < rank; ++d)
    if (d != dim && is[d] > xs[d])
      throw std::invalid_argument("scatter: index " + index.describe() + " is larger than input " + input.describe() +
                                  " in dimension " + std::to_string(d));
  std::vector<int64_t> idx = checkedIndices(index, xs[dim], "scatter");
  Shape xstride(static_cast<size_t>(rank), 1), sstride(static_cast<size_t>(rank), 1);
  for (int64_t d = rank - 1; d > 0; --d) xstride[d - 1] = xstride[d] * xs[d];
  if (src) {
    Shape ss = s.dim() == 0 ? Shape{1} : s.sizes();
    for (int64_t d = rank - 1; d > 0; --d) sstride[d - 1] = sstride[d] * ss[d];
  }
  const bool add = reduce == "add" || reduce == "sum", mul = reduce == "multiply" || reduce == "prod";
  if (!reduce.empty() && !add && !mul) throw std::invalid_argument("scatter: reduce must be 'add' or 'multiply', got '" + reduce + "'");
  dispatchDtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data<T>();
    const T* sp = src ? s.data<T>() : nullptr;
    const T v = fromDouble<T>(value);
    // In index order, as PyTorch's CPU kernel: with repeated positions the last write wins.
    for (int64_t at = 0, n = index.numel(); at < n; ++at) {
      int64_t rest = at, xoff = 0, soff = 0;
      for (int64_t d = rank - 1; d >= 0; --d) {
        const int64_t c = rest % is[d];
        rest /= is[d];
        xoff += (d == dim ? idx[static_cast<size_t>(at)] : c) * xstride[d];
        soff += c * sstride[d];
      }
      const T val = sp ? sp[soff] : v;
      if constexpr (std::is_same_v<T, bool>) {
        o[xoff] = add ? (o[xoff] || val) : mul ? (o[xoff] && val) : val;
      } else if constexpr (std::is_same_v<T, BFloat16>) {
        const float cur = static_cast<float>(o[xoff]), w = static_cast<float>(val);
        o[xoff] = BFloat16::from(add ? cur + w : mul ? cur * w : w);
      } else {
        o[xoff] = add ? static_cast<T>(o[xoff] + val) : mul ? static_cast<T>(o[xoff] * val) : val;
      }
    }
  });
  return out;
}

Tensor takeAlongDim(const Tensor& x, const Tensor& index, std::optional<int64_t> dim_arg) {
  if (!dim_arg) return gather(x.contiguous().view({x.numel()}), 0, index.contiguous().view({index.numel()}));
  if (x.dim() != index.dim())
    throw std::invalid_argument("take_along_dim: input " + x.describe() + " and index " + index.describe() + " differ in rank");
  const int64_t dim = x.wrapDim(*dim_arg);
  Shape xs = x.sizes(), is = index.sizes();
  xs[static_cast<size_t>(dim)] = 1;
  is[static_cast<size_t>(dim)] = 1;
  Shape b = broadcastShapes(xs, is), bx = b, bi = b;
  bx[static_cast<size_t>(dim)] = x.size(dim);
  bi[static_cast<size_t>(dim)] = index.size(dim);
  return gather(x.expand(bx), dim, index.expand(bi));
}

// index_put(x, indices, values, accumulate): the positions x[indices] selects,
// found by indexing a tensor of element offsets with the same indices.
Tensor indexPut(const Tensor& x, const RtValue& indices, const Tensor& values, bool accumulate) {
  Tensor out = x.contiguous().clone();
  Tensor pos = indexWithTensors(positions(out.sizes()), indices).contiguous();
  if (pos.numel() == 0) return out;
  Shape target = broadcastShapes(pos.sizes(), values.sizes());
  if (target != pos.sizes())
    throw std::invalid_argument("index_put: values " + values.describe() + " do not broadcast to the indexed shape " +
                                Tensor::empty(ScalarType::Float, pos.sizes()).describe());
  Tensor v = values.to(out.dtype()).expand(pos.sizes()).contiguous();
  const int64_t* p = pos.data<int64_t>();
  dispatchDtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data<T>();
    const T* vp = v.data<T>();
    for (int64_t i = 0, n = pos.numel(); i < n; ++i) {
      if constexpr (std::is_same_v<T, bool>) o[p[i]] = accumulate ? (o[p[i]] || vp[i]) : vp[i];
      else if constexpr (std::is_same_v<T, BFloat16>)
        o[p[i]] = accumulate ? BFloat16::from(static_cast<float>(o[p[i]]) + static_cast<float>(vp[i])) : vp[i];
      else o[p[i]] = accumulate ? static_cast<T>(o[p[i]] + vp[i]) : vp[i];
    }
  });
  return out;
}

Tensor maskedSelect(const Tensor& x, const Tensor& mask) {
  if (mask.dtype() != ScalarType::Bool) throw std::invalid_argument("masked_select expects a bool mask, got " + mask.describe());
  Shape b = broadcastShapes(x.sizes(), mask.sizes());
  return indexWithTensors(x.expand(b), makeList({RtValue(mask.expand(b))}));
}

}  // namespace

Tensor nonzero(const Tensor& input) {
  Tensor x = input.to(ScalarType::Bool).contiguous();
  const auto* m = static_cast<const uint8_t*>(x.data());
  std::vector<int64_t> hits;
  for (int64_t i = 0, n = x.numel(); i < n; ++i)
    if (m[i]) hits.push_back(i);
  const int64_t rank = x.dim();
  Tensor out = Tensor::empty(ScalarType::Long, {static_cast<int64_t>(hits.size()), rank});
  int64_t* o = out.data<int64_t>();
  for (size_t h = 0; h < hits.size(); ++h) {
    int64_t rest = hits[h];
    for (int64_t d = rank - 1; d >= 0; --d) {
      o[static_cast<int64_t>(h) * rank + d] = rest % x.size(d);
      rest /= x.size(d);
    }
  }
  return out;
}
namespace {

// embedding_bag: one output row per bag (offsets[b] .. offsets[b+1]).
void embeddingBag(const KernelArgs& a) {
  const Tensor w = a.tensor(0).contiguous();
  if (w.dim() != 2 || !isFloatingType(w.dtype())) throw std::invalid_argument("embedding_bag expects a 2-D floating weight, got " + w.describe());
  const Tensor& idx_in = a.tensor(1);
  if (idx_in.dim() != 1) throw std::invalid_argument("embedding_bag expects 1-D indices here, got " + idx_in.describe());
  std::vector<int64_t> idx = checkedIndices(idx_in, w.size(0), "embedding_bag");
  std::vector<int64_t> offsets = checkedIndices(a.tensor(2), static_cast<int64_t>(idx.size()) + 1, "embedding_bag offsets");
  const int64_t mode = a.toInt(4);
  const bool include_last = a.num_in > 7 && a.toBool(7);
  std::optional<Tensor> psw = a.optTensor(6);
  const int64_t padding_idx = a.num_in > 8 && !a.isNone(8) ? a.toInt(8) : -1;
  if (psw && mode != 0) throw std::invalid_argument("embedding_bag: per_sample_weights need mode='sum'");
  if (psw && psw->numel() != static_cast<int64_t>(idx.size()))
    throw std::invalid_argument("embedding_bag: per_sample_weights " + psw->describe() + " do not match the indices");
  if (!offsets.empty() && offsets[0] != 0)
    throw std::invalid_argument("embedding_bag: offsets[0] has to be 0 (the first bag starts at position 0), got " +
                                std::to_string(offsets[0]));
  for (size_t i = 1; i < offsets.size(); ++i)
    if (offsets[i] < offsets[i - 1]) throw std::invalid_argument("embedding_bag: offsets must not decrease");
  const int64_t bags = static_cast<int64_t>(offsets.size()) - (include_last ? 1 : 0), D = w.size(1);
  if (bags < 0) throw std::invalid_argument("embedding_bag: include_last_offset needs at least one offset");
  Tensor wf = w.to(ScalarType::Float).contiguous();
  Tensor pw = psw ? psw->to(ScalarType::Float).contiguous() : Tensor();
  Tensor out = Tensor::zeros(ScalarType::Float, {bags, D}), max_idx = Tensor::zeros(ScalarType::Long, {bags, mode == 2 ? D : 0});
  Tensor bag_size = Tensor::zeros(ScalarType::Long, {bags}), offset2bag = Tensor::zeros(ScalarType::Long, {static_cast<int64_t>(idx.size())});
  const float* wp = wf.data<float>();
  float* op = out.data<float>();
  const int64_t n = static_cast<int64_t>(idx.size());
  parallelFor(bags, n * D >= kParallelGrain, [&](int64_t b) {
    const int64_t lo = offsets[static_cast<size_t>(b)], hi = b + 1 < static_cast<int64_t>(offsets.size()) ? offsets[static_cast<size_t>(b + 1)] : n;
    float* row = op + b * D;
    int64_t count = 0;
    for (int64_t i = lo; i < std::min(hi, n); ++i) {
      const int64_t k = idx[static_cast<size_t>(i)];
      offset2bag.data<int64_t>()[i] = b;
      if (k == padding_idx) continue;
      const float* src = wp + k * D;
      const float s = psw ? pw.data<float>()[i] : 1.f;
      if (mode == 2) {
        for (int64_t j = 0; j < D; ++j)
          if (count == 0 || src[j] > row[j]) {
            row[j] = src[j];
            max_idx.data<int64_t>()[b * D + j] = k;
          }
      } else {
#pragma omp simd
        for (int64_t j = 0; j < D; ++j) row[j] += s * src[j];
      }
      ++count;
    }
    bag_size.data<int64_t>()[b] = count;
    if (mode == 1 && count > 0)
      for (int64_t j = 0; j < D; ++j) row[j] /= static_cast<float>(count);
  });
  a.set(0, out.to(w.dtype()));
  if (a.num_out > 1) a.set(1, offset2bag);
  if (a.num_out > 2) a.set(2, bag_size);
  if (a.num_out > 3) a.set(3, max_idx);
}

// Advanced indexing: self[indices] where indices holds a tensor or None per
// leading dim. Index tensors broadcast together; bool masks select their
// true positions. Adjacent indexed dims put the index shape in their place,
// separated ones put it first (numpy's rule).
Tensor advancedIndex(const Tensor& self, const RtValue& list) {
  std::vector<std::optional<Tensor>> idx;
  for (const RtValue& v : *list.list()) {
    if (v.isNone()) { idx.emplace_back(); continue; }
    const Tensor& t = v.tensor();
    if (t.dtype() == ScalarType::Bool || t.dtype() == ScalarType::Byte) {  // mask -> one long index per mask dim
      Tensor m = t.contiguous();
      std::vector<std::vector<int64_t>> coords(static_cast<size_t>(m.dim()));
      int64_t n = m.numel();
      for (int64_t i = 0; i < n; ++i) {
        if (!static_cast<const uint8_t*>(m.data())[i]) continue;
        int64_t rem = i;
        for (int64_t d = m.dim(); d-- > 0;) { coords[d].push_back(rem % m.size(d)); rem /= m.size(d); }
      }
      for (auto& c : coords) {
        Tensor ti = Tensor::empty(ScalarType::Long, {static_cast<int64_t>(c.size())});
        std::copy(c.begin(), c.end(), ti.data<int64_t>());
        idx.emplace_back(ti);
      }
      continue;
    }
    if (!isIntegralType(t.dtype(), false)) throw std::invalid_argument("tensors used as indices must be long, int, byte or bool");
    idx.emplace_back(t.to(ScalarType::Long));
  }
  if (static_cast<int64_t>(idx.size()) > self.dim()) throw std::invalid_argument("too many indices for tensor of rank " + std::to_string(self.dim()));
  std::vector<int64_t> dims;
  Shape bshape;
  for (size_t d = 0; d < idx.size(); ++d)
    if (idx[d]) {
      dims.push_back(static_cast<int64_t>(d));
      bshape = dims.size() == 1 ? idx[d]->sizes() : broadcastShapes(bshape, idx[d]->sizes());
    }
  if (dims.empty()) return self;
  bool adjacent = dims.back() - dims.front() + 1 == static_cast<int64_t>(dims.size());
  int64_t bn = 1;
  for (int64_t x : bshape) bn *= x;
  // Source offset of each index combination.
  std::vector<int64_t> base(static_cast<size_t>(bn), 0);
  for (int64_t d : dims) {
    Tensor e = idx[d]->expand(bshape).contiguous();
    const int64_t* p = e.data<int64_t>();
    int64_t size = self.size(d);
    for (int64_t i = 0; i < bn; ++i) {
      int64_t v = p[i];
      if (v < -size || v >= size) throw std::out_of_range("index " + std::to_string(v) + " is out of bounds for dimension " + std::to_string(d) + " with size " + std::to_string(size));
      base[i] += (v < 0 ? v + size : v) * self.stride(d);
    }
  }
  // pre: dims before the indexed block (when adjacent); post: the other non-indexed dims.
  Shape pre_sz, pre_st, post_sz, post_st;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (std::find(dims.begin(), dims.end(), d) != dims.end()) continue;
    bool before = adjacent && d < dims.front();
    (before ? pre_sz : post_sz).push_back(self.size(d));
    (before ? pre_st : post_st).push_back(self.stride(d));
  }
  auto offsets = [](const Shape& sz, const Shape& st) {
    std::vector<int64_t> out{0};
    for (size_t d = 0; d < sz.size(); ++d) {
      std::vector<int64_t> next;
      for (int64_t o : out)
        for (int64_t i = 0; i < sz[d]; ++i) next.push_back(o + i * st[d]);
      out.swap(next);
    }
    return out;
  };
  std::vector<int64_t> pre = offsets(pre_sz, pre_st), post = offsets(post_sz, post_st);
  Shape out_shape = pre_sz;
  out_shape.insert(out_shape.end(), bshape.begin(), bshape.end());
  out_shape.insert(out_shape.end(), post_sz.begin(), post_sz.end());
  Tensor out = Tensor::empty(self.dtype(), out_shape);
  const size_t item = self.itemsize();
  const char* src = static_cast<const char*>(self.data());
  char* dst = static_cast<char*>(out.data());
  for (int64_t po : pre)
    for (int64_t b : base)
      for (int64_t qo : post) {
        std::memcpy(dst, src + (po + b + qo) * static_cast<int64_t>(item), item);
        dst += item;
      }
  return out;
}


}  // namespace

Tensor indexWithTensors(const Tensor& self, const RtValue& indices) { return advancedIndex(self, indices); }

Tensor indexSelectOp(const Tensor& x, int64_t dim, const Tensor& index) { return indexSelect(x, dim, index); }

void registerIndexingOps(OpRegistry& r) {
  r.add("aten::index", 2, 4, [](const KernelArgs& a) {
    if (a.input(0).isList()) {  // l.index(x): the first position of an equal item
      const auto& items = *a.input(0).list();
      for (size_t i = 0; i < items.size(); ++i)
        if (items[i].sameKey(a.input(1))) return a.set(0, RtValue(static_cast<int64_t>(i)));
      throw std::invalid_argument("list.index(x): x not in list");
    }
    if (std::holds_alternative<std::string>(a.input(0).v)) {  // s.index(sub, start=0, end=-1): find, or raise
      const std::string& s = a.input(0).str();
      const int64_t n = static_cast<int64_t>(s.size());
      auto norm = [n](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + n : i, 0, n); };
      const int64_t start = a.num_in > 2 ? norm(a.toInt(2)) : 0;
      const int64_t end = a.num_in > 3 && a.toInt(3) != -1 ? norm(a.toInt(3)) : n;
      const size_t p = start <= end ? s.substr(0, static_cast<size_t>(end)).find(a.input(1).str(), static_cast<size_t>(start))
                                    : std::string::npos;
      if (p == std::string::npos) throw std::invalid_argument("str.index: substring not found");
      return a.set(0, RtValue(static_cast<int64_t>(p)));
    }
    if (a.num_in != 2) throw std::invalid_argument("aten::index of a tensor takes 2 inputs, got " + std::to_string(a.num_in));
    a.set(0, advancedIndex(a.tensor(0), a.input(1)));
  });
  r.add("aten::take_along_dim", 2, 3, [](const KernelArgs& a) {
    a.set(0, takeAlongDim(a.tensor(0), a.tensor(1), a.num_in > 2 && !a.isNone(2) ? std::optional<int64_t>(a.toInt(2)) : std::nullopt));
  });
  // scatter(x, dim, index, src), scatter(x, dim, index, value), scatter(x, dim, index, src|value, reduce)
  // The in-place forms (that remove-mutation left) write the result back into x.
  auto result = [](const KernelArgs& a, bool inplace, const Tensor& out) {
    if (!inplace) return a.set(0, out);
    Tensor x = a.tensor(0);
    x.copyFrom(out);
    a.set(0, x);
  };
  for (bool inplace : {false, true}) {
    r.add(inplace ? "aten::scatter_" : "aten::scatter", 4, 5, [inplace, result](const KernelArgs& a) {
      const bool has_src = a.input(3).isTensor();
      const std::string reduce = a.num_in > 4 && !a.isNone(4) ? a.input(4).str() : "";
      result(a, inplace,
             scatter(a.tensor(0), a.toInt(1), a.tensor(2), has_src ? &a.tensor(3) : nullptr, has_src ? 0.0 : a.toDouble(3), reduce));
    });
    r.add(inplace ? "aten::scatter_add_" : "aten::scatter_add", 4, 4, [inplace, result](const KernelArgs& a) {
      result(a, inplace, scatter(a.tensor(0), a.toInt(1), a.tensor(2), &a.tensor(3), 0.0, "add"));
    });
    r.add(inplace ? "aten::index_put_" : "aten::index_put", 3, 4, [inplace, result](const KernelArgs& a) {
      result(a, inplace, indexPut(a.tensor(0), a.input(1), a.tensor(2), a.num_in > 3 && a.toBool(3)));
    });
  }
  r.add("aten::masked_select", 2, 2, [](const KernelArgs& a) { a.set(0, maskedSelect(a.tensor(0), a.tensor(1))); });
  r.add("aten::nonzero", 1, 1, [](const KernelArgs& a) { a.set(0, nonzero(a.tensor(0))); });
  r.add("aten::embedding_bag", 9, 9, embeddingBag);
  r.add("aten::_embedding_bag", 9, 9, embeddingBag);
  r.add("aten::flip", 2, 2, [](const KernelArgs& a) { a.set(0, flip(a.tensor(0), a.intList(1))); });
  r.add("aten::index_select", 3, 3, [](const KernelArgs& a) { a.set(0, indexSelect(a.tensor(0), a.toInt(1), a.tensor(2))); });
  r.add("aten::gather", 3, 4, [](const KernelArgs& a) { a.set(0, gather(a.tensor(0), a.toInt(1), a.tensor(2))); });
}
LLGA_REGISTER_OPS(registerIndexingOps);

}  // namespace llga
