// Max pooling that also returns where each maximum came from, and its inverse.
//   aten::max_pool{1,2,3}d_with_indices(x, kernel, stride=[], padding=0, dilation=1, ceil_mode=False)
//   aten::adaptive_max_pool{1,2,3}d(x, output_size)        bins [floor(i*in/out), ceil((i+1)*in/out))
//        -> (values, indices); an index is the flat position in the input's
//        spatial plane, as PyTorch's (oneDNN's pooling workspace holds
//        positions within a window in its own layout, so these run here)
//   aten::fractional_max_pool{2,3}d(x, kernel, output_size, random_samples) -> (values, indices)
//        windows at PyTorch's pseudo-random intervals, one sample per plane and
//        dim (random_samples [N, C, 2|3]: W then H for 2-d; T, H, W for 3-d)
//   aten::max_unpool2d(x, indices, output_size), aten::max_unpool3d(x, indices, output_size, stride, padding)
//        zeros of output_size with x written at indices
// As PyTorch: a NaN is the maximum, the first maximum in window order wins.
// Planes and output rows run in parallel.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/dnnl/ops/op_utils.h"

namespace llga {
namespace {

// For each spatial dim i and output index o: the window's input range [lo, hi) and step.
struct Windows {
  std::vector<std::vector<int64_t>> lo, hi;
  Shape step, in, out;
};

Shape padTo3(const Shape& v, int64_t fill) {
  Shape r(3 - v.size(), fill);
  r.insert(r.end(), v.begin(), v.end());
  return r;
}

std::pair<Tensor, Tensor> maxWithIndices(const Tensor& x_in, const Windows& w, size_t nsp) {
  if (!isFloatingType(x_in.dtype()) && !isIntegralType(x_in.dtype(), false))
    throw std::invalid_argument("max pooling with indices: unsupported dtype in " + x_in.describe());
  const bool batched = x_in.dim() == static_cast<int64_t>(nsp) + 2;
  if (!batched && x_in.dim() != static_cast<int64_t>(nsp) + 1)
    throw std::invalid_argument("max pooling: a " + std::to_string(nsp) + "-d pool needs a " + std::to_string(nsp + 1) + "-d or " +
                                std::to_string(nsp + 2) + "-d input, got " + x_in.describe());
  Tensor x = (batched ? x_in : x_in.unsqueeze(0)).to(ScalarType::Float).contiguous();
  Shape out_shape{x.size(0), x.size(1)};
  for (size_t i = 0; i < nsp; ++i) out_shape.push_back(w.out[3 - nsp + i]);
  Tensor vals = Tensor::empty(ScalarType::Float, out_shape), idx = Tensor::empty(ScalarType::Long, out_shape);
  const int64_t planes = x.size(0) * x.size(1), in_plane = w.in[0] * w.in[1] * w.in[2];
  const int64_t rows = w.out[0] * w.out[1];
  const float* src = x.data<float>();
  float* vp = vals.data<float>();
  int64_t* ip = idx.data<int64_t>();
  if (vals.numel() > 0) {
#pragma omp parallel for schedule(static)
    for (int64_t pr = 0; pr < planes * rows; ++pr) {
      const int64_t p = pr / rows, r = pr % rows, od = r / w.out[1], oh = r % w.out[1];
      const float* s = src + p * in_plane;
      for (int64_t ow = 0; ow < w.out[2]; ++ow) {
        float best = -std::numeric_limits<float>::infinity();
        int64_t at = -1;
        for (int64_t d = w.lo[0][od]; d < w.hi[0][od]; d += w.step[0])
          for (int64_t h = w.lo[1][oh]; h < w.hi[1][oh]; h += w.step[1])
            for (int64_t c = w.lo[2][ow]; c < w.hi[2][ow]; c += w.step[2]) {
              const int64_t off = (d * w.in[1] + h) * w.in[2] + c;
              const float v = s[off];
              if (at < 0 || v > best || (std::isnan(v) && !std::isnan(best))) {
                best = v;
                at = off;
              }
            }
        vp[pr * w.out[2] + ow] = best;
        ip[pr * w.out[2] + ow] = at < 0 ? 0 : at;
      }
    }
  }
  vals = vals.to(x_in.dtype());
  if (!batched) return {vals.squeeze(0), idx.squeeze(0)};
  return {vals, idx};
}

Shape listParam(Shape v, size_t n, const Shape& dflt, const char* what) {
  if (v.empty()) v = dflt;
  if (v.size() == 1 && n > 1) v.assign(n, v[0]);
  if (v.size() != n) throw std::invalid_argument(std::string("max pooling: ") + what + " needs " + std::to_string(n) + " values");
  return v;
}

void maxPoolWithIndices(const KernelArgs& a, size_t nsp) {
  const Tensor& x = a.tensor(0);
  Shape kernel = listParam(a.intList(1), nsp, {}, "kernel_size");
  Shape stride = listParam(a.num_in > 2 ? a.intList(2) : Shape{}, nsp, kernel, "stride");
  Shape pad = listParam(a.num_in > 3 ? a.intList(3) : Shape{0}, nsp, {0}, "padding");
  Shape dil = listParam(a.num_in > 4 ? a.intList(4) : Shape{1}, nsp, {1}, "dilation");
  const bool ceil_mode = a.num_in > 5 && a.toBool(5);
  Windows w;
  const int64_t off = x.dim() - static_cast<int64_t>(nsp);
  Shape in;
  for (size_t i = 0; i < nsp; ++i) in.push_back(x.size(off + static_cast<int64_t>(i)));
  w.in = padTo3(in, 1);
  Shape k3 = padTo3(kernel, 1), s3 = padTo3(stride, 1), p3 = padTo3(pad, 0), d3 = padTo3(dil, 1);
  for (size_t i = 0; i < 3; ++i) {
    if (k3[i] <= 0 || s3[i] <= 0 || d3[i] <= 0 || p3[i] < 0 || p3[i] * 2 > k3[i])
      throw std::invalid_argument("max pooling: kernel, stride and dilation must be positive and padding at most half the kernel");
    const int64_t o = poolOutputSize(w.in[i], k3[i], s3[i], p3[i], d3[i], ceil_mode);
    if (o <= 0) throw std::invalid_argument("max pooling: the output of " + x.describe() + " would be empty");
    w.out.push_back(o);
    w.step.push_back(d3[i]);
    w.lo.emplace_back();
    w.hi.emplace_back();
    for (int64_t j = 0; j < o; ++j) {
      int64_t start = j * s3[i] - p3[i], end = start + d3[i] * (k3[i] - 1) + 1;
      while (start < 0) start += d3[i];
      w.lo[i].push_back(start);
      w.hi[i].push_back(std::min(end, w.in[i]));
    }
  }
  auto [v, ix] = maxWithIndices(x, w, nsp);
  a.set(0, v);
  a.set(1, ix);
}

void adaptiveMaxPool(const KernelArgs& a, size_t nsp) {
  const Tensor& x = a.tensor(0);
  Shape want = listParam(a.intList(1), nsp, {}, "output_size");
  Windows w;
  const int64_t off = x.dim() - static_cast<int64_t>(nsp);
  for (int64_t d = off == 2 ? 1 : 0; d < off; ++d)  // as PyTorch: only the batch may be empty
    if (x.size(d) == 0)
      throw std::invalid_argument("adaptive max pooling: expected an input with non-zero sizes except the batch, got " +
                                  x.describe());
  Shape in, out;
  for (size_t i = 0; i < nsp; ++i) {
    in.push_back(x.size(off + static_cast<int64_t>(i)));
    out.push_back(want[i] < 0 ? in.back() : want[i]);
    if (out.back() <= 0) throw std::invalid_argument("adaptive max pooling: output size must be positive");
    if (in.back() == 0) throw std::invalid_argument("adaptive max pooling of an empty dimension of " + x.describe());
  }
  w.in = padTo3(in, 1);
  w.out = padTo3(out, 1);
  w.step = {1, 1, 1};
  for (size_t i = 0; i < 3; ++i) {
    w.lo.emplace_back();
    w.hi.emplace_back();
    for (int64_t j = 0; j < w.out[i]; ++j) {
      w.lo[i].push_back(j * w.in[i] / w.out[i]);
      w.hi[i].push_back(((j + 1) * w.in[i] + w.out[i] - 1) / w.out[i]);
    }
  }
  auto [v, ix] = maxWithIndices(x, w, nsp);
  a.set(0, v);
  a.set(1, ix);
}

// PyTorch's generate_intervals: window starts for one plane and dim.
std::vector<int64_t> fractionalStarts(double sample, int64_t in, int64_t out, int64_t pool) {
  std::vector<int64_t> seq(static_cast<size_t>(out));
  if (out > 1) {
    const double alpha = static_cast<double>(in - pool) / static_cast<double>(out - 1);
    for (int64_t i = 0; i < out - 1; ++i)
      seq[static_cast<size_t>(i)] =
          static_cast<int64_t>((static_cast<double>(i) + sample) * alpha) - static_cast<int64_t>(sample * alpha);
  }
  seq[static_cast<size_t>(out - 1)] = in - pool;
  return seq;
}

void fractionalMaxPool(const KernelArgs& a, size_t nsp) {
  const Tensor& x_in = a.tensor(0);
  Shape kernel = listParam(a.intList(1), nsp, {}, "kernel_size"), out_size = listParam(a.intList(2), nsp, {}, "output_size");
  const bool batched = x_in.dim() == static_cast<int64_t>(nsp) + 2;
  if (!batched && x_in.dim() != static_cast<int64_t>(nsp) + 1)
    throw std::invalid_argument("fractional max pooling: bad input " + x_in.describe());
  Tensor x = (batched ? x_in : x_in.unsqueeze(0)).to(ScalarType::Float).contiguous();
  Tensor samples = a.tensor(3).to(ScalarType::Double).contiguous();
  const int64_t N = x.size(0), C = x.size(1);
  if (samples.dim() != 3 || samples.size(0) < N || samples.size(1) < C || samples.size(2) != static_cast<int64_t>(nsp))
    throw std::invalid_argument("fractional max pooling: random_samples " + a.tensor(3).describe() + " must be [" +
                                std::to_string(N) + ", " + std::to_string(C) + ", " + std::to_string(nsp) + "]");
  Shape in = padTo3(Shape(x.sizes().begin() + 2, x.sizes().end()), 1), k3 = padTo3(kernel, 1), o3 = padTo3(out_size, 1);
  // PyTorch 1.13 checks out + k - 1 <= in for 2-d, but < in for 3-d
  for (size_t i = 3 - nsp; i < 3; ++i)
    if (o3[i] <= 0 || k3[i] <= 0 || o3[i] + k3[i] - 1 > in[i] - (nsp == 3 ? 1 : 0))
      throw std::invalid_argument("fractional max pooling: output_size + kernel_size - 1 must " +
                                  std::string(nsp == 3 ? "be less than" : "fit") + " the input " + x_in.describe());
  Shape out_shape{N, C};
  for (size_t i = 3 - nsp; i < 3; ++i) out_shape.push_back(o3[i]);
  Tensor vals = Tensor::empty(ScalarType::Float, out_shape), idx = Tensor::empty(ScalarType::Long, out_shape);
  const float* src = x.data<float>();
  const double* sp = samples.data<double>();
  float* vp = vals.data<float>();
  int64_t* ip = idx.data<int64_t>();
  const int64_t in_plane = in[0] * in[1] * in[2], out_plane = o3[0] * o3[1] * o3[2];
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < N * C; ++p) {
    const int64_t n = p / C, c = p % C;
    const double* smp = sp + (n * samples.size(1) + c) * static_cast<int64_t>(nsp);
    // The sample of each dim: 2-d reads [W, H], 3-d [T, H, W] (PyTorch's order).
    std::vector<int64_t> seq[3];
    for (size_t i = 0; i < 3; ++i) {
      double u = 0;
      if (i >= 3 - nsp) u = nsp == 2 ? smp[i == 2 ? 0 : 1] : smp[i];
      seq[i] = i < 3 - nsp ? std::vector<int64_t>{0} : fractionalStarts(u, in[i], o3[i], k3[i]);
    }
    const float* s = src + p * in_plane;
    for (int64_t od = 0; od < o3[0]; ++od)
      for (int64_t oh = 0; oh < o3[1]; ++oh)
        for (int64_t ow = 0; ow < o3[2]; ++ow) {
          float best = -std::numeric_limits<float>::infinity();
          int64_t at = -1;
          for (int64_t d = seq[0][od]; d < seq[0][od] + k3[0]; ++d)
            for (int64_t h = seq[1][oh]; h < seq[1][oh] + k3[1]; ++h)
              for (int64_t w = seq[2][ow]; w < seq[2][ow] + k3[2]; ++w) {
                const int64_t off = (d * in[1] + h) * in[2] + w;
                if (at < 0 || s[off] > best || std::isnan(s[off])) {  // as PyTorch: the last NaN wins
                  best = s[off];
                  at = off;
                }
              }
          const int64_t o = p * out_plane + (od * o3[1] + oh) * o3[2] + ow;
          vp[o] = best;
          ip[o] = at;
        }
  }
  vals = vals.to(x_in.dtype());
  a.set(0, batched ? vals : vals.squeeze(0));
  a.set(1, batched ? idx : idx.squeeze(0));
}

void maxUnpool(const KernelArgs& a, size_t nsp) {
  const Tensor& x_in = a.tensor(0);
  const Tensor& i_in = a.tensor(1);
  Shape size = a.intList(2);
  if (size.size() != nsp) throw std::invalid_argument("max_unpool: output_size needs " + std::to_string(nsp) + " values");
  if (x_in.sizes() != i_in.sizes())
    throw std::invalid_argument("max_unpool: input " + x_in.describe() + " and indices " + i_in.describe() + " differ in shape");
  const bool batched = x_in.dim() == static_cast<int64_t>(nsp) + 2;
  if (!batched && x_in.dim() != static_cast<int64_t>(nsp) + 1)
    throw std::invalid_argument("max_unpool: bad input " + x_in.describe());
  for (int64_t d = batched ? 1 : 0; d < x_in.dim(); ++d)  // as PyTorch: only the batch may be empty
    if (x_in.size(d) == 0)
      throw std::invalid_argument("max_unpool: expected an input with non-zero sizes except the batch, got " + x_in.describe());
  Tensor x = (batched ? x_in : x_in.unsqueeze(0)).contiguous(), idx = (batched ? i_in : i_in.unsqueeze(0)).to(ScalarType::Long).contiguous();
  Shape out_shape{x.size(0), x.size(1)};
  int64_t out_plane = 1;
  for (int64_t s : size) {
    out_shape.push_back(s);
    out_plane *= s;
  }
  Tensor out = Tensor::zeros(x.dtype(), out_shape);
  const int64_t planes = x.size(0) * x.size(1), in_plane = planes ? x.numel() / planes : 0;
  const int64_t* ip = idx.data<int64_t>();
  for (int64_t k = 0, n = idx.numel(); k < n; ++k)
    if (ip[k] < 0 || ip[k] >= out_plane)
      throw std::invalid_argument("max_unpool: index " + std::to_string(ip[k]) + " is outside an output plane of " +
                                  std::to_string(out_plane) + " elements");
  const size_t item = x.itemsize();
  const char* src = static_cast<const char*>(x.data());
  char* dst = static_cast<char*>(out.data());
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t k = 0; k < in_plane; ++k)
      std::memcpy(dst + static_cast<size_t>(p * out_plane + ip[p * in_plane + k]) * item, src + static_cast<size_t>(p * in_plane + k) * item,
                  item);
  a.set(0, batched ? out : out.squeeze(0));
}

}  // namespace

void registerPoolIndicesOps(OpRegistry& r) {
  for (size_t nsp = 1; nsp <= 3; ++nsp) {
    const std::string d = std::to_string(nsp) + "d";
    r.add("aten::max_pool" + d + "_with_indices", 2, 6, [nsp](const KernelArgs& a) { maxPoolWithIndices(a, nsp); });
    r.add("aten::adaptive_max_pool" + d, 2, 2, [nsp](const KernelArgs& a) { adaptiveMaxPool(a, nsp); });
  }
  r.add("aten::max_unpool2d", 3, 3, [](const KernelArgs& a) { maxUnpool(a, 2); });
  r.add("aten::fractional_max_pool2d", 4, 4, [](const KernelArgs& a) { fractionalMaxPool(a, 2); });
  r.add("aten::fractional_max_pool3d", 4, 4, [](const KernelArgs& a) { fractionalMaxPool(a, 3); });
  r.add("aten::max_unpool3d", 5, 5, [](const KernelArgs& a) { maxUnpool(a, 3); });
}
LLGA_REGISTER_OPS(registerPoolIndicesOps);

}  // namespace llga
