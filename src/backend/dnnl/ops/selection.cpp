// Selection along a dimension: the value and position of the largest or
// smallest element.
//   aten::max(x) / aten::min(x)                      the whole tensor, 0-dim
//   aten::max(x, dim, keepdim=False) -> (values, indices)   (min alike)
//   aten::argmax(x, dim=None, keepdim=False), aten::argmin(...)
// (max/min of two tensors is aten::maximum/minimum: decompose rewrites it.)
// As PyTorch: a NaN wins (it is the max and the min, first NaN's index), and
// among equal values the first index is returned. The tensor is read as
// [outer, n, inner]; threads split the outer rows, and each row keeps a best
// value per inner position, updated a whole inner row at a time (a loop the
// compiler vectorises).
#include <cmath>
#include <limits>
#include <type_traits>

#include "backend/dnnl/ops/op_utils.h"

namespace llga {
namespace {

template <typename T>
bool isNan(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  else return false;
}

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

}  // namespace

void registerSelectionOps(OpRegistry& r) {
  r.add("aten::max", 1, 3, maxOrMin(true));
  r.add("aten::min", 1, 3, maxOrMin(false));
  r.add("aten::argmax", 1, 3, argMaxOrMin(true));
  r.add("aten::argmin", 1, 3, argMaxOrMin(false));
}
LLGA_REGISTER_OPS(registerSelectionOps);

}  // namespace llga
