// The kernels of fusion groups. Each entry of the fuser's pattern table
// (fuser/patterns.cpp) is bound, by its name, to the factory that builds the
// kernel of the groups it makes, registered here in the backend with one
// line next to the factory (as oneDNN's FCreateKernel binds a pattern to its
// kernel). An llga::FusionGroup node's kernel comes from its `pattern`
// attribute: the backend never re-derives what the fuser decided.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/kernel.h"
#include "runtime/value.h"

namespace llga {

struct PatternKernel {
  std::string pattern;      // a name in fusionPatterns()
  std::string description;  // what executes it ("dnnl convolution + post-ops (one primitive)")
  std::function<std::unique_ptr<Kernel>(const Node& group)> make;
};

class PatternKernels {
 public:
  static PatternKernels& global();
  void add(PatternKernel k);
  const PatternKernel* find(const std::string& pattern) const;
  std::vector<const PatternKernel*> list() const;

 private:
  std::map<std::string, PatternKernel> kernels_;
};

// LLGA_REGISTER_PATTERN_KERNEL(conv_post_ops, "what runs it", factory);
#define LLGA_REGISTER_PATTERN_KERNEL(pattern, description, factory)                                 \
  static const bool llga_registered_pattern_kernel_##pattern = [] {                                 \
    ::llga::PatternKernels::global().add({#pattern, description, factory});                         \
    return true;                                                                                    \
  }()

// A value a fused kernel reads: a group input or a non-tensor constant of the subgraph.
struct Source {
  int input = -1;  // group input index, or -1
  RtValue constant;
};
Source sourceOf(const Graph& sub, const Value* v);

// The subgraph's ops in order (constants left out).
std::vector<const Node*> opsOf(const Graph& sub);
// The group's ops when the group and each of them compute in fp32; nothing
// otherwise (or without a subgraph): the fp32-only kernels' test.
std::optional<std::vector<const Node*>> fp32OpsOf(const Node& group);

// The group's subgraph run op by op in a plan of its own (the chain
// patterns' kernel, and the fallback of kernels that fuse further).
std::unique_ptr<Kernel> makeChainKernel(const Node& group);

}  // namespace llga
