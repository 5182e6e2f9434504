// Printing in TorchScript's `graph.str()` format.
//
// Differences from PyTorch, all deliberate:
//  * A tensor constant created by a pass (not parsed from text) prints as
//    `{v}` when it has one element and `<Tensor>` otherwise; PyTorch would
//    print small tensors in full. Parsed tensor literals print as parsed.
//  * Bytes >= 0x80 in strings print as octal escapes (PyTorch prints them
//    as garbled escapes).
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

#include "ir/attributes.h"

namespace llga {

class Node;
class Graph;

// 17 significant digits, "1." for integral values, "inf", "-inf", "nan", "-nan".
std::string formatDouble(double v);
// "..." with TorchScript's escapes.
std::string quoteString(const std::string& s);
std::string formatAttr(const AttrValue& a);

// The graph as Graph::print prints it, except that every tensor attribute
// (list items too, subgraphs included) prints as `<Tensor:N>`, N being what
// `namer` returns for it: a model file's IR, whose tensors live in the file's
// tensor table (driver/model_file.h; the parser reads them back with
// ParseOptions::tensors). `namer` may throw to refuse a tensor.
using TensorNamer = std::function<int64_t(const TensorRef&)>;
void printWithTensorIndices(std::ostream& os, const Graph& g, const TensorNamer& namer);

}  // namespace llga
