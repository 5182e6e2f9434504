// Reductions on oneDNN's reduction primitive (float32); integer sums in C++.
//   aten::mean(x, dtype?) / aten::mean(x, dims, keepdim=False, dtype?)
//   aten::sum(x, dtype?)  / aten::sum(x, dims, keepdim=False, dtype?)
#include "runtime/dnnl_utils.h"
#include "runtime/ops/op_utils.h"

namespace llga {
namespace {

Tensor reduce(ExecContext& ctx, Tensor x, Shape dims, bool keepdim, bool mean, std::optional<ScalarType> dtype) {
  ScalarType out_t = dtype ? *dtype : (!mean && isIntegralType(x.dtype(), true)) ? ScalarType::Long : x.dtype();
  if (mean && !isFloatingType(out_t)) throw std::invalid_argument("mean needs a floating point dtype, got " + x.describe());
  std::vector<bool> reduced(static_cast<size_t>(x.dim()), dims.empty());
  for (int64_t d : dims) {
    int64_t w = x.wrapDim(d);
    if (reduced[w] && !dims.empty()) throw std::invalid_argument("reduction: dim " + std::to_string(d) + " appears twice");
    reduced[w] = true;
  }
  Shape kept_shape;  // keepdim shape
  for (int64_t d = 0; d < x.dim(); ++d) kept_shape.push_back(reduced[d] ? 1 : x.size(d));
  Tensor out;
  if (out_t == ScalarType::Float && x.numel() > 0) {
    Tensor src = x.to(ScalarType::Float);
    if (src.dim() == 0) src = src.view({1});
    Shape dshape = kept_shape.empty() ? Shape{1} : kept_shape;
    out = Tensor::empty(ScalarType::Float, dshape);
    if (src.sizes() == dshape) {
      out.copyFrom(src);
    } else {
      auto smd = plainDesc(src), dmd = plainDesc(out);
      dnnl::reduction::desc d(mean ? dnnl::algorithm::reduction_mean : dnnl::algorithm::reduction_sum, smd, dmd, 0.f, 0.f);
      dnnl::reduction::primitive_desc pd(d, scratchpadAttr(), cpuEngine());
      execute(ctx, dnnl::reduction(pd), pd.scratchpad_desc(), {{DNNL_ARG_SRC, wrap(src, smd)}, {DNNL_ARG_DST, wrap(out, dmd)}});
    }
  } else {  // double, integers, empty tensors: accumulate in double/int64
    Tensor src = x.contiguous();
    Tensor acc = Tensor::zeros(isFloatingType(out_t) ? ScalarType::Double : ScalarType::Long, kept_shape);
    Shape acc_strides = acc.strides();
    for (int64_t d = 0; d < x.dim(); ++d)
      if (reduced[d]) acc_strides[d] = 0;
    Tensor accv = acc.asStrided(x.sizes(), acc_strides, 0);
    // walk every element of x, adding into its output slot
    int64_t n = src.numel();
    std::vector<int64_t> idx(static_cast<size_t>(x.dim()), 0);
    dispatchDtype(src.dtype(), [&](auto z) {
      using T = decltype(z);
      const T* p = src.data<T>();
      for (int64_t i = 0; i < n; ++i) {
        int64_t off = 0;
        for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * accv.strides()[d];
        if (acc.dtype() == ScalarType::Double) acc.data<double>()[off] += toDouble(p[i]);
        else acc.data<int64_t>()[off] += static_cast<int64_t>(toDouble(p[i]));
        for (size_t d = idx.size(); d-- > 0;) {
          if (++idx[d] < x.size(static_cast<int64_t>(d))) break;
          idx[d] = 0;
        }
      }
    });
    if (mean) {
      int64_t count = 1;
      for (int64_t d = 0; d < x.dim(); ++d)
        if (reduced[d]) count *= x.size(d);
      double* q = acc.data<double>();
      for (int64_t i = 0; i < acc.numel(); ++i) q[i] = count ? q[i] / static_cast<double>(count) : NAN;
    }
    out = acc.to(out_t);
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

KernelFn reduction(bool mean) {
  return [mean](const KernelArgs& a) {
    const Tensor& x = a.tensor(0);
    if (a.num_in <= 2) {  // (x, dtype?)
      a.set(0, reduce(a.ctx, x, {}, false, mean, dtypeArg(a, 1)));
      return;
    }
    Shape dims = a.isNone(1) ? Shape{} : a.intList(1);
    a.set(0, reduce(a.ctx, x, dims, a.toBool(2), mean, dtypeArg(a, 3)));
  };
}

}  // namespace

void registerReduceOps(OpRegistry& r) {
  r.add("aten::mean", 1, 4, reduction(true));
  r.add("aten::sum", 1, 4, reduction(false));
}

}  // namespace llga
