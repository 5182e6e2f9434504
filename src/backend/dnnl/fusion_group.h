// Execution of llga::FusionGroup nodes (see fusion_group.cpp).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "runtime/kernel.h"
#include "runtime/post_ops.h"

namespace llga {

// A group that is one primitive: its anchor and the post-ops after it.
struct AnchorChain {
  const Node* anchor;
  std::vector<PostOp> ops;
};
// The anchor chain of a fusion group's subgraph, when it has one.
std::optional<AnchorChain> analyzeFusionGroup(const Graph& sub);

std::unique_ptr<Kernel> makeFusionGroupKernel(const Node& group);

}  // namespace llga
