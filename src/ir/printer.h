// Printing in TorchScript's `graph.str()` format.
//
// Differences from PyTorch, all deliberate:
//  * A tensor constant created by a pass (not parsed from text) prints as
//    `{v}` when it has one element and `<Tensor>` otherwise; PyTorch would
//    print small tensors in full. Parsed tensor literals print as parsed.
//  * Bytes >= 0x80 in strings print as octal escapes (PyTorch prints them
//    as garbled escapes).
#pragma once

#include <ostream>
#include <string>

#include "ir/attributes.h"

namespace llga {

class Node;

// 17 significant digits, "1." for integral values, "inf", "-inf", "nan", "-nan".
std::string formatDouble(double v);
// "..." with TorchScript's escapes.
std::string quoteString(const std::string& s);
std::string formatAttr(const AttrValue& a);

}  // namespace llga
