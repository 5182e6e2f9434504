// Ops that only move elements: views where the strides allow (movedim,
// diagonal), one strided copy otherwise (the shuffles, tile).
//   aten::pixel_shuffle(x, r)      [*, C*r*r, H, W] -> [*, C, H*r, W*r]
//   aten::pixel_unshuffle(x, r)    the inverse
//   aten::channel_shuffle(x, g)    [N, g*k, *] -> channels regrouped as [N, k*g, *]
//   aten::tile(x, reps)            repeat with reps padded by leading 1s
//   aten::movedim(x, src, dst)     int or int[] positions; a permuted view
//   aten::diagonal(x, offset=0, dim1=0, dim2=1)   a view, the diagonal last
//   aten::im2col(x, kernel, dilation, padding, stride)   nn.Unfold: [N, C, H, W] -> [N, C*kh*kw, L]
//   aten::col2im(cols, output_size, kernel, dilation, padding, stride)   nn.Fold: the sum back
//        (rows of [C*kh*kw] in parallel for im2col; planes of C for col2im, which adds)
#include <cstring>
#include <numeric>

#include "backend/dnnl/ops/op_utils.h"

namespace llga {
namespace {

Tensor pixelShuffle(const Tensor& x, int64_t r, bool shuffle) {
  const char* op = shuffle ? "pixel_shuffle" : "pixel_unshuffle";
  if (x.dim() < 3) throw std::invalid_argument(std::string(op) + " expects at least 3 dims, got " + x.describe());
  if (r <= 0) throw std::invalid_argument(std::string(op) + ": the factor must be positive, got " + std::to_string(r));
  Shape batch(x.sizes().begin(), x.sizes().end() - 3);
  const int64_t c = x.size(-3), h = x.size(-2), w = x.size(-1), nb = static_cast<int64_t>(batch.size());
  Shape split = batch, perm(static_cast<size_t>(nb)), out = batch;
  std::iota(perm.begin(), perm.end(), 0);
  if (shuffle) {
    if (c % (r * r)) throw std::invalid_argument("pixel_shuffle: channels " + std::to_string(c) + " are not divisible by " + std::to_string(r * r));
    split.insert(split.end(), {c / (r * r), r, r, h, w});  // [*, C, r1, r2, H, W] -> [*, C, H, r1, W, r2]
    for (int64_t p : {0, 3, 1, 4, 2}) perm.push_back(nb + p);
    out.insert(out.end(), {c / (r * r), h * r, w * r});
  } else {
    if (h % r || w % r)
      throw std::invalid_argument("pixel_unshuffle: height and width of " + x.describe() + " are not divisible by " + std::to_string(r));
    split.insert(split.end(), {c, h / r, r, w / r, r});  // [*, C, H, r1, W, r2] -> [*, C, r1, r2, H, W]
    for (int64_t p : {0, 2, 4, 1, 3}) perm.push_back(nb + p);
    out.insert(out.end(), {c * r * r, h / r, w / r});
  }
  return x.reshape(split).permute(perm).contiguous().view(out);
}

Tensor channelShuffle(const Tensor& x, int64_t g) {
  if (x.dim() < 3) throw std::invalid_argument("channel_shuffle expects at least 3 dims, got " + x.describe());
  if (g <= 0 || x.size(1) % g)
    throw std::invalid_argument("channel_shuffle: " + std::to_string(x.size(1)) + " channels cannot form " + std::to_string(g) + " groups");
  Shape split{x.size(0), g, x.size(1) / g};
  split.insert(split.end(), x.sizes().begin() + 2, x.sizes().end());
  return x.reshape(split).transpose(1, 2).contiguous().view(x.sizes());
}

Shape wrapDims(const Tensor& x, const Shape& dims, const char* op) {
  Shape out;
  std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(x.dim(), 1)), false);  // a 0-dim x takes dim 0
  for (int64_t d : dims) {
    const int64_t w = x.wrapDim(d);
    if (seen[static_cast<size_t>(w)]) throw std::invalid_argument(std::string(op) + ": dim " + std::to_string(d) + " repeats");
    seen[static_cast<size_t>(w)] = true;
    out.push_back(w);
  }
  return out;
}

Tensor movedim(const Tensor& x, const Shape& src_arg, const Shape& dst_arg) {
  if (src_arg.size() != dst_arg.size())
    throw std::invalid_argument("movedim: " + std::to_string(src_arg.size()) + " source and " + std::to_string(dst_arg.size()) +
                                " destination dims");
  Shape src = wrapDims(x, src_arg, "movedim"), dst = wrapDims(x, dst_arg, "movedim");
  if (x.dim() == 0) return x;
  const size_t rank = static_cast<size_t>(x.dim());
  Shape perm(rank, -1);
  std::vector<bool> used(rank, false);
  for (size_t i = 0; i < src.size(); ++i) {
    perm[static_cast<size_t>(dst[i])] = src[i];
    used[static_cast<size_t>(src[i])] = true;
  }
  size_t next = 0;
  for (int64_t& p : perm) {
    if (p >= 0) continue;
    while (used[next]) ++next;
    p = static_cast<int64_t>(next++);
  }
  return x.permute(perm);
}

Tensor diagonal(const Tensor& x, int64_t offset, int64_t d1_arg, int64_t d2_arg) {
  if (x.dim() < 2) throw std::invalid_argument("diagonal expects at least 2 dims, got " + x.describe());
  const int64_t d1 = x.wrapDim(d1_arg), d2 = x.wrapDim(d2_arg);
  if (d1 == d2) throw std::invalid_argument("diagonal: dim1 and dim2 are both " + std::to_string(d1));
  const int64_t len = offset >= 0 ? std::max<int64_t>(0, std::min(x.size(d1), x.size(d2) - offset))
                                  : std::max<int64_t>(0, std::min(x.size(d1) + offset, x.size(d2)));
  const int64_t start = len == 0 ? 0 : offset >= 0 ? offset * x.stride(d2) : -offset * x.stride(d1);
  Shape sizes, strides;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != d1 && d != d2) {
      sizes.push_back(x.size(d));
      strides.push_back(x.stride(d));
    }
  sizes.push_back(len);
  strides.push_back(x.stride(d1) + x.stride(d2));
  return Tensor::fromStorage(x.storage(), x.dtype(), sizes, strides, x.offset() + start);
}

struct Sliding {
  int64_t kh, kw, dh, dw, ph, pw, sh, sw, oh, ow;  // kernel, dilation, padding, stride; blocks per dim
};

Sliding sliding(const KernelArgs& a, size_t at, int64_t h, int64_t w, const char* op) {
  auto pair = [&](size_t i, const char* what) {
    Shape v = a.intList(i);
    if (v.size() == 1) v.push_back(v[0]);
    if (v.size() != 2) throw std::invalid_argument(std::string(op) + ": " + what + " needs 2 values");
    return v;
  };
  Shape k = pair(at, "kernel_size"), d = pair(at + 1, "dilation"), p = pair(at + 2, "padding"), s = pair(at + 3, "stride");
  Sliding g{k[0], k[1], d[0], d[1], p[0], p[1], s[0], s[1], 0, 0};
  if (g.kh <= 0 || g.kw <= 0 || g.dh <= 0 || g.dw <= 0 || g.sh <= 0 || g.sw <= 0 || g.ph < 0 || g.pw < 0)
    throw std::invalid_argument(std::string(op) + ": kernel, dilation and stride must be positive, padding not negative");
  g.oh = (h + 2 * g.ph - g.dh * (g.kh - 1) - 1) / g.sh + 1;
  g.ow = (w + 2 * g.pw - g.dw * (g.kw - 1) - 1) / g.sw + 1;
  if (g.oh <= 0 || g.ow <= 0)
    throw std::invalid_argument(std::string(op) + ": no sliding block fits a " + std::to_string(h) + "x" + std::to_string(w) + " input");
  return g;
}

Tensor im2col(const KernelArgs& a) {
  const Tensor& in = a.tensor(0);
  const bool batched = in.dim() == 4;
  if (!batched && in.dim() != 3) throw std::invalid_argument("im2col (nn.Unfold) expects a 3-D or 4-D input, got " + in.describe());
  Tensor x = (batched ? in : in.unsqueeze(0)).contiguous();
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  Sliding g = sliding(a, 1, H, W, "im2col");
  const int64_t rows = C * g.kh * g.kw, L = g.oh * g.ow;
  Tensor out = Tensor::zeros(x.dtype(), {N, rows, L});
  const size_t item = x.itemsize();
  const char* src = static_cast<const char*>(x.data());
  char* dst = static_cast<char*>(out.data());
#pragma omp parallel for schedule(static)
  for (int64_t nr = 0; nr < N * rows; ++nr) {
    const int64_t n = nr / rows, r = nr % rows, c = r / (g.kh * g.kw), ki = (r / g.kw) % g.kh, kj = r % g.kw;
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      const int64_t y = oy * g.sh - g.ph + ki * g.dh;
      if (y < 0 || y >= H) continue;
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        const int64_t xx = ox * g.sw - g.pw + kj * g.dw;
        if (xx < 0 || xx >= W) continue;
        std::memcpy(dst + static_cast<size_t>((nr * L) + oy * g.ow + ox) * item,
                    src + static_cast<size_t>(((n * C + c) * H + y) * W + xx) * item, item);
      }
    }
  }
  return batched ? out : out.squeeze(0);
}

Tensor col2im(const KernelArgs& a) {
  const Tensor& in = a.tensor(0);
  const bool batched = in.dim() == 3;
  if (!batched && in.dim() != 2) throw std::invalid_argument("col2im (nn.Fold) expects a 2-D or 3-D input, got " + in.describe());
  if (!isFloatingType(in.dtype())) throw std::invalid_argument("col2im (nn.Fold) expects a floating tensor, got " + in.describe());
  Tensor cols = (batched ? in : in.unsqueeze(0)).to(ScalarType::Double).contiguous();
  Shape size = a.intList(1);
  if (size.size() == 1) size.push_back(size[0]);
  if (size.size() != 2) throw std::invalid_argument("col2im (nn.Fold): output_size needs 2 values");
  const int64_t H = size[0], W = size[1];
  Sliding g = sliding(a, 2, H, W, "col2im");
  const int64_t N = cols.size(0), rows = cols.size(1), L = cols.size(2), kk = g.kh * g.kw;
  if (rows % kk || L != g.oh * g.ow)
    throw std::invalid_argument("col2im (nn.Fold): input " + in.describe() + " does not hold " + std::to_string(g.oh * g.ow) +
                                " blocks of a multiple of " + std::to_string(kk) + " values");
  const int64_t C = rows / kk;
  Tensor out = Tensor::zeros(ScalarType::Double, {N, C, H, W});
  const double* src = cols.data<double>();
  double* dst = out.data<double>();
#pragma omp parallel for schedule(static)
  for (int64_t nc = 0; nc < N * C; ++nc) {
    const int64_t n = nc / C, c = nc % C;
    double* plane = dst + nc * H * W;
    for (int64_t k = 0; k < kk; ++k) {
      const int64_t ki = k / g.kw, kj = k % g.kw;
      const double* row = src + (n * rows + c * kk + k) * L;
      for (int64_t oy = 0; oy < g.oh; ++oy) {
        const int64_t y = oy * g.sh - g.ph + ki * g.dh;
        if (y < 0 || y >= H) continue;
        for (int64_t ox = 0; ox < g.ow; ++ox) {
          const int64_t xx = ox * g.sw - g.pw + kj * g.dw;
          if (xx >= 0 && xx < W) plane[y * W + xx] += row[oy * g.ow + ox];
        }
      }
    }
  }
  Tensor r = out.to(in.dtype());
  return batched ? r : r.squeeze(0);
}

}  // namespace

void registerRearrangeOps(OpRegistry& r) {
  // unflatten(x, dim, sizes): dim split into sizes (one may be -1), a view.
  r.add("aten::unflatten", 3, 3, [](const KernelArgs& a) {
    const Tensor& x = a.tensor(0);
    const int64_t dim = x.wrapDim(a.toInt(1));
    Shape sizes = a.intList(2), shape;
    for (int64_t d = 0; d < x.dim(); ++d) {
      if (d == dim) shape.insert(shape.end(), sizes.begin(), sizes.end());
      else shape.push_back(x.size(d));
    }
    int64_t known = 1, unknown = -1;
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (sizes[i] == -1 && unknown < 0) unknown = static_cast<int64_t>(i);
      else known *= sizes[i];
    }
    if (unknown >= 0 && known != 0) shape[static_cast<size_t>(dim + unknown)] = x.size(dim) / known;
    int64_t prod = 1;
    for (size_t i = 0; i < sizes.size(); ++i) prod *= shape[static_cast<size_t>(dim) + i];
    if (prod != x.size(dim))
      throw std::invalid_argument("unflatten: sizes do not multiply to " + std::to_string(x.size(dim)) + ", the size of dim " +
                                  std::to_string(dim) + " of " + x.describe());
    a.set(0, x.reshape(shape));
  });
  r.add("aten::im2col", 5, 5, [](const KernelArgs& a) { a.set(0, im2col(a)); });
  r.add("aten::col2im", 6, 6, [](const KernelArgs& a) { a.set(0, col2im(a)); });
  r.add("aten::pixel_shuffle", 2, 2, [](const KernelArgs& a) { a.set(0, pixelShuffle(a.tensor(0), a.toInt(1), true)); });
  r.add("aten::pixel_unshuffle", 2, 2, [](const KernelArgs& a) { a.set(0, pixelShuffle(a.tensor(0), a.toInt(1), false)); });
  for (const char* k : {"aten::channel_shuffle", "aten::native_channel_shuffle"})
    r.add(k, 2, 2, [](const KernelArgs& a) { a.set(0, channelShuffle(a.tensor(0), a.toInt(1))); });
  r.add("aten::tile", 2, 2, [](const KernelArgs& a) {
    const Tensor& x = a.tensor(0);
    Shape reps = a.intList(1);
    if (reps.size() < static_cast<size_t>(x.dim())) reps.insert(reps.begin(), static_cast<size_t>(x.dim()) - reps.size(), 1);
    a.set(0, repeatTensor(x, reps));
  });
  r.add("aten::movedim", 3, 3, [](const KernelArgs& a) { a.set(0, movedim(a.tensor(0), a.intList(1), a.intList(2))); });
  r.add("aten::moveaxis", 3, 3, [](const KernelArgs& a) { a.set(0, movedim(a.tensor(0), a.intList(1), a.intList(2))); });
  // unfold(x, dimension, size, step): the windows of `size` along dimension, `step` apart, as a new
  // last dim: a view (a write through it reaches x)
  r.add("aten::unfold", 4, 4, [](const KernelArgs& a) {
    const Tensor& x = a.tensor(0);
    const int64_t d = x.dim() == 0 ? 0 : x.wrapDim(a.toInt(1));
    const int64_t size = a.toInt(2), step = a.toInt(3);
    const int64_t len = x.dim() == 0 ? 1 : x.size(d);
    if (size < 0) throw std::invalid_argument("unfold: size is " + std::to_string(size) + " but must be >= 0");
    if (size > len)
      throw std::invalid_argument("unfold: maximum size for tensor at dimension " + std::to_string(d) + " is " +
                                  std::to_string(len) + " but size is " + std::to_string(size));
    if (step <= 0) throw std::invalid_argument("unfold: step is " + std::to_string(step) + " but must be > 0");
    Shape sizes = x.sizes(), strides = x.strides();
    if (x.dim() > 0) {
      sizes[static_cast<size_t>(d)] = (len - size) / step + 1;
      strides[static_cast<size_t>(d)] *= step;
    }
    sizes.push_back(size);
    strides.push_back(x.dim() > 0 ? x.stride(d) : 1);
    a.set(0, x.asStrided(sizes, strides, x.offset()));
  });
  r.add("aten::diagonal", 1, 4, [](const KernelArgs& a) {
    a.set(0, diagonal(a.tensor(0), a.num_in > 1 ? a.toInt(1) : 0, a.num_in > 2 ? a.toInt(2) : 0, a.num_in > 3 ? a.toInt(3) : 1));
  });
}
LLGA_REGISTER_OPS(registerRearrangeOps);

}  // namespace llga
