// Interpolation (F.interpolate as traced), every mode PyTorch's upsample ops have:
//   aten::upsample_nearest{1,2,3}d(x, output_size?, scale_factors?)          (.vec)
//   aten::upsample_nearest{1,2,3}d(x, output_size, scales...?)
//   aten::_upsample_nearest_exact{1,2,3}d(...)                               the same arguments
//   aten::upsample_linear1d / upsample_bilinear2d / upsample_trilinear3d /
//   aten::upsample_bicubic2d(x, output_size?, align_corners, scale_factors?)  (.vec)
//        or (x, output_size, align_corners, scales...?)
//   aten::_upsample_bilinear2d_aa / _upsample_bicubic2d_aa: the same arguments,
//        antialiased (F.interpolate(antialias=True), torchvision's Resize)
// Each output index of each spatial dim reads a few taps (1 nearest, 2 linear,
// 4 cubic) with weights computed once per call by PyTorch's source-index
// arithmetic (oneDNN's resampling rounds nearest neighbours differently and
// has no cubic); planes and rows run in parallel, the innermost row of taps
// is a vectorisable loop.
//   aten::grid_sampler(x, grid, mode, padding_mode, align_corners): F.grid_sample,
//        4-D (bilinear, nearest, bicubic) and 5-D (trilinear, nearest) inputs;
//        padding zeros, border or reflection, PyTorch's coordinate arithmetic.
//        Output rows run in parallel.
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

enum class Mode { Nearest, NearestExact, Linear, Cubic, LinearAA, CubicAA };

// The taps of one spatial dim: for output o, index[o * taps + t] with weight[o * taps + t].
struct Taps {
  int64_t taps = 1;
  std::vector<int64_t> index;
  std::vector<float> weight;
};

// The antialiased modes (torchvision's Resize(antialias=True), PIL's filters):
// each output averages the inputs under its filter, stretched by the scale
// when shrinking (support 1 or 2 input pixels each side, times the scale),
// weights normalized to sum 1; as PyTorch's _upsample_*_aa kernels.
Taps makeTapsAA(Mode mode, int64_t in, int64_t out, bool align, std::optional<double> scale_arg) {
  const bool cubic = mode == Mode::CubicAA;
  const double scale = pixelScale(in, out, align, scale_arg);
  const double support = (cubic ? 2.0 : 1.0) * (scale >= 1.0 ? scale : 1.0);
  const double invscale = scale >= 1.0 ? 1.0 / scale : 1.0;
  auto filter = [cubic](double x) {
    x = std::abs(x);
    if (!cubic) return x < 1.0 ? 1.0 - x : 0.0;
    constexpr double a = -0.5;  // PIL's bicubic
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
    return 0.0;
  };
  Taps t;
  t.taps = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  t.index.assign(static_cast<size_t>(out * t.taps), 0);
  t.weight.assign(static_cast<size_t>(out * t.taps), 0.f);
  std::vector<double> w(static_cast<size_t>(t.taps));
  for (int64_t o = 0; o < out; ++o) {
    const double center = scale * (static_cast<double>(o) + 0.5);
    const int64_t lo = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
    const int64_t n = std::min<int64_t>({static_cast<int64_t>(center + support + 0.5), in, lo + t.taps}) - lo;
    double total = 0;
    for (int64_t j = 0; j < n; ++j) total += w[static_cast<size_t>(j)] = filter((static_cast<double>(j + lo) - center + 0.5) * invscale);
    for (int64_t j = 0; j < t.taps; ++j) {  // taps past n: weight 0 on a valid index
      t.index[static_cast<size_t>(o * t.taps + j)] = j < n ? lo + j : std::min(lo, in - 1);
      t.weight[static_cast<size_t>(o * t.taps + j)] = j < n && total != 0 ? static_cast<float>(w[static_cast<size_t>(j)] / total) : 0.f;
    }
  }
  return t;
}

Taps makeTaps(Mode mode, int64_t in, int64_t out, bool align, std::optional<double> scale_arg) {
  if (mode == Mode::LinearAA || mode == Mode::CubicAA) return makeTapsAA(mode, in, out, align, scale_arg);
  Taps t;
  const double scale = pixelScale(in, out, mode == Mode::Linear || mode == Mode::Cubic ? align : false, scale_arg);
  t.taps = mode == Mode::Cubic ? 4 : mode == Mode::Linear ? 2 : 1;
  t.index.resize(static_cast<size_t>(out * t.taps));
  t.weight.resize(static_cast<size_t>(out * t.taps));
  for (int64_t o = 0; o < out; ++o) {
    int64_t* idx = t.index.data() + o * t.taps;
    float* w = t.weight.data() + o * t.taps;
    const double od = static_cast<double>(o);
    if (mode == Mode::Nearest || mode == Mode::NearestExact) {
      const double src = mode == Mode::Nearest ? od * scale : (od + 0.5) * scale;
      idx[0] = std::min(static_cast<int64_t>(std::floor(src)), in - 1);
      w[0] = 1.f;
    } else if (mode == Mode::Linear) {
      double src = align ? scale * od : scale * (od + 0.5) - 0.5;
      if (src < 0) src = 0;
      const int64_t i0 = std::min(static_cast<int64_t>(src), in - 1);
      const double l = src - static_cast<double>(i0);
      idx[0] = i0;
      idx[1] = std::min(i0 + 1, in - 1);
      w[0] = static_cast<float>(1 - l);
      w[1] = static_cast<float>(l);
    } else {  // cubic convolution, A = -0.75, taps clamped to the border
      const double src = align ? scale * od : scale * (od + 0.5) - 0.5;
      const double fl = std::floor(src);
      const float x = static_cast<float>(src - fl), A = -0.75f;
      const int64_t i = static_cast<int64_t>(fl);
      auto c1 = [A](float v) { return ((A + 2) * v - (A + 3)) * v * v + 1; };
      auto c2 = [A](float v) { return ((A * v - 5 * A) * v + 8 * A) * v - 4 * A; };
      w[0] = c2(x + 1);
      w[1] = c1(x);
      w[2] = c1(1 - x);
      w[3] = c2(2 - x);
      for (int64_t k = 0; k < 4; ++k) idx[k] = std::min(std::max<int64_t>(i - 1 + k, 0), in - 1);
    }
  }
  return t;
}

class ResampleKernel final : public Kernel {
 public:
  ResampleKernel(Mode mode, size_t nsp) : mode_(mode), nsp_(nsp) {}
  void run(const KernelArgs& a) override {
    const Tensor& x_in = a.tensor(0);
    const bool nearest = mode_ == Mode::Nearest || mode_ == Mode::NearestExact;
    if (x_in.dim() != static_cast<int64_t>(nsp_) + 2)
      throw std::invalid_argument("interpolate: a " + std::to_string(nsp_) + "-d resize needs a " + std::to_string(nsp_ + 2) +
                                  "-d input, got " + x_in.describe());
    if (!nearest && !isFloatingType(x_in.dtype()))
      throw std::invalid_argument("interpolate: linear and cubic modes need a floating tensor, got " + x_in.describe());
    const bool align = !nearest && a.toBool(2);
    Resize r = parseResize(a, 1, nearest ? 2 : 3, nsp_, x_in);
    Tensor x = nearest ? x_in.contiguous() : x_in.to(ScalarType::Float).contiguous();
    Shape shape = {x.size(0), x.size(1)};
    shape.insert(shape.end(), r.out.begin(), r.out.end());
    std::vector<Taps> taps;
    Shape in(3, 1), out(3, 1);  // spatial sizes padded to 3 dims (leading 1s)
    for (size_t i = 0; i < nsp_; ++i) {
      in[3 - nsp_ + i] = x.size(static_cast<int64_t>(i) + 2);
      out[3 - nsp_ + i] = r.out[i];
    }
    for (size_t i = 0; i < 3; ++i) {
      const size_t sp = i + nsp_ - 3;  // the user's spatial dim, for the dims that exist
      taps.push_back(i < 3 - nsp_ ? makeTaps(Mode::Nearest, 1, 1, false, std::nullopt)
                                  : makeTaps(mode_, in[i], out[i], align, r.scale[sp]));
    }
    Tensor y = Tensor::empty(x.dtype(), shape);
    const int64_t planes = x.size(0) * x.size(1), in_plane = in[0] * in[1] * in[2], out_rows = out[0] * out[1];
    if (y.numel() == 0) return a.set(0, y);
    if (nearest) {  // a copy of the selected element, any dtype
      const size_t item = x.itemsize();
      const char* sp = static_cast<const char*>(x.data());
      char* dp = static_cast<char*>(y.data());
#pragma omp parallel for schedule(static)
      for (int64_t pr = 0; pr < planes * out_rows; ++pr) {
        const int64_t p = pr / out_rows, row = pr % out_rows, od = row / out[1], oh = row % out[1];
        const int64_t base = p * in_plane + (taps[0].index[od] * in[1] + taps[1].index[oh]) * in[2];
        char* d = dp + static_cast<size_t>(pr * out[2]) * item;
        for (int64_t ow = 0; ow < out[2]; ++ow)
          std::memcpy(d + static_cast<size_t>(ow) * item, sp + static_cast<size_t>(base + taps[2].index[ow]) * item, item);
      }
      return a.set(0, y);
    }
    const float* src = x.data<float>();
    float* dst = y.data<float>();
    const int64_t T0 = taps[0].taps, T1 = taps[1].taps, T2 = taps[2].taps;
    if ((mode_ == Mode::LinearAA || mode_ == Mode::CubicAA) && nsp_ == 2) {
      // separable, as PyTorch's: the rows along W into [planes, H, W_out],
      // then those along H (the antialiased filters span many taps a dim)
      std::vector<float> rows(static_cast<size_t>(planes * in[1] * out[2]));
      const int64_t* wi = taps[2].index.data();
      const float* ww = taps[2].weight.data();
#pragma omp parallel for schedule(static)
      for (int64_t pr = 0; pr < planes * in[1]; ++pr) {
        const float* s = src + pr * in[2];
        float* d = rows.data() + pr * out[2];
        for (int64_t ow = 0; ow < out[2]; ++ow) {
          float acc = 0.f;
          for (int64_t t2 = 0; t2 < T2; ++t2) acc += ww[ow * T2 + t2] * s[wi[ow * T2 + t2]];
          d[ow] = acc;
        }
      }
#pragma omp parallel for schedule(static)
      for (int64_t pr = 0; pr < planes * out[1]; ++pr) {
        const int64_t p = pr / out[1], oh = pr % out[1];
        float* d = dst + pr * out[2];
        for (int64_t ow = 0; ow < out[2]; ++ow) d[ow] = 0.f;
        for (int64_t t1 = 0; t1 < T1; ++t1) {
          const float w = taps[1].weight[oh * T1 + t1];
          if (w == 0.f) continue;
          const float* s = rows.data() + (p * in[1] + taps[1].index[oh * T1 + t1]) * out[2];
#pragma omp simd
          for (int64_t ow = 0; ow < out[2]; ++ow) d[ow] += w * s[ow];
        }
      }
      return a.set(0, y.to(x_in.dtype()));
    }
#pragma omp parallel for schedule(static)
    for (int64_t pr = 0; pr < planes * out_rows; ++pr) {
      const int64_t p = pr / out_rows, row = pr % out_rows, od = row / out[1], oh = row % out[1];
      float* d = dst + pr * out[2];
      for (int64_t ow = 0; ow < out[2]; ++ow) d[ow] = 0.f;
      for (int64_t t0 = 0; t0 < T0; ++t0)
        for (int64_t t1 = 0; t1 < T1; ++t1) {
          const float w01 = taps[0].weight[od * T0 + t0] * taps[1].weight[oh * T1 + t1];
          const float* s = src + p * in_plane + (taps[0].index[od * T0 + t0] * in[1] + taps[1].index[oh * T1 + t1]) * in[2];
          const int64_t* wi = taps[2].index.data();
          const float* ww = taps[2].weight.data();
          for (int64_t ow = 0; ow < out[2]; ++ow) {
            float acc = 0.f;
            for (int64_t t2 = 0; t2 < T2; ++t2) acc += ww[ow * T2 + t2] * s[wi[ow * T2 + t2]];
            d[ow] += w01 * acc;
          }
        }
    }
    a.set(0, y.to(x_in.dtype()));
  }

 private:
  Mode mode_;
  size_t nsp_;
};

// ---- grid_sampler

enum class GridPad { Zeros = 0, Border = 1, Reflection = 2 };

double unnormalize(double c, int64_t size, bool align) {
  return align ? (c + 1) / 2 * static_cast<double>(size - 1) : ((c + 1) * static_cast<double>(size) - 1) / 2;
}
double reflect(double in, int64_t twice_low, int64_t twice_high) {
  if (twice_low == twice_high) return 0;
  const double min = static_cast<double>(twice_low) / 2, span = static_cast<double>(twice_high - twice_low) / 2;
  in = std::fabs(in - min);
  const double extra = std::fmod(in, span);
  const int64_t flips = static_cast<int64_t>(std::floor(in / span));
  return flips % 2 == 0 ? extra + min : span - extra + min;
}
// Padding applied to a coordinate (border: clipped; reflection: mirrored, then clipped).
double padCoord(double c, int64_t size, GridPad pad, bool align) {
  if (pad == GridPad::Border) return std::min(std::max(c, 0.0), static_cast<double>(size - 1));
  if (pad == GridPad::Reflection) {
    c = align ? reflect(c, 0, 2 * (size - 1)) : reflect(c, -1, 2 * size - 1);
    return std::min(std::max(c, 0.0), static_cast<double>(size - 1));
  }
  return c;
}
double sourceIndex(double c, int64_t size, GridPad pad, bool align) { return padCoord(unnormalize(c, size, align), size, pad, align); }

Tensor gridSample(const Tensor& x_in, const Tensor& grid_in, int64_t mode, int64_t pad_code, bool align) {
  const int64_t nsp = x_in.dim() - 2;
  if ((nsp != 2 && nsp != 3) || grid_in.dim() != x_in.dim() || grid_in.size(-1) != nsp || grid_in.size(0) != x_in.size(0))
    throw std::invalid_argument("grid_sampler: input " + x_in.describe() + " and grid " + grid_in.describe() +
                                " must be [N, C, (D,) H, W] and [N, (D',) H', W', 2|3]");
  if (mode < 0 || mode > 2 || pad_code < 0 || pad_code > 2)
    throw std::invalid_argument("grid_sampler: unknown interpolation mode " + std::to_string(mode) + " or padding mode " + std::to_string(pad_code));
  if (mode == 2 && nsp == 3) throw std::invalid_argument("grid_sampler: bicubic needs a 4-D input, got " + x_in.describe());
  if (!isFloatingType(x_in.dtype())) throw std::invalid_argument("grid_sampler expects a floating input, got " + x_in.describe());
  const GridPad pad = static_cast<GridPad>(pad_code);
  Tensor x = x_in.to(ScalarType::Float).contiguous(), grid = grid_in.to(ScalarType::Float).contiguous();
  const int64_t N = x.size(0), C = x.size(1);
  const int64_t ID = nsp == 3 ? x.size(2) : 1, IH = x.size(-2), IW = x.size(-1);
  const int64_t OD = nsp == 3 ? grid.size(1) : 1, OH = grid.size(-3), OW = grid.size(-2);
  Shape out_shape{N, C};
  if (nsp == 3) out_shape.push_back(OD);
  out_shape.insert(out_shape.end(), {OH, OW});
  Tensor out = Tensor::empty(ScalarType::Float, out_shape);
  const float* src = x.data<float>();
  const float* gp = grid.data<float>();
  float* dst = out.data<float>();
  const int64_t in_plane = ID * IH * IW, out_plane = OD * OH * OW;
  auto at = [&](const float* plane, int64_t z, int64_t y, int64_t xx) -> double {
    if (z < 0 || z >= ID || y < 0 || y >= IH || xx < 0 || xx >= IW) return 0.0;
    return plane[(z * IH + y) * IW + xx];
  };
#pragma omp parallel for schedule(static)
  for (int64_t nr = 0; nr < N * OD * OH; ++nr) {
    const int64_t n = nr / (OD * OH), rest = nr % (OD * OH);
    for (int64_t ow = 0; ow < OW; ++ow) {
      const int64_t pos = rest * OW + ow;
      const float* g = gp + (n * out_plane + pos) * nsp;
      const double gx = g[0], gy = g[1], gz = nsp == 3 ? g[2] : 0.0;
      for (int64_t c = 0; c < C; ++c) {
        const float* plane = src + (n * C + c) * in_plane;
        double v = 0;
        if (mode == 2) {  // bicubic: 4x4 taps, each tap's index padded on its own
          const double ix = unnormalize(gx, IW, align), iy = unnormalize(gy, IH, align);
          const double fx = std::floor(ix), fy = std::floor(iy);
          const double tx = ix - fx, ty = iy - fy, A = -0.75;
          auto c1 = [A](double t) { return ((A + 2) * t - (A + 3)) * t * t + 1; };
          auto c2 = [A](double t) { return ((A * t - 5 * A) * t + 8 * A) * t - 4 * A; };
          const double wx[4] = {c2(tx + 1), c1(tx), c1(1 - tx), c2(2 - tx)}, wy[4] = {c2(ty + 1), c1(ty), c1(1 - ty), c2(2 - ty)};
          for (int64_t j = 0; j < 4; ++j)
            for (int64_t i = 0; i < 4; ++i) {
              const double px = padCoord(fx - 1 + static_cast<double>(i), IW, pad, align);
              const double py = padCoord(fy - 1 + static_cast<double>(j), IH, pad, align);
              v += wy[j] * wx[i] * at(plane, 0, static_cast<int64_t>(py), static_cast<int64_t>(px));
            }
        } else {
          const double ix = sourceIndex(gx, IW, pad, align), iy = sourceIndex(gy, IH, pad, align);
          const double iz = nsp == 3 ? sourceIndex(gz, ID, pad, align) : 0.0;
          if (mode == 1) {  // nearest: round half to even
            v = at(plane, static_cast<int64_t>(std::nearbyint(iz)), static_cast<int64_t>(std::nearbyint(iy)),
                   static_cast<int64_t>(std::nearbyint(ix)));
          } else {
            const double x0 = std::floor(ix), y0 = std::floor(iy), z0 = std::floor(iz);
            const double lx = ix - x0, ly = iy - y0, lz = iz - z0;
            for (int64_t dz = 0; dz < (nsp == 3 ? 2 : 1); ++dz)
              for (int64_t dy = 0; dy < 2; ++dy)
                for (int64_t dx = 0; dx < 2; ++dx) {
                  const double w = (dx ? lx : 1 - lx) * (dy ? ly : 1 - ly) * (nsp == 3 ? (dz ? lz : 1 - lz) : 1.0);
                  if (w != 0)
                    v += w * at(plane, static_cast<int64_t>(z0) + dz, static_cast<int64_t>(y0) + dy, static_cast<int64_t>(x0) + dx);
                }
          }
        }
        dst[(n * C + c) * out_plane + pos] = static_cast<float>(v);
      }
    }
  }
  return out.to(x_in.dtype());
}

}  // namespace

void registerResampleOps(OpRegistry& r) {
  r.add("aten::grid_sampler", 5, 5, [](const KernelArgs& a) {
    a.set(0, gridSample(a.tensor(0), a.tensor(1), a.toInt(2), a.toInt(3), a.toBool(4)));
  });
  for (size_t nsp = 1; nsp <= 3; ++nsp) {
    const std::string d = std::to_string(nsp) + "d";
    r.add(OpDef{"aten::upsample_nearest" + d, 2, 2 + nsp, [nsp](const Node&) { return std::make_unique<ResampleKernel>(Mode::Nearest, nsp); }});
    r.add(OpDef{"aten::_upsample_nearest_exact" + d, 2, 2 + nsp,
                [nsp](const Node&) { return std::make_unique<ResampleKernel>(Mode::NearestExact, nsp); }});
  }
  r.add(OpDef{"aten::upsample_linear1d", 3, 4, [](const Node&) { return std::make_unique<ResampleKernel>(Mode::Linear, 1); }});
  r.add(OpDef{"aten::upsample_bilinear2d", 3, 5, [](const Node&) { return std::make_unique<ResampleKernel>(Mode::Linear, 2); }});
  r.add(OpDef{"aten::upsample_trilinear3d", 3, 6, [](const Node&) { return std::make_unique<ResampleKernel>(Mode::Linear, 3); }});
  r.add(OpDef{"aten::upsample_bicubic2d", 3, 5, [](const Node&) { return std::make_unique<ResampleKernel>(Mode::Cubic, 2); }});
  r.add(OpDef{"aten::_upsample_bilinear2d_aa", 3, 5, [](const Node&) { return std::make_unique<ResampleKernel>(Mode::LinearAA, 2); }});
  r.add(OpDef{"aten::_upsample_bicubic2d_aa", 3, 5, [](const Node&) { return std::make_unique<ResampleKernel>(Mode::CubicAA, 2); }});
}
LLGA_REGISTER_OPS(registerResampleOps);

}  // namespace llga
