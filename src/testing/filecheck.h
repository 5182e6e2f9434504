// A small FileCheck: checks text against CHECK lines, in the manner of LLVM's.
//
//   # CHECK: aten::relu            a line at or after the last match contains it
//   # CHECK-NEXT: return           the line right after the last match
//   # CHECK-SAME: scope:           the last matched line, after the last match
//   # CHECK-NOT: aten::dropout     no line between the surrounding matches has it
//   # CHECK-DAG: prim::Constant    a group of DAG lines match in any order
//   # CHECK-LABEL: graph(          like CHECK; CHECK-NOT lines do not cross it
//
// Patterns are literal text, with {{regex}} and captured names:
// [[X:regex]] defines X, [[X]] matches what X captured.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace llga::testing {

struct CheckLine {
  enum Kind { Check, Next, Same, Not, Dag, Label } kind;
  std::string pattern;
  size_t line;  // in the file the checks came from (1-based)
};

// Every "<prefix>[-SUFFIX]:" line of `text` (the prefix is usually CHECK).
std::vector<CheckLine> parseChecks(std::string_view text, std::string_view prefix = "CHECK");

struct CheckResult {
  bool ok = true;
  std::string message;  // what failed, with the check's line and the output near it
};

CheckResult runChecks(const std::vector<CheckLine>& checks, std::string_view output);

}  // namespace llga::testing
