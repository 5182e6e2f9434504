// image::toChannelsLast (a CNN's input into its stem's channels-last)
// against an element-by-element reference: fp32 exactly, bf16 bit for bit
// as oneDNN's reorder rounds (to nearest even), and u8/s8 as
// saturate(zero_point + round-half-even(x / scale)) with NaN to the lowest
// value. 1 to 4 channels, images whose pixel count is and is not a multiple
// of 16 and spans several tasks, a batch of two, and halves, saturation and
// NaN among the values. Also: reorder() and quantizeActivation() take it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/dnnl/dnnl_utils.h"
#include "backend/dnnl/image_layout.h"
#include "backend/dnnl/quantize.h"
#include "runtime/exec_context.h"

using namespace llga;
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

namespace {

float value(int64_t i) {  // a spread of values with exact halves at scale 0.5, large ones and a NaN
  if (i % 997 == 13) return std::numeric_limits<float>::quiet_NaN();
  if (i % 101 == 7) return 1e6f * ((i % 2) ? 1.0f : -1.0f);
  return static_cast<float>((i * 7919) % 2001 - 1000) * 0.25f + 1.0f / 3.0f * static_cast<float>(i % 3);
}

uint16_t bf16Of(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  return static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

template <typename T>
T quantized(float x, float scale, int32_t zp) {
  const float lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
  const float r = static_cast<float>(zp) + int8::roundHalfEven(x * (1.0f / scale));
  return static_cast<T>(!(r == r) ? lo : r < lo ? lo : r > hi ? hi : r);
}

void check(dt to, int64_t n, int64_t c, int64_t h, int64_t w, float scale, int32_t zp, bool via_reorder) {
  SCOPED_TRACE("type " + std::to_string(static_cast<int>(to)) + " " + std::to_string(n) + "x" + std::to_string(c) + "x" +
               std::to_string(h) + "x" + std::to_string(w) + " zp " + std::to_string(zp));
  const dnnl::memory::dims dims{n, c, h, w};
  const dnnl::memory::desc src_md(dims, dt::f32, tag::nchw), dst_md(dims, to, tag::nhwc);
  ASSERT_TRUE(image::takes(src_md, dst_md));
  std::vector<float> src(static_cast<size_t>(n * c * h * w));
  for (size_t i = 0; i < src.size(); ++i) src[i] = value(static_cast<int64_t>(i));
  const size_t bytes = dst_md.get_size();
  std::vector<uint8_t> dst(bytes + 64, 0x5a);  // the bytes past the output stay 0x5a
  dnnl::memory s(src_md, cpuEngine(), src.data()), d(dst_md, cpuEngine(), dst.data());
  ExecContext ctx;
  if (via_reorder) reorder(ctx, s, d);
  else if (to == dt::u8 || to == dt::s8) int8::quantizeActivation(ctx, s, d, scale, zp);
  else image::toChannelsLast(s, d);
  int64_t bad = 0;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < h * w; ++p) {
        const float x = src[static_cast<size_t>((b * c + ch) * h * w + p)];
        const size_t at = static_cast<size_t>((b * h * w + p) * c + ch);
        bool ok = false;
        if (to == dt::f32) {
          float got;
          std::memcpy(&got, dst.data() + at * 4, 4);
          ok = std::memcmp(&got, &x, 4) == 0;
        } else if (to == dt::bf16) {
          uint16_t got;
          std::memcpy(&got, dst.data() + at * 2, 2);
          ok = got == bf16Of(x) || (std::isnan(x) && (got & 0x7f80) == 0x7f80 && (got & 0x7f) != 0);
        } else if (to == dt::u8) {
          ok = dst[at] == quantized<uint8_t>(x, scale, zp);
        } else {
          ok = static_cast<int8_t>(dst[at]) == quantized<int8_t>(x, scale, zp);
        }
        bad += ok ? 0 : 1;
      }
  EXPECT_EQ(bad, 0);
  for (size_t i = bytes; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0x5a) << "wrote past the output at byte " << i;
}

}  // namespace

TEST(ImageLayout, EveryTypeAndChannelCount) {
  if (!image::takes(dnnl::memory::desc({1, 3, 4, 4}, dt::f32, tag::nchw), dnnl::memory::desc({1, 3, 4, 4}, dt::f32, tag::nhwc)))
    GTEST_SKIP() << "no AVX-512 F, BW and VL here";
  const bool bf16 = image::takes(dnnl::memory::desc({1, 3, 4, 4}, dt::f32, tag::nchw),
                                 dnnl::memory::desc({1, 3, 4, 4}, dt::bf16, tag::nhwc));
  for (int64_t c : {1, 2, 3, 4})
    for (auto [n, h, w] : {std::tuple<int64_t, int64_t, int64_t>{1, 4, 4}, {2, 5, 7}, {1, 64, 48}, {2, 33, 35}}) {
      check(dt::f32, n, c, h, w, 1, 0, false);
      check(dt::f32, n, c, h, w, 1, 0, true);
      if (bf16) {
        check(dt::bf16, n, c, h, w, 1, 0, false);
        check(dt::bf16, n, c, h, w, 1, 0, true);
      }
      check(dt::u8, n, c, h, w, 0.5f, 0, false);
      check(dt::u8, n, c, h, w, 2.0f, 128, false);
      check(dt::s8, n, c, h, w, 0.5f, 0, false);
      check(dt::s8, n, c, h, w, 4.0f, -3, false);
    }
}

TEST(ImageLayout, TakesOnlyDenseImagesOfFewChannels) {
  if (!image::takes(dnnl::memory::desc({1, 3, 4, 4}, dt::f32, tag::nchw), dnnl::memory::desc({1, 3, 4, 4}, dt::f32, tag::nhwc)))
    GTEST_SKIP() << "no AVX-512 F, BW and VL here";
  EXPECT_TRUE(image::takes(dnnl::memory::desc({1, 4, 8, 8}, dt::f32, tag::nchw),
                           dnnl::memory::desc({1, 4, 8, 8}, dt::u8, tag::nhwc)));
  EXPECT_FALSE(image::takes(dnnl::memory::desc({1, 5, 8, 8}, dt::f32, tag::nchw),
                            dnnl::memory::desc({1, 5, 8, 8}, dt::f32, tag::nhwc)));
  EXPECT_FALSE(image::takes(dnnl::memory::desc({1, 3, 8, 8}, dt::f32, tag::nhwc),
                            dnnl::memory::desc({1, 3, 8, 8}, dt::f32, tag::nchw)));
  EXPECT_FALSE(image::takes(dnnl::memory::desc({1, 3, 8, 8}, dt::f32, tag::nchw),
                            dnnl::memory::desc({1, 3, 8, 8}, dt::f32, tag::nChw16c)));
  EXPECT_FALSE(image::takes(dnnl::memory::desc({1, 3, 8, 8}, dt::bf16, tag::nchw),
                            dnnl::memory::desc({1, 3, 8, 8}, dt::bf16, tag::nhwc)));
  // strided (a view's) source: not dense NCHW
  EXPECT_FALSE(image::takes(dnnl::memory::desc({1, 3, 8, 8}, dt::f32, dnnl::memory::dims{3 * 8 * 16, 8 * 16, 16, 1}),
                            dnnl::memory::desc({1, 3, 8, 8}, dt::f32, tag::nhwc)));
}
