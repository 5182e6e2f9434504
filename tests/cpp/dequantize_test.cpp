// int8::dequantize against (q - zero_point) * scale, for u8 and s8 in every
// layout a convolution leaves them: plain, channels-last (the strides of a
// permuted [N, H, W, C] buffer) and nChw16c. oneDNN 2.6's reorder with a
// source zero point is wrong where it also changes the layout (channels-last
// to plain at odd spatial sizes such as 7x7: resnet's last stage), which
// llga's own loop avoids; these cases failed with it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backend/dnnl/dnnl_utils.h"
#include "backend/dnnl/quantize.h"
#include "runtime/exec_context.h"

using namespace llga;

namespace {

void check(ScalarType dt, int64_t c, int64_t h, int32_t zp, const char* layout) {
  SCOPED_TRACE(std::string(layout) + " c=" + std::to_string(c) + " h=" + std::to_string(h) + " zp=" + std::to_string(zp));
  const float scale = 0.0625f;
  // the values, channels-last in memory: element (0, ch, y, x) at (y * h + x) * c + ch
  Tensor nhwc = Tensor::empty(dt, {1, h, h, c});
  for (int64_t i = 0; i < nhwc.numel(); ++i) {
    const int v = static_cast<int>((i * 37 + 11) % 256);
    if (dt == ScalarType::Byte) static_cast<uint8_t*>(nhwc.data())[i] = static_cast<uint8_t>(v);
    else static_cast<int8_t*>(nhwc.data())[i] = static_cast<int8_t>(v - 128);
  }
  const Tensor logical = nhwc.permute({0, 3, 1, 2});  // [1, c, h, h] with channels-last strides
  auto value = [&](int64_t ch, int64_t y, int64_t x) {
    const int64_t i = (y * h + x) * c + ch;
    return dt == ScalarType::Byte ? static_cast<float>(static_cast<const uint8_t*>(nhwc.data())[i])
                                  : static_cast<float>(static_cast<const int8_t*>(nhwc.data())[i]);
  };
  ExecContext ctx;
  Tensor in = logical;
  if (std::string(layout) == "plain") in = logical.contiguous();
  if (std::string(layout) == "nChw16c") {
    const dnnl::memory::desc md({1, c, h, h}, dnnlType(dt), dnnl::memory::format_tag::nChw16c);
    in = Tensor::blocked(Storage::allocate(md.get_size()), dt, {1, c, h, h}, makeLayout(md));
    reorder(ctx, wrap(logical), memoryOf(in));
  }
  const Tensor out = int8::dequantize(ctx, in, scale, zp);
  ASSERT_EQ(out.dtype(), ScalarType::Float);
  ASSERT_TRUE(out.isContiguous());
  const float* o = static_cast<const float*>(out.data());
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < h; ++x)
        ASSERT_EQ(o[(ch * h + y) * h + x], (value(ch, y, x) - static_cast<float>(zp)) * scale) << ch << " " << y << " " << x;
}

}  // namespace

TEST(Dequantize, EveryLayoutWithAndWithoutZeroPoint) {
  for (ScalarType dt : {ScalarType::Byte, ScalarType::Char})
    for (const char* layout : {"plain", "channels-last", "nChw16c"})
      for (int64_t c : {16, 64, 512})
        for (int64_t h : {1, 5, 7, 14})
          for (int32_t zp : {0, 3, 120}) {
            if (dt == ScalarType::Char && zp == 120) continue;
            check(dt, c, h, zp, layout);
          }
}

namespace {

// quantizeActivation from a dense NCHW float tensor into a dense NHWC int8
// one (a CNN's input entering its int8 stem: llga's own one-pass loop)
// against the definition: saturate(zero_point + round-half-even(x / scale)),
// NaN to the lowest value, as PyTorch's quantize_per_tensor.
void checkQuantizeToChannelsLast(ScalarType dt, int64_t n, int64_t c, int64_t h, int64_t w, int32_t zp) {
  SCOPED_TRACE("n=" + std::to_string(n) + " c=" + std::to_string(c) + " h=" + std::to_string(h) + " w=" +
               std::to_string(w) + " zp=" + std::to_string(zp));
  const float scale = 0.05f;
  Tensor x = Tensor::empty(ScalarType::Float, {n, c, h, w});
  float* xp = static_cast<float*>(x.data());
  for (int64_t i = 0; i < x.numel(); ++i) {
    // ties (k + 0.5 steps), values past both ends, and a NaN every 97th
    xp[i] = i % 97 == 5 ? std::nanf("") : (static_cast<float>((i * 53) % 701) - 350.0f + (i % 3 == 0 ? 0.5f : 0.25f)) * scale;
  }
  const Tensor out = Tensor::empty(dt, {n, h, w, c});  // channels-last storage
  ExecContext ctx;
  const dnnl::memory::desc to({n, c, h, w}, dnnlType(dt), dnnl::memory::format_tag::nhwc);
  int8::quantizeActivation(ctx, wrap(x), dnnl::memory(to, cpuEngine(), out.data()), scale, zp);
  const float lo = dt == ScalarType::Byte ? 0.0f : -128.0f, hi = dt == ScalarType::Byte ? 255.0f : 127.0f;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < h * w; ++p) {
        const float v = xp[(i * c + ch) * h * w + p];
        const float r = std::nearbyint(v * (1.0f / scale)) + static_cast<float>(zp);  // the default mode: half to even
        const float want = std::isnan(v) ? lo : std::clamp(r, lo, hi);
        const int64_t at = (i * h * w + p) * c + ch;
        const float got = dt == ScalarType::Byte ? static_cast<float>(static_cast<const uint8_t*>(out.data())[at])
                                                 : static_cast<float>(static_cast<const int8_t*>(out.data())[at]);
        ASSERT_EQ(got, want) << "image " << i << " channel " << ch << " position " << p << " x " << v;
      }
}

}  // namespace

TEST(Quantize, DenseNchwIntoChannelsLast) {
  for (ScalarType dt : {ScalarType::Byte, ScalarType::Char})
    for (int32_t zp : {0, 7, 128}) {
      if (dt == ScalarType::Char && zp == 128) continue;
      checkQuantizeToChannelsLast(dt, 1, 3, 224, 224, zp);  // above the parallel grain, positions a multiple of 64
      checkQuantizeToChannelsLast(dt, 2, 3, 9, 13, zp);     // a block shorter than 64, two images
      checkQuantizeToChannelsLast(dt, 1, 17, 31, 7, zp);
      checkQuantizeToChannelsLast(dt, 3, 64, 5, 5, zp);
    }
}
