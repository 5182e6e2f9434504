// llga's own swish, x * sigmoid(x), over a dense float buffer in place.
//
// Why not oneDNN's: in 2.6 its logistic/swish (as a post-op or a primitive)
// computes 1 / (1 + e) with vdivps, a 16-lane divide the core issues about
// once per 10-16 cycles. Measured on this project's AVX-512 machine, a conv
// with the swish post-op took 270 -> 755 us (efficientnet_b0's first 1x1
// expand, 1.2M outputs) and swish was about a fifth of that model's time. This
// kernel uses a reciprocal estimate refined by one Newton step instead
// (relative error ~3e-7, the same as a float divide's result to 2 ulp), so a
// convolution without the post-op plus this pass over its (cache-resident)
// output is cheaper than the fused form (on an AVX2-only EPYC too, in its
// 8-lane form: efficientnet_b0 0.925x of its time with oneDNN's post-op;
// that form does divide, see swish.cpp). It
// is only the activation; the convolution itself stays a oneDNN primitive.
#pragma once

#include <cstdint>

namespace llga {

// True when this CPU can run swishInPlace (AVX-512F, or AVX2 and FMA) and
// LLGA_FAST_SWISH is not "0" (the switch exists to compare against oneDNN's
// fused swish).
bool fastSwishEnabled();

// p[i] = p[i] * sigmoid(p[i]) for i < n; PyTorch's silu at float precision
// (silu(-inf) is NaN as in PyTorch; NaN stays NaN). Large buffers are split
// across llga's threads. Requires fastSwishEnabled().
void swishInPlace(float* p, int64_t n);

// Below this many elements a fused oneDNN post-op costs less than a pass.
constexpr int64_t kFastSwishMinElements = 16384;

}  // namespace llga
