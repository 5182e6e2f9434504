// The driver: the whole pipeline in one place, from a parsed graph to a plan
// ready to run. llga.optimize (through the Python module) and
// `llga-opt --compile` both call compile(), so a golden test of llga-opt
// checks exactly what users get.
//
//   graph (parsed) --passes--> graph with llga::FusionGroup partitions
//                  --refuse leftover prim::CallMethod--> Plan (CompiledGraph)
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "passes/pass.h"
#include "runtime/compiled.h"

namespace llga {

struct CompileOptions {
  std::string pipeline = std::string(defaultPipeline());  // "" runs no pass
  // Weights by name (for freeze and folding), method graphs (inline),
  // example inputs (propagate-shapes), op kinds kept out of fusion (route);
  // without an evaluator of its own, the passes get the runtime's.
  std::shared_ptr<const PassContext> context = std::make_shared<PassContext>();
  bool verify_each = true;
  std::function<void(const PassRecord&)> after_pass;  // dumps, logs
};

struct CompileResult {
  std::vector<PassRecord> passes;
  std::shared_ptr<CompiledGraph> compiled;  // the plan over the graph the passes left
};

// Runs the pipeline on `graph` in place, then builds its plan with `weights`
// bound. Throws PassError (a pass failed), std::invalid_argument (a graph
// that still calls submodule methods, a missing or malformed weight) and
// UnsupportedOps (op kinds llga cannot run, with their source lines).
CompileResult compile(std::shared_ptr<Graph> graph, WeightMap weights, const CompileOptions& options);

}  // namespace llga
