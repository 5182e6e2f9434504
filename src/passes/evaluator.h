// What passes may ask of execution, without knowing what executes it: which
// ops run, constant results, observed shapes, and kernels' layout behaviour. The
// driver (and llga-opt, and the Python binding) plug in the runtime's
// implementation (runtime/evaluator.h); passes see only this interface, so
// they build, run and are tested without the runtime or the backend. With
// no evaluator, the passes that need one change nothing and say so.
#pragma once

#include <limits>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/ir.h"

namespace llga {

struct PassContext;

// How the kernel that will run a node treats layouts (propagate-layouts asks;
// the plan later applies what the pass wrote). Stateful as the kernels are:
// a reader that passes values on (prim::ListConstruct) accepts strided items
// only once its own output has been allowed strided.
class LayoutQuery {
 public:
  virtual ~LayoutQuery() = default;
  // Input `i` may arrive in the backend's blocked layout (oneDNN's nChw16c).
  virtual bool acceptsBlocked(size_t i) const = 0;
  // Input `i` may arrive strided (dense in any dimension order, e.g. channels-last).
  virtual bool acceptsStrided(size_t i) const = 0;
  virtual void allowBlockedOutput(size_t j) = 0;
  virtual void allowStridedOutput(size_t j) = 0;
};

// The smallest and largest finite value a tensor value took over the runs
// observed (calibration); NaN and infinities are left out (counted).
struct ValueRange {
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  int64_t elements = 0;      // finite values seen
  int64_t non_finite = 0;    // NaN and infinities seen
  // When asked for: how many finite |x| fall in each of histogram.size()
  // equal bins over [0, max(|min|, |max|)] (a second run over the sets).
  std::vector<int64_t> histogram;
};

class Evaluator {
 public:
  virtual ~Evaluator() = default;
  // Whether the op library can run `kind` (remove-mutation turns an in-place
  // op functional only when the functional form runs).
  virtual bool supports(Symbol kind) const = 0;
  // The outputs of `n`, all of whose inputs are prim::Constants (or lists
  // built of them by prim::ListConstruct), as constant attributes typed as n's
  // outputs (None: an empty AttrValue); nullopt when it cannot (no kernel, an
  // unrepresentable result, or the op fails: it is left to fail at run time
  // with its own message). Tensor inputs and results only with
  // `max_tensor_bytes` > 0: a tensor result of at most that size, in memory of
  // its own (not a view of an input), becomes a TensorRef.
  virtual std::optional<std::vector<AttrValue>> evaluateConstant(const Node& n, size_t max_tensor_bytes = 0) const = 0;
  // Runs `g` once on the context's example inputs (or zeros shaped by the
  // graph inputs' complete types) with its weights, and returns what every
  // tensor value was (dtype, sizes, strides), merged over the times a value
  // was computed (inside loops); throws std::runtime_error saying why it
  // could not run.
  virtual std::unordered_map<const Value*, TensorInfo> observeTensors(const Graph& g, const PassContext& ctx) const = 0;
  // Runs `g` on each of the context's calibration input sets (or, without
  // any, its example inputs; without those, one set whose values spread
  // evenly over [-1, 1], for graphs whose inputs have complete types: what
  // llga-opt's golden tests calibrate on) and returns the range of
  // each of `values` that is a float tensor, as the nodes of `readers` (of
  // g's top block) read it: just before each runs, so after any in-place
  // write into it (over several such reads, the range covers them all), with
  // a histogram of `histogram_bins` bins of its magnitudes when that is > 0;
  // throws std::runtime_error saying why it could not run.
  virtual std::unordered_map<const Value*, ValueRange> observeRanges(const Graph& g, const PassContext& ctx,
                                                                     const std::unordered_set<const Value*>& values,
                                                                     const std::unordered_set<const Node*>& readers,
                                                                     int histogram_bins = 0) const = 0;
  // The layout behaviour of n's kernel; null when n has none (a constant,
  // control flow, an op the library lacks, or one it cannot build).
  virtual std::unique_ptr<LayoutQuery> layoutQuery(const Node& n) const = 0;
};

}  // namespace llga
