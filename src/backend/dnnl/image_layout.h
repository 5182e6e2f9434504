// A CNN's input into channels-last: a dense NCHW fp32 image of few channels
// (1 to 4: RGB, grey, RGBA) into dense NHWC, as fp32, as bf16 (rounded to
// nearest even) or quantized to u8/s8, in one pass.
//
// Why: a stem convolution takes its input channels-last, and oneDNN's
// reorder of a 3-channel image is a strided gather (1x3x224x224 on a Sapphire
// Rapids, two threads: fp32 17-36 us, into bf16 30-47); an int8 stem
// quantized the image where it lay and then moved its bytes (a 27-33 us
// byte reorder). How: 16 pixels of each channel plane loaded, interleaved
// by two-source permutes into C output vectors, converted, stored (AVX-512).
#pragma once

#include <cstdint>

#include <oneapi/dnnl/dnnl.hpp>

namespace llga::image {

// Whether toChannelsLast takes src -> dst: src a dense f32 NCHW of 1..4
// channels, dst the same sizes dense NHWC in f32, bf16, u8 or s8, and the
// CPU has AVX-512 F, BW and VL (bf16: and AVX512-BF16).
bool takes(const dnnl::memory::desc& src, const dnnl::memory::desc& dst);

// dst = src in dst's layout and type; a quantized dst is
// saturate(zero_point + round-half-even(x / scale)), NaN to the lowest value
// (int8::quantizeAffine's arithmetic); f32 and bf16 ignore scale and zero
// point. Only where takes(): the caller checks. Uses llga's threads.
void toChannelsLast(const dnnl::memory& src, const dnnl::memory& dst, float scale = 1.0f, int32_t zero_point = 0);

}  // namespace llga::image
