// assign-precision: under precision="bf16" (the pass context's `bf16`),
// writes precision="bf16" on every op whose kind the policy (below, with the
// context's per-kind overrides) runs in bf16, and on every fusion group whose
// anchor (its first op) is such an op, where dumps, golden tests and the
// kernels see it. Everything else stays fp32 and carries no attribute.
// Without bf16 in the context it removes nothing and writes nothing.
//
// Under int8 (llga.quantize), it runs the graph on the context's calibration
// inputs, takes the range of each activation read by an op of an int8 kind
// (convolutions and linears with constant weights, in the graph's top block)
// and writes precision="int8" with act_scale and act_dtype on the op and its
// partition: u8 where no negative value was seen, else s8, the scale mapping
// the largest magnitude seen to 255 or 127 (min-max calibration, zero point
// 0); a convolution's signed activation is that s8 grid as u8 with zero
// point 128 (act_zero_point) where the context's int8_shift_signed says the
// backend takes that faster (oneDNN's VNNI kernels), else s8 (with AMX).
// With the context's int8_asymmetric, a signed activation is u8 over its
// [min, max] with a zero point instead (calibratedQuant). An op whose
// activation calibration never saw finite, or saw only as zeros, stays fp32
// with a note (no step to take).
//
// Then the edges: a bf16 partition anchored by an op whose kernel reads and
// writes bf16 activations (a convolution or a linear), whose chain reads
// nothing else but at most a residual (an add of the output's shape), and
// whose one output only such partitions read (besides ops that read its
// sizes alone), each as its anchor's activation or as a convolution's
// residual, gets out_dtype="bf16": it
// writes bf16 and its readers skip their conversion (mobilenet's expand ->
// depthwise -> project, resnet's conv1 -> conv2 in a block, and the residual
// stream from block to block, which the readers' sum post-ops add as it
// arrives; a transformer's fc1 -> gelu -> fc2, whose gelu writes the bf16). Graph outputs and
// values read in nested blocks or by anything else stay fp32. A
// concat_batchnorm partition (fp32; densenet's concat -> batch_norm -> relu),
// a lone layer_norm's partition (a pre-norm transformer's, before its
// linears) or a float mul (squeeze-excite's) read only by such bf16
// partitions, as their activation, writes bf16 too. int8
// edges (out_scale, out_dtype) follow the same shape: int8Edges, where
// concat_batchnorm and concat partitions and float muls (squeeze-excite's)
// read only by llga.quantize's int8 convolutions write their result
// quantized too, and so do the convolutions whose outputs only go into such
// a concat.
//
//   Given:  %y = llga::FusionGroup_0[pattern="conv_post_ops"](%x, %w)
//           with_subgraph: %c = aten::conv2d(%x, %w, ...); %r = aten::relu(%c)
//   Result: %y = llga::FusionGroup_0[pattern="conv_post_ops", precision="bf16"](%x, %w)
//           with_subgraph: %c = aten::conv2d[precision="bf16"](%x, %w, ...); %r = aten::relu(%c)
#include "passes/assign_precision.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <unordered_set>

#include "ir/ops.h"
#include "passes/pass.h"
#include "passes/pass_utils.h"

namespace llga {

const std::vector<PrecisionRule>& precisionPolicy() {
  static const std::vector<PrecisionRule> rules = [] {
    std::vector<PrecisionRule> r;
    // The convolutions and matrix products are the op groups of ir/ops.def.
    // int8: the non-transposed convolutions and linear (constant weights).
    const std::string conv = "a convolution: bf16 activation and weights, fp32 accumulation, fp32 output and post-ops";
    for (const std::string& k : opsWith(op_trait::Conv))
      r.push_back({k, Precision::BF16, true, conv, true, k.find("transpose") == std::string::npos});
    const std::string mm = "a matrix product: bf16 operands, fp32 accumulation, fp32 output and post-ops";
    const std::string linear =
        "a matrix product: bf16 operands, fp32 accumulation and post-ops, output in bf16 where only such ops read it";
    for (const std::string& k : opsWith(op_trait::Matmul))
      r.push_back({k, Precision::BF16, true, k == "aten::linear" ? linear : mm, k == "aten::linear", k == "aten::linear"});
    const std::string fused = "PyTorch's fused transformer ops: their products in bf16, softmax and layer norms fp32";
    for (const char* k : {"aten::_native_multi_head_attention", "aten::_transformer_encoder_layer_fwd"})
      r.push_back({k, Precision::BF16, true, fused});
    const std::string sensitive = "numerically sensitive (exponentials, statistics over many values): fp32";
    for (const char* k : {"aten::softmax", "aten::log_softmax", "aten::layer_norm", "aten::group_norm",
                          "aten::batch_norm", "aten::instance_norm", "aten::sum", "aten::mean", "aten::var", "aten::std",
                          "aten::norm", "aten::cross_entropy_loss", "aten::nll_loss", "aten::mse_loss", "aten::exp",
                          "aten::log", "aten::pow"})
      r.push_back({k, Precision::F32, false, sensitive});
    const std::string bandwidth =
        "memory-bound: its fp32 input would be converted first, which costs what bf16 saves; fp32";
    for (const char* k : {"aten::max_pool2d", "aten::avg_pool2d", "aten::adaptive_avg_pool2d", "aten::cat",
                          "aten::relu", "aten::gelu", "aten::add", "aten::mul"})
      r.push_back({k, Precision::F32, false, bandwidth});
    const std::string scaled = "addmm/baddbmm with run-time alpha and beta (decompose turns constant ones into matmul): fp32";
    for (const char* k : {"aten::addmm", "aten::baddbmm", "aten::addbmm", "aten::addmv"})
      r.push_back({k, Precision::F32, false, scaled});
    return r;
  }();
  return rules;
}

namespace {

class AssignPrecision final : public Pass {
 public:
  std::string_view name() const override { return "assign-precision"; }
  std::string_view description() const override {
    return "under precision=\"bf16\": precision=\"bf16\" on the ops (and their partitions) the policy runs in bf16";
  }

  bool run(Graph& g) override {
    if (context().int8) return runInt8(g);
    if (!context().bf16) {
      // The graph's own int8 ops (import-quantization) still give their
      // partitions their precision and edges.
      const bool changed = visit(g.block());
      if (!changed) note("fp32: no op runs in bf16 (llga.optimize(precision=\"bf16\") asks for it)");
      return changed | int8Edges(g.block());
    }
    for (const PrecisionRule& r : precisionPolicy()) {
      auto o = context().precision_overrides.find(r.kind);
      const Precision p = o == context().precision_overrides.end() ? r.precision
                          : o->second == "bf16"                    ? Precision::BF16
                                                                   : Precision::F32;
      if (p == Precision::BF16 && !r.bf16_kernel)
        throw std::invalid_argument("precision override " + r.kind + ": \"bf16\": llga has no bf16 kernel for it");
      if (p == Precision::BF16) bf16_.emplace(Symbol::fromQualString(r.kind));
    }
    checkOverrides("bf16");
    for (const PrecisionRule& r : precisionPolicy())
      if (r.bf16_activations) bf16_io_.emplace(Symbol::fromQualString(r.kind));
    bool changed = visit(g.block());
    changed |= edges(g.block());
    return changed | int8Edges(g.block());
  }

 private:
  // Every per-kind override names a kind of the policy and asks for `lowered` or "fp32".
  void checkOverrides(const std::string& lowered) const {
    for (const auto& [kind, p] : context().precision_overrides) {
      if (p != lowered && p != "fp32")
        throw std::invalid_argument("precision override " + kind + ": \"" + p + "\" (expected \"" + lowered +
                                    "\" or \"fp32\")");
      bool known = false;
      for (const PrecisionRule& r : precisionPolicy()) known = known || r.kind == kind;
      if (!known) throw std::invalid_argument("precision override " + kind + ": not an op kind of the precision policy");
    }
  }

  // The group's anchor (its first op), or null for a node without a subgraph.
  static Node* anchorOf(const Node& group) {
    auto sub = group.subgraph();
    if (!sub) return nullptr;
    for (Node* m : sub->nodes())
      if (m->kind() != prim::Constant) return m;
    return nullptr;
  }

  // The value in n's block that input i of op (n itself, or the anchor inside
  // n's subgraph) reads; null when it is defined inside the subgraph.
  static const Value* outerInput(const Node& n, const Node& op, size_t i) {
    if (&n == &op) return n.input(i);
    const Value* v = op.input(i);
    const auto& ins = n.subgraph()->inputs();
    for (size_t j = 0; j < ins.size(); ++j)
      if (ins[j] == v) return n.input(j);
    return nullptr;
  }

  static constexpr int kHistogramBins = 2048;

  // The magnitude a calibrated range maps to the largest 8-bit step.
  static double clipThreshold(const ValueRange& r, const std::string& method, double percentile, double steps) {
    const double top = std::max(std::abs(r.min), std::abs(r.max));
    if (method == "minmax" || r.histogram.empty() || !(top > 0)) return top;
    const std::vector<int64_t>& h = r.histogram;
    const size_t bins = h.size();
    const double width = top / static_cast<double>(bins);
    int64_t total = 0;
    for (int64_t c : h) total += c;
    if (total == 0) return top;
    if (method == "percentile") {  // the upper edge of the bin where the percentile falls
      const double want = percentile / 100.0 * static_cast<double>(total);
      int64_t seen = 0;
      for (size_t b = 0; b < bins; ++b) {
        seen += h[b];
        if (static_cast<double>(seen) >= want) return width * static_cast<double>(b + 1);
      }
      return top;
    }
    // "histogram": the threshold (a bin edge, from bins / 8 up) whose expected
    // squared error is least: values past it are clipped to it, values under
    // it are rounded to steps of threshold / steps (error step^2 / 12).
    double best = top, best_err = std::numeric_limits<double>::infinity();
    for (size_t e = bins / 8; e <= bins; ++e) {
      const double t = width * static_cast<double>(e), step = t / steps;
      double err = 0;
      for (size_t b = 0; b < bins; ++b) {
        const double center = width * (static_cast<double>(b) + 0.5);
        err += static_cast<double>(h[b]) * (center > t ? (center - t) * (center - t) : step * step / 12.0);
      }
      if (err < best_err) best_err = err, best = t;
    }
    return best;
  }

  bool runInt8(Graph& g) {
    std::set<Symbol> int8;
    for (const PrecisionRule& r : precisionPolicy()) {
      auto o = context().precision_overrides.find(r.kind);
      if (o != context().precision_overrides.end() && o->second == "int8" && !r.int8_kernel)
        throw std::invalid_argument("precision override " + r.kind + ": \"int8\": llga has no int8 kernel for it");
      if (r.int8_kernel && (o == context().precision_overrides.end() || o->second == "int8"))
        int8.emplace(Symbol::fromQualString(r.kind));
    }
    checkOverrides("int8");
    struct Candidate {
      Node* node;    // the op, or its partition
      Node* op;      // the op
      const Value* activation;
    };
    std::vector<Candidate> found;
    std::unordered_set<const Value*> wanted;
    std::unordered_set<const Node*> readers;  // the candidates' nodes: ranges as they read their activations
    bool imported = false;  // a partition of an op the graph quantized got its precision
    std::function<void(Block*)> walk = [&](Block* b) {
      for (Node* n : b->nodes()) {
        for (Block* sub : n->blocks()) walk(sub);
        Node* op = n->subgraph() ? anchorOf(*n) : n;
        if (!op || !int8.count(op->kind())) continue;
        if (precisionOf(*op) == Precision::INT8) {  // the graph's own quantization (import-quantization)
          if (n != op) imported |= setPrecision(*n, Precision::INT8);
          continue;
        }
        const std::string what = op->kind().toQualString() + std::string(" (%") + op->output(0)->debugName() + ")";
        if (b != g.block()) {
          note(what + ": inside a loop or branch, where calibration does not look: fp32");
          continue;
        }
        const Value* w = op->inputs().size() > 1 ? outerInput(*n, *op, 1) : nullptr;
        if (!w || (w->node()->kind() != prim::Constant && w->node()->kind() != prim::GetAttr)) {
          note(what + ": its weight is not a constant: fp32");
          continue;
        }
        const std::string& name = n->output(0)->debugName();
        if (context().int8_skip.count(name) || (context().int8_only && !context().int8_only->count(name))) {
          note(what + ": kept fp32 as asked (%" + name + ")");
          continue;
        }
        if (onePixelConv(*op)) continue;
        const Value* act = outerInput(*n, *op, 0);
        if (!act) continue;
        found.push_back({n, op, act});
        wanted.insert(act);
        readers.insert(n);
      }
    };
    walk(g.block());
    if (context().int8_dynamic) {  // linears only, their activations quantized per call: nothing to calibrate
      bool changed = imported;
      for (const Candidate& c : found) {
        if (c.op->kind().toQualString() != "aten::linear") {
          note(c.op->kind().toQualString() + std::string(" (%") + c.op->output(0)->debugName() +
               "): dynamic int8 quantizes linears only: fp32");
          continue;
        }
        changed |= setPrecision(*c.op, Precision::INT8);
        changed |= setDynamicActivation(*c.op);
        if (c.node != c.op) changed |= setPrecision(*c.node, Precision::INT8);
      }
      return changed;
    }
    if (found.empty()) {
      note("int8: no convolution or linear with constant weights to quantize");
      return imported | int8Edges(g.block());
    }
    if (!evaluator()) {
      note("int8: no evaluator to calibrate with: everything fp32");
      return imported | int8Edges(g.block());
    }
    const std::string& method = context().calibration_method;
    if (method != "minmax" && method != "percentile" && method != "histogram")
      throw std::invalid_argument("calibration method \"" + method + "\" (expected minmax, percentile or histogram)");
    if (method == "percentile" && !(context().percentile > 0 && context().percentile <= 100))
      throw std::invalid_argument("calibration percentile " + std::to_string(context().percentile) +
                                  " (expected a value in (0, 100])");
    const std::unordered_map<const Value*, ValueRange> ranges =
        evaluator()->observeRanges(g, context(), wanted, readers, method == "minmax" ? 0 : kHistogramBins);
    bool changed = imported;
    for (const Candidate& c : found) {
      auto it = ranges.find(c.activation);
      if (it == ranges.end() || it->second.elements == 0) {
        note(c.op->kind().toQualString() + std::string(" (%") + c.op->output(0)->debugName() +
             "): calibration never saw a finite float activation: fp32");
        continue;
      }
      if (!(std::max(std::abs(it->second.min), std::abs(it->second.max)) > 0)) {
        // Any step would be a guess: at 1, a later 0.01 rounds to 0 (fuzzer
        // seed 140705: an amin over relu outputs, all zeros at calibration)
        note(c.op->kind().toQualString() + std::string(" (%") + c.op->output(0)->debugName() +
             "): calibration saw only zeros as its activation, which gives no step: fp32");
        continue;
      }
      const ActivationQuant q = calibratedQuant(it->second, hasTrait(c.op->kind(), op_trait::Conv));
      changed |= setPrecision(*c.op, Precision::INT8);
      changed |= setActivationQuant(*c.op, q);
      if (c.node != c.op) changed |= setPrecision(*c.node, Precision::INT8);
    }
    return changed | int8Edges(g.block());
  }

  // How a calibrated range is quantized. Non-negative: u8 over [0, t].
  // Signed, symmetric: the s8 grid over [-t, t]; a convolution's as u8 with
  // zero point 128 (the s8 grid shifted) where the context says the backend
  // takes that faster (oneDNN's VNNI kernels multiply u8 by s8; an s8 source
  // costs them a shift and a compensation that measured 10-30% more than a
  // zero point on mobilenet_v2's expand convolutions). Signed, asymmetric:
  // the u8 grid over [max(min, -t), min(max, t)] with the zero point that
  // puts 0 on a step (PyTorch's affine observers: scale (hi - lo) / 255,
  // zero point round(-lo / scale)). t is the method's threshold over the
  // magnitudes; for the asymmetric grid it is picked with the steps the
  // range's two sides leave to the larger one.
  ActivationQuant calibratedQuant(const ValueRange& r, bool conv) const {
    const std::string& method = context().calibration_method;
    const double pct = context().percentile;
    ActivationQuant q;
    if (r.min >= 0 || !context().int8_asymmetric) {
      const bool non_negative = r.min >= 0;
      const double steps = non_negative ? 255.0 : 127.0;
      const double magnitude = clipThreshold(r, method, pct, steps);
      q.scale = magnitude > 0 ? magnitude / steps : 1.0;
      const bool shifted = !non_negative && conv && context().int8_shift_signed;
      q.is_unsigned = non_negative || shifted;
      q.zero_point = shifted ? 128 : 0;
      return q;
    }
    const double top = std::max(-r.min, std::max(r.max, 0.0));
    const double other = std::min(-r.min, std::max(r.max, 0.0));  // the smaller side's extent
    const double t = top > 0 ? clipThreshold(r, method, pct, 255.0 * top / (top + other)) : 0.0;
    const double lo = std::max(r.min, -t), hi = std::min(std::max(r.max, 0.0), t);
    q.is_unsigned = true;
    if (!(hi - lo > 0)) return q;  // scale 1, zero point 0
    q.scale = (hi - lo) / 255.0;
    q.zero_point = static_cast<int32_t>(std::clamp(std::nearbyint(-lo / q.scale), 0.0, 255.0));
    return q;
  }

  // An int8 convolution partition whose chain reads nothing but its
  // activation and weights, or besides them one residual (below), and whose
  // one output only int8 convolution partitions read, each as its activation
  // or as such a residual: it writes that value quantized as the activation
  // readers read it (out_scale, out_dtype), so they need not quantize it
  // again. A residual reader takes it as it arrives: its sum post-op adds
  // it into its dst where that is int8 too, else it is dequantized first.
  // An activation reader must be there (its act_scale is the value's
  // calibrated scale). So a residual stream through resnet's or mobilenet's
  // blocks is int8 end to end.
  bool int8Edges(Block* b) {
    auto int8Conv = [](const Node& n) {
      const Node* a = anchorOf(n);
      return a && precisionOf(n) == Precision::INT8 && precisionOf(*a) == Precision::INT8 &&
             activationQuantOf(*a) && hasTrait(a->kind(), op_trait::Conv);
    };
    // llga.quantize's own quantization (not the graph's: there a residual
    // read quantized would differ from the graph's fp32 one).
    auto ownInt8 = [this](const Node& n) { return context().int8 && !weightScalesOf(*anchorOf(n)); };
    const std::unordered_set<const Value*> barred = valuesLeavingOps(b);
    // Where v goes: its uses, a max pooling's (int8 passes through it, see
    // maxPooling) replaced by its output's; `pools` collects those poolings.
    // Empty where a value on the way leaves the block's ops or is not read.
    auto uses = [&](const Value* v, std::vector<Node*>& pools) {
      std::vector<Use> out;
      if (barred.count(v) || !v->hasUses()) return out;
      for (const Use& u : v->uses()) {
        if (u.user->owningBlock() != b || u.offset != 0 || !maxPooling(*u.user)) {
          out.push_back(u);
          continue;
        }
        const Value* p = u.user->output(0);
        if (barred.count(p) || !p->hasUses()) return std::vector<Use>{};
        pools.push_back(u.user);
        out.insert(out.end(), p->uses().begin(), p->uses().end());
      }
      return out;
    };
    bool changed = false;
    // Max poolings between a producer and its readers: int8 in and out, at
    // the producer's scale, where the producer writes int8.
    auto markPools = [&](const std::vector<Node*>& pools, const std::optional<ActivationQuant>& q) {
      bool c = false;
      for (Node* p : pools) {
        c |= setPrecision(*p, q ? Precision::INT8 : Precision::F32);
        c |= setPrecision(*anchorOf(*p), q ? Precision::INT8 : Precision::F32);
        c |= setInt8Output(*p, q);
      }
      return c;
    };
    // Three fp32 producers can write their result quantized: a
    // concat_batchnorm partition (backend/dnnl/channel_affine.h), a concat
    // partition (its float parts quantized, int8 ones copied: ops/cat.cpp)
    // and a float mul (squeeze-excite's map times its per-channel scale:
    // ArithKernel in ops/binary.cpp, one pass). Where llga.quantize's int8
    // convolutions alone read the value (through max poolings too), each as
    // its activation at one quantization, they do, and the convolutions skip
    // their quantizing pass (densenet121: the 1x1 after each of its 58
    // concats; googlenet: the four branches reading each inception block's
    // concat; efficientnet_b0, regnet_y_800mf: the 1x1 after each
    // squeeze-excite).
    auto readersQuant = [&](const Value* v, std::vector<Node*>& pools) -> std::optional<ActivationQuant> {
      const std::vector<Use> readers = uses(v, pools);
      if (readers.empty()) return std::nullopt;
      std::optional<ActivationQuant> q;
      for (const Use& u : readers) {
        if (u.user->owningBlock() != b || !int8Conv(*u.user) || !ownInt8(*u.user) || !readAsActivation(*u.user, u.offset))
          return std::nullopt;
        const std::optional<ActivationQuant> r = activationQuantOf(*anchorOf(*u.user));
        if (q && *q != *r) return std::nullopt;
        q = r;
      }
      return q;
    };
    for (Node* n : b->nodes())
      if (concatBatchNorm(*n) || concatPartition(*n) || floatMul(*n)) {
        std::vector<Node*> pools;
        const std::optional<ActivationQuant> q = readersQuant(n->output(0), pools);
        changed |= setInt8Output(*n, q);
        changed |= markPools(pools, q);
      }
    // A value that goes only into one list which only a concat partition
    // writing int8 reads, as its parts: that partition's quantization (its
    // producer writes it so, and the concat copies its bytes).
    auto intoInt8Concat = [&](const Value* v) -> std::optional<ActivationQuant> {
      if (barred.count(v) || v->uses().size() != 1) return std::nullopt;
      const Node* list = v->uses()[0].user;
      if (list->owningBlock() != b || list->kind() != prim::ListConstruct || list->outputs().size() != 1)
        return std::nullopt;
      const Value* l = list->output(0);
      if (barred.count(l) || l->uses().size() != 1 || l->uses()[0].offset != 0) return std::nullopt;
      const Node* cat = l->uses()[0].user;
      if (cat->owningBlock() != b || !concatPartition(*cat)) return std::nullopt;
      return int8OutputOf(*cat);
    };
    for (Node* n : b->nodes()) {
      if (!int8Conv(*n) || n->outputs().size() != 1 ||
          !(chainReadsNothingElse(*n) || (ownInt8(*n) && chainReadsAtMostResidual(*n))))
        continue;
      if (ownInt8(*n))
        if (const std::optional<ActivationQuant> cq = intoInt8Concat(n->output(0))) {
          changed |= setInt8Output(*n, cq);
          continue;
        }
      std::vector<Node*> pools;
      const std::vector<Use> readers = uses(n->output(0), pools);
      bool ok = !readers.empty();
      std::optional<ActivationQuant> q;
      for (const Use& u : readers) {
        ok = ok && u.user->owningBlock() == b && int8Conv(*u.user);
        if (!ok) break;
        if (!readAsActivation(*u.user, u.offset)) {
          ok = ownInt8(*n) && ownInt8(*u.user) && readAsResidual(*u.user, u.offset);
          continue;
        }
        const std::optional<ActivationQuant> r = activationQuantOf(*anchorOf(*u.user));
        ok = !q || *q == *r;  // one quantization for all readers
        q = r;
      }
      ok = ok && q;
      changed |= setInt8Output(*n, ok ? q : std::nullopt);
      changed |= markPools(pools, ok ? q : std::nullopt);
    }
    return changed;
  }
  // A mul of two float tensors, not in a partition.
  static bool floatMul(const Node& n) {
    if (n.kind().toQualString() != "aten::mul" || n.inputs().size() != 2 || n.outputs().size() != 1) return false;
    for (const Value* v : {n.input(0), n.input(1), n.output(0)})
      if (!v->type()->isTensor() || knownDtype(v) != ScalarType::Float) return false;
    return true;
  }
  // A partition of the fusion pattern `name` with one output.
  static bool partitionOf(const Node& group, const char* name) {
    static const Symbol pattern = Symbol::fromQualString("attr::pattern");
    const AttrValue* a = group.attributes().find(pattern);
    return a && a->is<std::string>() && a->get<std::string>() == name && group.outputs().size() == 1 &&
           group.subgraph();
  }
  // A partition of the pattern `name` whose one op (besides constants) is a `kind`.
  static bool loneOpPartition(const Node& group, const char* name, const char* kind) {
    if (!partitionOf(group, name)) return false;
    int ops = 0;
    for (const Node* m : group.subgraph()->nodes())
      if (m->kind() != prim::Constant) ops += m->kind().toQualString() == kind ? 1 : 100;
    return ops == 1;
  }
  // A concat partition of one aten::cat.
  static bool concatPartition(const Node& group) { return loneOpPartition(group, "concat", "aten::cat"); }
  static bool concatBatchNorm(const Node& group) { return partitionOf(group, "concat_batchnorm"); }
  // A layernorm partition of one aten::layer_norm (its kernel writes bf16 from llga's rows).
  static bool layerNormPartition(const Node& group) {
    return loneOpPartition(group, "layernorm_post_ops", "aten::layer_norm");
  }
  // A partition that is one 2-D max pooling reading its input once: int8
  // passes through it exactly (the maximum of values quantized at one scale
  // is the quantized maximum; a window always holds one value of the input,
  // so its padding never wins).
  static bool maxPooling(const Node& group) {
    const Node* a = anchorOf(group);
    if (!a || a->kind().toQualString() != "aten::max_pool2d" || group.outputs().size() != 1 ||
        a->output(0) != group.subgraph()->outputs().at(0))
      return false;
    for (const Node* m : group.subgraph()->nodes())
      if (m != a && m->kind() != prim::Constant) return false;
    return readAsActivation(group, 0);
  }
  // An op that reads only its tensor input's sizes, the same in bf16 (not
  // its dtype: prim::dtype and new_zeros would see the bf16).
  static bool readsSizesOnly(const Node& n) {
    const std::string kind = n.kind().toQualString();
    return kind == "aten::size" || kind == "aten::dim" || kind == "aten::numel";
  }
  // A group anchored by a convolution, whose sum post-op adds a bf16 residual
  // as it arrives (a linear's chain would convert it first).
  static bool convAnchored(const Node& group) {
    const Node* a = anchorOf(group);
    return a && hasTrait(a->kind(), op_trait::Conv);
  }
  // A bf16 group whose anchor reads and writes bf16 activations.
  bool bf16Io(const Node& group) const {
    const Node* a = anchorOf(group);
    return a && precisionOf(*a) == Precision::BF16 && bf16_io_.count(a->kind());
  }
  // Group input `i` is read once inside, as the anchor's activation (input 0).
  static bool readAsActivation(const Node& group, size_t i) {
    const Value* in = group.subgraph()->inputs()[i];
    return in->uses().size() == 1 && in->uses()[0].user == anchorOf(group) && in->uses()[0].offset == 0;
  }
  // Every group input is read by the anchor alone: the chain has no operand.
  static bool chainReadsNothingElse(const Node& group) {
    const Node* a = anchorOf(group);
    for (const Value* in : group.subgraph()->inputs())
      for (const Use& u : in->uses())
        if (u.user != a) return false;
    return true;
  }
  // Group input `i` is its chain's one operand, read once, by an add (alpha
  // 1) of a value the group computes, with the sizes of the group's output
  // (known): the residual, which the kernel adds as a sum post-op into its
  // dst (and so can take in dst's own precision).
  static bool readAsResidual(const Node& group, size_t i) {
    const Graph& sub = *group.subgraph();
    const Value* in = sub.inputs()[i];
    if (in->uses().size() != 1 || group.outputs().size() != 1 || !in->type()->isTensor()) return false;
    const Node* add = in->uses()[0].user;
    const std::string kind = add->kind().toQualString();
    if ((kind != "aten::add" && kind != "aten::add_") || add->inputs().size() != 3 || in->uses()[0].offset > 1)
      return false;
    const Value* other = add->input(1 - in->uses()[0].offset);
    const std::optional<int64_t> alpha = constantInt(add->input(2));
    if (!alpha || *alpha != 1 || std::find(sub.inputs().begin(), sub.inputs().end(), other) != sub.inputs().end())
      return false;
    for (const Value* v : sub.inputs())  // no other operand: every other input is the anchor's
      if (v != in)
        for (const Use& u : v->uses())
          if (u.user != anchorOf(group)) return false;
    const Value* out = group.output(0);
    if (!out->type()->isTensor()) return false;
    const auto sizes = in->type()->tensorInfo().concreteSizes();
    return sizes && sizes == out->type()->tensorInfo().concreteSizes();
  }
  // The chain reads no operand, or one: a residual.
  static bool chainReadsAtMostResidual(const Node& group) {
    if (chainReadsNothingElse(group)) return true;
    const Node* a = anchorOf(group);
    const auto& ins = group.subgraph()->inputs();
    for (size_t i = 0; i < ins.size(); ++i) {
      bool anchor_only = true;
      for (const Use& u : ins[i]->uses()) anchor_only = anchor_only && u.user == a;
      if (!anchor_only) return readAsResidual(group, i);
    }
    return false;
  }

  // bf16 edges as int8Edges decides int8 ones: a residual reader takes the
  // value in bf16 (its sum post-op adds it into its bf16 dst, in fp32, as
  // PyTorch's autocast adds a bf16 convolution's output to a bf16 residual;
  // into an fp32 dst it is converted first); activation readers need not be
  // there.
  bool edges(Block* b) {
    bool changed = false;
    for (Node* n : b->nodes())
      for (Block* sub : n->blocks()) changed |= edges(sub);
    const std::unordered_set<const Value*> barred = valuesLeavingOps(b);
    // Besides such partitions, a concat_batchnorm partition (fp32), a lone
    // layer_norm's or a float mul read only by them, each as its activation,
    // writes its result in bf16 (the channel affine's bf16 store, llga's
    // layer norm rows; the mul converts its product), so they skip their
    // conversion (densenet121: the 1x1 after each of its 58 concats, and the
    // transitions'; efficientnet_b0: the 1x1 after each squeeze-excite;
    // vit_b_16: the q/k/v projection and fc1 after each norm).
    for (Node* n : b->nodes()) {
      const bool io = bf16Io(*n) && n->outputs().size() == 1 && chainReadsAtMostResidual(*n);
      if (!io && !concatBatchNorm(*n) && !layerNormPartition(*n) && !floatMul(*n)) continue;
      const Value* v = n->output(0);
      bool ok = !barred.count(v), read = false;
      for (const Use& u : v->uses()) {
        if (readsSizesOnly(*u.user)) continue;  // a traced attention's aten::size of its input
        read = true;
        ok = ok && u.user->owningBlock() == b && bf16Io(*u.user) &&
             (readAsActivation(*u.user, u.offset) || (io && convAnchored(*u.user) && readAsResidual(*u.user, u.offset)));
      }
      changed |= setBf16Output(*n, ok && read);
    }
    return changed;
  }

  bool visit(Block* b) {
    bool changed = false;
    for (Node* n : b->nodes()) {
      for (Block* sub : n->blocks()) changed |= visit(sub);
      if (auto sub = n->subgraph()) {
        changed |= visit(sub->block());
        const Node* anchor = nullptr;
        for (const Node* m : sub->nodes())
          if (m->kind() != prim::Constant) {
            anchor = m;
            break;
          }
        if (anchor) changed |= setPrecision(*n, precisionOf(*anchor));
        continue;
      }
      if (bf16_.count(n->kind()) && precisionOf(*n) != Precision::INT8 &&  // the graph's own int8 stays
          !onePixelConv(*n))
        changed |= setPrecision(*n, Precision::BF16);
    }
    return changed;
  }

  // A convolution from one pixel to one pixel (squeeze-excite's 1x1s on the
  // pooled map), its kind not overridden by the caller: it stays fp32 under
  // bf16 and int8. Its weights are read once per call, and in fp32 llga's
  // one-row product (backend/dnnl/gemv.h) runs it in a few microseconds,
  // where a bf16 or int8 primitive took 7-25 us a call (efficientnet_b0's
  // 32 of them: about 0.2 ms a call against 0.46 in bf16 and 0.36 in int8,
  // on the Zen 4).
  bool onePixelConv(const Node& n) {
    if (!hasTrait(n.kind(), op_trait::Conv) || n.outputs().size() != 1 || !n.output(0)->type()->isTensor() ||
        context().precision_overrides.count(n.kind().toQualString()))
      return false;
    for (const Value* v : {n.input(0), n.output(0)}) {
      const auto sizes = v->type()->isTensor() ? v->type()->tensorInfo().concreteSizes() : std::nullopt;
      if (!sizes || sizes->size() < 3) return false;
      for (size_t i = 2; i < sizes->size(); ++i)
        if ((*sizes)[i] != 1) return false;
    }
    note(std::string(n.kind().toQualString()) + " from one pixel to one pixel (" + n.output(0)->debugName() +
         "): fp32 (on llga's one-row product for one image)");
    return true;
  }

  std::set<Symbol> bf16_;
  std::set<Symbol> bf16_io_;
};

}  // namespace

LLGA_REGISTER_PASS(AssignPrecision);

}  // namespace llga
