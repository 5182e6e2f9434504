// The checker must be able to fail: each directive has a passing and a failing case.
#include <gtest/gtest.h>

#include "testing/filecheck.h"

using llga::testing::parseChecks;
using llga::testing::runChecks;

namespace {
bool passes(const std::string& checks, const std::string& output) {
  return runChecks(parseChecks(checks), output).ok;
}
const std::string kOut = "graph(%x):\n  %1 : int = prim::Constant[value=1]()\n  %y : Tensor = aten::relu(%x)\n  return (%y)\n";
}  // namespace

TEST(FileCheck, PlainAndOrder) {
  EXPECT_TRUE(passes("# CHECK: prim::Constant\n# CHECK: aten::relu", kOut));
  EXPECT_FALSE(passes("# CHECK: aten::relu\n# CHECK: prim::Constant", kOut));
  EXPECT_FALSE(passes("# CHECK: aten::gelu", kOut));
}

TEST(FileCheck, Next) {
  EXPECT_TRUE(passes("# CHECK: prim::Constant\n# CHECK-NEXT: aten::relu", kOut));
  EXPECT_FALSE(passes("# CHECK: graph\n# CHECK-NEXT: aten::relu", kOut));
}

TEST(FileCheck, Same) {
  EXPECT_TRUE(passes("# CHECK: %y\n# CHECK-SAME: aten::relu", kOut));
  EXPECT_FALSE(passes("# CHECK: aten::relu\n# CHECK-SAME: %y", kOut));
}

TEST(FileCheck, Not) {
  EXPECT_TRUE(passes("# CHECK: graph\n# CHECK-NOT: gelu\n# CHECK: return", kOut));
  EXPECT_FALSE(passes("# CHECK: graph\n# CHECK-NOT: relu\n# CHECK: return", kOut));
  EXPECT_FALSE(passes("# CHECK: graph\n# CHECK-NOT: return", kOut));
}

TEST(FileCheck, Dag) {
  EXPECT_TRUE(passes("# CHECK-DAG: aten::relu\n# CHECK-DAG: prim::Constant\n# CHECK: return", kOut));
  EXPECT_FALSE(passes("# CHECK-DAG: aten::relu\n# CHECK-DAG: aten::gelu", kOut));
}

TEST(FileCheck, RegexAndCaptures) {
  EXPECT_TRUE(passes("# CHECK: %[[V:[a-z]+]] : Tensor = aten::relu\n# CHECK: return (%[[V]])", kOut));
  EXPECT_FALSE(passes("# CHECK: %[[V:[0-9]+]] : int\n# CHECK: return (%[[V]])", kOut));
  EXPECT_TRUE(passes("# CHECK: value={{[0-9]+}}", kOut));
  EXPECT_FALSE(passes("# CHECK: value={{[a-z]+}}", kOut));
}

TEST(FileCheck, LabelAndNoChecks) {
  EXPECT_TRUE(passes("# CHECK-LABEL: graph(\n# CHECK: return", kOut));
  EXPECT_FALSE(passes("", kOut));
}

TEST(FileCheck, UnknownDirectiveIsAnError) {
  // Skipped, it would let a test pass without checking what it says.
  EXPECT_THROW(parseChecks("# CHECK-COUNT-2: aten::relu"), std::invalid_argument);
  EXPECT_THROW(parseChecks("# CHECK-EMPTY:"), std::invalid_argument);
  // Prose that names the checker is no directive.
  EXPECT_TRUE(passes("# the CHECK-NOT lines below: none\n# CHECK: aten::relu", kOut));
}
