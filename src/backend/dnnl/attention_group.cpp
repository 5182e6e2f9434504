// The `attention` pattern's kernel (fuser/patterns.cpp): the group
//   s = matmul(q, kt) -> [scale | mask: linear, add, sub, mul, div, masked_fill, where]
//     -> softmax(s, -1) -> matmul(., v) [-> permute | transpose, the last dim kept]
// runs as llga's fused attention (backend/dnnl/fused_attention.h; a permuted
// output dense, each row written where the permuted tensor has it) when the
// CPU has AVX-512 (and AVX512-BF16 for products assigned bf16) and the
// call's tensors fit it (fp32, plain, same batch dims, operands broadcasting
// to the scores); otherwise, and for an int8 group, its ops run one by one
// (makeChainKernel), which the report says.
#include <atomic>
#include <optional>

#include "backend/dnnl/dnnl_utils.h"
#include "backend/dnnl/fused_attention.h"
#include "backend/dnnl/fusion_group.h"
#include "fuser/post_ops.h"
#include "ir/precision.h"
#include "passes/pass_utils.h"
#include "runtime/exec_context.h"
#include "runtime/threads.h"

namespace llga {
namespace {

const Symbol kSoftmax = Symbol::fromQualString("aten::softmax");
const Symbol kPermute = Symbol::fromQualString("aten::permute");
const Symbol kTranspose = Symbol::fromQualString("aten::transpose");

struct OpSource {
  attention::ScoreOp::Kind kind;
  float alpha = 1, beta = 0;
  int input = -1;  // the operand's group input (Add..Div, Select)
  bool invert = false;  // Select
};

// Offsets of a tensor's element (b, 0, 0) for each flattened batch index b of
// `batch_sizes`, the tensor's dims aligned to the right of [batch..., rows,
// cols] (missing and size-1 dims broadcast).
std::vector<int64_t> batchOffsets(const Tensor& t, const Shape& batch_sizes) {
  const int64_t nb = static_cast<int64_t>(batch_sizes.size()), lead = nb + 2 - t.dim();
  int64_t count = 1;
  for (int64_t s : batch_sizes) count *= s;
  std::vector<int64_t> out(static_cast<size_t>(count), 0);
  for (int64_t b = 0; b < count; ++b) {
    int64_t rest = b, off = 0;
    for (int64_t d = nb - 1; d >= 0; --d) {
      const int64_t idx = rest % batch_sizes[static_cast<size_t>(d)];
      rest /= batch_sizes[static_cast<size_t>(d)];
      const int64_t td = d - lead;
      if (td >= 0 && t.size(td) != 1) off += idx * t.stride(td);
    }
    out[static_cast<size_t>(b)] = off;
  }
  return out;
}

class AttentionKernel final : public Kernel {
 public:
  AttentionKernel(int q, int kt, int v, std::vector<OpSource> ops, bool bf16_qk, bool bf16_pv, attention::Bf16Path path,
                  std::vector<int64_t> perm, std::unique_ptr<Kernel> fallback)
      : q_(q), kt_(kt), v_(v), ops_(std::move(ops)), bf16_qk_(bf16_qk), bf16_pv_(bf16_pv), path_(path),
        perm_(std::move(perm)), fallback_(std::move(fallback)) {}

  void run(const KernelArgs& a) override {
    std::optional<attention::Problem> p = problem(a);
    if (!p) {
      fallback_ran_.store(true, std::memory_order_relaxed);
      return fallback_->run(a);
    }
    fallback_ran_.store(false, std::memory_order_relaxed);
    Shape out_sizes = a.tensor(static_cast<size_t>(q_)).sizes();
    out_sizes.back() = p->Dv;
    Tensor out;
    if (perm_.empty()) {
      out = Tensor::empty(ScalarType::Float, out_sizes);
    } else {  // the permuted tensor, dense; the product's rows where it has them
      const size_t n = out_sizes.size();
      Shape permuted(n), back(n);
      for (size_t d = 0; d < n; ++d) {
        permuted[d] = out_sizes[static_cast<size_t>(perm_[d])];
        back[static_cast<size_t>(perm_[d])] = static_cast<int64_t>(d);
      }
      out = Tensor::empty(ScalarType::Float, permuted);
      const Tensor rows = out.permute(back);  // [batch..., L, Dv] over the permuted memory
      p->out_batch_offset = batchOffsets(rows, Shape(out_sizes.begin(), out_sizes.end() - 2));
      p->out_row_stride = rows.stride(-2);
    }
    p->out = out.data<float>();
    // a small transformer's attention (4 heads x 12 x 12 x 16) is done before a woken team would start
    const int64_t macs = p->batch * p->L * p->S * (p->D + p->Dv);
    const int threads = macs < kSerialMacs ? 1 : getNumThreads();
    attention::run(*p, threads, a.ctx.scratchpadData(attention::scratchBytes(*p, threads)));
    a.set(0, RtValue(std::move(out)));
  }

  KernelReport report() const override {
    if (fallback_ran_.load(std::memory_order_relaxed)) {
      KernelReport r = fallback_->report();
      r.detail = "ops one by one: the call's tensors do not fit llga's attention" + (r.detail.empty() ? "" : "; " + r.detail);
      return r;
    }
    KernelReport r;
    r.impl = !bf16_qk_ && !bf16_pv_ ? (attention::availableAvx512() ? "llga_attention:avx512" : "llga_attention:avx2")
             : path_ == attention::Bf16Path::Amx ? "llga_attention:avx512_amx_bf16"
                                                 : "llga_attention:avx512_bf16";
    auto product = [](const char* name, bool bf16) { return std::string(name) + (bf16 ? " (bf16)" : ""); };
    r.detail = product("q@kt", bf16_qk_) + ", " + std::to_string(ops_.size()) + " score op(s), softmax, " +
               product("@v", bf16_pv_) + " per 32 query rows" + (perm_.empty() ? "" : ", written permuted");
    return r;
  }
  const char* primitiveKind() const override { return "llga attention"; }
  // Reads every operand through its strides (q, k^T and v are usually views).
  bool acceptsStrided(size_t) const override { return true; }

 private:
  // The call as the fused kernel's problem, or nothing when it does not fit.
  std::optional<attention::Problem> problem(const KernelArgs& a) const {
    auto usable = [](const RtValue& v) {
      return v.isTensor() && v.tensor().dtype() == ScalarType::Float && !v.tensor().isBlocked();
    };
    if (!usable(a.input(static_cast<size_t>(q_))) || !usable(a.input(static_cast<size_t>(kt_))) ||
        !usable(a.input(static_cast<size_t>(v_))))
      return std::nullopt;
    const Tensor& q = a.tensor(static_cast<size_t>(q_));
    const Tensor& kt = a.tensor(static_cast<size_t>(kt_));
    const Tensor& v = a.tensor(static_cast<size_t>(v_));
    const int64_t n = q.dim();
    if (n < 2 || kt.dim() != n || v.dim() != n) return std::nullopt;
    const Shape batch(q.sizes().begin(), q.sizes().end() - 2);
    for (int64_t d = 0; d + 2 < n; ++d)
      if (kt.size(d) != q.size(d) || v.size(d) != q.size(d)) return std::nullopt;
    attention::Problem p;
    p.L = q.size(-2);
    p.D = q.size(-1);
    p.S = kt.size(-1);
    p.Dv = v.size(-1);
    if (kt.size(-2) != p.D || v.size(-2) != p.S) return std::nullopt;
    p.batch = 1;
    for (int64_t s : batch) p.batch *= s;
    auto operand = [&](const Tensor& t) {
      return attention::Operand{t.data<float>(), batchOffsets(t, batch), t.stride(-2), t.stride(-1)};
    };
    p.q = operand(q);
    p.kt = operand(kt);
    p.v = operand(v);
    p.bf16_qk = bf16_qk_;
    p.bf16_pv = bf16_pv_;
    p.bf16_path = path_;
    for (const OpSource& o : ops_) {
      attention::ScoreOp op;
      op.kind = o.kind;
      op.alpha = o.alpha;
      op.beta = o.beta;
      op.invert = o.invert;
      if (o.input >= 0) {
        const bool select = o.kind == attention::ScoreOp::Kind::Select;
        const RtValue& in = a.input(static_cast<size_t>(o.input));
        if (select ? !(in.isTensor() && in.tensor().dtype() == ScalarType::Bool && !in.tensor().isBlocked())
                   : !usable(in))
          return std::nullopt;
        const Tensor& t = a.tensor(static_cast<size_t>(o.input));
        if (t.dim() > n) return std::nullopt;
        const Shape scores = [&] {
          Shape s = batch;
          s.push_back(p.L);
          s.push_back(p.S);
          return s;
        }();
        for (int64_t i = 0; i < t.dim(); ++i) {  // broadcasts to the scores without growing them
          const int64_t td = t.size(t.dim() - 1 - i), sd = scores[scores.size() - 1 - static_cast<size_t>(i)];
          if (td != 1 && td != sd) return std::nullopt;
        }
        if (select) op.mask = t.data<bool>();
        else op.data = t.data<float>();
        op.batch_offset = batchOffsets(t, batch);
        op.row_stride = t.dim() >= 2 && t.size(-2) != 1 ? t.stride(-2) : 0;
        op.col_stride = t.dim() >= 1 && t.size(-1) != 1 ? t.stride(-1) : 0;
      }
      p.ops.push_back(std::move(op));
    }
    return p;
  }

  int q_, kt_, v_;
  std::vector<OpSource> ops_;
  bool bf16_qk_, bf16_pv_;
  attention::Bf16Path path_;
  std::vector<int64_t> perm_;  // the output's permutation (its last dim last), or empty
  std::unique_ptr<Kernel> fallback_;
  std::atomic<bool> fallback_ran_{false};
};

// The group's ops one by one on every call, for a reason the report gives
// (the CPU or the group's precision rules the fused kernel out).
class OpByOp final : public Kernel {
 public:
  OpByOp(std::unique_ptr<Kernel> ops, std::string why) : ops_(std::move(ops)), why_(std::move(why)) {}
  void run(const KernelArgs& a) override { ops_->run(a); }
  bool acceptsBlocked(size_t i) const override { return ops_->acceptsBlocked(i); }
  bool acceptsStrided(size_t i) const override { return ops_->acceptsStrided(i); }
  void allowBlockedOutput(size_t o) override { ops_->allowBlockedOutput(o); }
  void allowStridedOutput(size_t o) override { ops_->allowStridedOutput(o); }
  KernelReport report() const override {
    KernelReport r = ops_->report();
    r.detail = "ops one by one: " + why_ + (r.detail.empty() ? "" : "; " + r.detail);
    return r;
  }
  const char* primitiveKind() const override { return ops_->primitiveKind(); }

 private:
  std::unique_ptr<Kernel> ops_;
  std::string why_;
};

std::unique_ptr<Kernel> makeAttentionKernel(const Node& group) {
  std::unique_ptr<Kernel> fallback = makeChainKernel(group);
  const std::shared_ptr<Graph> subgraph = group.subgraph();
  if (!subgraph) return fallback;
  if (precisionOf(group) == Precision::INT8)
    return std::make_unique<OpByOp>(std::move(fallback), "llga's attention has no int8 products");
  if (!envSwitchOn("LLGA_ATTENTION"))  // (the switch compares against the ops one by one)
    return std::make_unique<OpByOp>(std::move(fallback), "LLGA_ATTENTION=0");
  if (!attention::available())
    return std::make_unique<OpByOp>(std::move(fallback), "llga's attention needs AVX-512 (F, BW, VL) or AVX2 and FMA");
  const Graph& sub = *subgraph;
  std::vector<const Node*> ops = opsOf(sub);
  // The fuser's shape of the group (checkAttention in fuser/patterns.cpp),
  // with the output's permutation (permute or transpose) last when it joined.
  std::vector<int64_t> perm;
  if (ops.size() > 3 && (ops.back()->kind() == kPermute || ops.back()->kind() == kTranspose)) {
    const Value* pv_out = ops[ops.size() - 2]->output();
    const auto rank = pv_out->type()->isTensor() ? pv_out->type()->tensorInfo().rank() : std::nullopt;
    const auto order = rank ? permutationOf(ops.back(), static_cast<int64_t>(*rank)) : std::nullopt;
    if (!order || order->back() != static_cast<int64_t>(*rank) - 1) return fallback;
    perm = *order;
    ops.pop_back();
  }
  if (ops.size() < 3 || ops[ops.size() - 2]->kind() != kSoftmax) return fallback;
  const Node* qk = ops.front();
  const Node* pv = ops.back();
  // The products as assign-precision decided (bf16 on AVX512-BF16's
  // instructions), everything between them fp32.
  const bool bf16_qk = precisionOf(*qk) == Precision::BF16, bf16_pv = precisionOf(*pv) == Precision::BF16;
  for (const Node* n : ops)
    if (precisionOf(*n) != Precision::F32 && !((n == qk || n == pv) && precisionOf(*n) == Precision::BF16))
      return std::make_unique<OpByOp>(std::move(fallback), n->kind().toQualString() + " in " +
                                                               std::string(precisionName(precisionOf(*n))));
  const std::optional<attention::Bf16Path> path = attention::bf16Path();
  if ((bf16_qk || bf16_pv) && !path)
    return std::make_unique<OpByOp>(std::move(fallback),
                                    "bf16 products, and oneDNN runs no bf16 instructions here (it emulates bf16)");
  const int q = sourceOf(sub, qk->input(0)).input, kt = sourceOf(sub, qk->input(1)).input,
            v = sourceOf(sub, pv->input(1)).input;
  if (q < 0 || kt < 0 || v < 0) return fallback;
  const PostOpMatch chain = translateChain(ops, 1, ops.size() - 2);
  if (!chain.ok()) return fallback;
  std::vector<OpSource> sources;
  for (const PostOp& op : chain.ops) {
    OpSource s;
    if (op.kind == PostOp::Kind::Eltwise && op.alg == PostOpAlg::Linear) {
      s.kind = attention::ScoreOp::Kind::Linear;
      s.alpha = op.alpha;
      s.beta = op.beta;
    } else if (op.kind == PostOp::Kind::Binary && op.operand) {
      switch (op.alg) {
        case PostOpAlg::Add: s.kind = attention::ScoreOp::Kind::Add; break;
        case PostOpAlg::Sub: s.kind = attention::ScoreOp::Kind::Sub; break;
        case PostOpAlg::Mul: s.kind = attention::ScoreOp::Kind::Mul; break;
        case PostOpAlg::Div: s.kind = attention::ScoreOp::Kind::Div; break;
        default: return fallback;
      }
      s.input = sourceOf(sub, op.operand).input;
      if (s.input < 0) return fallback;
    } else if (op.kind == PostOp::Kind::Select && op.operand) {
      s.kind = attention::ScoreOp::Kind::Select;
      s.alpha = op.alpha;
      s.invert = op.invert;
      s.input = sourceOf(sub, op.operand).input;
      if (s.input < 0) return fallback;
    } else {
      return fallback;
    }
    sources.push_back(s);
  }
  return std::make_unique<AttentionKernel>(q, kt, v, std::move(sources), bf16_qk, bf16_pv,
                                           path.value_or(attention::Bf16Path::Avx512Bf16), std::move(perm),
                                           std::move(fallback));
}

}  // namespace

LLGA_REGISTER_PATTERN_KERNEL(attention,
                             "llga's fused attention (q@kt, scale/mask, softmax, @v per block of query rows; "
                             "AVX-512, or AVX2 in fp32); otherwise its ops one by one",
                             makeAttentionKernel);

}  // namespace llga
