// Reductions that need more than one pass over each row, accumulated in double:
//   aten::var / aten::std (x, unbiased=True) | (x, dims?, unbiased=True, keepdim=False)
//                         | (x, dims?, correction?, keepdim=False)
//   aten::var_mean / aten::std_mean: the same arguments -> (var|std, mean)
//   aten::_weight_norm(v, g, dim=0): g * v / ||v||, the norm over every dim but
//     `dim` (all of them for dim -1): nn.utils.weight_norm's weight, as traced
//   aten::logsumexp(x, dims, keepdim=False): max + log(sum(exp(x - max))), with
//     rows of -inf giving -inf and rows holding +inf giving +inf, as PyTorch.
// The reduced dimensions are moved last (one copy when they are not already),
// then each row is reduced by one thread; rows run in parallel.
#include <cmath>
#include <limits>

#include "backend/dnnl/ops/op_utils.h"

namespace llga {
namespace {

struct Rows {
  Tensor data;      // contiguous [rows, n], double
  Shape out_shape;  // the result's shape (with or without the reduced dims)
  int64_t rows = 0, n = 0;
};

Rows toRows(const Tensor& x, const std::optional<Shape>& dims_arg, bool keepdim, const char* op) {
  if (!isFloatingType(x.dtype())) throw std::invalid_argument(std::string(op) + " expects a floating tensor, got " + x.describe());
  const int64_t rank = x.dim();
  std::vector<bool> reduced(static_cast<size_t>(std::max<int64_t>(rank, 1)), !dims_arg || dims_arg->empty());
  if (dims_arg)
    for (int64_t d : *dims_arg) {
      const int64_t w = rank == 0 ? (d == 0 || d == -1 ? 0 : x.wrapDim(d)) : x.wrapDim(d);
      if (reduced[static_cast<size_t>(w)] && !dims_arg->empty())
        throw std::invalid_argument(std::string(op) + ": dim " + std::to_string(d) + " appears twice");
      reduced[static_cast<size_t>(w)] = true;
    }
  Rows r;
  Shape perm, kept;
  r.n = 1;
  for (int64_t d = 0; d < rank; ++d)
    if (!reduced[static_cast<size_t>(d)]) {
      perm.push_back(d);
      kept.push_back(x.size(d));
    }
  for (int64_t d = 0; d < rank; ++d)
    if (reduced[static_cast<size_t>(d)]) {
      perm.push_back(d);
      r.n *= x.size(d);
    }
  r.rows = 1;
  for (int64_t k : kept) r.rows *= k;
  for (int64_t d = 0; d < rank; ++d) {
    if (!reduced[static_cast<size_t>(d)]) r.out_shape.push_back(x.size(d));
    else if (keepdim) r.out_shape.push_back(1);
  }
  r.data = (rank == 0 ? x : x.permute(perm)).to(ScalarType::Double).contiguous();
  return r;
}

std::optional<Shape> dimsInput(const KernelArgs& a, size_t i) {
  if (i >= a.num_in || a.isNone(i)) return std::nullopt;
  return a.intList(i);
}

// var/std and the *_mean forms: which overload the inputs are.
struct VarArgs {
  std::optional<Shape> dims;
  double correction = 1;
  bool keepdim = false;
};
VarArgs varArgs(const KernelArgs& a) {
  VarArgs v;
  if (a.num_in == 2) {  // (x, unbiased)
    v.correction = a.toBool(1) ? 1 : 0;
  } else if (a.num_in >= 3) {  // (x, dims?, unbiased | correction?, keepdim=False)
    v.dims = dimsInput(a, 1);
    if (a.input(2).isBool()) v.correction = a.toBool(2) ? 1 : 0;
    else if (!a.isNone(2)) v.correction = a.toDouble(2);
    v.keepdim = a.num_in > 3 && a.toBool(3);
  }
  return v;
}

KernelFn varianceKernel(bool take_sqrt, bool with_mean) {
  const char* name = take_sqrt ? (with_mean ? "std_mean" : "std") : (with_mean ? "var_mean" : "var");
  return [take_sqrt, with_mean, name](const KernelArgs& a) {
    const Tensor& x = a.tensor(0);
    VarArgs v = varArgs(a);
    Rows r = toRows(x, v.dims, v.keepdim, name);
    Tensor var = Tensor::empty(ScalarType::Double, r.out_shape), mean = Tensor::empty(ScalarType::Double, r.out_shape);
    const double* src = r.data.data<double>();
    double *pv = var.data<double>(), *pm = mean.data<double>();
    const int64_t n = r.n;
    const double denom = static_cast<double>(n) - v.correction;
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < r.rows; ++row) {
      const double* p = src + row * n;
      double s = 0;
      for (int64_t i = 0; i < n; ++i) s += p[i];
      const double m = n ? s / static_cast<double>(n) : std::numeric_limits<double>::quiet_NaN();
      double ss = 0;
      for (int64_t i = 0; i < n; ++i) ss += (p[i] - m) * (p[i] - m);
      const double vv = denom > 0 ? ss / denom : (ss == 0 && denom == 0 ? std::numeric_limits<double>::quiet_NaN()
                                                                         : ss / std::max(denom, 0.0));
      pv[row] = take_sqrt ? std::sqrt(vv) : vv;
      pm[row] = m;
    }
    a.set(0, var.to(x.dtype()));
    if (with_mean) a.set(1, mean.to(x.dtype()));
  };
}

void logsumexp(const KernelArgs& a) {
  const Tensor& x = a.tensor(0);
  Rows r = toRows(x.dtype() == ScalarType::Bool || isIntegralType(x.dtype(), false) ? x.to(ScalarType::Float) : x,
                  dimsInput(a, 1), a.num_in > 2 && a.toBool(2), "logsumexp");
  Tensor out = Tensor::empty(ScalarType::Double, r.out_shape);
  const double* src = r.data.data<double>();
  double* po = out.data<double>();
  const int64_t n = r.n;
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < r.rows; ++row) {
    const double* p = src + row * n;
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < n; ++i) m = std::max(m, p[i]);
    if (std::isinf(m)) {  // all -inf (or empty): -inf; any +inf: +inf
      po[row] = m;
      continue;
    }
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += std::exp(p[i] - m);
    po[row] = m + std::log(s);
  }
  a.set(0, out.to(isFloatingType(x.dtype()) ? x.dtype() : ScalarType::Float));
}

Tensor weightNorm(const Tensor& v_in, const Tensor& g_in, int64_t dim_arg) {
  if (!isFloatingType(v_in.dtype())) throw std::invalid_argument("_weight_norm expects a floating v, got " + v_in.describe());
  Tensor v = v_in.to(ScalarType::Double).contiguous(), g = g_in.to(ScalarType::Double).contiguous();
  const int64_t rank = std::max<int64_t>(v.dim(), 1);
  const int64_t dim = dim_arg == -1 ? -1 : (v.dim() == 0 ? 0 : v.wrapDim(dim_arg));
  // v as [outer, n, inner] with the kept dim in the middle (or everything one slice).
  int64_t outer = 1, n = 1, inner = 1;
  for (int64_t d = 0; d < v.dim(); ++d) {
    if (dim == -1) inner *= v.size(d);
    else if (d < dim) outer *= v.size(d);
    else if (d == dim) n = v.size(d);
    else inner *= v.size(d);
  }
  if (g.numel() != n)
    throw std::invalid_argument("_weight_norm: g " + g_in.describe() + " does not have one value per slice of v " + v_in.describe() +
                                " along dim " + std::to_string(dim_arg));
  (void)rank;
  std::vector<double> norm(static_cast<size_t>(n), 0.0);
  const double* pv = v.data<double>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < n; ++k)
      for (int64_t i = 0; i < inner; ++i) {
        const double x = pv[(o * n + k) * inner + i];
        norm[static_cast<size_t>(k)] += x * x;
      }
  Tensor out = Tensor::empty(ScalarType::Double, v.sizes());
  double* po = out.data<double>();
  const double* pg = g.data<double>();
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < n; ++k) {
      const double scale = pg[k] / std::sqrt(norm[static_cast<size_t>(k)]);
      for (int64_t i = 0; i < inner; ++i) po[(o * n + k) * inner + i] = pv[(o * n + k) * inner + i] * scale;
    }
  return out.to(v_in.dtype());
}

}  // namespace

void registerStatisticsOps(OpRegistry& r) {
  r.add("aten::_weight_norm", 2, 3, [](const KernelArgs& a) {
    a.set(0, weightNorm(a.tensor(0), a.tensor(1), a.num_in > 2 ? a.toInt(2) : 0));
  });
  r.add("aten::var", 1, 4, varianceKernel(false, false));
  r.add("aten::std", 1, 4, varianceKernel(true, false));
  r.add("aten::var_mean", 1, 4, varianceKernel(false, true));
  r.add("aten::std_mean", 1, 4, varianceKernel(true, true));
  r.add("aten::logsumexp", 2, 3, logsumexp);
}
LLGA_REGISTER_OPS(registerStatisticsOps);

}  // namespace llga
