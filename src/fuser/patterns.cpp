#include "fuser/patterns.h"

#include <algorithm>

#include "fuser/post_ops.h"
#include "ir/ops.h"
#include "passes/pass_utils.h"

namespace llga {
namespace {

// attention's ops: q @ kt, the score chain (a scale and/or a mask: alpha * s
// + beta, + - * / an operand, or masked_fill / where with a bool mask and a
// constant value), softmax over the last dim in the scores'
// dtype, then the probabilities @ v; q, kt and v of one rank (2+), which the
// kernel needs to split them into rows per batch entry. Then, optionally (the
// pattern's may_close), a permute or transpose of the output that keeps its
// last dim last and whose values one op reads at most (size reads aside):
// the kernel writes each output row where the permuted tensor, dense, has it
// (BERT's permute(0, 2, 1, 3) and nn.MultiheadAttention's transpose(0, 1)
// before the heads are merged), so the merge that follows is a view instead
// of a copy. PyTorch's permuted value is a strided view where llga's is
// dense; with one reader at most, nothing that runs later can tell them
// apart (a write into what that reader makes shows through the dense value
// only to that reader, which has run).
std::string checkAttention(const std::vector<const Node*>& all) {
  std::vector<const Node*> ops = all;
  const Node* perm = nullptr;
  if (ops.size() > 3) {
    const std::string k = ops.back()->kind().toQualString();
    if (k == "aten::permute" || k == "aten::transpose") {
      perm = ops.back();
      ops.pop_back();
    }
  }
  auto product = [](const Node* n) {
    const std::string k = n->kind().toQualString();
    return k == "aten::matmul" || k == "aten::bmm";
  };
  auto rank = [](const Value* v) -> std::optional<size_t> {
    return v->type()->isTensor() ? v->type()->tensorInfo().rank() : std::nullopt;
  };
  if (ops.size() < 3) return "too few ops";
  const Node* qk = ops.front();
  const Node* softmax = ops[ops.size() - 2];
  const Node* pv = ops.back();
  if (!product(qk) || !product(pv)) return "the products are not matmul/bmm";
  const auto rq = rank(qk->input(0)), rk = rank(qk->input(1)), rv = rank(pv->input(1));
  if (!rq || *rq < 2 || rk != rq || rv != rq) return "q, k^T and v are not known to share one rank of 2+";
  const auto dim = constantInt(softmax->input(1));
  if (!dim || (*dim != -1 && *dim != static_cast<int64_t>(*rq) - 1)) return "the softmax is not over the last dim";
  if (softmax->inputs().size() > 2 && !isNone(softmax->input(2))) return "the softmax converts its dtype";
  const PostOpMatch m = translateChain(ops, 1, ops.size() - 2);
  if (!m.ok()) return m.why_not;
  for (const PostOp& op : m.ops) {
    const bool scale = op.kind == PostOp::Kind::Eltwise && op.alg == PostOpAlg::Linear;
    const bool mask = (op.kind == PostOp::Kind::Binary &&
                       (op.alg == PostOpAlg::Add || op.alg == PostOpAlg::Sub || op.alg == PostOpAlg::Mul ||
                        op.alg == PostOpAlg::Div)) ||
                      op.kind == PostOp::Kind::Select;
    if (!scale && !mask) return op.name + " is no scale or mask";
  }
  if (perm) {
    const auto order = permutationOf(perm, static_cast<int64_t>(*rq));
    if (!order) return "the output's permutation is not constant";
    if (order->back() != static_cast<int64_t>(*rq) - 1) return "the output's permutation moves its last dim";
    const auto& uses = perm->output()->uses();
    if (std::count_if(uses.begin(), uses.end(), [](const Use& u) { return !readsMetadataOnly(*u.user); }) > 1)
      return "the permuted output's values have more than one reader";
  }
  return "";
}

// scaled_conv's ops: mul(x, s), s one number per channel of x [1, C, H, W]
// (squeeze-excite's scale), read only by a 1x1 convolution without padding,
// in one group, with constant weights, then its post-ops. Taken where the
// weights are small against the map: OC*C <= 8192 and C*H*W >= 16 * OC*C.
// Per call the weights are then read plain, scaled and reordered into the
// primitive's layout (three passes where a constant weight takes none); that
// costs ~1.5 ns per weight, against ~0.3 ns per map element for the mul it
// saves (measured on efficientnet_b0 and regnet_y_800mf: a win up to 24 x
// 144 weights on a 144 x 56 x 56 map, even at 40 x 240 on 240 x 28 x 28, a
// loss from 80 x 240 on 240 x 14 x 14). One image: every image would need
// weights of its own.
constexpr int64_t kScaledConvMaxWeights = 8192;

std::string checkScaledConv(const std::vector<const Node*>& ops) {
  if (ops.size() < 2) return "too few ops";
  const Node* mul = ops[0];
  const Node* conv = ops[1];
  auto sizes = [](const Value* v) -> std::optional<std::vector<int64_t>> {
    if (!v->type()->isTensor()) return std::nullopt;
    return v->type()->tensorInfo().concreteSizes();
  };
  const auto a = sizes(mul->input(0)), b = sizes(mul->input(1));
  if (!a || !b || a->size() != 4 || b->size() != 4) return "the mul's operands are not known 4-d tensors";
  const bool a_is_map = (*a)[2] * (*a)[3] > 1;
  const std::vector<int64_t>& map = a_is_map ? *a : *b;
  const std::vector<int64_t>& scale = a_is_map ? *b : *a;
  if (map[0] != 1 || scale[0] != 1 || scale[1] != map[1] || scale[2] != 1 || scale[3] != 1)
    return "not one image scaled per channel";
  for (const Value* v : mul->inputs())
    if (auto dt = knownDtype(v); !dt || *dt != ScalarType::Float) return "the mul's operands are not float32";
  const std::string k = conv->kind().toQualString();
  if (k != "aten::_convolution" && k != "aten::conv2d") return "no 2-d convolution reads the scaled map";
  if (k == "aten::_convolution") {
    const auto transposed = constantNumber(conv->input(6));
    if (!transposed || *transposed != 0) return "a transposed convolution";
  }
  if (conv->input(1)->node()->kind() != prim::Constant || !conv->input(1)->type()->isTensor())
    return "the convolution's weights are not constant";
  const auto w = sizes(conv->input(1));
  if (!w || w->size() != 4 || (*w)[1] != map[1] || (*w)[2] != 1 || (*w)[3] != 1) return "not a 1x1 convolution in one group";
  const auto padding = constantInts(conv->input(4));
  if (!padding || std::any_of(padding->begin(), padding->end(), [](int64_t p) { return p != 0; })) return "padded";
  const int64_t weights = (*w)[0] * (*w)[1];
  if (weights > kScaledConvMaxWeights || map[1] * map[2] * map[3] < 16 * weights)
    return "the weights are too large to scale per call against the map";
  return "";
}

}  // namespace

// Anchors and post-ops come from the op groups (ir/ops.def): post-ops, for
// every chain below, are the Eltwise group (and round, and x * sigmoid(x))
// and the Binary group with a tensor (broadcast) or a scalar operand
// (fuser/post_ops.cpp decides each one).
//
// Binary and eltwise chains run op by op, so their chains may grow through a
// commutative binary op with a bigger operand (chain_may_grow).
//
// A lone anchor becomes a partition where the oneDNN Graph bridge makes one
// (convolution, linear/matmul, pooling, layer_norm, concat) and, unlike the
// bridge, for an eltwise op: a relu whose input has other readers (an FPN
// level that is also an output, a slice of a split) then runs on oneDNN in
// its producer's blocked layout rather than outside on a plain copy. A lone
// batch_norm, softmax or binary op stays outside.
static const std::vector<FusionPattern> kPatterns = {
    {"attention", 4, {"aten::matmul", "aten::bmm"}, 3, false,
     R"(
        q    k^T
         \   /
         matmul
            |
        [scale | mask] x0..3      mul/div by a number, add a mask, masked_fill/where
            |
        softmax(-1)
            |     v
            |    /
          matmul                  llga's fused attention: per block of query
            |                     rows, scores stay in cache (AVX-512)
        [permute | transpose]     keeping the last dim: each row written where
            |                     the permuted tensor has it
           out
)",
     false, false, nullptr, {"aten::softmax", "aten::matmul|aten::bmm"}, checkAttention, true,
     "aten::permute|aten::transpose"},
    {"conv_post_ops", 3, opsWith(op_trait::Conv), 4, true,
     R"(
        x   W  b
         \  |  /
        convolution
             |
        [eltwise | binary(., y)] x0..4      e.g. conv -> add(residual) -> relu
             |
            out
)",
     false, true},
    {"matmul_post_ops", 3, opsWith(op_trait::Matmul), 4, true,
     R"(
        x   W  b                      q    k^T
         \  |  /                       \   /
         linear          or            matmul
             |                            |
        [eltwise | binary] x0..4      mul(scale) -> add(mask)
             |                            |
            out                          out
)",
     false, true},
    {"scaled_conv", 3, {"aten::mul"}, 4, false,
     R"(
        x [1, C, H, W]   s [1, C, 1, 1]     (squeeze-excite's scale)
              \         /
                 mul              read only by the convolution
                  |
        1x1 convolution (W)      one primitive with W * s as its weights
                  |              (per call): the map is read once, not
        [eltwise | binary] x0..4 read, scaled, written and read again
)",
     false, true, "aten::_convolution|aten::conv2d", {}, checkScaledConv, false, nullptr, /*fp32_only=*/true},
    {"concat_batchnorm", 3, {"aten::cat"}, 1, false,
     R"(
       x0  x1 ... xn
         \  |   /
          concat       (read only by the batch_norm)
             |
        batch_norm     (eval mode: per channel, so each part is normalised
             |          straight into its slice of the result, no concat copy)
           [relu]      (another post-op: the group runs op by op)
)",
     false, false, "aten::batch_norm"},
    {"pool_post_ops", 2, opsWith(op_trait::Pool), 4, true,
     R"(
          x
          |
       max/avg pool
          |
       [eltwise | binary] x0..4
)"},
    {"batchnorm_post_ops", 2, {"aten::batch_norm"}, 4, false,
     R"(
          x
          |
       batch_norm    (not folded: its input is no conv/linear with constant weights)
          |
       relu ...      (at least one post-op: a lone batch_norm is no partition)
)"},
    {"layernorm_post_ops", 2, {"aten::layer_norm", "aten::group_norm"}, 4, true,
     R"(
          x
          |
       layer_norm | group_norm
          |
       [eltwise | binary] x0..4
)"},
    {"softmax_post_ops", 2, {"aten::softmax"}, 4, false,
     R"(
          x
          |
       softmax      (at least one post-op: a lone softmax is no partition)
          |
       [eltwise | binary] x1..4
)"},
    {"concat", 2, {"aten::cat"}, 0, true,
     R"(
       x0  x1 ... xn
         \  |   /
          concat
)"},
    {"binary_post_ops", 1, opsWith(op_trait::Binary), 4, false,
     R"(
       x     y
        \   /
        binary        (at least one post-op)
          |
       [eltwise | binary] x1..4
))",
     true},
    {"eltwise_post_ops", 1, opsWith(op_trait::Eltwise), 4, true,
     R"(
          x
          |
       eltwise
          |
       [eltwise | binary] x0..4
))",
     true},
};

const std::vector<FusionPattern>& fusionPatterns() { return kPatterns; }

const FusionPattern* findPattern(const std::string& name) {
  auto it = std::find_if(kPatterns.begin(), kPatterns.end(), [&](const FusionPattern& p) { return name == p.name; });
  return it == kPatterns.end() ? nullptr : &*it;
}

}  // namespace llga
