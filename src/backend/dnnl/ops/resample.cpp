// Interpolation (F.interpolate as traced):
//   aten::upsample_nearest{1,2,3}d(x, output_size?, scale_factors?)            (.vec)
//   aten::upsample_nearest2d(x, output_size, scales_h?, scales_w?)
//   aten::upsample_bilinear2d(x, output_size?, align_corners, scale_factors?)  (.vec)
//   aten::upsample_bilinear2d(x, output_size, align_corners, scales_h?, scales_w?)
// Plain loops that follow PyTorch's source-index arithmetic exactly
// (oneDNN's resampling rounds nearest neighbours differently).
#include <cmath>
#include <cstring>

#include "backend/dnnl/ops/op_utils.h"

namespace llga {
namespace {

struct Resize {
  Shape out;                               // spatial output sizes
  std::vector<std::optional<double>> scale;  // user scale factors per spatial dim
};

std::optional<double> optDouble(const RtValue& v) {
  if (v.isNone()) return std::nullopt;
  return v.toDouble();
}

// Parses either overload: (x, size?, scale_factors?) or (x, size, scale_0?, scale_1?, ...).
Resize parseResize(const KernelArgs& a, size_t size_at, size_t scales_at, size_t nsp, const Tensor& x) {
  Resize r;
  r.scale.assign(nsp, std::nullopt);
  bool vec = a.num_in == scales_at + 1 && (a.isNone(scales_at) || a.input(scales_at).isList());
  if (vec && !a.isNone(scales_at)) {
    std::vector<double> f;
    for (const RtValue& v : *a.input(scales_at).list()) f.push_back(v.toDouble());
    if (f.size() == 1) f.assign(nsp, f[0]);
    if (f.size() != nsp) throw std::invalid_argument("interpolate: scale_factor needs one value per spatial dim");
    for (size_t i = 0; i < nsp; ++i) {
      r.scale[i] = f[i];
      r.out.push_back(static_cast<int64_t>(std::floor(static_cast<double>(x.size(static_cast<int64_t>(i) + 2)) * f[i])));
    }
  } else {
    if (a.isNone(size_at)) throw std::invalid_argument("interpolate: either size or scale_factor must be given");
    r.out = a.intList(size_at);
    if (r.out.size() == 1) r.out.assign(nsp, r.out[0]);
    if (!vec)
      for (size_t i = 0; i < nsp && scales_at + i < a.num_in; ++i) r.scale[i] = optDouble(a.input(scales_at + i));
  }
  if (r.out.size() != nsp) throw std::invalid_argument("interpolate: size needs one value per spatial dim");
  for (int64_t o : r.out)
    if (o <= 0) throw std::invalid_argument("interpolate: output size must be positive");
  return r;
}

// PyTorch's area_pixel_compute_scale
double pixelScale(int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  if (align_corners) return out > 1 ? static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0;
  if (scale && *scale > 0) return 1.0 / *scale;
  return static_cast<double>(in) / static_cast<double>(out);
}

class NearestKernel final : public Kernel {
 public:
  explicit NearestKernel(size_t nsp) : nsp_(nsp) {}
  void run(const KernelArgs& a) override {
    Tensor x = a.tensor(0);
    if (x.dim() != static_cast<int64_t>(nsp_) + 2) throw std::invalid_argument("upsample_nearest: bad input " + x.describe());
    Resize r = parseResize(a, 1, 2, nsp_, x);
    Shape shape = {x.size(0), x.size(1)};
    shape.insert(shape.end(), r.out.begin(), r.out.end());
    Tensor out = Tensor::empty(x.dtype(), shape);
    // source index per output index, per spatial dim
    std::vector<std::vector<int64_t>> src(nsp_);
    for (size_t i = 0; i < nsp_; ++i) {
      int64_t in = x.size(static_cast<int64_t>(i) + 2);
      double s = pixelScale(in, r.out[i], false, r.scale[i]);
      for (int64_t o = 0; o < r.out[i]; ++o)
        src[i].push_back(std::min(static_cast<int64_t>(std::floor(static_cast<double>(o) * s)), in - 1));
    }
    Tensor xc = x.contiguous();
    const size_t item = x.itemsize();
    int64_t planes = x.size(0) * x.size(1), in_plane = xc.numel() / std::max<int64_t>(planes, 1);
    int64_t out_plane = out.numel() / std::max<int64_t>(planes, 1);
    const char* sp = static_cast<const char*>(xc.data());
    char* dp = static_cast<char*>(out.data());
    std::vector<int64_t> idx(nsp_);
    for (int64_t p = 0; p < planes; ++p)
      for (int64_t o = 0; o < out_plane; ++o) {
        int64_t rem = o, off = 0, mul = 1;
        for (size_t i = nsp_; i-- > 0;) {
          idx[i] = rem % r.out[i];
          rem /= r.out[i];
        }
        for (size_t i = nsp_; i-- > 0;) {
          off += src[i][idx[i]] * mul;
          mul *= x.size(static_cast<int64_t>(i) + 2);
        }
        std::memcpy(dp + (p * out_plane + o) * static_cast<int64_t>(item), sp + (p * in_plane + off) * static_cast<int64_t>(item), item);
      }
    a.set(0, out);
  }

 private:
  size_t nsp_;
};

class BilinearKernel final : public Kernel {
 public:
  void run(const KernelArgs& a) override {
    Tensor x = a.tensor(0);
    if (x.dim() != 4 || x.dtype() != ScalarType::Float)
      throw std::invalid_argument("upsample_bilinear2d expects a float32 NCHW tensor, got " + x.describe());
    bool align = a.toBool(2);
    Resize r = parseResize(a, 1, 3, 2, x);
    int64_t ih = x.size(2), iw = x.size(3), oh = r.out[0], ow = r.out[1];
    Tensor xc = x.contiguous();
    Tensor out = Tensor::empty(ScalarType::Float, {x.size(0), x.size(1), oh, ow});
    double sh = pixelScale(ih, oh, align, r.scale[0]), sw = pixelScale(iw, ow, align, r.scale[1]);
    auto source = [align](double scale, int64_t o) {
      double s = align ? scale * static_cast<double>(o) : scale * (static_cast<double>(o) + 0.5) - 0.5;
      return s < 0 ? 0.0 : s;
    };
    const float* src = xc.data<float>();
    float* dst = out.data<float>();
    for (int64_t p = 0, planes = x.size(0) * x.size(1); p < planes; ++p)
      for (int64_t y = 0; y < oh; ++y) {
        double fy = source(sh, y);
        int64_t y0 = std::min(static_cast<int64_t>(fy), ih - 1), y1 = std::min(y0 + 1, ih - 1);
        double ly = fy - static_cast<double>(y0);
        for (int64_t xo = 0; xo < ow; ++xo) {
          double fx = source(sw, xo);
          int64_t x0 = std::min(static_cast<int64_t>(fx), iw - 1), x1 = std::min(x0 + 1, iw - 1);
          double lx = fx - static_cast<double>(x0);
          const float* s = src + p * ih * iw;
          double v = (1 - ly) * ((1 - lx) * s[y0 * iw + x0] + lx * s[y0 * iw + x1]) +
                     ly * ((1 - lx) * s[y1 * iw + x0] + lx * s[y1 * iw + x1]);
          dst[(p * oh + y) * ow + xo] = static_cast<float>(v);
        }
      }
    a.set(0, out);
  }
};

}  // namespace

void registerResampleOps(OpRegistry& r) {
  for (size_t nsp = 1; nsp <= 3; ++nsp)
    r.add(OpDef{"aten::upsample_nearest" + std::to_string(nsp) + "d", 2, 2 + nsp,
                [nsp](const Node&) { return std::make_unique<NearestKernel>(nsp); }});
  r.add(OpDef{"aten::upsample_bilinear2d", 3, 5, [](const Node&) { return std::make_unique<BilinearKernel>(); }});
}
LLGA_REGISTER_OPS(registerResampleOps);

}  // namespace llga
