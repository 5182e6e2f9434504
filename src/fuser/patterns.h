// The fusion pattern table: what llga groups into partitions. Each entry is
// data (name, tier, anchor kinds, how long a post-op chain may grow, whether
// a lone anchor is worth a partition, a diagram); the matcher in fuse.cpp is
// the only pass that reads it. The backend binds each entry, by name, to the
// factory of its kernel (backend/dnnl/fusion_group.h).
#pragma once

#include <string>
#include <vector>

namespace llga {

class Node;

struct FusionPattern {
  const char* name;
  int tier;                          // higher tiers are tried first
  std::vector<std::string> anchors;  // op kinds that start a partition
  int max_post_ops;                  // post-ops (eltwise/binary) the chain may take
  bool lone_ok;                      // a partition even with nothing fused
  const char* diagram;
  // The chain's kernel runs its ops one after another (not as one primitive
  // writing the anchor's shape), so a commutative binary link (add, mul) may
  // broadcast the chain value up to its other operand's shape, as the oneDNN
  // Graph bridge lets add(x, y * 2) with a small y be one partition.
  bool chain_may_grow = false;
  // The chain becomes post-op attributes of one oneDNN primitive (conv,
  // matmul), with oneDNN 2.6's limits: one set of parameters per eltwise
  // algorithm (two clips with different bounds, two leaky_relus with
  // different slopes come out wrong), so such a chain stops before the second.
  bool one_primitive = false;
  // An op that must read the anchor's result, as its only reader and first
  // operand, and joins the group before the post-op chain (concat ->
  // batch_norm); when it does not, the anchor tries the next pattern.
  const char* then = nullptr;
  // Ops that must follow the post-op chain, in order, each the only reader
  // of the value before it, as its first operand (attention: softmax, then
  // the second matmul); when they do not, the anchor tries the next pattern.
  std::vector<std::string> closing = {};
  // The whole group's ops in order (anchor, chain, closing): "" to accept,
  // else why not (the anchor then tries the next pattern). Null: any.
  std::string (*check)(const std::vector<const Node*>& ops) = nullptr;
  // The chain may take masked_fill / where with a constant value
  // (PostOp::Kind::Select), which the pattern's own kernel applies (no
  // oneDNN primitive does).
  bool selects = false;
  // An op that may follow the closing ops, on the same terms as they, and
  // joins the group when `check` accepts the group with it (attention: a
  // permute or transpose of the output that keeps its last dim last, written
  // so by the kernel); else the group closes without it.
  const char* may_close = nullptr;
  // Formed only where the compile asks for no lower precision (neither
  // precision="bf16" nor llga.quantize): a kernel with only an fp32 form
  // whose ops, left apart, run in bf16 or int8 where the precision policy
  // says (scaled_conv: its weights change per call, so its convolution
  // would run fp32, or convert them per call).
  bool fp32_only = false;
};

// Highest tier first.
const std::vector<FusionPattern>& fusionPatterns();
const FusionPattern* findPattern(const std::string& name);

}  // namespace llga
