// Selection along a dimension: the value and position of the largest or
// smallest element.
//   aten::max(x) / aten::min(x)                      the whole tensor, 0-dim
//   aten::max(x, dim, keepdim=False) -> (values, indices)   (min alike)
//   aten::argmax(x, dim=None, keepdim=False), aten::argmin(...)
//   aten::sort(x, dim=-1, descending=False) / sort(x, stable, dim, descending)
//        -> (values, indices); aten::argsort(x, dim=-1, descending=False)
//   aten::topk(x, k, dim=-1, largest=True, sorted=True) -> (values, indices)
// (max/min of two tensors is aten::maximum/minimum: decompose rewrites it.)
// As PyTorch: a NaN wins (it is the max and the min, first NaN's index), and
// among equal values the first index is returned. The tensor is read as
// [outer, n, inner]; threads split the outer rows, and each row keeps a best
// value per inner position, updated a whole inner row at a time (a loop the
// compiler vectorises). Sorting moves the dimension last and sorts each row's
// indices (stable, NaN last ascending and first descending, as PyTorch),
// rows in parallel; topk sorts only the k it keeps.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <limits>
#include <type_traits>

#include "backend/dnnl/ops/op_utils.h"

namespace llga {
namespace {

// Whether `v` replaces `best` (strictly better, or a first NaN).
template <typename T, bool Max>
inline bool better(T v, T best) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(best)) return false;
    if (std::isnan(v)) return true;
  }
  if constexpr (Max) return v > best;
  else return v < best;
}

template <typename T, bool Max>
void argReduce(const T* x, T* values, int64_t* indices, int64_t outer, int64_t n, int64_t inner) {
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < outer; ++o) {
    const T* row = x + o * n * inner;
    T* best = values + o * inner;
    int64_t* at = indices + o * inner;
    for (int64_t i = 0; i < inner; ++i) {
      best[i] = row[i];
      at[i] = 0;
    }
    for (int64_t k = 1; k < n; ++k) {
      const T* r = row + k * inner;
      for (int64_t i = 0; i < inner; ++i) {
        const bool b = better<T, Max>(r[i], best[i]);
        best[i] = b ? r[i] : best[i];
        at[i] = b ? k : at[i];
      }
    }
  }
}

struct Selected {
  Tensor values, indices;
};

// Along `dim` (none: the flattened tensor).
Selected select(const Tensor& input, std::optional<int64_t> dim, bool keepdim, bool max) {
  Tensor x = input;
  if (x.dtype() == ScalarType::BFloat16) {
    Selected s = select(x.to(ScalarType::Float), dim, keepdim, max);
    s.values = s.values.to(ScalarType::BFloat16);
    return s;
  }
  Shape out_shape;
  int64_t outer = 1, n = 1, inner = 1;
  if (!dim) {
    n = x.numel();
    x = x.contiguous();
    if (keepdim) out_shape = Shape(static_cast<size_t>(x.dim()), 1);
  } else {
    const int64_t d = x.dim() == 0 ? (*dim == 0 || *dim == -1 ? 0 : x.wrapDim(*dim)) : x.wrapDim(*dim);
    x = x.contiguous();
    for (int64_t i = 0; i < x.dim(); ++i) {
      if (i < d) outer *= x.size(i);
      else if (i > d) inner *= x.size(i);
      else n = x.size(i);
      if (i != d) out_shape.push_back(x.size(i));
      else if (keepdim) out_shape.push_back(1);
    }
  }
  if (n == 0) throw std::invalid_argument("max/min/argmax/argmin over an empty dimension is not defined: " + input.describe());
  Selected s{Tensor::empty(x.dtype(), out_shape), Tensor::empty(ScalarType::Long, out_shape)};
  if (s.values.numel() == 0) return s;
  dispatchDtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, BFloat16>) {
      throw std::logic_error("unreachable");
    } else if (max) {
      argReduce<T, true>(x.data<T>(), s.values.data<T>(), s.indices.data<int64_t>(), outer, n, inner);
    } else {
      argReduce<T, false>(x.data<T>(), s.values.data<T>(), s.indices.data<int64_t>(), outer, n, inner);
    }
  });
  return s;
}

KernelFn maxOrMin(bool max) {
  return [max](const KernelArgs& a) {
    const Tensor& x = a.tensor(0);
    if (a.num_in == 1) {  // the whole tensor
      a.set(0, select(x, std::nullopt, false, max).values);
      return;
    }
    if (!a.input(1).isInt())
      throw std::invalid_argument(std::string(max ? "max" : "min") +
                                  " of two tensors should have become maximum/minimum (decompose)");
    Selected s = select(x, a.toInt(1), a.num_in > 2 && a.toBool(2), max);
    a.set(0, s.values);
    if (a.num_out > 1) a.set(1, s.indices);
  };
}

KernelFn argMaxOrMin(bool max) {
  return [max](const KernelArgs& a) {
    std::optional<int64_t> dim;
    if (!a.isNone(1)) dim = a.toInt(1);
    a.set(0, select(a.tensor(0), dim, a.num_in > 2 && a.toBool(2), max).indices);
  };
}

// Row-wise sort of the last dimension of a contiguous [rows, n] tensor,
// keeping the first k of each row.
template <typename T>
void sortRows(const T* x, T* values, int64_t* indices, int64_t rows, int64_t n, int64_t k, bool descending) {
  auto less = [](T a, T b) { return !isNan(a) && (isNan(b) || a < b); };  // NaN is the largest
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = x + r * n;
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), int64_t{0});
    auto cmp = [&](int64_t i, int64_t j) { return descending ? less(row[j], row[i]) : less(row[i], row[j]); };
    if (k < n) {
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t i, int64_t j) {
        return cmp(i, j) || (!cmp(j, i) && i < j);  // ties: the first index first
      });
    } else {
      std::stable_sort(order.begin(), order.end(), cmp);
    }
    for (int64_t i = 0; i < k; ++i) {
      values[r * k + i] = row[order[static_cast<size_t>(i)]];
      indices[r * k + i] = order[static_cast<size_t>(i)];
    }
  }
}

Selected sortAlong(const Tensor& input, int64_t dim_arg, bool descending, std::optional<int64_t> k_arg) {
  if (input.dtype() == ScalarType::BFloat16) {
    Selected s = sortAlong(input.to(ScalarType::Float), dim_arg, descending, k_arg);
    s.values = s.values.to(ScalarType::BFloat16);
    return s;
  }
  Tensor x = input.dim() == 0 ? input.view({1}) : input;
  const int64_t dim = x.wrapDim(dim_arg), n = x.size(dim);
  const int64_t k = k_arg.value_or(n);
  if (k < 0 || k > n)
    throw std::invalid_argument("topk: k = " + std::to_string(k) + " is out of range for a dimension of " + std::to_string(n));
  Tensor rows = x.transpose(dim, x.dim() - 1).contiguous();
  Shape out_shape = rows.sizes();
  out_shape.back() = k;
  Selected s{Tensor::empty(x.dtype(), out_shape), Tensor::empty(ScalarType::Long, out_shape)};
  const int64_t m = n == 0 ? 0 : rows.numel() / n;
  if (s.values.numel() > 0) {
    dispatchDtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, BFloat16>) throw std::logic_error("unreachable");
      else sortRows<T>(rows.data<T>(), s.values.data<T>(), s.indices.data<int64_t>(), m, n, k, descending);
    });
  }
  s.values = s.values.transpose(dim, x.dim() - 1).contiguous();
  s.indices = s.indices.transpose(dim, x.dim() - 1).contiguous();
  if (input.dim() == 0) {
    s.values = s.values.view({});
    s.indices = s.indices.view({});
  }
  return s;
}

// sort(x, dim=-1, descending=False) or sort(x, stable: bool?, dim=-1, descending=False).
void sortOp(const KernelArgs& a) {
  if (a.input(0).isList()) return sortScriptList(*a.input(0).list(), a.num_in > 1 && a.toBool(1));  // list.sort()
  const bool with_stable = a.num_in == 4;
  const size_t d = with_stable ? 2 : 1;
  Selected s = sortAlong(a.tensor(0), a.num_in > d ? a.toInt(d) : -1, a.num_in > d + 1 && a.toBool(d + 1), std::nullopt);
  a.set(0, s.values);
  if (a.num_out > 1) a.set(1, s.indices);
}

}  // namespace

void registerSelectionOps(OpRegistry& r) {
  r.add("aten::sort", 1, 4, sortOp);
  // argsort(x, dim=-1, descending=False) and argsort.stable(x, stable, dim=-1, descending=False):
  // the sort is stable either way
  r.add("aten::argsort", 1, 4, [](const KernelArgs& a) {
    const size_t d = a.num_in == 4 ? 2 : 1;
    a.set(0, sortAlong(a.tensor(0), a.num_in > d ? a.toInt(d) : -1, a.num_in > d + 1 && a.toBool(d + 1), std::nullopt).indices);
  });
  r.add("aten::topk", 2, 5, [](const KernelArgs& a) {
    Selected s = sortAlong(a.tensor(0), a.num_in > 2 ? a.toInt(2) : -1, a.num_in <= 3 || a.toBool(3), a.toInt(1));
    a.set(0, s.values);
    a.set(1, s.indices);
  });
  // kthvalue(x, k, dim=-1, keepdim=False): the k-th smallest (1-based) and its index.
  r.add("aten::kthvalue", 2, 4, [](const KernelArgs& a) {
    const Tensor& x = a.tensor(0);
    const int64_t k = a.toInt(1);
    const int64_t dim = x.dim() == 0 ? 0 : x.wrapDim(a.num_in > 2 ? a.toInt(2) : -1);
    const int64_t n = x.dim() == 0 ? 1 : x.size(dim);
    if (k < 1 || k > n)
      throw std::invalid_argument("kthvalue: k = " + std::to_string(k) + " is out of range for a dimension of " + std::to_string(n));
    Selected s = sortAlong(x, dim, false, k);
    const bool keepdim = a.num_in > 3 && a.toBool(3);
    if (x.dim() == 0) return a.set(0, s.values), a.set(1, s.indices);
    a.set(0, keepdim ? s.values.narrow(dim, k - 1, 1).contiguous() : s.values.select(dim, k - 1).contiguous());
    a.set(1, keepdim ? s.indices.narrow(dim, k - 1, 1).contiguous() : s.indices.select(dim, k - 1).contiguous());
  });
  // _unique2(x, sorted, return_inverse, return_counts) -> (values, inverse, counts): the distinct
  // values in ascending order (also for sorted=False, where PyTorch leaves the order open), each
  // element's position among them (x's shape) and how often each occurs; the outputs not asked
  // for are empty.
  r.add("aten::_unique2", 1, 4, [](const KernelArgs& a) {
    const Tensor x = a.tensor(0).contiguous();
    const bool want_inverse = a.num_in > 2 && a.toBool(2), want_counts = a.num_in > 3 && a.toBool(3);
    const int64_t n = x.numel();
    dispatchDtype(x.dtype(), [&](auto z) {
      using T = decltype(z);
      const T* p = x.data<T>();
      std::vector<int64_t> order(static_cast<size_t>(n));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int64_t i, int64_t j) { return p[i] < p[j]; });
      std::vector<int64_t> group(static_cast<size_t>(n));
      std::vector<int64_t> counts;
      std::vector<T> values;
      for (int64_t k = 0; k < n; ++k) {
        const T v = p[order[static_cast<size_t>(k)]];
        if (values.empty() || values.back() < v) values.push_back(v), counts.push_back(0);
        ++counts.back();
        group[static_cast<size_t>(order[static_cast<size_t>(k)])] = static_cast<int64_t>(values.size()) - 1;
      }
      Tensor out = Tensor::empty(x.dtype(), {static_cast<int64_t>(values.size())});
      std::copy(values.begin(), values.end(), out.data<T>());
      Tensor inverse = Tensor::empty(ScalarType::Long, want_inverse ? x.sizes() : Shape{0});
      if (want_inverse) std::copy(group.begin(), group.end(), inverse.data<int64_t>());
      Tensor count = Tensor::empty(ScalarType::Long, {want_counts ? static_cast<int64_t>(counts.size()) : 0});
      if (want_counts) std::copy(counts.begin(), counts.end(), count.data<int64_t>());
      a.set(0, out);
      if (a.num_out > 1) a.set(1, inverse);
      if (a.num_out > 2) a.set(2, count);
    });
  });
  // unique_consecutive(x, return_inverse=False, return_counts=False, dim=None) -> (values,
  // inverse, counts): each run of equal elements (dim None: of the flattened tensor) or equal
  // slices along dim kept once (NaNs are never equal); the outputs not asked for are empty.
  r.add("aten::unique_consecutive", 1, 4, [](const KernelArgs& a) {
    const Tensor& input = a.tensor(0);
    const bool want_inverse = a.num_in > 1 && a.toBool(1), want_counts = a.num_in > 2 && a.toBool(2);
    const bool along = a.num_in > 3 && !a.isNone(3);
    if (along && input.dim() == 0) throw std::invalid_argument("unique_consecutive: dim given for a 0-dim tensor");
    const int64_t dim = along ? input.indexDim(a.toInt(3)) : 0;
    if (along && input.size(dim) > 0)
      for (int64_t d = 0; d < input.dim(); ++d)
        if (d != dim && input.size(d) == 0)
          throw std::invalid_argument("unique_consecutive: There are 0 sized dimensions, and they aren't selected, so "
                                      "unique cannot be applied (input " + input.describe() + ")");
    // the tensor as [n, row]: n slices along dim (or n elements), each compared whole
    Tensor x = along ? input.transpose(0, dim).contiguous() : input.contiguous().reshape({input.numel()});
    const int64_t n = along ? x.size(0) : x.numel();
    const int64_t row = n ? x.numel() / n : 0;
    std::vector<int64_t> starts, group(static_cast<size_t>(n));
    dispatchDtype(x.dtype(), [&](auto z) {
      using T = decltype(z);
      const T* p = x.data<T>();
      auto same = [&](int64_t i, int64_t j) {
        for (int64_t k = 0; k < row; ++k)
          if (!(p[i * row + k] == p[j * row + k])) return false;
        return true;
      };
      for (int64_t i = 0; i < n; ++i) {
        if (i == 0 || !same(i - 1, i)) starts.push_back(i);
        group[static_cast<size_t>(i)] = static_cast<int64_t>(starts.size()) - 1;
      }
    });
    const int64_t m = static_cast<int64_t>(starts.size());
    Tensor picks = Tensor::empty(ScalarType::Long, {m});
    std::copy(starts.begin(), starts.end(), picks.data<int64_t>());
    Tensor values = indexSelectOp(x, 0, picks);
    if (along) values = values.transpose(0, dim).contiguous();
    Tensor inverse = Tensor::empty(ScalarType::Long, want_inverse ? (along ? Shape{n} : input.sizes()) : Shape{0});
    if (want_inverse) std::copy(group.begin(), group.end(), inverse.data<int64_t>());
    Tensor counts = Tensor::empty(ScalarType::Long, {want_counts ? m : 0});
    for (int64_t k = 0; want_counts && k < m; ++k)
      counts.data<int64_t>()[k] = (k + 1 < m ? starts[static_cast<size_t>(k + 1)] : n) - starts[static_cast<size_t>(k)];
    a.set(0, values);
    if (a.num_out > 1) a.set(1, inverse);
    if (a.num_out > 2) a.set(2, counts);
  });
  r.add("aten::max", 1, 3, maxOrMin(true));
  r.add("aten::min", 1, 3, maxOrMin(false));
  r.add("aten::argmax", 1, 3, argMaxOrMin(true));
  r.add("aten::argmin", 1, 3, argMaxOrMin(false));
}
LLGA_REGISTER_OPS(registerSelectionOps);

}  // namespace llga
