// propagate-shapes runs the graph once; convolutions and matrix products in
// that run take their constant weights as they are, so compiling never holds
// a reordered copy of every weight next to the originals.
#include <gtest/gtest.h>

#include "frontend/parser.h"
#include "passes/pass.h"
#include "runtime/evaluator.h"
#include "runtime/tensor.h"

using namespace llga;

namespace {
// Shapes left out on purpose (plain `Tensor`), so that propagate-shapes runs.
constexpr const char* kConvLinear = R"IR(graph(%x : Float(1, 8, 16, 16)):
  %w : Tensor = prim::Constant[value=<Tensor>]()
  %v : Tensor = prim::Constant[value=<Tensor>]()
  %one : int = prim::Constant[value=1]()
  %last : int = prim::Constant[value=-1]()
  %none : NoneType = prim::Constant()
  %s : int[] = prim::ListConstruct(%one, %one)
  %y : Tensor = aten::conv2d(%x, %w, %none, %s, %s, %s, %one)
  %f : Tensor = aten::flatten(%y, %one, %last)
  %z : Tensor = aten::linear(%f, %v, %none)
  return (%z)
)IR";

TensorRef constant(std::vector<int64_t> sizes) {
  auto c = ConstantTensor::owned(ScalarType::Float, std::move(sizes));
  auto* p = static_cast<float*>(c->data);
  for (int64_t i = 0; i < c->numel(); ++i) p[i] = 0.01f * static_cast<float>(i % 7);
  return c;
}
}  // namespace

TEST(ShapeRun, MakesNoReorderedWeightCopies) {
  auto g = parseGraph(kConvLinear);
  auto ctx = std::make_shared<PassContext>();
  ctx->evaluator = runtimeEvaluator();
  ctx->weights["w"] = constant({16, 8, 3, 3});
  ctx->weights["v"] = constant({10, 16 * 16 * 16});
  ctx->example_inputs.push_back(constant({1, 8, 16, 16}));
  PassManagerOptions opts;
  opts.context = ctx;
  auto cache = std::make_shared<MemoryMeter>();
  std::vector<PassRecord> records;
  {
    MeterScope scope(nullptr, cache);
    records = PassManager("propagate-shapes", opts).run(*g);
  }
  ASSERT_EQ(records.size(), 1u);
  EXPECT_TRUE(records[0].changed) << (records[0].notes.empty() ? "" : records[0].notes[0]);
  EXPECT_EQ(cache->peak.load(), 0);  // no weight was reordered into a primitive's layout
  EXPECT_NE(g->toString().find("Float(1, 10"), std::string::npos);  // and shapes did propagate
}
