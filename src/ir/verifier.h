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

struct VerifyError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// Throws VerifyError listing the violations.
void verifyOrThrow(const Graph& g);

}  // namespace llga
