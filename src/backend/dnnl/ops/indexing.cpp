// Reading elements at positions held in an index tensor.
//   aten::index_select(x, dim, index)        whole slices along dim, one copy each
//   aten::gather(x, dim, index, sparse_grad=False)
//        out[..., j, ...] = x[..., index[..., j, ...], ...] along dim
//   aten::flip(x, dims)                      index_select with reversed positions, per dim
// Indices are checked before anything is read (a clear error names the bad
// one); negative indices are out of range, as PyTorch has them for these two
// ops. Rows run in parallel.
#include <cstring>

#include "backend/dnnl/ops/op_utils.h"

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
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < outer * len; ++r) {
    const int64_t o = r / len, k = r % len;
    std::memcpy(dst + static_cast<size_t>(r) * row, src + static_cast<size_t>(o * n + idx[static_cast<size_t>(k)]) * row, row);
  }
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
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
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
  }
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

}  // namespace

void registerIndexingOps(OpRegistry& r) {
  r.add("aten::flip", 2, 2, [](const KernelArgs& a) { a.set(0, flip(a.tensor(0), a.intList(1))); });
  r.add("aten::index_select", 3, 3, [](const KernelArgs& a) { a.set(0, indexSelect(a.tensor(0), a.toInt(1), a.tensor(2))); });
  r.add("aten::gather", 3, 4, [](const KernelArgs& a) { a.set(0, gather(a.tensor(0), a.toInt(1), a.tensor(2))); });
}
LLGA_REGISTER_OPS(registerIndexingOps);

}  // namespace llga
