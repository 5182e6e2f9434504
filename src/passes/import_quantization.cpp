// import-quantization: a graph's own quantization as llga's int8. PyTorch's
// FX reference graphs (convert_to_reference_fx, traced) carry it as
// quantize -> dequantize pairs around float ops; the torch adapter writes
// frozen quantized weights and packed quantized ops in the same form.
//
// 1. Each pair becomes the fake quantization it computes (float in, float
//    out; kernels in backend/dnnl/ops/fake_quant.cpp):
//      dequantize(quantize_per_tensor(x, scale, zp, dtype))
//          -> fake_quantize_per_tensor_affine(x, scale, zp, qmin, qmax)
//      dequantize(quantize_per_channel(x, scales, zps, axis, dtype))
//          -> fake_quantize_per_channel_affine(x, scales, zps, axis, qmin, qmax)
//    with [qmin, qmax] = [0, 255] for quint8, [-128, 127] for qint8 and
//    int32's range for qint32. A quantize read by anything but dequantize
//    stays (and is reported as an op llga cannot run). Quantization-aware
//    training's fused_moving_avg_obs_fake_quant with its observer off is the
//    plain fake quantization too (per channel where per_row_fake_quant).
//
// 2. Two fake quantizations on one grid, with at most a clamp between them,
//    become one with the narrower range (mergeFakeQuants, below).
//
// 3. A convolution or linear whose activation is fake-quantized per tensor
//    within u8's [0, 255] or s8's [-128, 127] (reduce_range's [0, 127] and
//    merged clamps' narrower ranges too) with constant parameters, and whose
//    constant weight is fake-quantized symmetrically to s8 (zero point 0,
//    [-128, 127]; per output channel or per tensor), becomes an int8 op:
//      %a = fake_quantize_per_tensor_affine(%x, 0.02, 3, 0, 255)
//      %w = fake_quantize_per_channel_affine(%W, %ws, %zeros, 0, -128, 127)
//      %y = aten::conv2d(%a, %w, ...)
//    ->
//      %y = aten::conv2d[precision="int8", act_scale=0.02, act_dtype="u8",
//                        act_zero_point=3, w_scale=<Tensor>](%x, %w, ...)
//    Its kernel quantizes %a as the graph did; the weight's fake
//    quantization is folded here (to scale * q, which w_scale maps back to
//    q exactly): the int8 kernel multiplies the integers PyTorch's
//    reference computes with. Where only int8 ops read %a and its range is
//    the whole of u8's or s8's, they read %x instead and the fake
//    quantization goes; otherwise it stays (a residual add reads it, or it
//    clamps to a narrower range), and quantizing its values again gives
//    the same integers.
//
// Left in float, running the fake quantization as written (with a note):
// non-constant parameters, ranges beyond 8 bits, weights with a zero
// point, transposed convolutions; ops inside loops or branches.
#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_set>

#include "ir/precision.h"
#include "passes/pass.h"
#include "passes/pass_utils.h"

namespace llga {
namespace {

bool is(const Node& n, const char* kind) { return n.kind().toQualString() == std::string_view(kind); }

// PyTorch's ScalarType codes of the quantized dtypes, and their ranges.
std::optional<std::pair<int64_t, int64_t>> quantRange(const Value* dtype) {
  auto code = constantInt(dtype);
  if (!code) return std::nullopt;
  switch (*code) {
    case 12: return std::pair<int64_t, int64_t>{-128, 127};  // qint8
    case 13: return std::pair<int64_t, int64_t>{0, 255};     // quint8
    case 14: return std::pair<int64_t, int64_t>{std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    default: return std::nullopt;
  }
}

// A per-tensor fake quantization's constant scale and zero point (in[1],
// in[2]) as numbers where they are one-element tensors (FX and QAT hold them
// so): the fuser and the kernels read numbers inside partitions.
void asNumbers(Emitter& e, std::vector<Value*>& in) {
  const ConstantTensor* s = boundTensor(in[1]);
  const ConstantTensor* z = boundTensor(in[2]);
  if (s && s->numel() == 1) in[1] = e.f(s->scalarAsDouble(0));
  if (z && z->numel() == 1 && !isFloatingType(z->dtype)) in[2] = e.i(static_cast<int64_t>(z->scalarAsDouble(0)));
}

// Step 1 on block b (and the blocks inside it).
bool toFakeQuant(Graph& g, Block* b, std::vector<std::string>& notes) {
  bool changed = false;
  for (Node* n = b->paramNode()->next(); n != b->returnNode();) {
    Node* next = n->next();
    for (Block* sub : n->blocks()) changed |= toFakeQuant(g, sub, notes);
    if (is(*n, "aten::fused_moving_avg_obs_fake_quant") && n->inputs().size() >= 11) {
      // quantization-aware training's fake quantization (its FakeQuantize
      // modules in 1.13), with the observer off and the fake quantization on
      // (eval mode, disable_observer): the plain fake quantization it then is
      // (per channel along ch_axis where per_row_fake_quant); off: x itself.
      // An observer that is on updates running statistics: left as it is.
      const ConstantTensor* observer = boundTensor(n->input(1));
      const ConstantTensor* on = boundTensor(n->input(2));
      const bool per_row = n->inputs().size() > 11 && constantNumber(n->input(11)).value_or(0) != 0;
      if (observer && on && observer->numel() == 1 && on->numel() == 1 && observer->scalarAsDouble(0) == 0) {
        Emitter e(g, n, n);
        Value* out = n->input(0);
        if (on->scalarAsDouble(0) != 0) {
          std::vector<Value*> in{n->input(0), n->input(5), n->input(6)};
          if (per_row) in.push_back(n->input(10));
          else asNumbers(e, in);
          in.push_back(n->input(8));
          in.push_back(n->input(9));
          out = e.op(per_row ? "aten::fake_quantize_per_channel_affine" : "aten::fake_quantize_per_tensor_affine", in,
                     n->input(0)->node()->kind() == prim::Constant ? n->input(0)->type() : n->output(0)->type());
        }
        replaceKeepingName(g, n->output(0), out);
        n->destroy();
        changed = true;
      } else {
        notes.push_back(where(*n) + ": its observer is on or not a constant (it would update its statistics on every call): "
                         "left as it is; disable it (model.apply(torch.ao.quantization.disable_observer)) or convert");
      }
      n = next;
      continue;
    }
    if (is(*n, "aten::dequantize") && n->inputs().size() == 1) {
      Node* q = n->input(0)->node();
      const bool per_tensor = is(*q, "aten::quantize_per_tensor") && q->inputs().size() == 4;
      const bool per_channel = is(*q, "aten::quantize_per_channel") && q->inputs().size() == 5;
      auto range = per_tensor || per_channel ? quantRange(q->inputs().back()) : std::nullopt;
      if (range) {
        Emitter e(g, n, q);
        std::vector<Value*> in(q->inputs().begin(), q->inputs().end() - 1);
        if (per_tensor) asNumbers(e, in);
        in.push_back(e.i(range->first));
        in.push_back(e.i(range->second));
        // of a constant (a weight): the constant's type, so that constant-propagation
        // knows its size and folds it without example inputs
        const Value* x = q->input(0);
        TypePtr type = x->node()->kind() == prim::Constant && x->type()->isTensor() ? x->type() : n->output(0)->type();
        Value* fq = e.op(per_tensor ? "aten::fake_quantize_per_tensor_affine" : "aten::fake_quantize_per_channel_affine", in,
                         type);
        replaceKeepingName(g, n->output(0), fq);
        n->destroy();
        if (!q->output(0)->hasUses()) q->destroy();
        changed = true;
      }
    }
    n = next;
  }
  return changed;
}

struct Fq {  // a fake quantization with constant parameters
  const Node* node;
  std::vector<double> scales;
  std::vector<int64_t> zero_points;
  int64_t axis = -1;  // -1: per tensor
  int64_t qmin = 0, qmax = 0;
};

// Numbers held by a constant: an int or float, or a tensor's elements.
std::optional<std::vector<double>> numbers(const Value* v) {
  if (auto x = constantNumber(v)) return std::vector<double>{*x};
  const ConstantTensor* t = boundTensor(v);
  if (!t || t->numel() < 1) return std::nullopt;
  std::vector<double> out(static_cast<size_t>(t->numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = t->scalarAsDouble(i);
  return out;
}

std::optional<Fq> fakeQuantOf(const Value* v) {
  const Node* n = v->node();
  if (n->outputs().size() != 1) return std::nullopt;
  const bool per_tensor = is(*n, "aten::fake_quantize_per_tensor_affine") && n->inputs().size() == 5;
  const bool per_channel = is(*n, "aten::fake_quantize_per_channel_affine") && n->inputs().size() == 6;
  if (!per_tensor && !per_channel) return std::nullopt;
  auto scales = numbers(n->input(1)), zps = numbers(n->input(2));
  auto qmin = constantInt(n->inputs()[n->inputs().size() - 2]), qmax = constantInt(n->inputs().back());
  auto axis = per_channel ? constantInt(n->input(3)) : std::optional<int64_t>(-1);
  if (!scales || !zps || !qmin || !qmax || !axis || scales->size() != zps->size()) return std::nullopt;
  if (per_tensor && scales->size() != 1) return std::nullopt;
  Fq f{n, *scales, {}, *axis, *qmin, *qmax};
  for (size_t i = 0; i < scales->size(); ++i) {
    const double z = (*zps)[i], s = (*scales)[i];
    if (z != std::nearbyint(z) || !(s > 0) || !std::isfinite(s)) return std::nullopt;
    f.zero_points.push_back(static_cast<int64_t>(z));
  }
  return f;
}

bool isConstant(const Value* v) { return v->node()->kind() == prim::Constant && boundTensor(v); }

// dequantize(quantize_per_tensor_dynamic(x, quint8, reduce_range)) (PyTorch's
// dynamic quantization, as the torch adapter writes quantized::linear_dynamic):
// the u8 range's top, 127 with reduce_range, else 255; nullopt otherwise.
std::optional<int> dynamicQuantOf(const Value* v) {
  const Node* d = v->node();
  if (!is(*d, "aten::dequantize") || d->inputs().size() != 1) return std::nullopt;
  const Node* q = d->input(0)->node();
  if (!is(*q, "aten::quantize_per_tensor_dynamic") || q->inputs().size() != 3) return std::nullopt;
  auto dtype = constantInt(q->input(1));
  auto reduce = constantNumber(q->input(2));
  if (!dtype || *dtype != 13 || !reduce) return std::nullopt;  // quint8
  return *reduce != 0 ? 127 : 255;
}

// Step 2 for one op; whether it became int8.
bool absorb(Node& op, std::string& why) {
  const bool linear = is(op, "aten::linear");
  const bool conv = is(op, "aten::conv1d") || is(op, "aten::conv2d") || is(op, "aten::conv3d") ||
                    is(op, "aten::_convolution") || is(op, "aten::_convolution_mode");
  if ((!linear && !conv) || op.inputs().size() < 2) return false;
  auto act = fakeQuantOf(op.input(0));
  auto w = fakeQuantOf(op.input(1));
  const std::optional<int> dynamic_qmax = linear ? dynamicQuantOf(op.input(0)) : std::nullopt;
  if (!act && !w && !dynamic_qmax) return false;
  if (is(op, "aten::_convolution") && (op.inputs().size() < 7 || constantInt(op.input(6)).value_or(1) != 0)) {
    why = "a transposed convolution (llga's int8 convolution is not)";
    return false;
  }
  if (!dynamic_qmax && (!act || act->axis != -1)) {
    why = "its activation is not fake-quantized per tensor with constant parameters";
    return false;
  }
  // u8 or s8: a range within theirs (reduce_range's [0, 127], a merged clamp's)
  const bool u8 = dynamic_qmax || (act->qmin >= 0 && act->qmax <= 255), s8 = !dynamic_qmax && act->qmin >= -128 && act->qmax <= 127;
  if (!u8 && !s8) {
    why = "its activation's range [" + std::to_string(act->qmin) + ", " + std::to_string(act->qmax) +
          "] fits neither u8 nor s8";
    return false;
  }
  if (!w || w->qmin != -128 || w->qmax != 127 || !isConstant(w->node->input(0))) {
    why = "its weight is not a constant fake-quantized to s8 with constant parameters";
    return false;
  }
  for (int64_t z : w->zero_points)
    if (z != 0) {
      why = "its weight's quantization has a zero point (llga's int8 weights are symmetric)";
      return false;
    }
  const ConstantTensor* weight = boundTensor(w->node->input(0));
  const int64_t oc = weight->sizes.empty() ? 0 : weight->sizes[0];
  if (oc < 1 || (w->axis != -1 && (w->axis != 0 || static_cast<int64_t>(w->scales.size()) != oc))) {
    why = "its weight is quantized along another axis than the output channels";
    return false;
  }
  std::vector<float> w_scale(static_cast<size_t>(oc));
  for (size_t c = 0; c < w_scale.size(); ++c) w_scale[c] = static_cast<float>(w->axis == -1 ? w->scales[0] : w->scales[c]);
  setPrecision(op, Precision::INT8);
  if (dynamic_qmax) {  // reads x itself: its quantize -> dequantize goes (below)
    setDynamicActivation(op, dynamic_qmax);
    op.replaceInput(0, op.input(0)->node()->input(0)->node()->input(0));
  } else {
    setActivationQuant(op, ActivationQuant{act->scales[0], u8, static_cast<int32_t>(act->zero_points[0])});
  }
  setWeightScales(op, w_scale);
  return true;
}

// Two fake quantizations on one grid (scale and zero point), with at most a
// clamp between them, are one with the narrower range: the second rounds
// values already on the grid, so it only clamps (conv -> quantize -> relu6
// -> quantize with the same parameters, as PyTorch's int8 graphs run
// hardtanh on quantized tensors):
//   fq(fq(x, s, z, a, b), s, z, c, d)                 -> fq(x, s, z, max(a, c), min(b, d))
//   fq(clamp(f, lo, hi), s, z, c, d), f on that grid  -> fq(f, s, z, max(c, z + round(lo / s)), min(d, z + round(hi / s)))
// (relu is a clamp at 0, hardtanh and relu6 at their bounds).
bool mergeFakeQuants(Graph& g) {
  bool changed = false;
  auto sameGrid = [](const Fq& a, const Fq& b) {
    return a.axis == -1 && b.axis == -1 && static_cast<float>(a.scales[0]) == static_cast<float>(b.scales[0]) &&
           a.zero_points[0] == b.zero_points[0];
  };
  for (bool again = true; again;) {
    again = false;
    for (Node* n : g.block()->nodes()) {
      if (n->outputs().size() != 1) continue;
      auto outer = fakeQuantOf(n->output(0));
      if (!outer || outer->axis != -1 || n->inputs().empty()) continue;
      const Node* in = n->input(0)->node();
      Value* source = nullptr;
      int64_t lo = outer->qmin, hi = outer->qmax;
      if (auto inner = fakeQuantOf(n->input(0)); inner && sameGrid(*inner, *outer)) {
        source = in->input(0);
        lo = std::max(lo, inner->qmin);
        hi = std::min(hi, inner->qmax);
      } else if ((is(*in, "aten::relu") || is(*in, "aten::hardtanh") || is(*in, "aten::clamp") || is(*in, "aten::relu6")) &&
                 !in->inputs().empty()) {
        auto inner = fakeQuantOf(in->input(0));
        if (!inner || !sameGrid(*inner, *outer)) continue;
        std::optional<double> bound_lo = 0.0, bound_hi;  // relu
        if (is(*in, "aten::relu6")) bound_hi = 6.0;
        if (is(*in, "aten::hardtanh") || is(*in, "aten::clamp")) {
          if (in->inputs().size() != 3) continue;
          bound_lo = isNone(in->input(1)) ? std::nullopt : constantNumber(in->input(1));
          bound_hi = isNone(in->input(2)) ? std::nullopt : constantNumber(in->input(2));
          if ((!isNone(in->input(1)) && !bound_lo) || (!isNone(in->input(2)) && !bound_hi)) continue;
        }
        const float inv = 1.0f / static_cast<float>(outer->scales[0]);
        const int64_t z = outer->zero_points[0];
        if (bound_lo) lo = std::max(lo, z + static_cast<int64_t>(std::nearbyint(static_cast<float>(*bound_lo) * inv)));
        if (bound_hi) hi = std::min(hi, z + static_cast<int64_t>(std::nearbyint(static_cast<float>(*bound_hi) * inv)));
        source = in->input(0);
      }
      if (!source || lo > hi) continue;
      Emitter e(g, n, n);
      n->replaceInput(0, source);
      n->replaceInput(3, e.i(lo));
      n->replaceInput(4, e.i(hi));
      changed = again = true;
    }
  }
  return changed;
}

class ImportQuantization final : public Pass {
 public:
  std::string_view name() const override { return "import-quantization"; }
  std::string_view description() const override {
    return "a graph's quantize/dequantize pairs as fake quantization, and the convolutions and linears between them "
           "as int8 ops with the graph's scales and zero points";
  }
  bool run(Graph& g) override {
    std::vector<std::string> notes;
    bool changed = toFakeQuant(g, g.block(), notes);
    for (std::string& n : notes) note(std::move(n));
    changed |= mergeFakeQuants(g);
    std::unordered_set<const Node*> absorbed;
    for (Node* n : g.block()->nodes()) {  // the top block only: a loop's or branch's op keeps its fake quantization
      std::string why;
      if (absorb(*n, why)) {
        absorbed.insert(n);
        changed = true;
      } else if (!why.empty()) {
        note(where(*n) + ": fake quantization kept, fp32: " + why);
      }
    }
    // A dynamic quantize -> dequantize that only int8 linears read: gone
    // (they read its input, dequantize and quantize have no kernels)
    for (Node* n = g.block()->paramNode()->next(); n != g.block()->returnNode();) {
      Node* next = n->next();
      if ((is(*n, "aten::dequantize") || is(*n, "aten::quantize_per_tensor_dynamic")) && !n->output(0)->hasUses()) {
        n->destroy();
        changed = true;
      }
      n = next;
    }
    // The weights' fake quantizations fold here, whatever their size
    // (constant-propagation folds small tensors only): the kernels quantize
    // constant weights once. The constant keeps the fake quantization's type
    // (the weight's: dtype, sizes, contiguous) and name.
    std::vector<Node*> weight_fqs;
    for (const Node* op : absorbed) weight_fqs.push_back(op->input(1)->node());
    std::sort(weight_fqs.begin(), weight_fqs.end());
    weight_fqs.erase(std::unique(weight_fqs.begin(), weight_fqs.end()), weight_fqs.end());
    for (Node* fq : weight_fqs) {
      if (!evaluator()) break;  // llga-opt without one: the kernels see a variable weight and run fp32
      std::optional<std::vector<AttrValue>> outs = evaluator()->evaluateConstant(*fq, std::numeric_limits<size_t>::max());
      if (!outs || outs->size() != 1 || !(*outs)[0].is<TensorRef>()) continue;
      Node* c = g.create(prim::Constant, 1);
      c->output()->setType(constantTensorType(*(*outs)[0].get<TensorRef>()));
      c->setAttr(attr::value, std::move((*outs)[0]));
      c->setScope(fq->scope());
      c->setSource(fq->source());
      c->insertBefore(fq);
      replaceKeepingName(g, fq->output(0), c->output());
      fq->destroy();
    }
    // An activation's fake quantization that only int8 ops read goes: they
    // read its input and quantize it as it did. One with other readers stays
    // (it joins its producer's chain as post-ops) and the int8 ops read it:
    // quantizing its values again gives the same integers.
    std::vector<Node*> fqs;
    for (Node* n : g.block()->nodes())
      if (is(*n, "aten::fake_quantize_per_tensor_affine") && n->output(0)->hasUses()) fqs.push_back(n);
    for (Node* fq : fqs) {
      auto params = fakeQuantOf(fq->output(0));  // a narrower range than u8's or s8's clamps: it stays
      if (!params || !((params->qmin == 0 && params->qmax == 255) || (params->qmin == -128 && params->qmax == 127))) continue;
      bool only_int8 = true;
      for (const Use& u : fq->output(0)->uses()) only_int8 = only_int8 && absorbed.count(u.user) && u.offset == 0;
      if (!only_int8) continue;
      fq->output(0)->replaceAllUsesWith(fq->input(0));
      fq->destroy();
    }
    return changed;
  }
};

}  // namespace

LLGA_REGISTER_PASS(ImportQuantization);

}  // namespace llga
