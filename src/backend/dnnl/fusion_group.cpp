// The kernel of an llga::FusionGroup node, chosen by its `pattern`
// attribute: conv_post_ops and matmul_post_ops compile to one oneDNN
// primitive with the chain as post-ops (backend/dnnl/ops/fused.h), and so
// does batchnorm_post_ops when it is batch_norm -> relu (fuse_norm_relu);
// concat_batchnorm normalises the concat's parts into the result (one llga
// kernel);
// the other patterns (pooling, layer_norm, softmax, concat, binary and
// eltwise chains, longer batch_norm chains) run the subgraph's ops back to
// back in a plan of their own.
#include "backend/dnnl/fusion_group.h"

#include <algorithm>
#include <array>
#include <functional>
#include <mutex>

#include "backend/dnnl/ops/fused.h"
#include "backend/dnnl/ops/op_utils.h"
#include "backend/dnnl/post_ops.h"
#include "ir/out_layouts.h"
#include "ir/precision.h"
#include "runtime/constant_eval.h"
#include "runtime/exec_context.h"
#include "runtime/plan.h"
#include "runtime/profiler.h"

namespace llga {
namespace {

// Anchor + post-ops in one primitive; or a partition's one op (`lone`:
// profiled and observed as an inner op, as its own chain plan would have it;
// its inputs and outputs blocked where the op's kernel takes them so, as a
// pooling does).
class FusedAnchorKernel final : public Kernel {
 public:
  FusedAnchorKernel(std::unique_ptr<Kernel> inner, std::vector<Source> sources, const Node* lone = nullptr,
                    std::shared_ptr<const Graph> sub = nullptr, std::shared_ptr<const Graph> chain = nullptr)
      : inner_(std::move(inner)), sources_(std::move(sources)), sub_(std::move(sub)), lone_(lone),
        chain_(std::move(chain)) {}

  void run(const KernelArgs& a) override {
    std::array<RtValue*, 32> in_small;  // no allocation per call for the usual few arguments
    std::vector<RtValue*> in_big;
    RtValue** in = in_small.data();
    if (sources_.size() > in_small.size()) {
      in_big.resize(sources_.size());
      in = in_big.data();
    }
    for (size_t i = 0; i < sources_.size(); ++i)
      in[i] = sources_[i].input >= 0 ? a.in[sources_[i].input] : &sources_[i].constant;
    uint64_t dying = 0;  // the group's dying inputs, at their positions in the anchor's arguments
    for (size_t k = 0; k < sources_.size() && k < 64; ++k)
      if (sources_[k].input >= 0 && a.inputDies(static_cast<size_t>(sources_[k].input))) dying |= uint64_t{1} << k;
    const KernelArgs args{in, sources_.size(), a.out, a.num_out, a.ctx, dying};
    if (!lone_) {
      try {
        return inner_->run(args);
      } catch (const OperandGrowsOutput&) {  // checked before anything is written
        if (!chain_ || !make_anchor_only_) throw;
      }
      // A post-op operand broadcasts the output up at these shapes (traced
      // with a batch of 2, called with 1): the anchor alone (a kernel like
      // this one without post-ops, which takes the compacted weight too),
      // then the group's other ops one by one.
      return runOpByOp(a, in);
    }
    if (Profiler::active()) runKernelProfiled(*lone_, "", -1, *inner_, args);
    else inner_->run(args);
    if (a.ctx.observer) (*a.ctx.observer)(*lone_, a.out, a.num_out);
  }
  // The anchor's kernel without post-ops, for calls whose operands do not fit them.
  void setAnchorOnly(std::function<std::unique_ptr<Kernel>()> make) { make_anchor_only_ = std::move(make); }
  bool acceptsBlocked(size_t input) const override { return everyUse(input, &Kernel::acceptsBlocked); }
  void allowBlockedOutput(size_t output) override { inner_->allowBlockedOutput(output); }
  bool acceptsStrided(size_t input) const override { return everyUse(input, &Kernel::acceptsStrided); }
  void allowStridedOutput(size_t output) override { inner_->allowStridedOutput(output); }
  KernelReport report() const override { return inner_->report(); }
  const char* primitiveKind() const override { return inner_->primitiveKind(); }
  std::optional<Tensor> compactedWeight(size_t input) const override {
    std::optional<size_t> at;  // the one anchor position reading group input `input`
    for (size_t k = 0; k < sources_.size(); ++k) {
      if (sources_[k].input != static_cast<int>(input)) continue;
      if (at) return std::nullopt;
      at = k;
    }
    return at ? inner_->compactedWeight(*at) : std::nullopt;
  }

 private:
  // Group input `input` is read by the anchor at least once, and `accepts` holds at each of those positions.
  bool everyUse(size_t input, bool (Kernel::*accepts)(size_t) const) const {
    bool any = false;
    for (size_t k = 0; k < sources_.size(); ++k) {
      if (sources_[k].input != static_cast<int>(input)) continue;
      if (!((*inner_).*accepts)(k)) return false;
      any = true;
    }
    return any;
  }

  std::unique_ptr<Kernel> inner_;
  std::vector<Source> sources_;
  std::shared_ptr<const Graph> sub_;  // holds lone_
  const Node* lone_;
  void runOpByOp(const KernelArgs& a, RtValue** in) {
    std::call_once(fallback_once_, [&] { anchor_only_ = make_anchor_only_(); });
    std::vector<const Node*> ops;
    for (const Node* n : chain_->nodes())
      if (n->kind() != prim::Constant) ops.push_back(n);
    RtValue v;
    RtValue* outs[] = {&v};
    anchor_only_->run(KernelArgs{in, ops[0]->inputs().size(), outs, 1, a.ctx, 0});
    const auto& group_in = chain_->inputs();
    for (size_t i = 1; i < ops.size(); ++i) {
      std::vector<RtValue> args;
      for (const Value* x : ops[i]->inputs()) {
        if (x == ops[i - 1]->output()) {
          args.push_back(v);
        } else if (auto it = std::find(group_in.begin(), group_in.end(), x); it != group_in.end()) {
          // the group's inputs may arrive blocked (the anchor takes that); the other ops read plain tensors
          const RtValue& in_value = *a.in[it - group_in.begin()];
          const bool blocked = in_value.isTensor() && in_value.tensor().isBlocked();
          args.push_back(blocked ? RtValue(toPlain(a.ctx, in_value.tensor())) : in_value);
        } else if (auto c = constantValue(*x->node())) {
          args.push_back(std::move(*c));
        } else {
          throw std::logic_error("fusion group fallback: cannot read %" + x->debugName());
        }
      }
      auto r = evaluateNode(*ops[i], std::move(args));
      if (!r || r->empty()) throw std::logic_error("fusion group fallback: " + ops[i]->kind().toQualString() + " gave nothing");
      v = std::move((*r)[0]);
    }
    a.set(0, std::move(v));
  }

  std::shared_ptr<const Graph> chain_;  // the group's subgraph, for the op-by-op fallback
  std::function<std::unique_ptr<Kernel>()> make_anchor_only_;
  std::once_flag fallback_once_;
  std::unique_ptr<Kernel> anchor_only_;
};

// The subgraph's ops, one after the other.
class ChainKernel final : public Kernel {
 public:
  explicit ChainKernel(std::shared_ptr<const Graph> sub) : plan_(Plan::build(std::move(sub), {})) {}
  void run(const KernelArgs& a) override {
    std::vector<RtValue> in;
    in.reserve(a.num_in);
    for (size_t i = 0; i < a.num_in; ++i) in.push_back(*a.in[i]);
    std::vector<RtValue> out = plan_->run(std::move(in), a.ctx);
    for (size_t i = 0; i < out.size() && i < a.num_out; ++i) a.set(i, std::move(out[i]));
  }
  const char* primitiveKind() const override { return "ops in sequence"; }
  KernelReport report() const override {  // its ops' own: the first that has something to say (a pooling's)
    KernelReport r;
    for (const auto& [node, k] : plan_->kernelReports()) {
      if (k.empty()) continue;
      if (r.empty()) r = k;
      else r.detail += (r.detail.empty() ? "" : "; ") + k.text();
    }
    return r;
  }
  bool acceptsStrided(size_t input) const override { return plan_->inputAcceptsStrided(input); }
  void allowStridedOutput(size_t output) override { plan_->allowOutputStrided(output); }

 private:
  std::unique_ptr<Plan> plan_;
};

// A group that is one primitive: its anchor and the post-ops after it.
struct AnchorChain {
  const Node* anchor;
  std::vector<PostOp> ops;
};

// The anchor (the group's first op) and its chain, translated by the fuser's own rules.
AnchorChain anchorChain(const Graph& sub) {
  std::vector<const Node*> ops = opsOf(sub);
  if (ops.empty()) throw std::logic_error("fusion group without ops");
  PostOpMatch m = translateChain(ops, 1, ops.size());
  if (!m.ok()) throw std::logic_error("fusion group: " + m.why_not);
  return {ops[0], std::move(m.ops)};
}

// batch_norm -> relu, the relu reading only it: one batch_normalization primitive.
const Node* batchNormRelu(const Graph& sub) {
  std::vector<const Node*> ops = opsOf(sub);
  if (ops.size() != 2 || ops[0]->kind().toQualString() != "aten::batch_norm") return nullptr;
  const std::string relu = ops[1]->kind().toQualString();
  if ((relu != "aten::relu" && relu != "aten::relu_") || ops[1]->input(0) != ops[0]->output() ||
      ops[0]->output()->uses().size() != 1 || sub.outputs().size() != 1 || sub.outputs()[0] != ops[1]->output())
    return nullptr;
  return ops[0];
}

std::shared_ptr<Graph> subgraphOf(const Node& group) {
  std::shared_ptr<Graph> sub = group.subgraph();
  if (!sub) throw std::invalid_argument("llga::FusionGroup without a subgraph");
  return sub;
}

// conv_post_ops / matmul_post_ops: the anchor with its chain as post-ops.
std::unique_ptr<Kernel> makeAnchorChainKernel(const Node& group, bool conv) {
  AnchorChain chain = anchorChain(*subgraphOf(group));
  const Graph& sub = *group.subgraph();
  std::vector<Source> sources;
  for (const Value* in : chain.anchor->inputs()) sources.push_back(sourceOf(sub, in));
  for (const PostOp& p : chain.ops)
    if (p.operand) sources.push_back(sourceOf(sub, p.operand));
  // The weight is constant when the group reads it from a constant outside.
  bool constant_weight = chain.anchor->inputs().size() > 1 && sources[1].input >= 0 &&
                         isConstantInput(group, static_cast<size_t>(sources[1].input));
  // A residual written quantized by its producer (assign-precision's int8 edge) arrives so.
  std::optional<ActivationQuant> residual_quant;
  for (size_t i = chain.anchor->inputs().size(); i < sources.size(); ++i)
    if (sources[i].input >= 0)
      if (std::optional<ActivationQuant> q = int8OutputOf(*group.input(static_cast<size_t>(sources[i].input))->node()))
        residual_quant = q;
  auto inner = conv ? makeFusedConv(*chain.anchor, chain.ops, constant_weight, bf16Output(group), int8OutputOf(group),
                                    residual_quant)
                    : makeFusedMatmul(*chain.anchor, chain.ops, constant_weight, bf16Output(group));
  auto k = std::make_unique<FusedAnchorKernel>(std::move(inner), std::move(sources), nullptr, nullptr,
                                               chain.ops.empty() ? nullptr : group.subgraph());
  const Node* anchor = chain.anchor;
  k->setAnchorOnly([anchor, conv, constant_weight] {
    return conv ? makeFusedConv(*anchor, {}, constant_weight) : makeFusedMatmul(*anchor, {}, constant_weight);
  });
  return k;
}

// The subgraph's only op, run directly with the group's arguments (a lone
// pooling, layer_norm or concat: a plan of its own costs ~3 us a call), if it
// has one op, which returns the group's outputs and reads only group inputs
// and non-tensor constants.
// `given`: that kernel for the op instead of its registered one.
std::unique_ptr<Kernel> makeLoneOpKernel(const std::shared_ptr<Graph>& sub_ptr,
                                         std::unique_ptr<Kernel> given = nullptr) {
  const Graph& sub = *sub_ptr;
  std::vector<const Node*> ops = opsOf(sub);
  if (ops.size() != 1 || ops[0]->outputs().size() != sub.outputs().size()) return nullptr;
  const Node& op = *ops[0];
  for (size_t i = 0; i < op.outputs().size(); ++i)
    if (op.output(i) != sub.outputs()[i]) return nullptr;
  std::vector<Source> sources;
  for (const Value* in : op.inputs()) {
    if (in->node()->kind() == prim::Constant && in->type()->isTensor()) return nullptr;
    sources.push_back(sourceOf(sub, in));
  }
  const OpDef* def = given ? nullptr : OpRegistry::global().find(op.kind());
  if (!given && !def) return nullptr;
  std::unique_ptr<Kernel> k = given ? std::move(given) : def->make(op);
  const std::vector<OutLayout> layouts = outLayouts(op);  // as a plan would apply them
  for (size_t j = 0; j < layouts.size(); ++j)
    if (layouts[j].strided) k->allowStridedOutput(j);
  return std::make_unique<FusedAnchorKernel>(std::move(k), std::move(sources), &op, sub_ptr);
}

std::unique_ptr<Kernel> makeBatchNormKernel(const Node& group) {
  std::shared_ptr<Graph> sub = subgraphOf(group);
  const Node* bn = batchNormRelu(*sub);
  if (!bn) return makeChainKernel(group);
  std::vector<Source> sources;
  for (const Value* in : bn->inputs()) sources.push_back(sourceOf(*sub, in));
  return std::make_unique<FusedAnchorKernel>(makeBatchNormRelu(), std::move(sources));
}

// concat -> batch_norm [-> relu], each op reading only the one before: the
// concat's parts normalised straight into the result (makeConcatBatchNorm).
// Another chain after the batch_norm runs op by op.
std::unique_ptr<Kernel> makeConcatBatchNormKernel(const Node& group) {
  std::shared_ptr<Graph> sub = subgraphOf(group);
  std::vector<const Node*> ops = opsOf(*sub);
  auto reads = [](const Node* n, const Node* before) {
    return n->input(0) == before->output() && before->output()->uses().size() == 1;
  };
  const bool relu = ops.size() == 3 && (ops[2]->kind().toQualString() == "aten::relu" ||
                                        ops[2]->kind().toQualString() == "aten::relu_");
  if (ops.size() < 2 || ops.size() > 3 || (ops.size() == 3 && (!relu || !reads(ops[2], ops[1]))) ||
      ops[0]->kind().toQualString() != "aten::cat" || ops[1]->kind().toQualString() != "aten::batch_norm" ||
      ops[0]->inputs().size() != 2 || ops[1]->inputs().size() != 9 || !reads(ops[1], ops[0]) ||
      sub->outputs().size() != 1 || sub->outputs()[0] != ops.back()->output())
    return std::make_unique<ChainKernel>(std::move(sub));
  std::vector<Source> sources;
  for (const Value* in : ops[0]->inputs()) sources.push_back(sourceOf(*sub, in));
  for (size_t i = 1; i < ops[1]->inputs().size(); ++i) sources.push_back(sourceOf(*sub, ops[1]->input(i)));
  return std::make_unique<FusedAnchorKernel>(
      makeConcatBatchNorm(*ops[0], relu, int8OutputOf(group), bf16Output(group)), std::move(sources));
}

// A lone layer_norm written in bf16 where the partition says (out_dtype:
// its readers are bf16 linears), else as any chain.
std::unique_ptr<Kernel> makeNormKernel(const Node& group) {
  std::shared_ptr<Graph> sub = subgraphOf(group);
  const std::vector<const Node*> ops = opsOf(*sub);
  if (bf16Output(group) && ops.size() == 1 && ops[0]->kind().toQualString() == "aten::layer_norm")
    if (std::unique_ptr<Kernel> k = makeLoneOpKernel(sub, makeLayerNormBf16())) return k;
  return makeChainKernel(group);
}

// A concat, quantized where the partition says (out_scale, out_dtype: its
// readers are int8 convolutions), else as any lone op.
std::unique_ptr<Kernel> makeConcatKernel(const Node& group) {
  std::shared_ptr<Graph> sub = subgraphOf(group);
  const std::vector<const Node*> ops = opsOf(*sub);
  const std::optional<ActivationQuant> q = int8OutputOf(group);
  if (q && ops.size() == 1 && ops[0]->kind().toQualString() == "aten::cat")
    if (std::unique_ptr<Kernel> k = makeLoneOpKernel(sub, makeQuantizedCat(*q))) return k;
  return makeChainKernel(group);
}

}  // namespace

std::unique_ptr<Kernel> makeChainKernel(const Node& group) {
  std::shared_ptr<Graph> sub = subgraphOf(group);
  if (std::unique_ptr<Kernel> lone = makeLoneOpKernel(sub)) return lone;
  return std::make_unique<ChainKernel>(std::move(sub));
}

std::vector<const Node*> opsOf(const Graph& sub) {
  std::vector<const Node*> ops;
  for (const Node* n : sub.nodes())
    if (n->kind() != prim::Constant) ops.push_back(n);
  return ops;
}

std::optional<std::vector<const Node*>> fp32OpsOf(const Node& group) {
  const std::shared_ptr<Graph> sub = group.subgraph();
  if (!sub || precisionOf(group) != Precision::F32) return std::nullopt;
  std::vector<const Node*> ops = opsOf(*sub);
  for (const Node* n : ops)
    if (precisionOf(*n) != Precision::F32) return std::nullopt;
  return ops;
}

Source sourceOf(const Graph& sub, const Value* v) {
  const auto& ins = sub.inputs();
  for (size_t i = 0; i < ins.size(); ++i)
    if (ins[i] == v) return {static_cast<int>(i), RtValue()};
  const Node* c = v->node();
  if (c->kind() != prim::Constant || v->type()->isTensor())
    throw std::logic_error("fusion group: %" + v->debugName() + " is neither an input nor a non-tensor constant");
  auto cv = constantValue(*c);
  if (!cv) throw std::logic_error("fusion group: cannot read constant %" + v->debugName());
  return {-1, std::move(*cv)};
}

PatternKernels& PatternKernels::global() {
  static PatternKernels k;
  return k;
}
void PatternKernels::add(PatternKernel k) {
  std::string name = k.pattern;
  if (!kernels_.emplace(name, std::move(k)).second) throw std::logic_error("pattern kernel registered twice: " + name);
}
const PatternKernel* PatternKernels::find(const std::string& pattern) const {
  auto it = kernels_.find(pattern);
  return it == kernels_.end() ? nullptr : &it->second;
}
std::vector<const PatternKernel*> PatternKernels::list() const {
  std::vector<const PatternKernel*> out;
  for (const auto& [name, k] : kernels_) out.push_back(&k);
  return out;
}

LLGA_REGISTER_PATTERN_KERNEL(conv_post_ops, "dnnl convolution + post-ops (one primitive)",
                             [](const Node& g) { return makeAnchorChainKernel(g, /*conv=*/true); });
LLGA_REGISTER_PATTERN_KERNEL(matmul_post_ops, "dnnl matmul + post-ops (one primitive)",
                             [](const Node& g) { return makeAnchorChainKernel(g, /*conv=*/false); });
LLGA_REGISTER_PATTERN_KERNEL(batchnorm_post_ops,
                             "batch_norm -> relu: one dnnl batch_normalization (fuse_norm_relu); longer chains: llga chain",
                             makeBatchNormKernel);
LLGA_REGISTER_PATTERN_KERNEL(concat_batchnorm,
                             "each part batch-normalised into its slice of the result (llga, AVX2); otherwise the "
                             "concat's and batch_norm's own kernels",
                             makeConcatBatchNormKernel);
LLGA_REGISTER_PATTERN_KERNEL(pool_post_ops, "pooling, then its chain (llga chain)", makeChainKernel);
LLGA_REGISTER_PATTERN_KERNEL(layernorm_post_ops,
                             "layer_norm or group_norm, then its chain (llga chain); a lone layer_norm whose bf16 "
                             "readers take bf16 written so by llga's rows",
                             makeNormKernel);
LLGA_REGISTER_PATTERN_KERNEL(softmax_post_ops, "softmax, then its chain (llga chain)", makeChainKernel);
LLGA_REGISTER_PATTERN_KERNEL(concat, "row copies of the parts (channels-last parts stay so); u8/s8 ones for int8 readers",
                             makeConcatKernel);
LLGA_REGISTER_PATTERN_KERNEL(binary_post_ops, "binary, then its chain (llga chain)", makeChainKernel);
LLGA_REGISTER_PATTERN_KERNEL(eltwise_post_ops, "eltwise, then its chain (llga chain)", makeChainKernel);

namespace {

// The group's kernel: the one its pattern binds.
std::unique_ptr<Kernel> makeFusionGroupKernel(const Node& group) {
  static const Symbol kPattern = Symbol::fromQualString("attr::pattern");
  const AttrValue* a = group.attributes().find(kPattern);
  if (!a || !a->is<std::string>()) throw std::invalid_argument("llga::FusionGroup without a pattern attribute");
  const PatternKernel* k = PatternKernels::global().find(a->get<std::string>());
  if (!k) throw std::invalid_argument("no kernel for fusion pattern '" + a->get<std::string>() + "'");
  return k->make(group);
}

}  // namespace

void registerFusionGroupOps(OpRegistry& r) {
  r.add(OpDef{"llga::FusionGroup", 0, 1u << 20, [](const Node& n) { return makeFusionGroupKernel(n); }});
}
LLGA_REGISTER_OPS(registerFusionGroupOps);

}  // namespace llga
