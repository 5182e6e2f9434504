#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "frontend/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "test_util.h"

using namespace llga;

namespace {

std::vector<std::string> validCases() {
  auto cases = test::splitCases(test::readFile(test::sourceDir() / "tests/ir/roundtrip.ir"));
  for (const char* f : {"tests/ir/small_cnn.ir"}) cases.push_back(test::readFile(test::sourceDir() / f));
  return cases;
}

const ConstantTensor& constantOf(Graph& g, const char* name) {
  Value* v = g.findValue(name);
  EXPECT_NE(v, nullptr) << name;
  return *v->node()->attr(attr::value).get<TensorRef>();
}

}  // namespace

TEST(Parser, RoundTripIsAFixedPoint) {
  for (const std::string& text : validCases()) {
    if (text.find("graph(") == std::string::npos) continue;
    auto g1 = parseGraph(text);
    std::string p1 = g1->toString();
    auto g2 = parseGraph(p1);
    EXPECT_EQ(p1, g2->toString());
    EXPECT_TRUE(verify(*g2).empty());
  }
}

TEST(Parser, TensorLiterals) {
  auto g = parseGraph(R"IR(graph():
  %a : Float(2, strides=[1], requires_grad=0, device=cpu) = prim::Constant[value=0.01 * -3.8909  4.0122 [ CPUFloatType{2} ]]()
  %b : Float(2, 2, 2, strides=[4, 2, 1]) = prim::Constant[value=(1,.,.) =    1  2   3  4  (2,.,.) =    5  6   7  8 [ CPUFloatType{2,2,2} ]]()
  %c : Long(2, 3) = prim::Constant[value=Columns 1 to 2  1  2  4  5 Columns 3 to 3  3  6 [ CPULongType{2,3} ]]()
  %d : Long(requires_grad=0, device=cpu) = prim::Constant[value={-7}]()
  %e : Float(3) = prim::Constant[value= nan -inf  1.0000e+03 [ CPUFloatType{3} ]]()
  %f : Bool(2) = prim::Constant[value= 1  0 [ CPUBoolType{2} ]]()
  return (%a, %b, %c, %d, %e, %f)
)IR");
  const auto& a = constantOf(*g, "a");
  EXPECT_NEAR(a.scalarAsDouble(0), -0.038909, 1e-7);
  EXPECT_NEAR(a.scalarAsDouble(1), 0.040122, 1e-7);
  EXPECT_TRUE(a.approximate);
  const auto& b = constantOf(*g, "b");
  for (int i = 0; i < 8; ++i) EXPECT_EQ(b.scalarAsDouble(i), i + 1);
  EXPECT_FALSE(b.approximate) << "whole numbers printed without a point are exact";
  const auto& c = constantOf(*g, "c");
  for (int i = 0; i < 6; ++i) EXPECT_EQ(c.scalarAsDouble(i), i + 1) << "chunked columns reassemble row-major";
  EXPECT_FALSE(c.approximate);
  EXPECT_EQ(constantOf(*g, "d").scalarAsDouble(0), -7);
  EXPECT_EQ(constantOf(*g, "d").dtype, ScalarType::Long);
  const auto& e = constantOf(*g, "e");
  EXPECT_TRUE(std::isnan(e.scalarAsDouble(0)));
  EXPECT_EQ(e.scalarAsDouble(1), -INFINITY);
  EXPECT_EQ(e.scalarAsDouble(2), 1000.0);
  EXPECT_TRUE(e.approximate);
  EXPECT_EQ(constantOf(*g, "f").scalarAsDouble(1), 0);
  // Half constants store IEEE binary16 (found by the fuzzer: {..} of a Half value).
  auto h = parseGraph("graph():\n  %h : Half(requires_grad=0, device=cpu) = prim::Constant[value={-1.5}]()\n"
                      "  %k : Half(3) = prim::Constant[value= 65504  6.1035e-05  1e-07 [ CPUHalfType{3} ]]()\n"
                      "  return (%h, %k)\n");
  EXPECT_EQ(constantOf(*h, "h").scalarAsDouble(0), -1.5);
  EXPECT_EQ(constantOf(*h, "k").scalarAsDouble(0), 65504.0);
  EXPECT_NEAR(constantOf(*h, "k").scalarAsDouble(1), 6.1035e-05, 1e-8);
  EXPECT_NEAR(constantOf(*h, "k").scalarAsDouble(2), 1.19e-07, 1e-9);  // nearest subnormal
  EXPECT_THROW(parseGraph("graph():\n  %c : ComplexFloat(requires_grad=0) = prim::Constant[value={2}]()\n  return (%c)\n"),
               ParseError);
  // Unbound "<Tensor>" constants take dtype and shape from the value's type.
  auto w = parseGraph("graph():\n  %w : Float(4, 3, strides=[3, 1]) = prim::Constant[value=<Tensor>]()\n  return (%w)\n");
  const auto& wt = constantOf(*w, "w");
  EXPECT_FALSE(wt.hasData());
  EXPECT_EQ(wt.sizes, (std::vector<int64_t>{4, 3}));
}

TEST(Parser, TypesRoundTrip) {
  for (const char* t : {"Tensor", "Float(1, 3, 224, 224, strides=[150528, 50176, 224, 1], requires_grad=0, device=cpu)",
                        "Long(requires_grad=0, device=cpu)", "Float(*, 3, strides=[3, 1], requires_grad=0, device=cpu)",
                        "FloatTensor(requires_grad=0, device=cpu)", "int[]", "Tensor?", "Tensor[]?", "(Tensor, int)",
                        "()", "Dict(str, Tensor)", "Union(int, str, NoneType)", "Future(int)", "RRef(Tensor)",
                        "__torch__.torchvision.models.resnet.ResNet", "Float(2)[Undefined]", "Tensor(device=cuda:1)",
                        "BFloat16(3, strides=[1])", "Device", "NoneType", "Scalar", "number", "Generator"}) {
    EXPECT_EQ(parseType(t)->str(), t);
  }
  EXPECT_EQ(parseType("Optional(int)")->str(), "int?");
  // Rank: known for Float(...), unknown for FloatTensor(...); for Tensor(...) only with sizes.
  EXPECT_EQ(parseType("Float(requires_grad=0)")->tensorInfo().rank(), 0u);
  EXPECT_FALSE(parseType("FloatTensor(requires_grad=0)")->tensorInfo().rank());
  EXPECT_FALSE(parseType("Tensor(requires_grad=0)")->tensorInfo().rank());
  EXPECT_FALSE(parseType("Tensor[Undefined]")->tensorInfo().rank());
  EXPECT_EQ(parseType("Tensor(2, *)")->tensorInfo().rank(), 2u);
  EXPECT_EQ(parseType("Tensor()")->tensorInfo().rank(), 0u);
  EXPECT_TRUE(parseType("Float(2, 3)")->equals(*parseType("Float(2, 3)")));
  EXPECT_FALSE(parseType("Float(2, 3)")->equals(*parseType("Float(3, 2)")));
}

TEST(Parser, ErrorsCarryLineAndColumn) {
  try {
    parseGraph("graph(%x : Tensor):\n  %y : Tensor = aten::relu(%z)\n  return (%y)\n");
    FAIL() << "expected a ParseError";
  } catch (const ParseError& e) {
    EXPECT_EQ(e.line, 2u);
    EXPECT_EQ(e.column, 28u);
    EXPECT_NE(e.message.find("undefined value %z"), std::string::npos);
    EXPECT_EQ(e.excerpt, "  %y : Tensor = aten::relu(%z)");
  }
}

// Every prefix of every valid case either parses or raises ParseError: no other
// exception, crash or hang (the sanitizer build runs this too).
TEST(Parser, EveryTruncationIsHandled) {
  size_t errors = 0, total = 0;
  for (const std::string& text : validCases()) {
    size_t last_paren = text.rfind(')');
    for (size_t n = 0; n < text.size(); ++n) {
      ++total;
      try {
        parseGraph(std::string_view(text).substr(0, n));
        EXPECT_GE(n, last_paren) << "a prefix ending before the final ')' parsed:\n" << text.substr(0, n);
      } catch (const ParseError&) {
        ++errors;
      }
    }
  }
  EXPECT_GT(errors, total / 2);
}

TEST(Parser, RandomByteMutationsAreHandled) {
  std::mt19937 rng(1234);
  auto cases = validCases();
  for (int iter = 0; iter < 3000; ++iter) {
    std::string text = cases[rng() % cases.size()];
    if (text.empty()) continue;
    int edits = 1 + rng() % 4;
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % text.size();
      switch (rng() % 3) {
        case 0: text[at] = static_cast<char>(rng() % 256); break;
        case 1: text.erase(at, 1 + rng() % 8); break;
        default: text.insert(at, std::string(1, "()[]{}%:=,#\"<>-.\n"[rng() % 17])); break;
      }
      if (text.empty()) break;
    }
    try {
      auto g = parseGraph(text);
      EXPECT_TRUE(verify(*g).empty());
      parseGraph(g->toString());  // what we print we can read back
    } catch (const ParseError&) {
    }
  }
}

TEST(Printer, Doubles) {
  EXPECT_EQ(formatDouble(1.0), "1.");
  EXPECT_EQ(formatDouble(-2.0), "-2.");
  EXPECT_EQ(formatDouble(0.1), "0.10000000000000001");
  EXPECT_EQ(formatDouble(1e-5), "1.0000000000000001e-05");
  EXPECT_EQ(formatDouble(1e20), "1e+20");
  EXPECT_EQ(formatDouble(INFINITY), "inf");
  EXPECT_EQ(formatDouble(-INFINITY), "-inf");
  EXPECT_EQ(formatDouble(-std::nan("")), "-nan");
  EXPECT_EQ(quoteString("a\n\"'\\\x01\xe9"), "\"a\\n\\\"\\'\\\\\\001\\351\"");
}
