// A graph ready to run: its weights bound, its plan built, its inputs checked.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "runtime/plan.h"

namespace llga {

struct InputSpec {
  std::string name;
  TypePtr type;
};

class CompiledGraph {
 public:
  CompiledGraph(std::shared_ptr<Graph> graph, WeightMap weights);

  // Checks count, dtype and rank of each input against the graph's types
  // (std::invalid_argument naming the input), then runs.
  std::vector<RtValue> run(std::vector<RtValue> inputs) const;

  const std::shared_ptr<Graph>& graph() const { return graph_; }
  const std::vector<InputSpec>& inputs() const { return inputs_; }
  size_t weightBytes() const;

 private:
  void checkInputs(const std::vector<RtValue>& inputs) const;
  std::shared_ptr<Graph> graph_;
  WeightMap weights_;
  std::vector<InputSpec> inputs_;
  std::unique_ptr<Plan> plan_;
};

}  // namespace llga
