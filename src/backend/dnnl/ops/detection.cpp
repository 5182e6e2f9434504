// torchvision's detection ops, with torchvision's CPU semantics:
//   torchvision::nms(boxes[N,4], scores[N], iou_threshold) -> kept indices, by decreasing score
//   torchvision::roi_align(x[N,C,H,W], rois[K,5], scale, ph, pw, sampling_ratio, aligned) -> [K,C,ph,pw]
//   torchvision::roi_pool(x, rois, scale, ph, pw) -> (out[K,C,ph,pw], argmax Int)
//   torchvision::ps_roi_align(x, rois, scale, ph, pw, sampling_ratio) -> (out[K,C/(ph*pw),ph,pw], channel Int)
//   torchvision::ps_roi_pool(x, rois, scale, ph, pw) -> (out, channel Int)
//   torchvision::deform_conv2d(x, weight, offset, mask, bias, stride_h, stride_w, pad_h, pad_w,
//                              dilation_h, dilation_w, weight_groups, offset_groups, use_mask)
// Boxes are (x1, y1, x2, y2); a roi row is (batch index, x1, y1, x2, y2).
// nms suppresses in one pass over boxes sorted by score, its inner loop
// over structure-of-arrays coordinates (vectorised); the roi ops run their
// rois in parallel, each sampling position's bilinear weights computed once
// per roi and applied to every channel. deform_conv2d samples its columns
// (im2col at the offset positions, in parallel) and contracts them with the
// weights on oneDNN's matmul.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "backend/dnnl/ops/functional.h"
#include "backend/dnnl/ops/op_utils.h"

namespace llga {
namespace {

Tensor floatInput(const KernelArgs& a, size_t i, const char* op, const char* what) {
  const Tensor& t = a.tensor(i);
  if (t.dtype() != ScalarType::Float)
    throw std::invalid_argument(std::string(op) + ": " + what + " must be float32, got " + t.describe());
  return t.contiguous();
}

// rois [K, 5] (batch index, x1, y1, x2, y2) against a batch of n images.
Tensor roisInput(const KernelArgs& a, const char* op, int64_t batch) {
  Tensor rois = floatInput(a, 1, op, "rois");
  if (rois.dim() != 2 || rois.size(1) != 5)
    throw std::invalid_argument(std::string(op) + ": rois must be [K, 5], got " + rois.describe());
  const float* r = rois.data<float>();
  for (int64_t k = 0; k < rois.size(0); ++k) {
    float b = r[k * 5];
    if (!(b >= 0 && b < static_cast<float>(batch)))
      throw std::invalid_argument(std::string(op) + ": roi " + std::to_string(k) + " has batch index " +
                                  std::to_string(b) + ", the input holds " + std::to_string(batch) + " images");
  }
  return rois;
}

Tensor imageInput(const KernelArgs& a, const char* op) {
  Tensor x = floatInput(a, 0, op, "input");
  if (x.dim() != 4) throw std::invalid_argument(std::string(op) + ": input must be [N, C, H, W], got " + x.describe());
  return x;
}

int64_t positive(const KernelArgs& a, size_t i, const char* op, const char* what) {
  int64_t v = a.toInt(i);
  if (v <= 0) throw std::invalid_argument(std::string(op) + ": " + what + " must be positive, got " + std::to_string(v));
  return v;
}

// ---- nms

Tensor nms(const Tensor& boxes_in, const Tensor& scores_in, float threshold) {
  if (boxes_in.dtype() != ScalarType::Float || scores_in.dtype() != ScalarType::Float)
    throw std::invalid_argument("nms: boxes and scores must be float32, got " + boxes_in.describe() + " and " +
                                scores_in.describe());
  if (boxes_in.dim() != 2 || boxes_in.size(1) != 4)
    throw std::invalid_argument("nms: boxes must be [N, 4], got " + boxes_in.describe());
  if (scores_in.dim() != 1 || scores_in.size(0) != boxes_in.size(0))
    throw std::invalid_argument("nms: scores must be [N] for " + std::to_string(boxes_in.size(0)) + " boxes, got " +
                                scores_in.describe());
  const Tensor boxes = boxes_in.contiguous(), scores = scores_in.contiguous();
  const int64_t n = boxes.size(0);
  const float* b = boxes.data<float>();
  const float* s = scores.data<float>();
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t i, int64_t j) { return s[i] > s[j]; });
  // Coordinates and areas in score order, one array each.
  std::vector<float> x1(n), y1(n), x2(n), y2(n), area(n);
  for (int64_t i = 0; i < n; ++i) {
    const float* r = b + order[static_cast<size_t>(i)] * 4;
    x1[i] = r[0], y1[i] = r[1], x2[i] = r[2], y2[i] = r[3];
    area[i] = (r[2] - r[0]) * (r[3] - r[1]);
  }
  std::vector<uint8_t> removed(static_cast<size_t>(n), 0);
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < n; ++i) {
    if (removed[i]) continue;
    keep.push_back(order[static_cast<size_t>(i)]);
    const float ix1 = x1[i], iy1 = y1[i], ix2 = x2[i], iy2 = y2[i], iarea = area[i];
    uint8_t* rm = removed.data();
#pragma omp simd
    for (int64_t j = i + 1; j < n; ++j) {
      const float w = std::max(0.f, std::min(ix2, x2[j]) - std::max(ix1, x1[j]));
      const float h = std::max(0.f, std::min(iy2, y2[j]) - std::max(iy1, y1[j]));
      const float inter = w * h;
      const float iou = inter / (iarea + area[j] - inter);
      rm[j] |= static_cast<uint8_t>(iou > threshold);
    }
  }
  Tensor out = Tensor::empty(ScalarType::Long, {static_cast<int64_t>(keep.size())});
  std::copy(keep.begin(), keep.end(), out.data<int64_t>());
  return out;
}

// ---- bilinear sampling shared by roi_align and ps_roi_align

struct Tap {  // one sampling point: four pixel offsets and their weights
  int64_t o1, o2, o3, o4;
  float w1, w2, w3, w4;
};

Tap bilinearTap(int64_t height, int64_t width, float y, float x) {
  if (y < -1.f || y > static_cast<float>(height) || x < -1.f || x > static_cast<float>(width)) return Tap{0, 0, 0, 0, 0, 0, 0, 0};
  y = std::max(y, 0.f);
  x = std::max(x, 0.f);
  int64_t y_lo = static_cast<int64_t>(y), x_lo = static_cast<int64_t>(x), y_hi, x_hi;
  if (y_lo >= height - 1) y_hi = y_lo = height - 1, y = static_cast<float>(y_lo);
  else y_hi = y_lo + 1;
  if (x_lo >= width - 1) x_hi = x_lo = width - 1, x = static_cast<float>(x_lo);
  else x_hi = x_lo + 1;
  const float ly = y - static_cast<float>(y_lo), lx = x - static_cast<float>(x_lo), hy = 1.f - ly, hx = 1.f - lx;
  return Tap{y_lo * width + x_lo, y_lo * width + x_hi, y_hi * width + x_lo, y_hi * width + x_hi,
             hy * hx, hy * lx, ly * hx, ly * lx};
}

struct RoiGeometry {
  float start_h, start_w, bin_h, bin_w;
  int64_t grid_h, grid_w;
};

RoiGeometry alignGeometry(const float* r, float scale, int64_t ph, int64_t pw, int64_t sampling, bool aligned) {
  const float offset = aligned ? 0.5f : 0.f;
  const float sw = r[1] * scale - offset, sh = r[2] * scale - offset;
  float rw = r[3] * scale - offset - sw, rh = r[4] * scale - offset - sh;
  if (!aligned) rw = std::max(rw, 1.f), rh = std::max(rh, 1.f);  // too small rois count as 1x1
  const float bh = rh / static_cast<float>(ph), bw = rw / static_cast<float>(pw);
  const int64_t gh = sampling > 0 ? sampling : static_cast<int64_t>(std::ceil(rh / static_cast<float>(ph)));
  const int64_t gw = sampling > 0 ? sampling : static_cast<int64_t>(std::ceil(rw / static_cast<float>(pw)));
  return RoiGeometry{sh, sw, bh, bw, gh, gw};
}

// The taps of bin (y, x): grid_h * grid_w points, evenly spaced inside it.
void binTaps(const RoiGeometry& g, int64_t y, int64_t x, int64_t height, int64_t width, std::vector<Tap>& out) {
  for (int64_t iy = 0; iy < g.grid_h; ++iy) {
    const float yy = g.start_h + static_cast<float>(y) * g.bin_h +
                     (static_cast<float>(iy) + .5f) * g.bin_h / static_cast<float>(g.grid_h);
    for (int64_t ix = 0; ix < g.grid_w; ++ix) {
      const float xx = g.start_w + static_cast<float>(x) * g.bin_w +
                       (static_cast<float>(ix) + .5f) * g.bin_w / static_cast<float>(g.grid_w);
      out.push_back(bilinearTap(height, width, yy, xx));
    }
  }
}

float sampleBin(const float* plane, const Tap* taps, size_t count) {
  float sum = 0.f;
  for (size_t t = 0; t < count; ++t) {
    const Tap& p = taps[t];
    sum += p.w1 * plane[p.o1] + p.w2 * plane[p.o2] + p.w3 * plane[p.o3] + p.w4 * plane[p.o4];
  }
  return sum;
}

Tensor roiAlign(const KernelArgs& a) {
  const char* op = "roi_align";
  const Tensor x = imageInput(a, op);
  const Tensor rois = roisInput(a, op, x.size(0));
  const float scale = static_cast<float>(a.toDouble(2));
  const int64_t ph = positive(a, 3, op, "pooled_height"), pw = positive(a, 4, op, "pooled_width");
  const int64_t sampling = a.toInt(5);
  const bool aligned = a.toBool(6);
  const int64_t K = rois.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  Tensor out = Tensor::empty(ScalarType::Float, {K, C, ph, pw});
  const float* in = x.data<float>();
  const float* r = rois.data<float>();
  float* o = out.data<float>();
#pragma omp parallel for schedule(dynamic)
  for (int64_t k = 0; k < K; ++k) {
    const float* roi = r + k * 5;
    const RoiGeometry g = alignGeometry(roi, scale, ph, pw, sampling, aligned);
    const size_t per_bin = static_cast<size_t>(std::max<int64_t>(g.grid_h * g.grid_w, 0));
    const float inv_count = 1.f / static_cast<float>(std::max<int64_t>(g.grid_h * g.grid_w, 1));
    std::vector<Tap> taps;
    taps.reserve(per_bin * static_cast<size_t>(ph * pw));
    for (int64_t y = 0; y < ph; ++y)
      for (int64_t xx = 0; xx < pw; ++xx) binTaps(g, y, xx, H, W, taps);
    const float* image = in + static_cast<int64_t>(roi[0]) * C * H * W;
    for (int64_t c = 0; c < C; ++c) {
      const float* plane = image + c * H * W;
      float* dst = o + (k * C + c) * ph * pw;
      for (int64_t bin = 0; bin < ph * pw; ++bin)
        dst[bin] = sampleBin(plane, taps.data() + static_cast<size_t>(bin) * per_bin, per_bin) * inv_count;
    }
  }
  return out;
}

// ps_roi_align: bin (y, x) of output channel c reads input channel (c * ph + y) * pw + x.
void psRoiAlign(const KernelArgs& a) {
  const char* op = "ps_roi_align";
  const Tensor x = imageInput(a, op);
  const Tensor rois = roisInput(a, op, x.size(0));
  const float scale = static_cast<float>(a.toDouble(2));
  const int64_t ph = positive(a, 3, op, "pooled_height"), pw = positive(a, 4, op, "pooled_width");
  const int64_t sampling = a.toInt(5);
  const int64_t K = rois.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  if (C % (ph * pw))
    throw std::invalid_argument("ps_roi_align: input channels (" + std::to_string(C) +
                                ") must be a multiple of pooled_height * pooled_width");
  const int64_t C_out = C / (ph * pw);
  Tensor out = Tensor::empty(ScalarType::Float, {K, C_out, ph, pw});
  Tensor mapping = Tensor::empty(ScalarType::Int, {K, C_out, ph, pw});
  const float* in = x.data<float>();
  const float* r = rois.data<float>();
  float* o = out.data<float>();
  int32_t* m = mapping.data<int32_t>();
#pragma omp parallel for schedule(dynamic)
  for (int64_t k = 0; k < K; ++k) {
    const float* roi = r + k * 5;
    // as roi_align with aligned=True, except that rois keep their size
    RoiGeometry g = alignGeometry(roi, scale, ph, pw, sampling, true);
    const size_t per_bin = static_cast<size_t>(std::max<int64_t>(g.grid_h * g.grid_w, 0));
    const float inv_count = 1.f / static_cast<float>(std::max<int64_t>(g.grid_h * g.grid_w, 1));
    std::vector<Tap> taps;
    taps.reserve(per_bin * static_cast<size_t>(ph * pw));
    for (int64_t y = 0; y < ph; ++y)
      for (int64_t xx = 0; xx < pw; ++xx) binTaps(g, y, xx, H, W, taps);
    const float* image = in + static_cast<int64_t>(roi[0]) * C * H * W;
    for (int64_t c = 0; c < C_out; ++c)
      for (int64_t bin = 0; bin < ph * pw; ++bin) {
        const int64_t c_in = c * ph * pw + bin, at = (k * C_out + c) * ph * pw + bin;
        o[at] = sampleBin(image + c_in * H * W, taps.data() + static_cast<size_t>(bin) * per_bin, per_bin) * inv_count;
        m[at] = static_cast<int32_t>(c_in);
      }
  }
  a.set(0, out);
  a.set(1, mapping);
}

// roi_pool and ps_roi_pool: rois rounded to whole pixels, each bin the max
// (roi_pool) or mean (ps_roi_pool) of the pixels it covers.
void roiPool(const KernelArgs& a, bool position_sensitive) {
  const char* op = position_sensitive ? "ps_roi_pool" : "roi_pool";
  const Tensor x = imageInput(a, op);
  const Tensor rois = roisInput(a, op, x.size(0));
  const float scale = static_cast<float>(a.toDouble(2));
  const int64_t ph = positive(a, 3, op, "pooled_height"), pw = positive(a, 4, op, "pooled_width");
  const int64_t K = rois.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  if (position_sensitive && C % (ph * pw))
    throw std::invalid_argument(std::string(op) + ": input channels (" + std::to_string(C) +
                                ") must be a multiple of pooled_height * pooled_width");
  const int64_t C_out = position_sensitive ? C / (ph * pw) : C;
  Tensor out = Tensor::empty(ScalarType::Float, {K, C_out, ph, pw});
  Tensor index = Tensor::empty(ScalarType::Int, {K, C_out, ph, pw});  // channel (ps) or argmax pixel, int32 as torchvision's
  const float* in = x.data<float>();
  const float* r = rois.data<float>();
  float* o = out.data<float>();
#pragma omp parallel for schedule(dynamic)
  for (int64_t k = 0; k < K; ++k) {
    const float* roi = r + k * 5;
    const int64_t sw = std::lround(roi[1] * scale), sh = std::lround(roi[2] * scale);
    const int64_t ew = std::lround(roi[3] * scale), eh = std::lround(roi[4] * scale);
    // roi_pool counts both end pixels, ps_roi_pool one; both at least 1x1
    const int64_t rw = std::max<int64_t>(ew - sw + (position_sensitive ? 0 : 1), 1);
    const int64_t rh = std::max<int64_t>(eh - sh + (position_sensitive ? 0 : 1), 1);
    const float bh = static_cast<float>(rh) / static_cast<float>(ph), bw = static_cast<float>(rw) / static_cast<float>(pw);
    // ps_roi_pool clips to the last pixel, roi_pool to the edge
    const int64_t hmax = position_sensitive ? H - 1 : H, wmax = position_sensitive ? W - 1 : W;
    const float* image = in + static_cast<int64_t>(roi[0]) * C * H * W;
    for (int64_t y = 0; y < ph; ++y)
      for (int64_t xx = 0; xx < pw; ++xx) {
        const int64_t h0 = std::clamp<int64_t>(static_cast<int64_t>(std::floor(static_cast<float>(y) * bh)) + sh, 0, hmax);
        const int64_t h1 = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(static_cast<float>(y + 1) * bh)) + sh, 0, hmax);
        const int64_t w0 = std::clamp<int64_t>(static_cast<int64_t>(std::floor(static_cast<float>(xx) * bw)) + sw, 0, wmax);
        const int64_t w1 = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(static_cast<float>(xx + 1) * bw)) + sw, 0, wmax);
        const bool empty = h1 <= h0 || w1 <= w0;
        for (int64_t c = 0; c < C_out; ++c) {
          const int64_t at = ((k * C_out + c) * ph + y) * pw + xx;
          if (position_sensitive) {
            const int64_t c_in = (c * ph + y) * pw + xx;
            const float* plane = image + c_in * H * W;
            float sum = 0.f;
            for (int64_t h = h0; h < h1; ++h)
              for (int64_t w = w0; w < w1; ++w) sum += plane[h * W + w];
            o[at] = empty ? 0.f : sum / static_cast<float>((h1 - h0) * (w1 - w0));
            index.data<int32_t>()[at] = static_cast<int32_t>(c_in);
          } else {
            const float* plane = image + c * H * W;
            float best = empty ? 0.f : -std::numeric_limits<float>::max();
            int32_t arg = -1;
            for (int64_t h = h0; h < h1; ++h)
              for (int64_t w = w0; w < w1; ++w)
                if (plane[h * W + w] > best) best = plane[h * W + w], arg = static_cast<int32_t>(h * W + w);
            o[at] = best;
            index.data<int32_t>()[at] = arg;
          }
        }
      }
  }
  a.set(0, out);
  a.set(1, index);
}

std::string shapeText(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// deform_conv2d's sampling: zero outside the image, each of the four
// neighbours read only where it lies inside (torchvision's convention,
// unlike roi_align's clamping).
float deformSample(const float* plane, int64_t H, int64_t W, float y, float x) {
  if (y <= -1.f || static_cast<float>(H) <= y || x <= -1.f || static_cast<float>(W) <= x) return 0.f;
  const int64_t y0 = static_cast<int64_t>(std::floor(y)), x0 = static_cast<int64_t>(std::floor(x));
  const int64_t y1 = y0 + 1, x1 = x0 + 1;
  const float ly = y - static_cast<float>(y0), lx = x - static_cast<float>(x0), hy = 1.f - ly, hx = 1.f - lx;
  const float v1 = (y0 >= 0 && x0 >= 0) ? plane[y0 * W + x0] : 0.f;
  const float v2 = (y0 >= 0 && x1 <= W - 1) ? plane[y0 * W + x1] : 0.f;
  const float v3 = (y1 <= H - 1 && x0 >= 0) ? plane[y1 * W + x0] : 0.f;
  const float v4 = (y1 <= H - 1 && x1 <= W - 1) ? plane[y1 * W + x1] : 0.f;
  return hy * hx * v1 + hy * lx * v2 + ly * hx * v3 + ly * lx * v4;
}

void deformConv2d(const KernelArgs& a, MatmulCacheHolder& cache) {
  const char* op = "deform_conv2d";
  const Tensor x = imageInput(a, op);
  const Tensor w = floatInput(a, 1, op, "weight");
  const Tensor offset = floatInput(a, 2, op, "offset");
  const bool use_mask = a.toBool(13);
  const std::optional<Tensor> mask = use_mask ? std::optional<Tensor>(floatInput(a, 3, op, "mask")) : std::nullopt;
  const std::optional<Tensor> bias = a.optTensor(4);
  const int64_t sh = positive(a, 5, op, "stride"), sw = positive(a, 6, op, "stride");
  const int64_t pad_h = a.toInt(7), pad_w = a.toInt(8);
  const int64_t dh = positive(a, 9, op, "dilation"), dw = positive(a, 10, op, "dilation");
  const int64_t wg = positive(a, 11, op, "weight groups"), og = positive(a, 12, op, "offset groups");
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  if (w.dim() != 4) throw std::invalid_argument("deform_conv2d: weight must be [O, C/groups, kh, kw], got " + w.describe());
  const int64_t O = w.size(0), kh = w.size(2), kw = w.size(3), K = kh * kw;
  if (C % wg || O % wg || w.size(1) * wg != C || C % og)
    throw std::invalid_argument("deform_conv2d: " + std::to_string(C) + " input channels, weight " + w.describe() +
                                ", " + std::to_string(wg) + " weight groups and " + std::to_string(og) +
                                " offset groups do not fit");
  const int64_t out_h = (H + 2 * pad_h - (dh * (kh - 1) + 1)) / sh + 1;
  const int64_t out_w = (W + 2 * pad_w - (dw * (kw - 1) + 1)) / sw + 1;
  if (out_h <= 0 || out_w <= 0) throw std::invalid_argument("deform_conv2d: the output would be empty for " + x.describe());
  const int64_t L = out_h * out_w;
  const Shape want_offset{N, 2 * og * K, out_h, out_w}, want_mask{N, og * K, out_h, out_w};
  if (offset.sizes() != want_offset)
    throw std::invalid_argument("deform_conv2d: offset must be " + shapeText(want_offset) + ", got " + offset.describe());
  if (mask && mask->sizes() != want_mask)
    throw std::invalid_argument("deform_conv2d: mask must be " + shapeText(want_mask) + ", got " + mask->describe());
  if (bias && (bias->dtype() != ScalarType::Float || bias->sizes() != Shape{O}))
    throw std::invalid_argument("deform_conv2d: bias must be float32 [" + std::to_string(O) + "], got " + bias->describe());
  // columns[n, c * K + k, l]: input channel c sampled at kernel tap k's offset position for output l
  Tensor cols = Tensor::empty(ScalarType::Float, {N, wg, C / wg * K, L});
  const float* in = x.data<float>();
  const float* off = offset.data<float>();
  const float* msk = mask ? mask->data<float>() : nullptr;
  float* col = cols.data<float>();
  const int64_t c_per_og = C / og;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      const int64_t g = c / c_per_og;
      const float* plane = in + (n * C + c) * H * W;
      for (int64_t k = 0; k < K; ++k) {
        const int64_t i = k / kw, j = k % kw;
        const float* oy = off + ((n * og + g) * 2 * K + 2 * k) * L;
        const float* ox = oy + L;
        const float* m = msk ? msk + ((n * og + g) * K + k) * L : nullptr;
        float* dst = col + (n * C * K + c * K + k) * L;
        for (int64_t l = 0; l < L; ++l) {
          const int64_t oh = l / out_w, ow = l % out_w;
          const float y = static_cast<float>(oh * sh - pad_h + i * dh) + oy[l];
          const float xx = static_cast<float>(ow * sw - pad_w + j * dw) + ox[l];
          const float v = deformSample(plane, H, W, y, xx);
          dst[l] = m ? v * m[l] : v;
        }
      }
    }
  // [wg, O/wg, C/wg*K] x [N, wg, C/wg*K, L] -> [N, wg, O/wg, L] = [N, O, out_h, out_w]
  Tensor out = matmulOp(a.ctx, w.reshape({wg, O / wg, C / wg * K}), cols, *cache.cache).reshape({N, O, out_h, out_w});
  if (bias) {
    out = out.contiguous();
    float* o = out.data<float>();
    const float* b = bias->contiguous().data<float>();
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < O; ++c) {
        float* p = o + (n * O + c) * L;
        for (int64_t l = 0; l < L; ++l) p[l] += b[c];
      }
  }
  a.set(0, out);
}

}  // namespace

void registerDetectionOps(OpRegistry& r) {
  addCached<MatmulCacheHolder>(r, "torchvision::deform_conv2d", 14, 14, deformConv2d);
  r.add("torchvision::nms", 3, 3, [](const KernelArgs& a) {
    a.set(0, nms(a.tensor(0), a.tensor(1), static_cast<float>(a.toDouble(2))));
  });
  r.add("torchvision::roi_align", 7, 7, [](const KernelArgs& a) { a.set(0, roiAlign(a)); });
  r.add("torchvision::ps_roi_align", 6, 6, psRoiAlign);
  r.add("torchvision::roi_pool", 5, 5, [](const KernelArgs& a) { roiPool(a, false); });
  r.add("torchvision::ps_roi_pool", 5, 5, [](const KernelArgs& a) { roiPool(a, true); });
}
LLGA_REGISTER_OPS(registerDetectionOps);

}  // namespace llga
