// Order statistics along a dimension:
//   aten::median(x) -> 0-dim, over every element
//   aten::median(x, dim, keepdim=False) -> (values, indices)
//   aten::nanmedian(...): the same, NaNs left out
//   aten::quantile(x, q, dim=None, keepdim=False, interpolation="linear"): q a
//       number or a 0-/1-D tensor of x's dtype (1-D: the result gets a leading
//       dim of q's length); interpolation linear, lower, higher, midpoint or
//       nearest (the rank rounded half to even); dim None: every element
//   aten::nanquantile(...): the same, NaNs left out
//   aten::mode(x, dim=-1, keepdim=False) -> (values, indices)
// As PyTorch 1.13: the median is the lower of the two middle values; a row
// holding a NaN has median NaN (at its first NaN's index) and quantiles NaN;
// nanmedian and nanquantile take the row's other values (NaN where there are
// none). mode is the most frequent value, the smallest of equally frequent
// ones, found as PyTorch finds it (see mode() below). median's index among
// equal values is the one in (value, index) order, as PyTorch's; a row of
// NaNs only gives nanmedian the index PyTorch's selection lands on. quantile interpolates as
// torch.lerp does, in x's dtype, so an infinite neighbour gives what
// PyTorch's gives.
//
// The dimension is moved last (one copy) and the rows run in parallel, each
// by one thread: median by selection (nth_element, linear time), quantile
// and mode by sorting the row.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <type_traits>
#include <vector>

#include "backend/dnnl/ops/op_utils.h"

namespace llga {
namespace {

// Index order of one row by (value, index), NaNs after every number and
// equivalent among themselves: PyTorch's comparison, so that nth_element
// (the same algorithm) picks the same index where only NaNs are left.
template <typename T>
struct ByValue {
  const T* row;
  bool operator()(int64_t a, int64_t b) const {
    const T x = row[a], y = row[b];
    const bool nx = isNan(x), ny = isNan(y);
    if (nx || ny) return !nx && ny;
    return x < y || (x == y && a < b);
  }
};

// x's elements as rows of `dim` (moved last), or one row of all of them.
struct Rows {
  Tensor data;     // contiguous [rows, n]
  int64_t rows = 1, n = 0;
  Shape out;       // the result's sizes (keepdim applied)
  int64_t dim = -1;  // the dim reduced (-1: all)
};

Rows rowsOf(const Tensor& x, std::optional<int64_t> dim, bool keepdim, const std::string& op) {
  Rows r;
  if (!dim) {
    r.data = x.contiguous().reshape({1, x.numel()});
    r.n = x.numel();
    if (keepdim) r.out.assign(static_cast<size_t>(x.dim()), 1);
    return r;
  }
  const Tensor t = x.dim() == 0 ? x.view({1}) : x;
  r.dim = t.wrapDim(*dim);
  r.n = t.size(r.dim);
  Shape perm;
  for (int64_t i = 0; i < t.dim(); ++i)
    if (i != r.dim) perm.push_back(i), r.out.push_back(t.size(i));
  perm.push_back(r.dim);
  r.rows = 1;
  for (int64_t s : r.out) r.rows *= s;
  if (r.n == 0 && r.rows > 0)
    throw std::invalid_argument(op + "(): Expected reduction dim " + std::to_string(*dim) +
                                " to have non-zero size (input " + x.describe() + ")");
  r.data = t.permute(perm).contiguous().reshape({r.rows, r.n});
  if (keepdim && x.dim() > 0) r.out.insert(r.out.begin() + r.dim, 1);
  if (x.dim() == 0) r.out.clear();
  return r;
}

// Runs fn(row, scratch) for each row, rows shared among threads when there is enough work.
template <typename Fn>
void eachRow(const Rows& r, Fn&& fn) {
#pragma omp parallel if (r.rows > 1 && r.rows * r.n > 16384)
  {
    std::vector<int64_t> scratch(static_cast<size_t>(r.n));
#pragma omp for schedule(static)
    for (int64_t i = 0; i < r.rows; ++i) fn(i, scratch);
  }
}

ScalarType computeType(const Tensor& x, const std::string& op) {
  if (x.dtype() == ScalarType::Bool) throw std::invalid_argument(op + "() does not take bool tensors, got " + x.describe());
  return x.dtype() == ScalarType::BFloat16 ? ScalarType::Float : x.dtype();
}

// median / nanmedian of each row: values (x's dtype) and indices.
std::pair<Tensor, Tensor> median(const Tensor& x, std::optional<int64_t> dim, bool keepdim, bool ignore_nan) {
  const std::string op = ignore_nan ? "nanmedian" : "median";
  const ScalarType ct = computeType(x, op);
  const Rows r = rowsOf(x.to(ct), dim, keepdim, op);
  Tensor values = Tensor::empty(ct, r.out), indices = Tensor::empty(ScalarType::Long, r.out);
  if (!dim && r.n == 0) {
    // NaN; PyTorch's integer result is a NaN converted as x86 converts it:
    // the lowest int64 or int32, 0 for the narrower types
    dispatchDtype(ct, [&](auto z) {
      using T = decltype(z);
      if constexpr (std::is_floating_point_v<T>) *values.data<T>() = std::numeric_limits<T>::quiet_NaN();
      else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, int32_t>) *values.data<T>() = std::numeric_limits<T>::min();
      else if constexpr (!std::is_same_v<T, BFloat16>) *values.data<T>() = T(0);
    });
    indices.fill(0);
  } else {
    dispatchDtype(ct, [&](auto z) {
      using T = decltype(z);
      if constexpr (!std::is_same_v<T, BFloat16> && !std::is_same_v<T, bool>) {
        const T* src = r.data.data<T>();
        T* out = values.data<T>();
        int64_t* at = indices.data<int64_t>();
        eachRow(r, [&](int64_t i, std::vector<int64_t>& idx) {
          const T* row = src + i * r.n;
          int64_t m = r.n;
          if constexpr (std::is_floating_point_v<T>) {
            const T* nan = std::find_if(row, row + r.n, [](T v) { return std::isnan(v); });
            if (nan != row + r.n && !ignore_nan) {
              out[i] = *nan, at[i] = nan - row;
              return;
            }
            if (ignore_nan) m = std::count_if(row, row + r.n, [](T v) { return !std::isnan(v); });
          }
          std::iota(idx.begin(), idx.end(), int64_t{0});
          const int64_t k = m > 0 ? (m - 1) / 2 : 0;
          std::nth_element(idx.begin(), idx.begin() + k, idx.end(), ByValue<T>{row});
          out[i] = row[idx[static_cast<size_t>(k)]], at[i] = idx[static_cast<size_t>(k)];
        });
      }
    });
  }
  return {x.dtype() == ct ? values : values.to(x.dtype()), indices};
}

// mode of each row, by PyTorch's own procedure: the row's positions sorted
// by value with std::sort (not stable), then the first of the longest runs of
// equal values, at its last position. std::sort's moves follow only its
// comparisons, so sorting positions does what PyTorch's sort of (value,
// index) pairs does: its index among equal values and its answer for a row
// holding NaNs (which that sort leaves in an order of its own: NaN compares
// unequal, so it is a run of one) are PyTorch's.
std::pair<Tensor, Tensor> mode(const Tensor& x, int64_t dim, bool keepdim) {
  const ScalarType ct = computeType(x, "mode");
  const Rows r = rowsOf(x.to(ct), dim, keepdim, "mode");
  Tensor values = Tensor::empty(ct, r.out), indices = Tensor::empty(ScalarType::Long, r.out);
  dispatchDtype(ct, [&](auto z) {
    using T = decltype(z);
    if constexpr (!std::is_same_v<T, BFloat16> && !std::is_same_v<T, bool>) {
      const T* src = r.data.data<T>();
      T* out = values.data<T>();
      int64_t* at = indices.data<int64_t>();
      eachRow(r, [&](int64_t i, std::vector<int64_t>& idx) {
        const T* row = src + i * r.n;
        std::iota(idx.begin(), idx.end(), int64_t{0});
        std::sort(idx.begin(), idx.end(), [row](int64_t u, int64_t v) { return row[u] < row[v]; });
        size_t best = 0;
        int64_t run = 0, longest = 0;
        for (size_t k = 0; k < idx.size(); ++k) {
          ++run;
          if (k + 1 == idx.size() || row[idx[k]] != row[idx[k + 1]]) {
            if (run > longest) best = k, longest = run;
            run = 0;
          }
        }
        out[i] = row[idx[best]], at[i] = idx[best];
      });
    }
  });
  return {x.dtype() == ct ? values : values.to(x.dtype()), indices};
}

enum class Interp { Linear, Lower, Higher, Midpoint, Nearest };

Interp interpolation(const std::string& s, const std::string& op) {
  if (s == "linear") return Interp::Linear;
  if (s == "lower") return Interp::Lower;
  if (s == "higher") return Interp::Higher;
  if (s == "midpoint") return Interp::Midpoint;
  if (s == "nearest") return Interp::Nearest;
  throw std::invalid_argument(op + "() interpolation must be one of linear, lower, higher, midpoint or nearest. Got " + s);
}

// torch.lerp's formula (either end exact).
template <typename T>
T lerp(T a, T b, T w) {
  return w < T(0.5) ? a + w * (b - a) : b - (b - a) * (T(1) - w);
}

// quantile / nanquantile(x, q, dim=None, keepdim=False, interpolation="linear").
void quantileKernel(const KernelArgs& a, bool ignore_nan) {
  const std::string op = ignore_nan ? "nanquantile" : "quantile";
  const Tensor& x = a.tensor(0);
  if (x.dtype() != ScalarType::Float && x.dtype() != ScalarType::Double)
    throw std::invalid_argument(op + "() input tensor must be either float or double dtype, got " + x.describe());
  if (x.numel() == 0) throw std::invalid_argument(op + "() input tensor must be non-empty");
  const bool q_tensor = a.input(1).isTensor();
  Tensor q;
  if (q_tensor) {
    q = a.tensor(1);
    if (q.dim() > 1) throw std::invalid_argument(op + "() q must be a scalar or 1D tensor, got " + q.describe());
    if (q.dtype() != x.dtype())
      throw std::invalid_argument(op + "() q tensor must be same dtype as the input tensor, got " + q.describe() + " for " + x.describe());
  } else {
    q = Tensor::scalar(x.dtype(), a.toDouble(1));
  }
  q = q.contiguous();
  std::optional<int64_t> dim;
  if (!a.isNone(2)) dim = a.toInt(2);
  const bool keepdim = a.num_in > 3 && a.toBool(3);
  const Interp how = a.num_in > 4 ? interpolation(a.input(4).str(), op) : Interp::Linear;
  const Rows r = rowsOf(x, dim, keepdim, op);
  Shape out_shape = r.out;
  if (q.dim() == 1) out_shape.insert(out_shape.begin(), q.size(0));
  Tensor out = Tensor::empty(x.dtype(), out_shape);
  dispatchDtype(x.dtype(), [&](auto z) {
    using T = decltype(z);
    if constexpr (std::is_floating_point_v<T>) {
      const T* qs = q.data<T>();
      const int64_t nq = q.numel();
      for (int64_t j = 0; j < nq; ++j)
        if (!(qs[j] >= T(0) && qs[j] <= T(1)))
          throw std::invalid_argument(op + "() q must be in the range [0, 1] but got " + std::to_string(qs[j]));
      const T* src = r.data.data<T>();
      T* dst = out.data<T>();
#pragma omp parallel if (r.rows > 1 && r.rows * r.n > 16384)
      {
        std::vector<T> sorted(static_cast<size_t>(r.n));
#pragma omp for schedule(static)
        for (int64_t i = 0; i < r.rows; ++i) {
          std::copy(src + i * r.n, src + (i + 1) * r.n, sorted.begin());
          std::sort(sorted.begin(), sorted.end(), [](T u, T v) { return u < v || (!std::isnan(u) && std::isnan(v)); });
          const int64_t valid = std::count_if(sorted.begin(), sorted.end(), [](T v) { return !std::isnan(v); });
          for (int64_t j = 0; j < nq; ++j) {
            T& y = dst[j * r.rows + i];
            if ((!ignore_nan && valid < r.n) || valid == 0) {
              y = std::numeric_limits<T>::quiet_NaN();
              continue;
            }
            const T rank = qs[j] * static_cast<T>(valid - 1);
            const int64_t lo = static_cast<int64_t>(rank), hi = static_cast<int64_t>(std::ceil(rank));
            const T below = sorted[static_cast<size_t>(lo)], above = sorted[static_cast<size_t>(hi)];
            switch (how) {
              case Interp::Lower: y = below; break;
              case Interp::Higher: y = above; break;
              case Interp::Nearest: y = sorted[static_cast<size_t>(std::nearbyint(rank))]; break;
              case Interp::Midpoint: y = lerp(below, above, T(0.5)); break;
              case Interp::Linear: y = lerp(below, above, rank - static_cast<T>(lo)); break;
            }
          }
        }
      }
    }
  });
  a.set(0, out);
}

// median(x) or median(x, dim, keepdim=False); nanmedian alike.
KernelFn medianKernel(bool ignore_nan) {
  return [ignore_nan](const KernelArgs& a) {
    if (a.num_in == 1) return a.set(0, median(a.tensor(0), std::nullopt, false, ignore_nan).first);
    auto [values, indices] = median(a.tensor(0), a.toInt(1), a.num_in > 2 && a.toBool(2), ignore_nan);
    a.set(0, values);
    if (a.num_out > 1) a.set(1, indices);
  };
}

}  // namespace

void registerQuantileOps(OpRegistry& r) {
  r.add("aten::median", 1, 3, medianKernel(false));
  r.add("aten::nanmedian", 1, 3, medianKernel(true));
  r.add("aten::quantile", 2, 5, [](const KernelArgs& a) { quantileKernel(a, false); });
  r.add("aten::nanquantile", 2, 5, [](const KernelArgs& a) { quantileKernel(a, true); });
  // mode(x, dim=-1, keepdim=False)
  r.add("aten::mode", 1, 3, [](const KernelArgs& a) {
    auto [values, indices] = mode(a.tensor(0), a.num_in > 1 ? a.toInt(1) : -1, a.num_in > 2 && a.toBool(2));
    a.set(0, values);
    if (a.num_out > 1) a.set(1, indices);
  });
}

LLGA_REGISTER_OPS(registerQuantileOps);

}  // namespace llga
