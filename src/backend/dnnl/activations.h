// llga's own activations, run over a primitive's dense float output in place
// after the primitive instead of as its post-op: swish (x * sigmoid(x)) and
// gelu (erf form).
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
// that form does divide, see activations.cpp).
// gelu_erf likewise: oneDNN's post-op added 0.59 ms to vit_b_16's 197 x 768
// x 3072 linear (3.25 ms bare, paired in one process on the Sapphire
// Rapids), llga's pass 0.38 ms.
// They are only the activation; the convolution or product stays a oneDNN
// primitive.
#pragma once

#include <cstdint>

namespace llga {

enum class OwnActivation : uint8_t { None, Swish, GeluErf };

// True when this CPU can run swishInPlace (AVX-512F, or AVX2 and FMA) and
// LLGA_FAST_SWISH is not "0" (the switch exists to compare against oneDNN's
// fused swish).
bool fastSwishEnabled();
// True when this CPU can run geluErfInPlace (AVX-512F) and LLGA_FAST_GELU is not "0".
bool fastGeluEnabled();

// p[i] = p[i] * sigmoid(p[i]) for i < n; PyTorch's silu at float precision
// (silu(-inf) is NaN as in PyTorch; NaN stays NaN). Large buffers are split
// across llga's threads. Requires fastSwishEnabled().
void swishInPlace(float* p, int64_t n);

// p[i] = gelu(p[i]) = p[i] / 2 * (1 + erf(p[i] / sqrt(2))) for i < n, within
// 4e-7 absolute of a double reference (erfc by Abramowitz and Stegun 7.1.26,
// the form oneDNN's gelu_erf uses); gelu(-inf) is NaN and NaN stays NaN, as
// in PyTorch. Requires fastGeluEnabled().
void geluErfInPlace(float* p, int64_t n);

// True when swishQuantize can run (and activationToBf16 of a swish): fastSwishEnabled() and AVX-512F.
bool swishNarrowEnabled();

// q[i] = saturate(round(p[i] * sigmoid(p[i]) * inv_scale + zero_point)), u8
// or s8, for i < n: a quantized output's swish, after a primitive that wrote
// fp32 without it. oneDNN 2.6's int8 kernels apply a swish post-op at a
// fraction of their speed (efficientnet_b0's 16 -> 96 expand at 112x112,
// hot: 382 us into u8 with it, 114 into fp32 without). Rounds half to even
// as oneDNN's int8 dst does. Requires swishNarrowEnabled().
void swishQuantize(const float* p, void* q, int64_t n, float inv_scale, int32_t zero_point, bool is_unsigned);

// q[i] = bf16(a(p[i])) for i < n (a None: bf16(p[i])), rounded as
// vcvtneps2bf16 does (to nearest even; denormals to signed zeros), split
// across llga's threads: a bf16 output's swish or gelu after a primitive
// that wrote fp32 without it, where oneDNN's bf16 kernels would apply the
// post-op with its divide (swish), or a product whose fp32 result its bf16
// readers would otherwise convert in a pass of their own (gelu). The same
// bits as the fp32 activation (runOwnActivation) rounded by oneDNN's reorder.
// Requires activationToBf16Available(a).
void activationToBf16(OwnActivation a, const float* p, uint16_t* q, int64_t n);
// Whether activationToBf16 runs `a` here: AVX-512F, and `a`'s own kernel enabled (fastSwishEnabled, fastGeluEnabled).
bool activationToBf16Available(OwnActivation a);

// Runs `a` (not None) over p[0, n).
void runOwnActivation(OwnActivation a, float* p, int64_t n);
// "+llga_swish", "+llga_gelu" or "": what a kernel's report appends to its impl.
const char* ownActivationSuffix(OwnActivation a);

// Below this many elements a fused oneDNN post-op costs less than a pass.
constexpr int64_t kOwnActivationMinElements = 16384;

}  // namespace llga
