#include "driver/compile.h"

#include <stdexcept>

#include "runtime/evaluator.h"

namespace llga {
namespace {

// A method graph whose calls were not inlined (no module given): say what to
// pass rather than report prim::CallMethod as a missing op.
void refuseMethodCalls(const Graph& g) {
  size_t calls = 0;
  const Node* first = nullptr;
  g.forEachNode([&](Node* n) {
    if (n->kind() != prim::CallMethod) return;
    if (!first) first = n;
    ++calls;
  });
  if (!calls) return;
  const AttrValue* name = first->attributes().find(attr::name);
  std::string what = first->inputs().empty() ? "?" : first->input(0)->type()->str();
  what += "." + (name && name->is<std::string>() ? name->get<std::string>() : std::string("?"));
  throw std::invalid_argument(
      "the graph still calls " + std::to_string(calls) + " submodule method(s) (prim::CallMethod, the first " + what +
      "): llga needs the module they belong to; pass the ScriptModule (llga.optimize(traced)), its graph while the "
      "module is alive (llga.optimize(traced.graph)), name it (module=traced), or pass traced.inlined_graph.str() "
      "with params=");
}

}  // namespace

CompileResult compile(std::shared_ptr<Graph> graph, WeightMap weights, const CompileOptions& options) {
  PassManagerOptions pm;
  pm.verify_each = options.verify_each;
  auto ctx = options.context ? std::make_shared<PassContext>(*options.context) : std::make_shared<PassContext>();
  if (!ctx->evaluator) ctx->evaluator = runtimeEvaluator();
  pm.context = ctx;
  pm.after_pass = options.after_pass;
  CompileResult r;
  r.passes = PassManager(options.pipeline, pm).run(*graph);
  refuseMethodCalls(*graph);
  r.compiled = std::make_shared<CompiledGraph>(std::move(graph), std::move(weights));
  return r;
}

}  // namespace llga
