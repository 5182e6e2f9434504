// Reductions. float32 runs on oneDNN's reduction primitive; other dtypes
// (and empty tensors) accumulate in C++ (double for floats, int64 for ints).
//   aten::mean(x, dtype?) / aten::mean(x, dims, keepdim=False, dtype?)
//   aten::sum(x, dtype?)  / aten::sum(x, dims, keepdim=False, dtype?)
//   aten::amax(x, dims=[], keepdim=False), aten::amin(...)
//   aten::norm(x, p?) / aten::norm(x, p?, dims, keepdim=False, dtype?)
//   aten::linalg_vector_norm(x, ord=2, dims?, keepdim=False, dtype?)
//   aten::frobenius_norm(x, dims, keepdim=False)
//   aten::prod(x, dtype?) / prod(x, dim, keepdim=False, dtype?)
//   aten::any(x) / any(x, dim, keepdim=False), aten::all(...): bool results
//   aten::cumsum(x, dim, dtype?), aten::cumprod(x, dim, dtype?): running sums
//   aten::cummax(x, dim), aten::cummin(x, dim) -> (values, indices), aten::logcumsumexp(x, dim)
//     and products along dim; rows of [outer, n, inner] in parallel, each step
//     a whole inner row at a time (vectorised)
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "backend/dnnl/dnnl_utils.h"
#include "backend/dnnl/ops/functional.h"
#include "backend/dnnl/ops/op_utils.h"

namespace llga {
namespace {

enum class Red { Sum, Mean, Max, Min, Norm, Prod };

struct Reduction {
  Red kind;
  double p = 2;  // for Norm
};

// Float32 reduction of each row of a dense [rows, n] into out[rows]: oneDNN's
// reduction over a short inner dim is slow (its lp-norm has only the
// reference kernel: 15 ms for swin v2's 64x3x49x32 q.norm(dim=-1); its jit sum
// 5 ms), so a transformer's row norms, sums and maxima run here, rows shared
// among the threads, each row's loop in 8 lanes the compiler vectorises.
// For a p-norm, out is the sum of |x|^p (the caller takes the root).
void reduceRows(const float* x, float* out, int64_t rows, int64_t n, Red kind, double p) {
  auto row = [&](int64_t i) {
    const float* v = x + i * n;
    constexpr int L = 8;
    float acc[L];
    const float init = kind == Red::Max ? -INFINITY : kind == Red::Min ? INFINITY : kind == Red::Prod ? 1.f : 0.f;
    std::fill(acc, acc + L, init);
    const float pf = static_cast<float>(p);
    auto step = [&](float& a, float y) {
      switch (kind) {
        case Red::Max: a = std::isnan(y) || y > a ? y : a; break;  // NaN wins, as PyTorch's max
        case Red::Min: a = std::isnan(y) || y < a ? y : a; break;
        case Red::Prod: a *= y; break;
        case Red::Norm: a += p == 2 ? y * y : p == 1 ? std::fabs(y) : std::pow(std::fabs(y), pf); break;
        default: a += y; break;
      }
    };
    int64_t k = 0;
    for (; k + L <= n; k += L)
      for (int l = 0; l < L; ++l) step(acc[l], v[k + l]);
    for (int l = 0; k < n; ++k, ++l) step(acc[l], v[k]);
    float r = acc[0];
    for (int l = 1; l < L; ++l) {
      if (kind == Red::Max || kind == Red::Min) {
        if (std::isnan(acc[l]) || (kind == Red::Max ? acc[l] > r : acc[l] < r)) r = acc[l];
      } else {
        r = kind == Red::Prod ? r * acc[l] : r + acc[l];
      }
    }
    out[i] = kind == Red::Mean ? r / static_cast<float>(n) : r;
  };
  if (rows * n < 32768) {
    for (int64_t i = 0; i < rows; ++i) row(i);
  } else {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < rows; ++i) row(i);
  }
}

// The same over the middle dim of a dense [outer, n, inner] (a reduction
// over dims followed by kept ones: RAFT's convex upsampling sums 9 of
// [1, 2, 9, 8, 8, h, w]; oneDNN's kernel took 7 ms for 370k floats): each
// task accumulates a chunk of `inner` across the n rows, lane by lane.
template <Red K>
void reduceMiddleAs(const float* x, float* out, int64_t outer, int64_t n, int64_t inner, float pf) {
  constexpr int64_t kChunk = 512;
  const int64_t chunks = (inner + kChunk - 1) / kChunk;
  const float init = K == Red::Max ? -INFINITY : K == Red::Min ? INFINITY : K == Red::Prod ? 1.f : 0.f;
  auto task = [&](int64_t t) {
    const int64_t o = t / chunks, i0 = (t % chunks) * kChunk, i1 = std::min(inner, i0 + kChunk);
    float* dst = out + o * inner;
    const float* src = x + o * n * inner;
    for (int64_t i = i0; i < i1; ++i) dst[i] = init;
    for (int64_t c = 0; c < n; ++c) {
      const float* v = src + c * inner;
      for (int64_t i = i0; i < i1; ++i) {
        const float y = v[i];
        float& a = dst[i];
        if constexpr (K == Red::Max) a = std::isnan(y) || y > a ? y : a;
        else if constexpr (K == Red::Min) a = std::isnan(y) || y < a ? y : a;
        else if constexpr (K == Red::Prod) a *= y;
        else if constexpr (K == Red::Norm) a += pf == 2.f ? y * y : pf == 1.f ? std::fabs(y) : std::pow(std::fabs(y), pf);
        else a += y;
      }
    }
    if constexpr (K == Red::Mean)
      for (int64_t i = i0; i < i1; ++i) dst[i] /= static_cast<float>(n);
  };
  const int64_t tasks = outer * chunks;
  if (outer * n * inner < 32768) {
    for (int64_t t = 0; t < tasks; ++t) task(t);
  } else {
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < tasks; ++t) task(t);
  }
}

void reduceMiddle(const float* x, float* out, int64_t outer, int64_t n, int64_t inner, Red kind, double p) {
  const float pf = static_cast<float>(p);
  switch (kind) {
    case Red::Sum: return reduceMiddleAs<Red::Sum>(x, out, outer, n, inner, pf);
    case Red::Mean: return reduceMiddleAs<Red::Mean>(x, out, outer, n, inner, pf);
    case Red::Max: return reduceMiddleAs<Red::Max>(x, out, outer, n, inner, pf);
    case Red::Min: return reduceMiddleAs<Red::Min>(x, out, outer, n, inner, pf);
    case Red::Prod: return reduceMiddleAs<Red::Prod>(x, out, outer, n, inner, pf);
    case Red::Norm: return reduceMiddleAs<Red::Norm>(x, out, outer, n, inner, pf);
  }
}

Tensor reduce(ExecContext& ctx, const Tensor& x, const Shape& dims, bool keepdim, Reduction r,
              std::optional<ScalarType> dtype) {
  if (x.dim() == 0) {  // a 0-dim tensor reduces over its one element (dims may name 0 or -1): still 0-dim
    for (int64_t d : dims) (void)x.wrapDim(d);
    return reduce(ctx, x.view({1}), {0}, false, r, dtype).view({});
  }
  ScalarType out_t = dtype ? *dtype
                           : ((r.kind == Red::Sum || r.kind == Red::Prod) && isIntegralType(x.dtype(), true)) ? ScalarType::Long
                                                                                                              : x.dtype();
  if ((r.kind == Red::Mean || r.kind == Red::Norm) && !isFloatingType(out_t))
    throw std::invalid_argument("this reduction needs a floating point dtype, got " + x.describe());
  std::vector<bool> reduced(static_cast<size_t>(x.dim()), dims.empty());
  for (int64_t d : dims) {
    int64_t w = x.wrapDim(d);
    if (reduced[w] && !dims.empty()) throw std::invalid_argument("reduction: dim " + std::to_string(d) + " appears twice");
    reduced[w] = true;
  }
  Shape kept_shape;
  int64_t count = 1;
  for (int64_t d = 0; d < x.dim(); ++d) {
    kept_shape.push_back(reduced[d] ? 1 : x.size(d));
    if (reduced[d]) count *= x.size(d);
  }
  if (count == 0 && (r.kind == Red::Max || r.kind == Red::Min))
    throw std::invalid_argument("max/min of an empty dimension is not defined");
  if (count == 0 && r.kind == Red::Norm && (std::isinf(r.p) || r.p < 0))
    throw std::invalid_argument("vector norm: the " + std::to_string(r.p) + " norm of an empty dimension is not defined");
  Tensor out;
  double root = 0;  // set: the result is the sum's 1/root power (a p-norm oneDNN's lp-norm cannot take)
  if (out_t == ScalarType::Float && x.numel() > 0) {
    Tensor src = x.to(ScalarType::Float);
    if (src.dim() == 0) src = src.view({1});
    Shape dshape = kept_shape.empty() ? Shape{1} : kept_shape;
    if (r.kind == Red::Norm && (std::isinf(r.p) || r.p < 1.0 || src.sizes() == dshape)) {
      // inf-norms: max/min |x|; p = 0: the count of non-zeros; other p: (sum |x|^p)^(1/p).
      // (oneDNN's lp-norm takes p >= 1 and a reduction that reduces something.)
      const float p = static_cast<float>(r.p);
      const int kind = std::isinf(r.p) ? 0 : r.p == 0 ? 1 : 2;
      src = src.contiguous().clone();
      float* q = src.data<float>();
      const int64_t n = src.numel();
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i)
        q[i] = kind == 0 ? std::fabs(q[i]) : kind == 1 ? static_cast<float>(q[i] != 0.f) : std::pow(std::fabs(q[i]), p);
      root = kind == 2 ? r.p : 0;
      r = Reduction{kind == 0 ? (r.p > 0 ? Red::Max : Red::Min) : Red::Sum};
    }
    out = Tensor::empty(ScalarType::Float, dshape);
    // the reduced dims are the innermost ones, and each row at most 4096 long
    // (longer ones: oneDNN's kernel, which splits a row among the threads)
    int64_t inner_from = src.dim();
    while (inner_from > 0 && reduced[static_cast<size_t>(inner_from - 1)]) --inner_from;
    bool rows_case = count > 0 && count <= 4096 && inner_from < src.dim() && (r.kind != Red::Norm || r.p >= 1.0);
    for (int64_t d = 0; d < inner_from; ++d) rows_case = rows_case && !reduced[static_cast<size_t>(d)];
    // or one run of reduced dims [first, last] with kept dims after it
    int64_t first = 0, last = src.dim() - 1;
    while (first < src.dim() && !reduced[static_cast<size_t>(first)]) ++first;
    while (last >= 0 && !reduced[static_cast<size_t>(last)]) --last;
    bool middle_case = !rows_case && count > 0 && count <= 4096 && last + 1 < src.dim() && first <= last &&
                       (r.kind != Red::Norm || r.p >= 1.0);
    for (int64_t d = first; middle_case && d <= last; ++d) middle_case = reduced[static_cast<size_t>(d)];
    if (src.sizes() == dshape && r.kind != Red::Norm) {
      out.copyFrom(src);
    } else if (rows_case) {
      if (!src.isContiguous()) src = src.contiguous();
      reduceRows(src.data<float>(), out.data<float>(), out.numel(), count, r.kind, r.p);
      if (r.kind == Red::Norm) root = r.p;
    } else if (middle_case) {
      if (!src.isContiguous()) src = src.contiguous();
      int64_t outer = 1, inner = 1;
      for (int64_t d = 0; d < first; ++d) outer *= src.size(d);
      for (int64_t d = last + 1; d < src.dim(); ++d) inner *= src.size(d);
      reduceMiddle(src.data<float>(), out.data<float>(), outer, count, inner, r.kind, r.p);
      if (r.kind == Red::Norm) root = r.p;
    } else {
      using A = dnnl::algorithm;
      A alg = r.kind == Red::Sum ? A::reduction_sum : r.kind == Red::Mean ? A::reduction_mean
            : r.kind == Red::Max ? A::reduction_max : r.kind == Red::Min ? A::reduction_min
            : r.kind == Red::Prod ? A::reduction_mul : A::reduction_norm_lp_sum;
      if (r.kind == Red::Norm && r.p < 1.0) throw std::invalid_argument("norm: p must be >= 1 (or inf)");
      // A strided src (swin v2's q of a permuted qkv, normalised) runs in
      // oneDNN's reference reduction: 8 ms for 300k floats instead of 0.2
      // after a copy to dense.
      if (!src.isContiguous()) src = src.contiguous();
      auto smd = plainDesc(src), dmd = plainDesc(out);
      dnnl::reduction::desc d(alg, smd, dmd, static_cast<float>(r.p), 0.f);
      dnnl::memory::desc scratch;
      auto prim = makePrimitive<dnnl::reduction>(d, scratch);
      execute(ctx, prim, scratch, {{DNNL_ARG_SRC, wrap(src, smd)}, {DNNL_ARG_DST, wrap(out, dmd)}});
    }
  } else if (r.kind == Red::Norm && out_t == ScalarType::Float) {  // of an empty tensor: empty sums, 0
    out = Tensor::zeros(ScalarType::Float, kept_shape);
  } else {
    if (r.kind == Red::Norm) throw std::invalid_argument("norm supports float32 tensors here, got " + x.describe());
    Tensor src = x.contiguous();
    bool integral = !isFloatingType(out_t);
    Tensor acc = Tensor::empty(integral ? ScalarType::Long : ScalarType::Double, kept_shape);
    double init = r.kind == Red::Max ? -INFINITY : r.kind == Red::Min ? INFINITY : r.kind == Red::Prod ? 1.0 : 0.0;
    if (integral) {
      int64_t i0 = r.kind == Red::Max ? INT64_MIN : r.kind == Red::Min ? INT64_MAX : r.kind == Red::Prod ? 1 : 0;
      std::fill(acc.data<int64_t>(), acc.data<int64_t>() + acc.numel(), i0);
    } else {
      std::fill(acc.data<double>(), acc.data<double>() + acc.numel(), init);
    }
    Shape acc_strides = acc.strides();
    for (int64_t d = 0; d < x.dim(); ++d)
      if (reduced[d]) acc_strides[d] = 0;
    std::vector<int64_t> idx(static_cast<size_t>(x.dim()), 0);
    dispatchDtype(src.dtype(), [&](auto z) {
      using T = decltype(z);
      const T* p = src.data<T>();
      for (int64_t i = 0, n = src.numel(); i < n; ++i) {
        int64_t off = 0;
        for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * acc_strides[d];
        if (integral) {
          int64_t v = static_cast<int64_t>(toDouble(p[i]));
          int64_t& a = acc.data<int64_t>()[off];
          a = r.kind == Red::Max ? std::max(a, v) : r.kind == Red::Min ? std::min(a, v) : r.kind == Red::Prod ? a * v : a + v;
        } else {
          double v = toDouble(p[i]);
          double& a = acc.data<double>()[off];
          a = r.kind == Red::Max ? std::max(a, v) : r.kind == Red::Min ? std::min(a, v) : r.kind == Red::Prod ? a * v : a + v;
        }
        for (size_t d = idx.size(); d-- > 0;) {
          if (++idx[d] < x.size(static_cast<int64_t>(d))) break;
          idx[d] = 0;
        }
      }
    });
    if (r.kind == Red::Mean)
      for (double *q = acc.data<double>(), *e = q + acc.numel(); q != e; ++q) *q = count ? *q / static_cast<double>(count) : NAN;
    out = acc.to(out_t);
  }
  if (root != 0) {
    float* q = out.data<float>();
    const float inv = static_cast<float>(1.0 / root);
    for (int64_t i = 0, n = out.numel(); i < n; ++i) q[i] = root == 2 ? std::sqrt(q[i]) : std::pow(q[i], inv);
  }
  if (keepdim) return out.view(kept_shape);
  Shape final_shape;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (!reduced[d]) final_shape.push_back(x.size(d));
  return out.view(final_shape);
}

std::optional<ScalarType> dtypeArg(const KernelArgs& a, size_t i) {
  if (a.isNone(i)) return std::nullopt;
  auto t = scalarTypeFromCode(a.toInt(i));
  if (!t) throw std::invalid_argument("unknown dtype code");
  return t;
}

Shape dimsArg(const KernelArgs& a, size_t i) { return a.isNone(i) ? Shape{} : a.intList(i); }

KernelFn sumOrMean(Red kind) {
  return [kind](const KernelArgs& a) {
    if (kind == Red::Sum && a.num_in == 1 && a.input(0).isList()) {  // Python's sum() of an int/float/bool list
      const std::vector<RtValue>& items = *a.input(0).list();
      const bool floats = std::any_of(items.begin(), items.end(), [](const RtValue& v) { return v.isDouble(); });
      if (floats) {
        double t = 0;  // left to right, as Python and TorchScript add
        for (const RtValue& v : items) t += v.toDouble();
        return a.set(0, RtValue(t));
      }
      int64_t t = 0;
      for (const RtValue& v : items) t += v.toInt();
      return a.set(0, RtValue(t));
    }
    const Tensor& x = a.tensor(0);
    if (a.num_in <= 2) {  // (x, dtype?)
      a.set(0, reduce(a.ctx, x, {}, false, {kind}, dtypeArg(a, 1)));
      return;
    }
    a.set(0, reduce(a.ctx, x, dimsArg(a, 1), a.toBool(2), {kind}, dtypeArg(a, 3)));
  };
}

double pArg(const KernelArgs& a, size_t i) {
  if (a.isNone(i)) return 2.0;
  return a.input(i).toDouble();
}

template <typename T, bool Sum>
void scan(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < outer; ++o) {
    const T* src = x + o * n * inner;
    T* dst = y + o * n * inner;
    for (int64_t i = 0; i < inner; ++i) dst[i] = src[i];
    for (int64_t k = 1; k < n; ++k) {
      const T* s = src + k * inner;
      const T* prev = dst + (k - 1) * inner;
      T* d = dst + k * inner;
      for (int64_t i = 0; i < inner; ++i) {
        if constexpr (Sum) d[i] = prev[i] + s[i];
        else d[i] = prev[i] * s[i];
      }
    }
  }
}

// x as [outer, n, inner] along dim (a 0-dim x as one element), contiguous in `dtype`.
struct Along {
  Tensor x;
  int64_t dim, outer = 1, n = 1, inner = 1;
};
Along along(const Tensor& input, int64_t dim, ScalarType dtype) {
  Along r{input.to(dtype).contiguous(), 0};
  const Tensor flat = r.x.dim() == 0 ? r.x.view({1}) : r.x;
  r.dim = flat.wrapDim(dim);
  r.n = flat.size(r.dim);
  for (int64_t i = 0; i < flat.dim(); ++i) {
    if (i < r.dim) r.outer *= flat.size(i);
    if (i > r.dim) r.inner *= flat.size(i);
  }
  return r;
}

KernelFn cumulative(bool sum) {
  return [sum](const KernelArgs& a) {
    const Tensor& input = a.tensor(0);
    std::optional<ScalarType> dt = a.num_in > 2 ? dtypeArg(a, 2) : std::nullopt;
    // Integers and bool accumulate in int64, as PyTorch.
    ScalarType out_t = dt ? *dt : isIntegralType(input.dtype(), true) ? ScalarType::Long : input.dtype();
    if (out_t == ScalarType::BFloat16 || out_t == ScalarType::Bool)
      throw std::invalid_argument(std::string(sum ? "cumsum" : "cumprod") + " into " + std::string(scalarTypeName(out_t)) +
                                  " is not supported");
    const Along x = along(input, a.toInt(1), out_t);
    Tensor out = Tensor::empty(out_t, input.sizes());
    if (out.numel() > 0) {
      dispatchDtype(out_t, [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, bool>) throw std::logic_error("unreachable");
        else if (sum) scan<T, true>(x.x.data<T>(), out.data<T>(), x.outer, x.n, x.inner);
        else scan<T, false>(x.x.data<T>(), out.data<T>(), x.outer, x.n, x.inner);
      });
    }
    a.set(0, out);
  };
}

// cummax / cummin(x, dim) -> (values, indices): as PyTorch, a later equal
// value takes the index, and a NaN, once seen, stays (each NaN its own index).
KernelFn cumulativeExtreme(bool max) {
  return [max](const KernelArgs& a) {
    const Tensor& input = a.tensor(0);
    const Along x = along(input, a.toInt(1), input.dtype());
    Tensor values = Tensor::empty(input.dtype(), input.sizes()), indices = Tensor::empty(ScalarType::Long, input.sizes());
    if (values.numel() == 0) return a.set(0, values), a.set(1, indices);  // (each row starts from its first element)
    dispatchDtype(input.dtype(), [&](auto z) {
      using T = decltype(z);
      if constexpr (std::is_same_v<T, BFloat16>) {
        throw std::invalid_argument("cummax/cummin of bfloat16 is not supported");
      } else {
        const T* src = x.x.data<T>();
        T* out = values.data<T>();
        int64_t* idx = indices.data<int64_t>();
#pragma omp parallel for schedule(static) if (x.outer * x.n * x.inner > 32768)
        for (int64_t o = 0; o < x.outer; ++o)
          for (int64_t i = 0; i < x.inner; ++i) {
            const int64_t base = o * x.n * x.inner + i;
            T best = src[base];
            int64_t at = 0;
            for (int64_t k = 0; k < x.n; ++k) {
              const T v = src[base + k * x.inner];
              bool take;
              if constexpr (std::is_floating_point_v<T>)
                take = std::isnan(v) || (!std::isnan(best) && (max ? v >= best : v <= best));
              else
                take = max ? v >= best : v <= best;
              if (take) best = v, at = k;
              out[base + k * x.inner] = best;
              idx[base + k * x.inner] = at;
            }
          }
      }
    });
    a.set(0, values);
    a.set(1, indices);
  };
}

// log(exp(a) + exp(b)) without overflow; a NaN on either side gives NaN, two
// equal infinities stay themselves.
template <typename T>
T logAddExp(T a, T b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  const T lo = std::min(a, b), hi = std::max(a, b);
  if (lo != hi || std::isfinite(lo)) return hi + std::log1p(std::exp(lo - hi));
  return a;
}

// logcumsumexp(x, dim): running logsumexp, floating dtypes.
void logCumSumExp(const KernelArgs& a) {
  const Tensor& input = a.tensor(0);
  if (!isFloatingType(input.dtype()) || input.dtype() == ScalarType::BFloat16)
    throw std::invalid_argument("logcumsumexp takes float32 or float64 tensors, got " + input.describe());
  const Along x = along(input, a.toInt(1), input.dtype());
  Tensor out = Tensor::empty(input.dtype(), input.sizes());
  if (out.numel() == 0) return a.set(0, out);  // (each row's first element is copied: none here)
  dispatchDtype(input.dtype(), [&](auto z) {
    using T = decltype(z);
    if constexpr (std::is_floating_point_v<T>) {
      const T* src = x.x.data<T>();
      T* dst = out.data<T>();
#pragma omp parallel for schedule(static) if (x.outer * x.n * x.inner > 32768)
      for (int64_t o = 0; o < x.outer; ++o) {
        const int64_t base = o * x.n * x.inner;
        for (int64_t i = 0; i < x.inner; ++i) dst[base + i] = src[base + i];
        for (int64_t k = 1; k < x.n; ++k)
          for (int64_t i = 0; i < x.inner; ++i) {
            const int64_t at = base + k * x.inner + i;
            dst[at] = logAddExp(dst[at - x.inner], src[at]);
          }
      }
    }
  });
  a.set(0, out);
}

}  // namespace

Tensor sumOp(ExecContext& ctx, const Tensor& x, const Shape& dims, bool keepdim) {
  return reduce(ctx, x, dims, keepdim, {Red::Sum}, std::nullopt);
}

void registerReduceOps(OpRegistry& r) {
  r.add("aten::mean", 1, 4, sumOrMean(Red::Mean));
  r.add("aten::sum", 1, 4, sumOrMean(Red::Sum));
  // prod(x, dtype?) / prod(x, dim, keepdim=False, dtype?)
  r.add("aten::prod", 1, 4, [](const KernelArgs& a) {
    if (a.num_in <= 2) return a.set(0, reduce(a.ctx, a.tensor(0), {}, false, {Red::Prod}, dtypeArg(a, 1)));
    a.set(0, reduce(a.ctx, a.tensor(0), {a.toInt(1)}, a.toBool(2), {Red::Prod}, dtypeArg(a, 3)));
  });
  // any/all(x) and any/all(x, dim, keepdim=False): the max/min of x != 0, as bool.
  for (auto [name, kind] : {std::pair{"aten::any", Red::Max}, {"aten::all", Red::Min}}) {
    Red k = kind;
    r.add(name, 1, 3, [k](const KernelArgs& a) {
      if (a.input(0).isList()) {  // any(l) / all(l) of a scripted list of bools
        const auto& items = *a.input(0).list();
        auto truth = [](const RtValue& v) { return v.toBool(); };
        return a.set(0, RtValue(k == Red::Max ? std::any_of(items.begin(), items.end(), truth)
                                              : std::all_of(items.begin(), items.end(), truth)));
      }
      Tensor truth = a.tensor(0).to(ScalarType::Bool).to(ScalarType::Float);
      Shape dims = a.num_in > 1 ? Shape{a.toInt(1)} : Shape{};
      if (truth.numel() == 0) {  // any of nothing is false, all of nothing is true
        Tensor t = reduce(a.ctx, Tensor::zeros(ScalarType::Long, truth.sizes()), dims, a.num_in > 2 && a.toBool(2), {Red::Sum},
                          std::nullopt);
        t.fill(k == Red::Min ? 1 : 0);
        return a.set(0, t.to(ScalarType::Bool));
      }
      a.set(0, reduce(a.ctx, truth, dims, a.num_in > 2 && a.toBool(2), {k}, std::nullopt).to(ScalarType::Bool));
    });
  }
  r.add("aten::cumsum", 2, 3, cumulative(true));
  r.add("aten::cumprod", 2, 3, cumulative(false));
  r.add("aten::cummax", 2, 2, cumulativeExtreme(true));
  r.add("aten::cummin", 2, 2, cumulativeExtreme(false));
  r.add("aten::logcumsumexp", 2, 2, logCumSumExp);
  for (auto [name, kind] : {std::pair{"aten::amax", Red::Max}, {"aten::amin", Red::Min}}) {
    Red k = kind;
    r.add(name, 1, 3, [k](const KernelArgs& a) {
      a.set(0, reduce(a.ctx, a.tensor(0), a.num_in > 1 ? dimsArg(a, 1) : Shape{}, a.num_in > 2 && a.toBool(2), {k}, std::nullopt));
    });
  }
  // norm(x, p?) and norm(x, p?, dims, keepdim, dtype?)
  r.add("aten::norm", 1, 5, [](const KernelArgs& a) {
    double p = a.num_in > 1 ? pArg(a, 1) : 2.0;
    if (a.tensor(0).numel() == 0) p = 2.0;  // unlike linalg_vector_norm, every p-norm of nothing is 0 here
    Shape dims = a.num_in > 2 ? dimsArg(a, 2) : Shape{};
    bool keepdim = a.num_in > 3 && a.toBool(3);
    a.set(0, reduce(a.ctx, a.tensor(0), dims, keepdim, {Red::Norm, p}, a.num_in > 4 ? dtypeArg(a, 4) : std::nullopt));
  });
  // frobenius_norm(x, dims, keepdim=False): what x.norm(dim=...) traces to, the 2-norm over dims
  r.add("aten::frobenius_norm", 1, 3, [](const KernelArgs& a) {
    a.set(0, reduce(a.ctx, a.tensor(0), a.num_in > 1 ? dimsArg(a, 1) : Shape{}, a.num_in > 2 && a.toBool(2),
                    {Red::Norm, 2.0}, std::nullopt));
  });
  r.add("aten::linalg_vector_norm", 1, 5, [](const KernelArgs& a) {
    a.set(0, reduce(a.ctx, a.tensor(0), a.num_in > 2 ? dimsArg(a, 2) : Shape{}, a.num_in > 3 && a.toBool(3),
                    {Red::Norm, a.num_in > 1 ? pArg(a, 1) : 2.0}, a.num_in > 4 ? dtypeArg(a, 4) : std::nullopt));
  });
}
LLGA_REGISTER_OPS(registerReduceOps);

}  // namespace llga
