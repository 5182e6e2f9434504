// int8 helpers for the kernels that run precision="int8" (ir/precision.h):
// weights quantized once, symmetric per output channel; activations
// quantized per call by a oneDNN reorder with a scale.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include <dnnl.hpp>

#include "fuser/post_ops.h"
#include "ir/precision.h"
#include "runtime/exec_context.h"
#include "runtime/tensor.h"

namespace llga::int8 {

// `rows` rows of `cols` contiguous floats (a weight's output channels):
// scale[r] = max |w[r, :]| / 127 (1 where the row is all zeros), and
// out[r, c] = round-to-nearest-even(w[r, c] / scale[r]), in [-127, 127].
// Rows are split across llga's threads; a row is one vectorised pass for
// its maximum and one for its values.
std::vector<float> quantizeRows(const float* w, int64_t rows, int64_t cols, int8_t* out);

// Round half to even without a libm call (so loops over it vectorise):
// below 2^23 in magnitude, adding and taking away 2^23 leaves the nearest
// integer; larger floats are integers already (NaN stays NaN).
inline float roundHalfEven(float v) {
  const float c = std::copysign(8388608.0f, v);
  return std::fabs(v) < 8388608.0f ? (v + c) - c : v;
}

// How an int8 op quantizes: its activation (act_scale, act_dtype,
// act_zero_point) and, where the graph gave them (w_scale, from
// import-quantization), its weight's scales per output channel.
struct OpQuant {
  ActivationQuant act;
  std::vector<float> weight_scales;  // empty: quantizeRows picks max |w| / 127 per channel
  // act_scale="dynamic": the activation's parameters are chosen per call
  // (act.scale and act.zero_point unused): symmetric s8 (llga.quantize), or
  // u8 over [0, qmax] as PyTorch chooses them (act.is_unsigned).
  bool dynamic = false;
  int qmax = 255;
  // The graph's own quantization (import-quantization): an op that runs fp32
  // after all still rounds its activation as the graph does (fakeQuantize).
  bool fromGraph() const { return !weight_scales.empty(); }
};
std::optional<OpQuant> opQuantOf(const Node& n);

// Whether oneDNN's int8 kernels here multiply with VNNI (AVX512-VNNI,
// AVX-VNNI or AMX, as oneDNN sees it: ONEDNN_MAX_CPU_ISA counts). Without,
// they saturate 16-bit sums (llga.quantize refuses; the graph's own int8 ops
// run fp32 on the fake-quantized values).
bool hasVnni();
// The same, with AVX-512 (AVX512-VNNI, or AMX's CPUs): not AVX-VNNI's 256 bits.
bool hasAvx512Vnni();

// The primitive for an int8 convolution whose source has a zero point
// (`attr` sets it): oneDNN's first brgemm kernel for it, where its first pick
// is another. oneDNN 2.6 lists its older AMX kernels (jit_1x1: and
// jit:avx512_core_amx_int8) before its brgemm ones, and its AMX brgemm
// kernels take no source zero point: with AMX a zero point left
// mobilenet_v2's 1x1 convolutions on the older kernel, where its VNNI brgemm
// kernel runs them 1.6-3.6x faster (16 -> 96 at 112x112: 157 against 96 us;
// 64 -> 384 at 14x14: 43 against 12; the model 0.65x of its time).
dnnl::convolution_forward::primitive_desc convolutionWithZeroPoint(const dnnl::convolution_forward::desc& d,
                                                                    const dnnl::primitive_attr& attr);

// How a convolution takes a signed activation best here: true, the s8 grid
// shifted into u8 with zero point 128; false, as s8. Shifted where a u8
// source with a zero point runs on the kernel an s8 one does (as
// convolutionWithZeroPoint picks it; a 1x1 convolution of mobilenet_v2's,
// 32 -> 192 channels over 28x28, channels-last): there the zero point costs
// less than the s8 source's compensation (AVX512-VNNI: 10-30% on
// mobilenet_v2's expansions). With AMX, s8 runs on oneDNN 2.6's AMX brgemm
// kernels, which take no source zero point (mobilenet_v2 int8 2.1 ms shifted
// on its older AMX kernel, 1.5 on its VNNI brgemm one, 1.4 as s8). Asked of
// oneDNN once (no primitive is run); false without VNNI (no int8 kernels to
// ask about). LLGA_INT8_SIGNED=u8 or s8 (read once) chooses instead, to
// compare the two.
bool shiftSignedActivations();

// x (f32, any layout) rounded to q's grid and back: plain contiguous f32.
Tensor fakeQuantize(ExecContext& ctx, const Tensor& x, const ActivationQuant& q);

// The weight's rows quantized as q says: with its given scales
// (out = saturate(round-half-even(w / scale[r])) in [-128, 127], PyTorch's
// rounding) or, without, by quantizeRows. The scales used. Throws
// std::invalid_argument when the given scales are not one per row.
std::vector<float> quantizeWeights(const float* w, int64_t rows, int64_t cols, const OpQuant& q, int8_t* out);

// dst (u8 or s8, any layout) = saturate(round(src / scale) + zero_point),
// rounding half to even before the shift (PyTorch's order), NaN to the
// lowest value: a dense NCHW src into a dense NHWC dst (a CNN's input) by
// llga's loop where src lies, then a byte reorder into dst; otherwise one
// oneDNN reorder (src f32 in any layout) without a zero point, and with one,
// src in dst's layout (a reorder first where it is not) and llga's loop.
void quantizeActivation(ExecContext& ctx, const dnnl::memory& src, const dnnl::memory& dst, float scale,
                        int32_t zero_point = 0);

// dst (u8 or s8) = saturate(round-half-even(src / scale + zero_point)): one
// oneDNN reorder, rounding after the shift (as PyTorch's oneDNN engine
// quantizes a dynamic activation), unlike quantizeActivation.
void quantizeActivationShifted(ExecContext& ctx, const dnnl::memory& src, const dnnl::memory& dst, float scale,
                               int32_t zero_point);

// Row r of out (u8 or s8, `out_step` elements apart) = the quantized
// (quantizeAffine's arithmetic) product of row r of x (`rows` rows of `c`
// floats, `x_step` apart: a channels-last map's pixels) with s (c floats, one
// per channel), the product rounded to float first as a mul's result is:
// squeeze-excite's scaled map written for its int8 reader in one pass. On
// llga's threads; AVX-512 where the CPU has it.
void quantizeScaledRows(const float* x, int64_t rows, int64_t c, int64_t x_step, const float* s, float scale,
                        int32_t zero_point, bool is_unsigned, void* out, int64_t out_step);

// x (fp32, plain, strided or blocked) quantized as q says
// (quantizeActivation's arithmetic) into a new u8/s8 tensor, in x's
// dimension order where x is dense (channels-last stays so), else plain.
Tensor quantizeTensor(ExecContext& ctx, const Tensor& x, const ActivationQuant& q);

// x (u8 or s8, plain, strided or blocked) back to fp32: a plain contiguous
// tensor of x's sizes, (x - zero_point) * scale (one oneDNN reorder).
Tensor dequantize(ExecContext& ctx, const Tensor& x, float scale, int32_t zero_point = 0);

bool isInt8(ScalarType t);  // Byte (u8) or Char (s8)
// The tensor type a value quantized so is held in: Byte (u8) or Char (s8).
inline ScalarType storageType(const ActivationQuant& q) { return q.is_unsigned ? ScalarType::Byte : ScalarType::Char; }

// The bias as an int8 primitive takes it: oneDNN adds it to the int32 sums
// before the output scales, so each element (the last dim cycling through
// `scales`) is divided by its channel's scale. A contiguous copy of bias's shape.
Tensor biasForInt8(const Tensor& bias, const std::vector<float>& scales);

// A convolution chain into a quantized dst, as oneDNN's int8 primitive
// takes it. `ops` ends in the quantizing linear (x / out_scale + zero
// point), `out_scales` are the primitive's output scales per channel and
// `sum_scale` the residual sum's. Each eltwise post-op costs oneDNN's int8
// epilogue a pass over every output vector: a 16 -> 96 1x1 at 112x112 ran
// 119 us with relu6 and the quantizing linear, 109 with one clip, 87 with
// none (hot, Zen 4). So where the zero point is 0 and the ops before the
// linear are relus, clips and the sum (positively homogeneous: f(a x) =
// a f(x) for a > 0), 1 / out_scale moves into the output scales, the sum's
// scale and the clips' bounds, the linear goes, and so does a final clamp
// the dst type's saturation already makes (relu into u8; a clip past the
// type's range: relu6 into u8 always is, as calibration sees at most 6
// there, so out_scale <= 6 / 255). Returns whether it folded (else
// nothing changed). The results are the unfolded chain's up to the rounding
// of one product more or less in float.
bool foldQuantizingScale(std::vector<PostOp>& ops, std::vector<float>& out_scales, float& sum_scale, bool dst_unsigned);

// Dynamic quantization of a contiguous float array: the scale its largest
// finite magnitude maps to 127 at (1 where all are 0), and out = round(x /
// scale) saturated to [-128, 127]. Two vectorised passes, split across
// llga's threads when large.
float dynamicScale(const float* x, int64_t n);
// PyTorch's parameters for a dynamic u8 activation over [0, qmax] (its
// ChooseQuantizationParams without sparsity or power-of-two scales): the
// range [min(x), max(x)] widened to hold 0, scale = range / qmax (0.1 where
// that is 0 or its reciprocal overflows; at least 6.1e-5, the range
// widened alike), the zero point from whichever end loses less, rounded
// and clamped. Finite values only (NaN and infinities are left out).
ActivationQuant pytorchDynamicParams(const float* x, int64_t n, int qmax);
void quantizeS8(const float* x, int64_t n, float scale, int8_t* out);

}  // namespace llga::int8
