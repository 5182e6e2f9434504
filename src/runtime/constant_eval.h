// Evaluating nodes at compile time (for constant propagation), and the
// conversions between constant attributes and runtime values.
#pragma once

#include <optional>
#include <vector>

#include "ir/ir.h"
#include "runtime/value.h"

namespace llga {

// The value of a prim::Constant that holds no tensor (None, numbers, strings,
// devices, lists of them); nullopt for tensors and functions.
std::optional<RtValue> constantValue(const Node& constant);
// The attribute for a value a prim::Constant can hold (no tensors), typed as `type`.
std::optional<AttrValue> toAttr(const RtValue& v, const Type& type);
// Runs n's kernel on the given inputs; nullopt when the op library lacks it.
std::optional<std::vector<RtValue>> evaluateNode(const Node& n, std::vector<RtValue> inputs);

}  // namespace llga
