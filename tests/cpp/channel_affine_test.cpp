// llga's channel affine (backend/dnnl/channel_affine.h) against a scalar
// reference, for every row form concat_batchnorm builds: planes of one channel
// (NCHW), channel blocks of 8 and 16 (nChw8c here; nChw16c where convolutions
// write it, on AVX-512 CPUs), and pixels' channels (channels-last, where
// brgconv writes nhwc), with row tails, several strips, strided destinations,
// relu's NaN rule and enough work to split across threads.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "backend/dnnl/channel_affine.h"

using namespace llga;

namespace {

struct Case {
  int64_t rows, len, period, c_step, src_step, dst_step;
};

void runCase(const Case& k, bool relu, int strips) {
  const int64_t channels = 1 + (k.rows - 1) * k.c_step + k.period;  // the last row's last channel, strip 1's offset of 1

  std::vector<float> scale(channels), shift(channels);
  for (int64_t c = 0; c < channels; ++c) {
    scale[c] = 0.5f + 0.01f * static_cast<float>(c % 64);
    shift[c] = -0.3f + 0.02f * static_cast<float>(c % 61);
  }
  const int64_t src_size = k.rows * k.src_step + k.len, dst_size = k.rows * k.dst_step + k.len;
  std::vector<std::vector<float>> src(strips), dst(strips);
  affine::Job job{{}, scale.data(), shift.data(), relu};
  for (int s = 0; s < strips; ++s) {
    src[s].resize(src_size);
    dst[s].assign(dst_size, 7.25f);  // what the strips must not touch stays
    for (int64_t i = 0; i < src_size; ++i) src[s][i] = std::sin(0.37f * static_cast<float>(i + 11 * s)) * 3.0f;
    src[s][5] = std::numeric_limits<float>::quiet_NaN();
    src[s][6] = -std::numeric_limits<float>::infinity();
    job.strips.push_back({src[s].data(), dst[s].data(), k.rows, k.len, k.src_step, k.dst_step, s % 2, k.c_step, k.period});
  }
  affine::run(job);
  for (int s = 0; s < strips; ++s) {
    std::vector<bool> written(dst_size, false);
    for (int64_t r = 0; r < k.rows; ++r)
      for (int64_t j = 0; j < k.len; ++j) {
        const int64_t c = s % 2 + r * k.c_step + j % k.period;
        const float x = src[s][r * k.src_step + j];
        float want = std::fma(x, scale[c], shift[c]);
        if (relu && want < 0) want = 0;
        const float got = dst[s][r * k.dst_step + j];
        written[r * k.dst_step + j] = true;
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(got)) << "strip " << s << " row " << r << " j " << j;
        } else {
          EXPECT_FLOAT_EQ(got, want) << "strip " << s << " row " << r << " j " << j << " period " << k.period;
        }
      }
    for (int64_t i = 0; i < dst_size; ++i) {
      if (!written[i]) {
        EXPECT_EQ(dst[s][i], 7.25f) << "wrote outside its rows at " << i;
      }
    }
  }
}

}  // namespace

TEST(ChannelAffine, EveryRowFormMatchesTheReference) {
  if (!affine::available()) GTEST_SKIP() << "llga's AVX2 kernels do not run on this CPU";
  const Case cases[] = {
      {5, 13, 1, 1, 13, 13},   // NCHW planes with a tail of 5
      {3, 8 * 7, 8, 8, 56, 56},  // nChw8c blocks
      {2, 16 * 9, 16, 16, 144, 144},  // nChw16c blocks
      {9, 20, 20, 0, 20, 52},  // channels-last pixels: 20 of a 52-channel result's each
      {4, 7, 7, 0, 7, 30},     // channels-last, shorter than a vector
      {37, 16, 16, 0, 16, 80},  // a 16-channel block into a channels-last result, a pixel a row
      {6, 41, 41, 0, 41, 90},   // channels-last, 8-lane vectors and a tail of 1
      {3, 16 * 5, 16, 16, 80, 96},  // nChw16c blocks into a wider strided destination
      {33, 8, 8, 0, 8, 40},    // an 8-channel block into a channels-last result (nChw8c, AVX2 CPUs)
      {5, 13, 1, 0, 13, 20},   // rows of one channel, the same for every row
  };
  for (const Case& k : cases)
    for (bool relu : {false, true}) runCase(k, relu, 3);
}

TEST(ChannelAffine, LargeJobsSplitAcrossThreads) {
  if (!affine::available()) GTEST_SKIP() << "llga's AVX2 kernels do not run on this CPU";
  runCase({40, 8 * 1024, 8, 8, 8 * 1024, 8 * 1024}, true, 4);  // 1.3M floats
  runCase({3000, 48, 48, 0, 48, 64}, false, 2);
  runCase({4000, 16, 16, 0, 16, 528}, true, 3);  // densenet's nChw16c parts into a channels-last concat
}

TEST(ChannelAffine, RejectsAPeriodThatDoesNotTileItsRows) {
  if (!affine::available()) GTEST_SKIP() << "llga's AVX2 kernels do not run on this CPU";
  std::vector<float> buf(64), p(64, 1.0f);
  affine::Job job{{{buf.data(), buf.data(), 1, 12, 12, 12, 0, 0, 8}}, p.data(), p.data(), false};
  EXPECT_THROW(affine::run(job), std::logic_error);
}
