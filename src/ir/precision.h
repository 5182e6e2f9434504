// The precision attribute: the data type an op (or a partition) computes in.
// The assign-precision pass writes it, the kernels read it; both only
// through these functions.
//   precision="bf16"  the op's heavy inputs (activation, weights) are rounded
//                     to bf16 and multiplied on the CPU's bf16 instructions,
//                     accumulating in fp32; its output and post-ops are fp32
//   (no attribute)    fp32
#pragma once

#include <string_view>

#include "ir/ir.h"

namespace llga {

enum class Precision { F32, BF16 };

std::string_view precisionName(Precision p);  // "fp32", "bf16"
Precision precisionOf(const Node& n);
// Writes p on n (removing the attribute for fp32); whether n changed.
bool setPrecision(Node& n, Precision p);

}  // namespace llga
