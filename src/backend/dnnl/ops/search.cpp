// Lookups of values among others:
//   aten::searchsorted(sorted, x, out_int32=False, right=False, side=None, sorter=None)
//        where each x would be inserted into `sorted` (1-D, or with x's
//        leading dims: one sorted row per row of x); x may be a number
//   aten::bucketize(x, boundaries, out_int32=False, right=False): searchsorted
//        with the arguments swapped and 1-D boundaries
//   aten::isin(elements, test_elements, assume_unique=False, invert=False)
//   aten::one_hot(indices, num_classes=-1)
//   aten::histc(x, bins=100, min=0, max=0): how many of x's elements fall in
//        each of `bins` equal bins over [min, max] (min == max: x's own
//        extremes, widened by 1 each way if those are equal too); elements
//        outside it are not counted, max falls in the last bin, and a NaN
//        counts in the first bin (PyTorch 1.13's histc does so). The bin is
//        (x - min) * bins / (max - min) truncated, in x's dtype, as PyTorch
//        computes it (no correction at the edges: it makes none).
// Values compare in int64 when both sides are integral, else in double
// (exact for every float32, int32 and smaller), with PyTorch's comparisons:
// a NaN value goes past every element, a NaN element sorts last. Elements are
// searched in parallel (binary search; isin sorts the test elements once).
#include <algorithm>
#include <cmath>
#include <vector>

#include <omp.h>

#include "backend/dnnl/ops/op_utils.h"

namespace llga {
namespace {

// The tensor as a contiguous int64 (both sides integral) or double buffer.
Tensor comparable(const Tensor& t, bool integral) {
  return t.to(integral ? ScalarType::Long : ScalarType::Double).contiguous();
}

// The first position in [first, first + n) (stride `step`) where v belongs:
// left: the first element not below v; right: the first element above v.
template <typename T>
int64_t insertionPoint(const T* first, const int64_t* order, int64_t n, T v, bool right) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    const T e = first[order ? order[mid] : mid];
    if (right ? !(e > v) : !(e >= v)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

Tensor searchSorted(const Tensor& sorted, const Tensor& x, bool out_int32, bool right,
                    const std::optional<Tensor>& sorter, const char* op) {
  const std::string who = std::string("torch.") + op + "(): ";
  if (sorted.dim() == 0) throw std::invalid_argument(who + "boundaries tensor should have at least 1 dimension");
  const int64_t n = sorted.size(-1);
  if (sorted.dim() > 1) {
    Shape lead(sorted.sizes().begin(), sorted.sizes().end() - 1);
    Shape xlead(x.sizes().begin(), x.sizes().end() - (x.dim() ? 1 : 0));
    if (x.dim() != sorted.dim() || lead != xlead)
      throw std::invalid_argument(who + "boundaries tensor should be 1 dimension or the first N-1 dimensions of "
                                  "boundaries tensor and input value tensor must match, but we got boundaries tensor " +
                                  sorted.describe() + " and input value tensor " + x.describe());
  }
  Tensor order;
  if (sorter) {
    if (sorter->sizes() != sorted.sizes() || sorter->dtype() != ScalarType::Long)
      throw std::invalid_argument(who + "sorter must be an int64 tensor of the boundaries' shape, got " + sorter->describe());
    order = sorter->contiguous();
    const int64_t* o = order.data<int64_t>();
    for (int64_t i = 0; i < order.numel(); ++i)
      if (o[i] < 0 || o[i] >= n) throw std::invalid_argument(who + "sorter index out of range: " + std::to_string(o[i]));
  }
  const bool integral = isIntegralType(sorted.dtype(), true) && isIntegralType(x.dtype(), true);
  const Tensor s = comparable(sorted, integral), v = comparable(x, integral);
  Tensor out = Tensor::empty(out_int32 ? ScalarType::Int : ScalarType::Long, x.sizes());
  const int64_t count = v.numel();
  const int64_t row = x.dim() ? x.size(-1) : 1;  // values per sorted row (N-D boundaries)
  dispatchDtype(integral ? ScalarType::Long : ScalarType::Double, [&](auto z) {
    using T = decltype(z);
    const T* sv = s.data<T>();
    const T* vv = v.data<T>();
    const int64_t* ov = sorter ? order.data<int64_t>() : nullptr;
#pragma omp parallel for schedule(static) if (count > 4096)
    for (int64_t i = 0; i < count; ++i) {
      const int64_t base = sorted.dim() > 1 ? (i / row) * n : 0;
      const int64_t at = insertionPoint(sv + base, ov ? ov + base : nullptr, n, vv[i], right);
      if (out_int32) out.data<int32_t>()[i] = static_cast<int32_t>(at);
      else out.data<int64_t>()[i] = at;
    }
  });
  return out;
}

// side ("left" | "right" | None) against right, as PyTorch checks them.
bool rightSide(const KernelArgs& a, size_t right_at, size_t side_at) {
  const bool right = a.num_in > right_at && a.toBool(right_at);
  if (a.isNone(side_at)) return right;
  const std::string side = a.input(side_at).str();
  if (side != "left" && side != "right")
    throw std::invalid_argument("torch.searchsorted(): side can only be 'left' or 'right' but got " + side);
  if (right && side == "left")
    throw std::invalid_argument("torch.searchsorted(): side and right can't be set to opposites, got side of left "
                                "while right was True");
  return side == "right";
}

Tensor numberTensor(const RtValue& v) { return asTensor(v, v.isDouble() ? ScalarType::Double : ScalarType::Long); }

Tensor isIn(const Tensor& elements, const Tensor& tests, bool invert) {
  const bool integral = isIntegralType(elements.dtype(), true) && isIntegralType(tests.dtype(), true);
  const Tensor e = comparable(elements, integral), t = comparable(tests, integral);
  Tensor out = Tensor::empty(ScalarType::Bool, elements.sizes());
  const int64_t count = e.numel();
  dispatchDtype(integral ? ScalarType::Long : ScalarType::Double, [&](auto z) {
    using T = decltype(z);
    std::vector<T> sorted(t.data<T>(), t.data<T>() + t.numel());
    if constexpr (std::is_floating_point_v<T>)  // a NaN equals nothing
      sorted.erase(std::remove_if(sorted.begin(), sorted.end(), [](T x) { return std::isnan(x); }), sorted.end());
    std::sort(sorted.begin(), sorted.end());
    const T* ev = e.data<T>();
    bool* ov = out.data<bool>();
#pragma omp parallel for schedule(static) if (count > 4096)
    for (int64_t i = 0; i < count; ++i)
      ov[i] = std::binary_search(sorted.begin(), sorted.end(), ev[i]) != invert;
  });
  return out;
}

// histc(x, bins, min, max) of a float or double x: counts in x's dtype.
Tensor histc(const Tensor& input, int64_t bins, double lo, double hi) {
  if (input.dtype() != ScalarType::Float && input.dtype() != ScalarType::Double)
    throw std::invalid_argument("torch.histc: takes float or double tensors, got " + input.describe());
  if (bins <= 0) throw std::invalid_argument("torch.histc: bins must be > 0, but got " + std::to_string(bins));
  const Tensor x = input.contiguous();
  const int64_t count = x.numel();
  Tensor out = Tensor::zeros(input.dtype(), {bins});
  dispatchDtype(input.dtype(), [&](auto z) {
    using T = decltype(z);
    if constexpr (std::is_floating_point_v<T>) {
      const T* xv = x.data<T>();
      if (lo == hi && count > 0) {
        const auto [mn, mx] = std::minmax_element(xv, xv + count);
        const bool nan = std::any_of(xv, xv + count, [](T v) { return std::isnan(v); });
        lo = nan ? std::nan("") : double(*mn), hi = nan ? std::nan("") : double(*mx);
      }
      if (lo == hi) lo -= 1, hi += 1;
      if (!std::isfinite(lo) || !std::isfinite(hi))
        throw std::invalid_argument("torch.histc: range of [" + std::to_string(lo) + ", " + std::to_string(hi) +
                                    "] is not finite");
      if (!(lo < hi)) throw std::invalid_argument("torch.histc: max must be larger than min");
      const T left = static_cast<T>(lo), right = static_cast<T>(hi);
      T* ov = out.data<T>();
      const int nthreads = count > 65536 ? omp_get_max_threads() : 1;
      std::vector<std::vector<int64_t>> partial(static_cast<size_t>(nthreads), std::vector<int64_t>(static_cast<size_t>(bins)));
#pragma omp parallel num_threads(nthreads)
      {
        std::vector<int64_t>& mine = partial[static_cast<size_t>(omp_get_thread_num())];
#pragma omp for schedule(static)
        for (int64_t i = 0; i < count; ++i) {
          const T v = xv[i];
          if (v < left || v > right) continue;
          int64_t pos = std::isnan(v) ? 0 : static_cast<int64_t>((v - left) * static_cast<T>(bins) / (right - left));
          pos = std::min(pos, bins - 1);  // max itself: the last bin
          ++mine[static_cast<size_t>(pos)];
        }
      }
      for (const auto& p : partial)
        for (int64_t b = 0; b < bins; ++b) ov[b] += static_cast<T>(p[static_cast<size_t>(b)]);
    }
  });
  return out;
}

}  // namespace

void registerSearchOps(OpRegistry& r) {
  // searchsorted.Tensor(sorted, x, out_int32, right, side, sorter) / searchsorted.Scalar(sorted, number, ...)
  r.add("aten::searchsorted", 2, 6, [](const KernelArgs& a) {
    const bool number = !a.input(1).isTensor();
    const Tensor x = number ? numberTensor(a.input(1)) : a.tensor(1);
    if (number && a.tensor(0).dim() != 1)
      throw std::invalid_argument("torch.searchsorted(): input value can be a scalar only when boundaries tensor "
                                  "dimension is 1, but we got boundaries tensor dim(" +
                                  std::to_string(a.tensor(0).dim()) + ") and input value's dim(0) numel(1)");
    a.set(0, searchSorted(a.tensor(0), x, a.num_in > 2 && a.toBool(2), rightSide(a, 3, 4),
                          a.isNone(5) ? std::nullopt : std::optional<Tensor>(a.tensor(5)), "searchsorted"));
  });
  // bucketize.Tensor(x, boundaries, out_int32, right) / bucketize.Scalar(number, boundaries, ...)
  r.add("aten::bucketize", 2, 4, [](const KernelArgs& a) {
    const Tensor& boundaries = a.tensor(1);
    if (boundaries.dim() != 1)
      throw std::invalid_argument("torch.bucketize(): boundaries tensor must be 1 dimension, but got dim(" +
                                  std::to_string(boundaries.dim()) + ")");
    const Tensor x = a.input(0).isTensor() ? a.tensor(0) : numberTensor(a.input(0));
    a.set(0, searchSorted(boundaries, x, a.num_in > 2 && a.toBool(2), a.num_in > 3 && a.toBool(3), std::nullopt,
                          "bucketize"));
  });
  // isin.Tensor_Tensor / Tensor_Scalar / Scalar_Tensor (elements, test_elements, assume_unique, invert)
  r.add("aten::isin", 2, 4, [](const KernelArgs& a) {
    const Tensor e = a.input(0).isTensor() ? a.tensor(0) : numberTensor(a.input(0));
    const Tensor t = a.input(1).isTensor() ? a.tensor(1) : numberTensor(a.input(1));
    a.set(0, isIn(e, t, a.num_in > 3 && a.toBool(3)));
  });
  // histc(x, bins=100, min=0, max=0)
  r.add("aten::histc", 1, 4, [](const KernelArgs& a) {
    a.set(0, histc(a.tensor(0), a.num_in > 1 ? a.toInt(1) : 100, a.num_in > 2 ? a.toDouble(2) : 0.0,
                   a.num_in > 3 ? a.toDouble(3) : 0.0));
  });
  // one_hot(indices, num_classes=-1): int64 indices; -1 takes the largest index + 1
  r.add("aten::one_hot", 1, 2, [](const KernelArgs& a) {
    const Tensor& x = a.tensor(0);
    if (x.dtype() != ScalarType::Long)
      throw std::invalid_argument("one_hot is only applicable to index tensor (int64), got " + x.describe());
    const Tensor idx = x.contiguous();
    const int64_t* iv = idx.data<int64_t>();
    const int64_t count = idx.numel();
    int64_t classes = a.num_in > 1 ? a.toInt(1) : -1;
    if (classes == -1 && count == 0)
      throw std::invalid_argument("Can not infer total number of classes from empty tensor.");
    int64_t lo = 0, hi = -1;
    for (int64_t i = 0; i < count; ++i) lo = std::min(lo, iv[i]), hi = std::max(hi, iv[i]);
    if (lo < 0) throw std::invalid_argument("Class values must be non-negative.");
    if (classes == -1) classes = hi + 1;
    else if (hi >= classes) throw std::invalid_argument("Class values must be smaller than num_classes.");
    if (classes < 0) throw std::invalid_argument("num_classes should be -1 or a non-negative number");
    Shape sizes = x.sizes();
    sizes.push_back(classes);
    Tensor out = Tensor::zeros(ScalarType::Long, sizes);
    int64_t* ov = out.data<int64_t>();
    for (int64_t i = 0; i < count; ++i) ov[i * classes + iv[i]] = 1;
    a.set(0, out);
  });
}
LLGA_REGISTER_OPS(registerSearchOps);

}  // namespace llga
