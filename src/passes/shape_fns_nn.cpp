// Shape functions of the heavy ops: convolution, matrix products, pooling,
// reductions and selection along a dimension, attention (shape_functions.h).
#include <algorithm>

#include "ir/ops.h"
#include "passes/shape_fn_helpers.h"

namespace llga::shape_fn {

// ---- convolution, matrix products, pooling ----

// Output extent of a window op along one dimension.
std::optional<int64_t> windowOut(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  if (s <= 0 || d <= 0 || k <= 0) return std::nullopt;
  int64_t span = in + 2 * p - d * (k - 1) - 1;
  if (span < 0) return std::nullopt;
  int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;  // the last window must start inside the input or left padding
  return out;
}

// conv{1,2,3}d(x, w, b, stride, padding, dilation, groups) and
// _convolution(x, w, b, stride, padding, dilation, transposed, output_padding, groups, ...).
Out convShape(const ShapeArgs& a) {
  const TensorInfo* x = a.tensor(0);
  const TensorInfo* w = a.tensor(1);
  // Whatever the input's strides (channels-last after a permute, say), the
  // kernel writes a fresh row-major result.
  if (!x || !w || !isFloating(*x->dtype)) return std::nullopt;
  std::vector<int64_t> xs = sizesOf(*x), ws = sizesOf(*w);
  if (ws.size() < 3 || xs.size() != ws.size()) return std::nullopt;  // unbatched input: not modelled
  const size_t spatial = ws.size() - 2;
  const std::string_view kind = a.node().kind().toQualString();
  const bool full = kind == "aten::_convolution";
  bool transposed = kind.find("transpose") != std::string_view::npos;
  if (full) {
    if (a.size() < 9 || !a.i(6)) return std::nullopt;
    transposed = *a.i(6) != 0;
  }
  auto stride = a.ints(3, spatial), padding = a.ints(4, spatial);
  std::optional<std::vector<int64_t>> dilation, out_pad;
  std::optional<int64_t> groups;
  if (full) {
    dilation = a.ints(5, spatial);
    out_pad = a.ints(7, spatial);
    groups = a.i(8);
  } else if (transposed) {  // conv_transpose(x, w, b, stride, padding, output_padding, groups, dilation)
    out_pad = a.ints(5, spatial);
    groups = a.i(6);
    dilation = a.ints(7, spatial);
  } else {
    dilation = a.ints(5, spatial);
    groups = a.i(6);
  }
  if (!stride || !padding || !dilation || !groups || *groups <= 0 || stride->size() != spatial ||
      padding->size() != spatial || dilation->size() != spatial)
    return std::nullopt;
  std::vector<int64_t> out{xs[0], transposed ? ws[1] * *groups : ws[0]};
  for (size_t i = 0; i < spatial; ++i) {
    int64_t in = xs[i + 2], k = ws[i + 2], s = (*stride)[i], p = (*padding)[i], d = (*dilation)[i];
    if (transposed) {
      if (!out_pad || out_pad->size() != spatial) return std::nullopt;
      out.push_back((in - 1) * s - 2 * p + d * (k - 1) + (*out_pad)[i] + 1);
    } else {
      auto o = windowOut(in, k, s, p, d, false);
      if (!o) return std::nullopt;
      out.push_back(*o);
    }
  }
  return oneTensor(contiguousInfo(*x->dtype, out));
}
LLGA_SHAPE_FN_FOR_TRAITS(op_trait::Conv, convShape);

// llga::dft_frames(x [B, 1, L], window, n_fft, hop, bins) -> [B, 2 * bins, (L - n_fft) / hop + 1].
Out dftFramesShape(const ShapeArgs& a) {
  const TensorInfo* x = a.tensor(0);
  const auto n = a.i(2), hop = a.i(3), bins = a.i(4);
  if (!x || x->dtype != ScalarType::Float || !n || !hop || !bins || *n <= 0 || *hop <= 0) return std::nullopt;
  const std::vector<int64_t> xs = sizesOf(*x);
  if (xs.size() != 3 || xs[1] != 1 || xs[2] < *n) return std::nullopt;
  return oneTensor(contiguousInfo(ScalarType::Float, {xs[0], 2 * *bins, (xs[2] - *n) / *hop + 1}));
}
LLGA_SHAPE_FN("llga::dft_frames", dftFramesShape);

// linear(x, w, b): x[..., in] -> [..., out].
Out linearShape(const ShapeArgs& a) {
  const TensorInfo* x = a.tensor(0);
  const TensorInfo* w = a.tensor(1);
  if (!x || !w || !isFloating(*x->dtype)) return std::nullopt;
  std::vector<int64_t> xs = sizesOf(*x), ws = sizesOf(*w);
  if (xs.empty() || ws.size() != 2 || xs.back() != ws[1]) return std::nullopt;
  xs.back() = ws[0];
  return oneTensor(contiguousInfo(*x->dtype, xs));
}
LLGA_SHAPE_FN("aten::linear", linearShape);

// matmul / mm / bmm: torch.matmul's rules (1-D operands, broadcast batch).
Out matmulShape(const ShapeArgs& a) {
  const TensorInfo* x = a.tensor(0);
  const TensorInfo* y = a.tensor(1);
  if (!x || !y || x->dtype != y->dtype || !isFloating(*x->dtype)) return std::nullopt;
  std::vector<int64_t> xs = sizesOf(*x), ys = sizesOf(*y);
  const std::string_view kind = a.node().kind().toQualString();
  if ((kind == "aten::mm" && (xs.size() != 2 || ys.size() != 2)) ||
      (kind == "aten::bmm" && (xs.size() != 3 || ys.size() != 3 || xs[0] != ys[0])))
    return std::nullopt;
  if (xs.empty() || ys.empty()) return std::nullopt;
  const bool x1 = xs.size() == 1, y1 = ys.size() == 1;
  if (x1) xs.insert(xs.begin(), 1);
  if (y1) ys.push_back(1);
  if (xs.back() != ys[ys.size() - 2]) return std::nullopt;
  auto batch = broadcast(std::vector<int64_t>(xs.begin(), xs.end() - 2), std::vector<int64_t>(ys.begin(), ys.end() - 2));
  if (!batch) return std::nullopt;
  std::vector<int64_t> out = *batch;
  if (!x1) out.push_back(xs[xs.size() - 2]);
  if (!y1) out.push_back(ys.back());
  return oneTensor(contiguousInfo(*x->dtype, out));
}
LLGA_SHAPE_FN("aten::matmul", matmulShape);
LLGA_SHAPE_FN("aten::mm", matmulShape);
LLGA_SHAPE_FN("aten::bmm", matmulShape);

// max_poolNd(x, kernel, stride, padding, dilation, ceil_mode) and
// avg_poolNd(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor).
Out poolShape(const ShapeArgs& a, size_t spatial, bool is_max) {
  const TensorInfo* x = a.tensor(0);
  if (!x || !isFloating(*x->dtype) || !isContiguous(*x)) return std::nullopt;
  std::vector<int64_t> xs = sizesOf(*x);
  if (xs.size() != spatial + 2) return std::nullopt;  // unbatched: not modelled
  auto kernel = a.ints(1, spatial);
  if (!kernel || kernel->size() != spatial) return std::nullopt;
  auto stride = a.ints(2, spatial);
  if (stride && stride->empty()) stride = kernel;  // an empty stride means the kernel's
  auto padding = a.ints(3, spatial);
  auto dilation = is_max ? a.ints(4, spatial) : std::optional<std::vector<int64_t>>(std::vector<int64_t>(spatial, 1));
  auto ceil_mode = a.i(is_max ? 5 : 4);
  if (!stride || !padding || !dilation || !ceil_mode || stride->size() != spatial || padding->size() != spatial ||
      dilation->size() != spatial)
    return std::nullopt;
  std::vector<int64_t> out{xs[0], xs[1]};
  for (size_t i = 0; i < spatial; ++i) {
    auto o = windowOut(xs[i + 2], (*kernel)[i], (*stride)[i], (*padding)[i], (*dilation)[i], *ceil_mode != 0);
    if (!o) return std::nullopt;
    out.push_back(*o);
  }
  return oneTensor(contiguousInfo(*x->dtype, out));
}
LLGA_SHAPE_FN("aten::max_pool1d", [](const ShapeArgs& a) { return poolShape(a, 1, true); });
LLGA_SHAPE_FN("aten::max_pool2d", [](const ShapeArgs& a) { return poolShape(a, 2, true); });
LLGA_SHAPE_FN("aten::max_pool3d", [](const ShapeArgs& a) { return poolShape(a, 3, true); });
LLGA_SHAPE_FN("aten::avg_pool1d", [](const ShapeArgs& a) { return poolShape(a, 1, false); });
LLGA_SHAPE_FN("aten::avg_pool2d", [](const ShapeArgs& a) { return poolShape(a, 2, false); });
LLGA_SHAPE_FN("aten::avg_pool3d", [](const ShapeArgs& a) { return poolShape(a, 3, false); });

// adaptive_avg_poolNd(x, output_size): None entries keep the input's extent.
Out adaptivePoolShape(const ShapeArgs& a, size_t spatial) {
  const TensorInfo* x = a.tensor(0);
  if (!x || !isFloating(*x->dtype) || !isContiguous(*x)) return std::nullopt;
  std::vector<int64_t> xs = sizesOf(*x);
  if (xs.size() != spatial + 2 || !a[1].items || a[1].items->size() != spatial) return std::nullopt;
  std::vector<int64_t> out{xs[0], xs[1]};
  for (size_t i = 0; i < spatial; ++i) {
    const Known& k = (*a[1].items)[i];
    if (k.none) out.push_back(xs[i + 2]);
    else if (k.i && *k.i >= 0) out.push_back(*k.i);
    else return std::nullopt;
  }
  return oneTensor(contiguousInfo(*x->dtype, out));
}
LLGA_SHAPE_FN("aten::adaptive_avg_pool1d", [](const ShapeArgs& a) { return adaptivePoolShape(a, 1); });
LLGA_SHAPE_FN("aten::adaptive_avg_pool2d", [](const ShapeArgs& a) { return adaptivePoolShape(a, 2); });
LLGA_SHAPE_FN("aten::adaptive_avg_pool3d", [](const ShapeArgs& a) { return adaptivePoolShape(a, 3); });

// ---- reductions ----

// mean/sum(x, dims, keepdim, dtype) over floating inputs.
Out reduceShape(const ShapeArgs& a) {
  const TensorInfo* x = a.tensor(0);
  if (!x || !isFloating(*x->dtype) || !isContiguous(*x)) return std::nullopt;
  if (a.size() < 4 || !a.none(3)) return std::nullopt;  // the full reduction and dtype arguments: not modelled
  std::vector<int64_t> xs = sizesOf(*x);
  auto dims = a.ints(1);
  auto keep = a.i(2);
  if (!dims || !keep) return std::nullopt;
  std::vector<bool> reduced(xs.size(), dims->empty());
  for (int64_t d : *dims) {
    auto w = wrapDim(d, xs.size());
    if (!w) return std::nullopt;
    reduced[*w] = true;
  }
  std::vector<int64_t> out;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!reduced[i]) out.push_back(xs[i]);
    else if (*keep) out.push_back(1);
  }
  return oneTensor(contiguousInfo(*x->dtype, out));
}
LLGA_SHAPE_FN("aten::mean", reduceShape);
LLGA_SHAPE_FN("aten::sum", reduceShape);

// max/min(x) -> 0-dim; max/min(x, dim, keepdim) -> (values, Long indices);
// argmax/argmin(x, dim?, keepdim) -> Long indices.
std::optional<std::vector<int64_t>> reducedAlong(const TensorInfo& x, const ShapeArgs& a, size_t dim_at, bool keep) {
  std::vector<int64_t> xs = sizesOf(x), out;
  if (a.none(dim_at)) {
    if (keep) out.assign(xs.size(), 1);
    return out;
  }
  auto d = wrapDim(a.i(dim_at), std::max<size_t>(xs.size(), 1));
  if (!d || (!xs.empty() && xs[*d] == 0)) return std::nullopt;
  for (size_t i = 0; i < xs.size(); ++i)
    if (i != *d) out.push_back(xs[i]);
    else if (keep) out.push_back(1);
  return out;
}

Out maxMinShape(const ShapeArgs& a) {
  const TensorInfo* x = a.tensor(0);
  if (!x || a.size() == 2) return std::nullopt;  // the binary overload becomes maximum/minimum (decompose)
  if (a.size() == 1) return oneTensor(contiguousInfo(*x->dtype, {}));
  auto keep = a.i(2);
  if (!keep || a.none(1)) return std::nullopt;
  auto out = reducedAlong(*x, a, 1, *keep != 0);
  if (!out) return std::nullopt;
  return std::vector<Known>{Known::ofTensor(contiguousInfo(*x->dtype, *out)),
                            Known::ofTensor(contiguousInfo(ScalarType::Long, *out))};
}
LLGA_SHAPE_FN("aten::max", maxMinShape);
LLGA_SHAPE_FN("aten::min", maxMinShape);

Out argMaxMinShape(const ShapeArgs& a) {
  const TensorInfo* x = a.tensor(0);
  auto keep = a.size() > 2 ? a.i(2) : std::optional<int64_t>(0);
  if (!x || !keep) return std::nullopt;
  auto out = reducedAlong(*x, a, 1, *keep != 0);
  if (!out) return std::nullopt;
  return oneTensor(contiguousInfo(ScalarType::Long, *out));
}
LLGA_SHAPE_FN("aten::argmax", argMaxMinShape);
LLGA_SHAPE_FN("aten::argmin", argMaxMinShape);


// _native_multi_head_attention(q, k, v, embed_dim, heads, qkv_w, qkv_b, proj_w,
// proj_b, mask, need_weights, average_attn_weights, mask_type): batched [B, L, E].
Out mhaShape(const ShapeArgs& a) {
  const TensorInfo* q = a.tensor(0);
  const TensorInfo* k = a.tensor(1);
  const TensorInfo* proj = a.tensor(7);
  auto heads = a.i(4);
  if (!q || !k || !proj || !heads || !isFloating(*q->dtype) || sizesOf(*q).size() != 3 || sizesOf(*k).size() != 3)
    return std::nullopt;
  std::vector<int64_t> qs = sizesOf(*q), ks = sizesOf(*k);
  const bool need = a.size() > 10 ? a.i(10).value_or(-1) : 1;
  const bool average = a.size() > 11 ? a.i(11).value_or(-1) : 1;
  if ((a.size() > 10 && !a.i(10)) || (a.size() > 11 && !a.i(11))) return std::nullopt;
  std::vector<Known> out{Known::ofTensor(contiguousInfo(*q->dtype, {qs[0], qs[1], sizesOf(*proj)[0]}))};
  if (!need) out.push_back(Known::ofTensor(contiguousInfo(ScalarType::Float, {0})));
  else if (average) out.push_back(Known::ofTensor(contiguousInfo(ScalarType::Float, {qs[0], qs[1], ks[1]})));
  else out.push_back(Known::ofTensor(contiguousInfo(ScalarType::Float, {qs[0], *heads, qs[1], ks[1]})));
  return out;
}
LLGA_SHAPE_FN("aten::_native_multi_head_attention", mhaShape);

// lstm(x, hx[], params[], has_biases, layers, dropout, train, bidirectional, batch_first) -> (y, hy, cy);
// gru / rnn_tanh / rnn_relu(x, hx, params[], ...) -> (y, hy). The state sizes come
// from the first layer's w_hh (gates * H, P): P is the output's and hy's size.
Out rnnShape(const ShapeArgs& a) {
  const bool lstm = a.node().kind().toQualString() == std::string_view("aten::lstm");
  const TensorInfo* x = a.tensor(0);
  if (lstm && !a[1].items) return std::nullopt;  // the packed overload (data, batch_sizes, ...): data-dependent
  auto layers = a.i(4);
  auto bidirectional = a.i(7), batch_first = a.i(8);
  if (!x || !layers || !bidirectional || !batch_first || !a[2].items || a[2].items->size() < 2) return std::nullopt;
  const Known& w_hh = (*a[2].items)[1];
  if (!w_hh.tensor || !w_hh.tensor->concreteSizes() || !x->dtype || *x->dtype != ScalarType::Float) return std::nullopt;
  std::vector<int64_t> ws = sizesOf(*w_hh.tensor), xs = sizesOf(*x);
  if (ws.size() != 2 || (xs.size() != 2 && xs.size() != 3)) return std::nullopt;
  const int64_t gates = lstm ? 4 : a.node().kind().toQualString() == std::string_view("aten::gru") ? 3 : 1;
  const int64_t H = ws[0] / gates, P = ws[1], D = *bidirectional ? 2 : 1, states = *layers * D;
  const bool batched = xs.size() == 3;
  const int64_t T = xs[batched && *batch_first ? 1 : 0];
  std::vector<int64_t> y = !batched ? std::vector<int64_t>{T, D * P}
                           : *batch_first ? std::vector<int64_t>{xs[0], T, D * P} : std::vector<int64_t>{T, xs[1], D * P};
  auto state = [&](int64_t size) {
    return batched ? std::vector<int64_t>{states, xs[*batch_first ? 0 : 1], size} : std::vector<int64_t>{states, size};
  };
  std::vector<Known> out{Known::ofTensor(contiguousInfo(ScalarType::Float, y)),
                         Known::ofTensor(contiguousInfo(ScalarType::Float, state(P)))};
  if (lstm) out.push_back(Known::ofTensor(contiguousInfo(ScalarType::Float, state(H))));
  return out;
}
LLGA_SHAPE_FN("aten::lstm", rnnShape);
LLGA_SHAPE_FN("aten::gru", rnnShape);
LLGA_SHAPE_FN("aten::rnn_tanh", rnnShape);
LLGA_SHAPE_FN("aten::rnn_relu", rnnShape);

}  // namespace llga::shape_fn
