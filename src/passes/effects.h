// What passes must not move, merge or delete.
#pragma once

#include "ir/ir.h"

namespace llga {

// In-place ops (aten::relu_), list mutation, exceptions, prints, attribute
// writes, randomness; and control flow containing any of those.
bool hasSideEffects(const Node& n);
// Mutable container types (lists and dicts can be changed in place).
bool isMutableType(const Type& t);
// Some node that mutates (has side effects) reads this value.
bool hasMutatingUse(const Value& v);

}  // namespace llga
