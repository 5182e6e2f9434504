// int8::foldQuantizingScale: a convolution chain into a quantized dst with
// 1 / out_scale moved into the output scales, the sum's scale and the clips'
// bounds, and final clamps the dst type's saturation makes dropped. Each case
// runs the chain as written and as folded, the way oneDNN's int8 epilogue
// does (output scale, post-ops in order, round half to even, saturate), in
// double on a grid of accumulators and residuals that crosses every bound,
// and wants the same bytes; and checks which ops are left, since the point is
// fewer of them.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend/dnnl/quantize.h"

using namespace llga;

namespace {

PostOp relu(float alpha = 0) { return {.kind = PostOp::Kind::Eltwise, .alg = PostOpAlg::Relu, .alpha = alpha}; }
PostOp clip(float lo, float hi) { return {.kind = PostOp::Kind::Eltwise, .alg = PostOpAlg::Clip, .alpha = lo, .beta = hi}; }
PostOp linear(float a, float b) { return {.kind = PostOp::Kind::Eltwise, .alg = PostOpAlg::Linear, .alpha = a, .beta = b}; }
PostOp swish() { return {.kind = PostOp::Kind::Eltwise, .alg = PostOpAlg::Swish, .alpha = 1}; }
PostOp sum() { return {.kind = PostOp::Kind::Sum, .alg = PostOpAlg::Add}; }
PostOp binaryAdd() { return {.kind = PostOp::Kind::Binary, .alg = PostOpAlg::Add}; }

// One output: acc (the int32 sum plus bias) times the channel's output scale,
// then the chain, then round half to even and saturate into u8 or s8.
double run(const std::vector<PostOp>& ops, double out_scale, double sum_scale, double acc, double residual, bool u8) {
  double x = acc * out_scale;
  for (const PostOp& op : ops) {
    if (op.kind == PostOp::Kind::Sum) {
      x += sum_scale * residual;
    } else if (op.alg == PostOpAlg::Relu) {
      x = x < 0 ? op.alpha * x : x;
    } else if (op.alg == PostOpAlg::Clip) {
      x = std::fmin(std::fmax(x, op.alpha), op.beta);
    } else if (op.alg == PostOpAlg::Linear) {
      x = op.alpha * x + op.beta;
    } else {
      ADD_FAILURE() << "no evaluator for " << op.name;
    }
  }
  const double r = std::nearbyint(x);  // (the default rounding mode: half to even)
  return u8 ? std::fmin(std::fmax(r, 0), 255) : std::fmin(std::fmax(r, -128), 127);
}

struct Case {
  const char* name;
  std::vector<PostOp> chain;  // ending in the quantizing linear
  bool u8;
  size_t ops_left;  // after folding
};

void expectSameBytes(const Case& k) {
  SCOPED_TRACE(k.name);
  std::vector<PostOp> ops = k.chain;
  std::vector<float> scales = {0.02f, 0.0035f, 0.11f};
  const std::vector<float> before = scales;
  const float sum_before = 0.047f;
  float sum_scale = sum_before;
  ASSERT_TRUE(int8::foldQuantizingScale(ops, scales, sum_scale, k.u8));
  EXPECT_EQ(ops.size(), k.ops_left);
  for (const PostOp& op : ops) EXPECT_FALSE(op.kind == PostOp::Kind::Eltwise && op.alg == PostOpAlg::Linear);
  int differ = 0, checked = 0;
  for (size_t c = 0; c < scales.size(); ++c)
    for (int acc = -6000; acc <= 6000; acc += 7)
      for (int residual : {-128, -40, -3, 0, 5, 77, 255}) {
        const double want = run(k.chain, before[c], sum_before, acc, residual, k.u8);
        const double got = run(ops, scales[c], sum_scale, acc, residual, k.u8);
        ++checked;
        if (want != got) {
          ++differ;
          // only where the unfolded value sits on a rounding tie, one product apart in float
          EXPECT_LE(std::fabs(want - got), 1.0) << "acc " << acc << " residual " << residual << " channel " << c;
        }
      }
  EXPECT_LE(differ, checked / 1000) << differ << " of " << checked << " outputs differ";
}

}  // namespace

TEST(FoldQuantizingScale, KeepsTheBytesAndDropsWhatSaturationDoes) {
  const float q = 1.0f / 0.05f;  // out_scale 0.05
  const std::vector<Case> cases = {
      {"relu into u8: nothing left", {relu(), linear(q, 0)}, true, 0},
      {"relu into s8: the relu stays", {relu(), linear(q, 0)}, false, 1},
      {"leaky relu into s8", {relu(0.1f), linear(q, 0)}, false, 1},
      {"relu6 into u8 at 6 / 255 or finer: nothing left", {clip(0, 6), linear(255.0f / 6, 0)}, true, 0},
      {"relu6 into u8 at a coarser scale: the clip, scaled", {clip(0, 6), linear(q, 0)}, true, 1},
      {"a clip above 0 into u8", {clip(0.5f, 3), linear(q, 0)}, true, 1},
      {"a clip past s8's range both ways", {clip(-9, 9), linear(q, 0)}, false, 0},
      {"a clip past s8's range on one side", {clip(-9, 4), linear(q, 0)}, false, 1},
      {"sum then relu into u8 (a residual block)", {sum(), relu(), linear(q, 0)}, true, 1},
      {"sum then relu into s8", {sum(), relu(), linear(q, 0)}, false, 2},
      {"relu, sum, relu6 into u8", {relu(), sum(), clip(0, 6), linear(q, 0)}, true, 3},
      {"the quantizing linear alone", {linear(q, 0)}, true, 0},
  };
  for (const Case& k : cases) expectSameBytes(k);
}

TEST(FoldQuantizingScale, LeavesOtherChainsAsTheyAre) {
  const std::vector<std::vector<PostOp>> chains = {
      {},                                          // no quantizing linear
      {relu(), linear(20, 128)},                   // a zero point
      {relu(), linear(-20, 0)},                    // a negative scale
      {relu(), linear(INFINITY, 0)},               // no finite scale
      {swish(), linear(20, 0)},                    // not positively homogeneous
      {binaryAdd(), linear(20, 0)},                // an operand the scale would have to reach
      {linear(2, 0.5f), relu(), linear(20, 0)},    // a linear with an offset inside
      {relu()},                                    // ends in no linear
  };
  for (const auto& chain : chains) {
    std::vector<PostOp> ops = chain;
    std::vector<float> scales = {0.5f, 0.25f};
    float sum_scale = 0.75f;
    EXPECT_FALSE(int8::foldQuantizingScale(ops, scales, sum_scale, true));
    EXPECT_EQ(ops.size(), chain.size());
    EXPECT_EQ(scales, (std::vector<float>{0.5f, 0.25f}));
    EXPECT_EQ(sum_scale, 0.75f);
  }
}
