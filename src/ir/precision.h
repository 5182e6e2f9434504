// The precision attribute: the data type an op (or a partition) computes in.
// The assign-precision pass writes it, the kernels read it; both only
// through these functions.
//   precision="bf16"  the op's heavy inputs (activation, weights) are rounded
//                     to bf16 and multiplied on the CPU's bf16 instructions,
//                     accumulating in fp32; its output and post-ops are fp32
//   (no attribute)    fp32
// and the out_dtype attribute, on a bf16 partition whose one output only bf16
// convolutions read as their activation:
//   out_dtype="bf16"  the partition hands its output on in bf16 (its
//                     primitive writes bf16), so the readers need no conversion
#pragma once

#include <string_view>

#include "ir/ir.h"

namespace llga {

enum class Precision { F32, BF16 };

std::string_view precisionName(Precision p);  // "fp32", "bf16"
Precision precisionOf(const Node& n);
// Writes p on n (removing the attribute for fp32); whether n changed.
bool setPrecision(Node& n, Precision p);
bool bf16Output(const Node& n);
// Writes (or removes) out_dtype="bf16" on n; whether n changed.
bool setBf16Output(Node& n, bool on);

}  // namespace llga
