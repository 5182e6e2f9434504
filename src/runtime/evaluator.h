// The runtime as the passes' Evaluator (passes/evaluator.h): the op
// registry answers which kinds run, single nodes are evaluated with their
// kernels, and shapes are observed by running the graph's plan once with
// plain (unreordered) weights.
#pragma once

#include <memory>

#include "passes/evaluator.h"

namespace llga {

std::shared_ptr<const Evaluator> runtimeEvaluator();

}  // namespace llga
