// int8::dequantize against (q - zero_point) * scale, for u8 and s8 in every
// layout a convolution leaves them: plain, channels-last (the strides of a
// permuted [N, H, W, C] buffer) and nChw16c. oneDNN 2.6's reorder with a
// source zero point is wrong where it also changes the layout (channels-last
// to plain at odd spatial sizes such as 7x7: resnet's last stage), which
// llga's own loop avoids; these cases failed with it.
#include <gtest/gtest.h>

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
