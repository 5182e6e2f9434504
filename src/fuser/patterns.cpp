#include "fuser/patterns.h"

#include <algorithm>

#include "ir/ops.h"

namespace llga {

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
