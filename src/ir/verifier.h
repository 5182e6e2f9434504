// Checks the invariants stated in ir.h. Passes run it between steps in tests
// and with --verify-each; the parser runs it on everything it builds.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace llga {

class Graph;

// Every violation found, each naming the node line it concerns. Empty: valid.
std::vector<std::string> verify(const Graph& g);

class Node;
// The per-node structural rules (prim::If/Loop block arity, prim::Constant
// shape): the first violation, or an empty string.
std::string checkNodeShape(const Node& n);
// Kinds that own blocks: prim::If, prim::Loop, prim::Closure, prim::With.
bool canHaveBlocks(const Node& n);

struct VerifyError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// Throws VerifyError listing the violations.
void verifyOrThrow(const Graph& g);

}  // namespace llga
