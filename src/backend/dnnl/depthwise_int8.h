// llga's own int8 depthwise convolution (AVX512-VNNI), for the CPUs where
// oneDNN 2.6's runs no faster than its fp32 one.
//
// Why: oneDNN's int8 depthwise kernel (brdgmm_dw) spends one vpdpbusd per
// tap on 16 channels, using one of the instruction's four byte products, and
// vpdpbusd issues on one port where fp32's FMA issues on two: mobilenet_v2's
// depthwise layers took 457 us a call in int8 against 586 in fp32 (a third of
// its int8 time).
//
// How: a depthwise tap multiplies one channel by one weight, but vpdpbusd
// sums four adjacent byte products. So the input is interleaved: each dword
// holds one channel's bytes from four kernel rows (kh = 4g .. 4g + 3) at one
// column, and one vpdpbusd per kernel column (and group of four rows) does
// four taps of 16 channels. A 3x3 kernel takes 3 vpdpbusd per output pixel
// and 16 channels instead of 9. Each input column of an output row is
// interleaved once (byte and word unpacks of 64 channels, 8 shuffles),
// whatever the stride, into a per-thread row buffer; at stride 1, where the
// kernel's rows plus one fit its groups of four (3x3, 5x5, 7x7), one buffer
// serves two output rows, the second's taps packed one byte further into
// each dword (pairsRows in the .cpp). (Channels past the last
// block of 64: see Units in the .cpp.) The unpacks leave
// channels in a fixed order within each 128-bit lane, which the packed
// weights, scales and bias follow, and which the saturating packs of the
// quantized output (or a 128-bit transpose of an fp32 one) undo.
//
// Where it runs (ownDepthwiseInt8 in ops/conv.cpp) is where it measured
// faster: stride 1, 32+ channels, an int8 output (docs/fusion-and-layouts.md
// has the figures); the kernel itself takes any stride, channel count, kernel
// up to 8x8 and an fp32 output, and its test covers them.
//
// Arithmetic: activations u8 with a zero point (padding reads the zero
// point, a real 0), or s8 read as u8 with zero point 128 (the top bit of
// each byte flipped as it is interleaved), weights s8 per output channel,
// int32 sums; then in float
//   y = scale[c] * (sum - zp * sum_taps(w[c])) + bias[c]
// the chain's eltwise steps, and for a quantized output round to nearest
// even and saturate (as oneDNN's int8 kernels do). Layouts: channels
// innermost (nhwc, any pixel strides), src and dst.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/dnnl/eltwise_step.h"
#include "runtime/tensor.h"

namespace llga::dw_int8 {

// AVX512-BW and AVX512-VNNI on this CPU (as oneDNN reports its ISA), and
// LLGA_DW_INT8 is not "0" (the switch compares against oneDNN's kernel).
bool available();

struct Geometry {
  int64_t n = 0, c = 0, h = 0, w = 0;  // input
  int64_t oh = 0, ow = 0;              // output
  int64_t kh = 0, kw = 0, stride_h = 1, stride_w = 1, pad_t = 0, pad_l = 0;
  // element strides of batch, row and column (channels are contiguous)
  int64_t src_strides[3] = {0, 0, 0};
  int64_t dst_strides[3] = {0, 0, 0};
};

// Kernels of up to 8 x 8 taps, dilation 1 (the caller's to check).
bool supports(const Geometry& g);

// An eltwise step after the bias, in chain order: relu, clip, linear, and
// swish of alpha 1 as the last (the kernel's Epilogue forms; the caller's to
// check).
using Step = vec::Step;

enum class Output : uint8_t { U8, S8, F32 };

// The weights in the kernel's order, with what follows from them alone.
struct Weights {
  int64_t c = 0, kh = 0, kw = 0;
  int32_t src_zero_point = 0;  // of the bytes as the kernel multiplies them (u8)
  // The source is s8 (no zero point): each byte is read with its top bit
  // flipped, x + 128 as u8, against src_zero_point 128.
  bool src_s8 = false;
  std::shared_ptr<Storage> storage;  // packed taps, then scale and zero-point compensation per channel (kernel order)
};

// From w[c][kh][kw] (s8, dense) and scale[c] = activation scale x weight
// scale; `src_zero_point` is the activation's (u8), or `src_s8` says the
// activation is s8 (then its zero point is 0).
std::shared_ptr<const Weights> pack(const int8_t* w, const float* scale, int64_t c, int64_t kh, int64_t kw,
                                    int32_t src_zero_point, bool src_s8 = false);

// Scratch the run needs (bytes), for `threads` threads.
size_t scratchBytes(const Geometry& g, int threads);

// dst = steps(conv(src) + bias), stored as `out` says (U8/S8: rounded and
// saturated; the steps include the quantizing scale and zero point).
// `bias` (c floats, real values) may be null. `scratch`: scratchBytes(g,
// omp_get_max_threads()) bytes, 64-byte aligned. Uses llga's threads (OpenMP).
// `src`: u8, or s8 bytes where the weights were packed with src_s8.
void run(const Weights& wt, const Geometry& g, const void* src, void* dst, Output out, const float* bias,
         const std::vector<Step>& steps, void* scratch);

}  // namespace llga::dw_int8
