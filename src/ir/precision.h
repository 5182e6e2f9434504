// The precision attribute: the data type an op (or a partition) computes in.
// The assign-precision pass writes it, the kernels read it; both only
// through these functions.
//   precision="bf16"  the op's heavy inputs (activation, weights) are rounded
//                     to bf16 and multiplied on the CPU's bf16 instructions,
//                     accumulating in fp32; its output and post-ops are fp32
//   precision="int8"  (llga.quantize) the op's activation is quantized to
//                     8 bits with the scale calibration found (act_scale,
//                     act_dtype below) and its weights to s8 with a scale per
//                     output channel; it accumulates in int32 and its output
//                     and post-ops are fp32
//   (no attribute)    fp32
// and the out_dtype attribute, on a bf16 partition whose one output only bf16
// convolutions read as their activation:
//   out_dtype="bf16"  the partition hands its output on in bf16 (its
//                     primitive writes bf16), so the readers need no conversion
// and on an int8 partition whose one output only int8 convolutions read as
// their activation (all with the same quantization, that value's):
//   out_scale=0.0213, out_dtype="u8"   the partition writes its output
//                     quantized so (its primitive's dst), and the readers
//                     take it without quantizing it again
//   out_zero_point=3  (absent: 0) the readers' zero point, where the graph
//                     gave them one (import-quantization)
// and on an int8 op, how its activation (input 0) is quantized:
//   act_scale=0.0213  real value = scale * (8-bit value - zero point)
//   act_dtype="u8"    "u8" where calibration saw no negative value, else "s8"
//                     (or u8 with a zero point, below)
//   act_zero_point=125  (absent: 0) a graph's own quantization's
//                     (import-quantization); llga.quantize's: 128 for the s8
//                     grid written as u8 (the backend's faster form), or,
//                     with activations="asymmetric", the zero point of a
//                     signed activation's u8 grid over its [min, max]
//   w_scale=<Tensor>  (import-quantization) the weight's scale per output
//                     channel as the graph quantized it (s8, zero point 0);
//                     without it the kernel picks max |w| / 127 per channel
// or, under llga.quantize(mode="dynamic"):
//   act_scale="dynamic", act_dtype="s8"   the scale is taken per call from
//                     the activation's largest magnitude (no calibration)
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "ir/ir.h"

namespace llga {

enum class Precision { F32, BF16, INT8 };

std::string_view precisionName(Precision p);  // "fp32", "bf16", "int8"
Precision precisionOf(const Node& n);
// Writes p on n (removing the attribute for fp32); whether n changed.
bool setPrecision(Node& n, Precision p);
bool bf16Output(const Node& n);
// Writes (or removes) out_dtype="bf16" on n; whether n changed.
bool setBf16Output(Node& n, bool on);

struct ActivationQuant {
  double scale = 1.0;        // > 0
  bool is_unsigned = false;  // u8 (else s8)
  int32_t zero_point = 0;    // in the dtype's range
  bool operator==(const ActivationQuant&) const = default;
};
std::optional<ActivationQuant> activationQuantOf(const Node& n);
// Writes (or, with nullopt, removes) act_scale and act_dtype; whether n changed.
bool setActivationQuant(Node& n, std::optional<ActivationQuant> q);
// act_scale="dynamic": quantized per call; act_dtype="s8" (llga.quantize's
// mode="dynamic": symmetric, max |x| -> 127) or "u8" with act_qmax (PyTorch's
// dynamic quantization, import-quantization: asymmetric over [0, act_qmax]
// from the call's min and max, as PyTorch chooses them; act_qmax 127 with
// reduce_range, else 255).
bool dynamicActivation(const Node& n);
bool setDynamicActivation(Node& n, std::optional<int> u8_qmax = std::nullopt);
// act_qmax of a dynamic u8 activation, or nullopt.
std::optional<int> dynamicU8Qmax(const Node& n);
// out_dtype="u8"/"s8" with out_scale, or nullopt.
std::optional<ActivationQuant> int8OutputOf(const Node& n);
// Writes (or, with nullopt, removes) out_dtype and out_scale; whether n changed.
bool setInt8Output(Node& n, std::optional<ActivationQuant> q);
// w_scale: one positive finite scale per output channel, or nullopt.
std::optional<std::vector<float>> weightScalesOf(const Node& n);
bool setWeightScales(Node& n, const std::vector<float>& scales);

}  // namespace llga
