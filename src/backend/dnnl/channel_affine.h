// llga's own per-channel affine map, y = x * scale[c] + shift[c] (then
// relu), from one buffer into another: an eval-mode batch_norm on strips of
// its input, each written where the caller says (AVX2); the result in fp32,
// in bf16 for a bf16 reader, or quantized to u8/s8 for an int8 reader.
//
// Why: densenet's every dense layer is concat -> batch_norm -> relu over all
// the block's feature maps so far. Run as two ops, the concat copies every
// map into a new buffer and the batch_norm reads that copy; and before the
// concat kept the blocked layout, oneDNN's non-jit ncsp batch_norm took a
// third of the model's time. A batch_norm is per channel, so each part of
// the concat can be normalised straight into its slice of the result: one
// read and one write per element instead of two of each. Under
// llga.quantize, where the result's only readers are int8 convolutions
// (densenet's 1x1 after every concat), it is written quantized as they read
// it: a quarter of the bytes written, and no quantizing pass in the reader
// (assign-precision's int8 edges); under precision="bf16", where they are
// bf16 convolutions, in bf16 (half the bytes, no conversion pass).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace llga::affine {

// cpuRunsAvx2Kernels() (backend/dnnl/dnnl_utils.h).
bool available();

// `rows` rows of `len` floats: row r reads src + r * src_step and writes
// dst + r * dst_step. Element j of row r has channel
// c0 + r * c_step + j % period, where period is 1 (a plane of one channel:
// NCHW), 8 or 16 (a plane of a channel block: nChw8c, nChw16c) or len (a
// pixel's channels: channels-last).
struct Strip {
  const float* src;
  void* dst;  // float, or the Job's quantized type; steps count elements
  int64_t rows, len, src_step, dst_step;
  int64_t c0, c_step, period;
};

struct Job {
  std::vector<Strip> strips;
  const float* scale = nullptr;  // per channel
  const float* shift = nullptr;
  bool relu = false;  // max(y, 0), a NaN staying NaN (PyTorch's relu)
  // Quantized output: dst holds u8 (is_unsigned) or s8, each
  // saturate(zero_point + round-half-even(y / scale)), a NaN the lowest
  // value: as the readers' own quantizing (int8::quantizeActivation).
  struct Quantized {
    float scale = 1.0f;
    int32_t zero_point = 0;
    bool is_unsigned = true;
  };
  std::optional<Quantized> quantized;
  // bf16 output (without `quantized`): dst holds bf16, each rounded to
  // nearest even, NaN quiet, a denormal flushed to a signed zero: the bits
  // of AVX512-BF16's vcvtneps2bf16, which oneDNN's reorders use.
  bool bf16 = false;
};

// Runs the strips, shared out among llga's threads when the job is large.
// Each strip's period must be 1, 8, 16 (dividing len) or len. Requires
// available().
void run(const Job& job);

// The per-channel scale and shift that make run() a group_norm of
// channels-last x: `images` images of `spatial` rows of `c` floats, channels
// split into `groups` groups of consecutive channels; per image and group the
// mean and biased variance over its channels and rows (PyTorch's), then
// scale = w / sqrt(var + eps), shift = b - mean * scale (w, b may be null: 1,
// 0). scale and shift get images * c values. Two passes over x (sums, then
// centred squares) by llga's threads, float partial sums of at most 64 rows
// added up in double. Requires available().
void groupNormParams(const float* x, int64_t images, int64_t spatial, int64_t c, int64_t groups, double eps,
                     const float* w, const float* b, float* scale, float* shift);

}  // namespace llga::affine
