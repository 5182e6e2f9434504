// Parser of TorchScript IR text, as printed by `torch._C.Graph.str()`.
//
// Recursive descent, one method per grammar rule (see parser.cpp). Errors
// throw ParseError with line, column and the offending line. Everything
// PyTorch 1.13 prints for traced, inlined, frozen and scripted graphs is
// accepted, including fusion-group subgraphs (`with prim::FooGroup_0 = graph(...)`).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "frontend/lexer.h"
#include "ir/ir.h"

namespace llga {

struct ParseOptions {
  std::string filename = "<string>";  // used in error messages
  bool verify = true;                 // run the verifier on the result
  // A model file's tensor table: `<Tensor:N>` attributes are its entries
  // (ir/printer.h, printWithTensorIndices). Null: such attributes are errors.
  const std::vector<TensorRef>* tensors = nullptr;
};

std::shared_ptr<Graph> parseGraph(std::string_view text, const ParseOptions& options = {});

// Parses one type ("Float(1, 3, strides=[3, 1])", "int[]", ...).
TypePtr parseType(std::string_view text);

}  // namespace llga
