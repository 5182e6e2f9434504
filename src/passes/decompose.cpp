// decompose: composite ops into the primitives the fuser matches.
//
//   addmm(b, x, w, beta, alpha)  ->  add(mul(mm(x, w), alpha), mul(b, beta))
//                                                 (the muls only where != 1; beta == 0 drops b,
//                                                 as PyTorch ignores b then, NaNs included)
//   baddbmm(b, x, y, beta, alpha) ->  the same around bmm(x, y) (masked attention scores)
//   addbmm(b, x, y, beta, alpha)  ->  the same around sum(bmm(x, y), 0)
//   addmv(b, m, v, beta, alpha)   ->  the same around matmul(m, v)
//   max(x, other) / min(x, other) ->  maximum / minimum (the binary overloads, so
//                                     they fuse as binary ops)
//   instance_norm(x, w, b, rm, rv, use_input_stats, momentum, eps, cudnn)
//        ->  group_norm(x, size(x, 1), w, b, eps, cudnn) with the input's statistics,
//            batch_norm(x, w, b, rm, rv, False, momentum, eps, cudnn) with the running ones
//   clamp(x, min: Tensor?, max: Tensor?)  ->  minimum(maximum(x, min), max)
//        (clamp_min / clamp_max with a tensor bound alike; scalar bounds stay clamp)
//   cosine_similarity(x1, x2, dim, eps) ->  sum((x1 / max(|x1|, eps)) * (x2 / max(|x2|, eps)), dim)
//        (PyTorch 1.13's formula: each norm clamped on its own)
//   pairwise_distance(x1, x2, p, eps, keepdim) -> linalg_vector_norm(x1 - x2 + eps, p, [-1], keepdim)
//   cdist(x1, x2, p, compute_mode)  ->  as PyTorch 1.13 computes it: for p == 2 through a
//        matrix product where compute_mode says (1, or None/0 with more than 25 rows on
//        either side, decided per call by a prim::If on the row counts),
//          sqrt(clamp_min(cat([-2 x1, |x1|^2, 1], -1) @ cat([x2, 1, |x2|^2], -1)^T, 0)),
//        else linalg_vector_norm(x1.unsqueeze(-2) - x2.unsqueeze(-3), p, [-1])
//   outer(a, b) / ger(a, b)        ->  unsqueeze(a, -1) * b
//   narrow_copy(x, dim, start, n)  ->  clone(narrow(x, dim, start, n), contiguous_format)
//   trace(x)                       ->  sum(diagonal(x))
//   count_nonzero(x, dims)         ->  sum(x != 0, dims)
//   isnan(x) -> x != x; isfinite(x) -> x - x == 0; isinf(x) -> |x| == inf (a number:
//        x == x and x - x != x - x); isposinf / isneginf -> x == +-inf;
//        signbit(x) -> copysign(1, x) < 0; isreal(x) -> (x == x) | (x != x)
//   deg2rad / rad2deg(x) -> x * (pi / 180) / x * (180 / pi); ldexp(x, e) -> x * pow(2, e)
//   logit(x, eps) -> log(x / (1 - x)), x clamped to [eps, 1 - eps] first
//   float_power(x, e) -> pow of both in float64
//   aminmax(x, dim, keepdim)       ->  (amin(x, dim, keepdim), amax(x, dim, keepdim))
//   diag(x, k)                     ->  a copy of diagonal(x, k) for a matrix; for a vector
//        (k = 0) where(eye(n) as bool, x, 0)
//   cross(a, b, dim) / linalg_cross ->  roll(a, -1) * roll(b, -2) - roll(a, -2) * roll(b, -1)
//        along dim, after a check that both have 3 there (PyTorch's error otherwise)
//   kron(a, b)                     ->  both at the larger rank (leading 1s), a's dims
//        interleaved with 1s and b's, their product, then each (a_i, b_i) pair flattened
//   linalg_norm(x, ord, dim, keepdim, dtype) -> linalg_vector_norm over dim (every dim when
//        both are None; one dim, or a vector, with a number ord), over two dims for 'fro';
//        matrix ord 1 / -1 / inf / -inf as the largest / smallest column / row sum of |x|
//        (2, -2 and 'nuc' need singular values: left alone)
//   stft(x, n_fft, hop, win_length, window, normalized, onesided, return_complex)
//        ->  the DFT of each frame: llga::dft_frames (an FFT, backend/dnnl/ops/fft.cpp) where
//            n_fft has no prime factor above 31, else one strided conv1d of x with 2F kernels
//            of n_fft taps (window * cos, -window * sin: F = n_fft / 2 + 1 onesided, else n_fft); then
//            sqrt(re^2 + im^2) where the complex result is read only through abs (and
//            size, and views on the way: torchaudio's Spectrogram), or stack([re, im], -1)
//            for return_complex=False; llga has no complex tensors, so a complex result read
//            any other way is left alone
//   _nested_tensor_from_mask(x, keep, check) -> _transformer_encoder_layer_fwd(., mask=None) x N
//        -> to_padded_tensor(., pad, None)   (nn.TransformerEncoder's nested fast path in eval)
//        ->  the layers on x itself with the key padding mask logical_not(keep)
//            (mask_type 1), then masked_fill(., pad rows, pad) cut to the longest
//            row, as to_padded_tensor's output is. PyTorch takes that path only
//            for masks whose padding is at the end of each row (it checks before
//            tracing); for those the results agree.
//   _native_multi_head_attention(q, k, v, E, H, Wqkv, bqkv, Wo, bo, None, ...)
//        ->  linear (one for self-attention, else three on weight slices)
//            -> reshape [B, L, H, D] -> transpose(1, 2)
//            -> matmul(q, k^T) * 1/sqrt(D) -> softmax(-1) -> matmul(., v)
//            -> transpose(1, 2) -> reshape [B, L, E] -> linear(Wo, bo)
//   _transformer_encoder_layer_fwd(src, ...)  ->  the attention above, the
//        residual adds, two layer_norms and linear -> gelu|relu -> linear,
//        in norm-first or norm-last order
//
// Left alone, with a note: attention with a mask, attention whose weights
// output is read, non-constant embed_dim/heads/flags, inputs of unknown or
// other rank than 3, addmm/baddbmm/addbmm/addmv with non-constant alpha/beta
// (addmm then runs as one op; the others are reported as unsupported).
#include <cmath>
#include <limits>
#include <set>

#include "ir/ops.h"
#include "passes/pass.h"
#include "passes/pass_utils.h"

namespace llga {
namespace {

bool is(const Node& n, const char* kind) { return n.kind().toQualString() == kind; }

const std::vector<std::string> kDecomposed = {
    "aten::addmm", "aten::baddbmm", "aten::addbmm", "aten::addmv", "aten::instance_norm",
    "aten::_native_multi_head_attention", "aten::_transformer_encoder_layer_fwd", "aten::cosine_similarity",
    "aten::pairwise_distance", "aten::cdist", "aten::_nested_tensor_from_mask", "aten::to_padded_tensor",
    "aten::swapaxes", "aten::swapdims", "aten::outer", "aten::ger", "aten::narrow_copy", "aten::trace",
    "aten::count_nonzero", "aten::aminmax", "aten::diag", "aten::cross", "aten::linalg_cross", "aten::linalg_norm", "aten::kron", "aten::stft",
    "aten::isnan", "aten::isinf", "aten::isfinite", "aten::isposinf", "aten::isneginf", "aten::signbit", "aten::isreal",
    "aten::deg2rad", "aten::rad2deg", "aten::logit", "aten::float_power", "aten::ldexp"};

// Rewritten by Decompose::small (each the op's PyTorch definition in ops llga runs).
bool smallKind(const Node& n) {
  static const std::set<std::string> kinds = {"aten::outer", "aten::ger", "aten::narrow_copy", "aten::trace",
                                              "aten::count_nonzero", "aten::aminmax", "aten::diag", "aten::cross",
                                              "aten::linalg_cross", "aten::linalg_norm", "aten::kron",
                                              "aten::isnan", "aten::isinf", "aten::isfinite", "aten::isposinf",
                                              "aten::isneginf", "aten::signbit", "aten::isreal", "aten::deg2rad",
                                              "aten::rad2deg", "aten::logit", "aten::float_power", "aten::ldexp"};
  return kinds.count(n.kind().toQualString()) > 0;
}

std::optional<size_t> knownRank(const Value* v) {
  if (!v->type()->isTensor()) return std::nullopt;
  return v->type()->tensorInfo().rank();
}

class Decompose final : public Pass {
 public:
  std::string_view name() const override { return "decompose"; }
  std::string_view description() const override {
    return "composite ops (addmm, baddbmm, addbmm, addmv, attention) into primitives";
  }

  bool run(Graph& g) override {
    bool nested = false;
    std::vector<Node*> from_mask;
    g.forEachNode([&](Node* n) {
      if (is(*n, "aten::_nested_tensor_from_mask")) from_mask.push_back(n);
    });
    for (Node* n : from_mask) nested |= nestedEncoder(g, n);
    std::vector<Node*> todo;
    g.forEachNode([&](Node* n) {
      if (product(*n) || binaryMaxMin(*n) || alias(*n) || tensorClamp(*n) || is(*n, "aten::instance_norm") ||
          is(*n, "aten::_native_multi_head_attention") || is(*n, "aten::_transformer_encoder_layer_fwd") ||
          is(*n, "aten::cosine_similarity") || is(*n, "aten::pairwise_distance") || is(*n, "aten::cdist") ||
          smallKind(*n) || is(*n, "aten::stft"))
        todo.push_back(n);
    });
    bool changed = false;
    for (Node* n : todo) {
      if (product(*n)) changed |= scaledProduct(g, n);
      else if (const char* k = binaryMaxMin(*n)) changed |= rename(g, n, k);
      else if (const char* k = alias(*n)) changed |= rename(g, n, k);
      else if (tensorClamp(*n)) changed |= clampWithTensors(g, n);
      else if (is(*n, "aten::cosine_similarity")) changed |= cosineSimilarity(g, n);
      else if (is(*n, "aten::pairwise_distance")) changed |= pairwiseDistance(g, n);
      else if (is(*n, "aten::cdist")) changed |= cdist(g, n);
      else if (smallKind(*n)) changed |= small(g, n);
      else if (is(*n, "aten::stft")) changed |= stft(g, n);
      else if (is(*n, "aten::instance_norm")) changed |= instanceNorm(g, n);
      else if (is(*n, "aten::_native_multi_head_attention")) changed |= mha(g, n);
      else changed |= encoderLayer(g, n);
    }
    return changed || nested;
  }

 private:
  bool skip(const Node* n, const std::string& why) {
    note(where(*n) + ": " + why);
    return false;
  }

  // Replaces n's single output by `v` (which takes its name and type) and drops n.
  static void finish(Graph& g, Node* n, Value* v) {
    v->setType(n->output()->type());
    replaceKeepingName(g, n->output(), v);
    n->destroy();
  }

  // Another name of an op (swapaxes and swapdims are transpose): that op's kind, or null.
  static const char* alias(const Node& n) {
    if (is(n, "aten::swapaxes") || is(n, "aten::swapdims")) return "aten::transpose";
    return nullptr;
  }

  // max/min of two tensors: their elementwise kind, or null.
  static const char* binaryMaxMin(const Node& n) {
    if (n.inputs().size() != 2 || n.outputs().size() != 1 || !n.input(1)->type()->isTensor()) return nullptr;
    if (is(n, "aten::max")) return "aten::maximum";
    if (is(n, "aten::min")) return "aten::minimum";
    return nullptr;
  }

  // clamp (clip) / clamp_min / clamp_max with a bound typed as a tensor.
  static bool tensorClamp(const Node& n) {
    if (!is(n, "aten::clamp") && !is(n, "aten::clip") && !is(n, "aten::clamp_min") && !is(n, "aten::clamp_max"))
      return false;
    if (n.outputs().size() != 1) return false;
    for (size_t i = 1; i < n.inputs().size(); ++i)
      if (n.input(i)->type()->isTensor()) return true;
    return false;
  }

  static bool clampWithTensors(Graph& g, Node* n) {
    Emitter e(g, n, n);
    Value* out = n->input(0);
    // A tensor bound: maximum/minimum; a scalar one: clamp_min/clamp_max; None: nothing.
    auto bound = [&](size_t i, bool lower) {
      if (i >= n->inputs().size()) return;
      Value* v = n->input(i);
      if (v->type()->isTensor()) out = e.op(lower ? "aten::maximum" : "aten::minimum", {out, v});
      else if (!v->type()->isSimple("NoneType")) out = e.op(lower ? "aten::clamp_min" : "aten::clamp_max", {out, v});
    };
    if (is(*n, "aten::clamp_max")) {
      bound(1, false);
    } else {
      bound(1, true);
      if (is(*n, "aten::clamp") || is(*n, "aten::clip")) bound(2, false);
    }
    finish(g, n, out);
    return true;
  }

  bool cosineSimilarity(Graph& g, Node* n) {
    if (n->inputs().size() != 4) return skip(n, "unexpected arity");
    Emitter e(g, n, n);
    Value* dims = e.list({n->input(2)}, Type::Int());
    auto unit = [&](Value* x) {
      Value* norm = e.op("aten::linalg_vector_norm", {x, e.f(2.0), dims, e.b(true), e.none()});
      return e.op("aten::div", {x, e.op("aten::clamp_min", {norm, n->input(3)})});
    };
    // Both operands at their broadcast shape first: a broadcast operand's norm is over its expanded values
    // (PyTorch expands before the norms); the product is only there for that shape.
    Value* like = e.op("aten::mul", {n->input(0), n->input(1)});
    Value* prod = e.op("aten::mul", {unit(e.op("aten::expand_as", {n->input(0), like})),
                                     unit(e.op("aten::expand_as", {n->input(1), like}))});
    finish(g, n, e.op("aten::sum", {prod, dims, e.b(false), e.none()}));
    return true;
  }

  bool pairwiseDistance(Graph& g, Node* n) {
    if (n->inputs().size() != 5) return skip(n, "unexpected arity");
    Emitter e(g, n, n);
    Value* diff = e.op("aten::add", {e.op("aten::sub", {n->input(0), n->input(1), e.i(1)}), n->input(3), e.i(1)});
    finish(g, n, e.op("aten::linalg_vector_norm", {diff, n->input(2), e.ints({-1}), n->input(4), e.none()}));
    return true;
  }

  bool cdist(Graph& g, Node* n) {
    if (n->inputs().size() != 4) return skip(n, "unexpected arity");
    const auto p = constantNumber(n->input(2));
    if (!p) return skip(n, "p is not a constant");
    const auto mode = isNone(n->input(3)) ? std::optional<int64_t>(0) : constantInt(n->input(3));
    if (!mode || *mode < 0 || *mode > 2) return skip(n, "compute_mode is not a constant 0, 1, 2 or None");
    Value* x1 = n->input(0);
    Value* x2 = n->input(1);
    auto direct = [&](Emitter& e) {
      Value* diff = e.op("aten::sub", {e.op("aten::unsqueeze", {x1, e.i(-2)}), e.op("aten::unsqueeze", {x2, e.i(-3)}),
                                       e.i(1)});
      return e.op("aten::linalg_vector_norm", {diff, e.f(*p), e.ints({-1}), e.b(false), e.none()});
    };
    auto product = [&](Emitter& e) {  // PyTorch's _euclidean_dist
      auto squares = [&](Value* x) {
        return e.op("aten::sum", {e.op("aten::pow", {x, e.f(2.0)}), e.ints({-1}), e.b(true), e.none()});
      };
      auto ones = [&](Value* like) { return e.op("aten::ones_like", {like, e.none(), e.none(), e.none(), e.none(), e.none()}); };
      Value* n1 = squares(x1);
      Value* n2 = squares(x2);
      Value* a = e.op("aten::cat", {e.list({e.op("aten::mul", {x1, e.f(-2.0)}), n1, ones(n1)}, Type::tensor()), e.i(-1)});
      Value* b = e.op("aten::cat", {e.list({x2, ones(n2), n2}, Type::tensor()), e.i(-1)});
      Value* r = e.op("aten::matmul", {a, e.op("aten::transpose", {b, e.i(-1), e.i(-2)})});
      return e.op("aten::sqrt", {e.op("aten::clamp_min", {r, e.f(0.0)})});
    };
    Emitter e(g, n, n);
    if (*p != 2.0 || *mode == 2) {
      finish(g, n, direct(e));
      return true;
    }
    if (*mode == 1) {
      finish(g, n, product(e));
      return true;
    }
    Value* rows = e.op("prim::max", {e.op("aten::size", {x1, e.i(-2)}, Type::Int()),
                                     e.op("aten::size", {x2, e.i(-2)}, Type::Int())}, Type::Int());
    Node* choice = e.node("prim::If", {e.op("aten::gt", {rows, e.i(25)}, Type::Bool())}, 1);
    for (bool mm : {true, false}) {
      Block* block = choice->addBlock();
      Emitter in(g, block->returnNode(), n);
      block->registerOutput(mm ? product(in) : direct(in));
    }
    finish(g, n, choice->output());
    return true;
  }

  // Emits `if cond: raise message` before n's replacement (PyTorch's own
  // check of what the decomposition does not refuse by itself).
  static void raiseIf(Graph& g, Emitter& e, Node* n, Value* cond, const std::string& message) {
    Node* check = e.node("prim::If", {cond}, 0);
    Block* raise = check->addBlock();
    check->addBlock();
    Emitter r(g, raise->returnNode(), n);
    r.node("prim::RaiseException", {r.constant(AttrValue(message), Type::Str())}, 0);
  }

  // x must have `rank` dims, as PyTorch checks: false (left alone) where its
  // known rank differs, a check at run time where it is not known.
  static bool requireRank(Graph& g, Emitter& e, Node* n, Value* x, size_t rank, const std::string& message) {
    if (const auto r = knownRank(x)) return *r == rank;
    raiseIf(g, e, n, e.op("aten::ne", {e.op("aten::dim", {x}, Type::Int()), e.i(static_cast<int64_t>(rank))}, Type::Bool()),
            message);
    return true;
  }

  bool small(Graph& g, Node* n) {
    const std::string kind = n->kind().toQualString();
    Emitter e(g, n, n);
    auto in = [&](size_t i) { return n->input(i); };
    const size_t arity = n->inputs().size();
    if ((kind == "aten::outer" || kind == "aten::ger") && arity == 2) {
      for (Value* x : {in(0), in(1)})
        if (!requireRank(g, e, n, x, 1, "outer: expected 1-D arguments")) return skip(n, "an argument is not 1-D");
      finish(g, n, e.op("aten::mul", {e.op("aten::unsqueeze", {in(0), e.i(-1)}), in(1)}));
      return true;
    }
    // value tests, as comparisons (each also right for a number: math.isnan(x) and the like)
    const double inf = std::numeric_limits<double>::infinity();
    if (kind == "aten::isnan" && arity == 1) return finish(g, n, e.op("aten::ne", {in(0), in(0)})), true;
    if (kind == "aten::isfinite" && arity == 1)  // x - x is 0 unless x is infinite or NaN
      return finish(g, n, e.op("aten::eq", {e.op("aten::sub", {in(0), in(0), e.i(1)},
                                                 in(0)->type()->isTensor() ? nullptr : in(0)->type()),
                                          e.i(0)})), true;
    if (kind == "aten::isinf" && arity == 1) {
      if (in(0)->type()->isTensor()) return finish(g, n, e.op("aten::eq", {e.op("aten::abs", {in(0)}), e.f(inf)})), true;
      Value* d = e.op("aten::sub", {in(0), in(0), e.i(1)}, in(0)->type());  // NaN for an infinity or a NaN
      Value* nan_or_inf = e.op("aten::ne", {d, d}, Type::Bool());
      return finish(g, n, e.op("aten::__and__", {e.op("aten::eq", {in(0), in(0)}, Type::Bool()), nan_or_inf})), true;
    }
    if ((kind == "aten::isposinf" || kind == "aten::isneginf") && arity == 1)
      return finish(g, n, e.op("aten::eq", {in(0), e.f(kind == "aten::isposinf" ? inf : -inf)})), true;
    if (kind == "aten::signbit" && arity == 1)  // -0.0 and a NaN with its sign bit set too
      return finish(g, n, e.op("aten::lt", {e.op("aten::copysign", {e.f(1.0), in(0)}), e.i(0)})), true;
    if (kind == "aten::isreal" && arity == 1)  // every element of a real tensor, NaN included
      return finish(g, n, e.op("aten::__or__", {e.op("aten::eq", {in(0), in(0)}), e.op("aten::ne", {in(0), in(0)})})), true;
    if ((kind == "aten::deg2rad" || kind == "aten::rad2deg") && arity == 1)
      return finish(g, n, e.op("aten::mul", {in(0), e.f(kind == "aten::deg2rad" ? M_PI / 180.0 : 180.0 / M_PI)})), true;
    if (kind == "aten::logit" && arity == 2) {  // log(x / (1 - x)), x clamped to [eps, 1 - eps] first
      Value* x = in(0);
      if (!isNone(in(1))) {
        const auto eps = constantNumber(in(1));
        if (!eps) return skip(n, "eps is not a constant");
        x = e.op("aten::clamp", {x, e.f(*eps), e.f(1.0 - *eps)});
      }
      return finish(g, n, e.op("aten::log", {e.op("aten::div", {x, e.op("aten::rsub", {x, e.i(1), e.i(1)})})})), true;
    }
    if (kind == "aten::float_power" && arity == 2) {  // in float64
      auto dbl = [&](Value* v) {
        return v->type()->isTensor() ? e.op("aten::to", {v, e.i(7), e.b(false), e.b(false), e.none()}) : v;
      };
      return finish(g, n, e.op("aten::pow", {dbl(in(0)), dbl(in(1))})), true;
    }
    if (kind == "aten::ldexp" && arity == 2)  // x * 2^e, as PyTorch defines it
      return finish(g, n, e.op("aten::mul", {in(0), e.op("aten::pow", {e.f(2.0), in(1)})})), true;
    if (kind == "aten::narrow_copy" && arity == 4) {
      finish(g, n, e.op("aten::clone", {e.op("aten::narrow", {in(0), in(1), in(2), in(3)}), e.i(0)}));
      return true;
    }
    if (kind == "aten::trace" && arity == 1) {
      if (!requireRank(g, e, n, in(0), 2, "trace: expected a matrix")) return skip(n, "not a matrix");
      Value* d = e.op("aten::diagonal", {in(0), e.i(0), e.i(0), e.i(1)});
      finish(g, n, e.op("aten::sum", {d, e.none()}));
      return true;
    }
    if (kind == "aten::count_nonzero" && arity == 2) {
      Value* nz = e.op("aten::ne", {in(0), e.i(0)});
      Value* dims = in(1)->type()->isSimple("int") ? e.list({in(1)}, Type::Int()) : in(1);
      finish(g, n, isNone(in(1)) ? e.op("aten::sum", {nz, e.none()})
                                 : e.op("aten::sum", {nz, dims, e.b(false), e.none()}));
      return true;
    }
    if (kind == "aten::aminmax" && arity == 3 && n->outputs().size() == 2) {
      Value* dims = isNone(in(1)) ? e.ints({}) : e.list({in(1)}, Type::Int());
      Value* lo = e.op("aten::amin", {in(0), dims, in(2)});
      Value* hi = e.op("aten::amax", {in(0), dims, in(2)});
      for (auto [out, v] : {std::pair{n->output(0), lo}, {n->output(1), hi}}) {
        v->setType(out->type());
        replaceKeepingName(g, out, v);
      }
      n->destroy();
      return true;
    }
    if (kind == "aten::diag" && arity == 2) {
      const auto rank = knownRank(in(0));
      const auto k = constantInt(in(1));
      if (rank == 2u && k) {
        // PyTorch 1.13 refuses an offset past the matrix's edge ("numel: integer multiplication overflow")
        Value* edge = e.op("aten::size", {in(0), e.i(*k >= 0 ? 1 : 0)}, Type::Int());
        raiseIf(g, e, n, e.op("aten::gt", {e.i(*k >= 0 ? *k : -*k), edge}, Type::Bool()),
                "diag: the offset " + std::to_string(*k) + " lies past the matrix");
        finish(g, n, e.op("aten::clone", {e.op("aten::diagonal", {in(0), in(1), e.i(0), e.i(1)}), e.i(0)}));
        return true;
      }
      if (rank != 1u || k != 0) return skip(n, "diag of a vector off the main diagonal, or of unknown rank");
      Value* size = e.op("aten::size", {in(0), e.i(0)}, Type::Int());
      Value* eye = e.op("aten::eye", {size, e.i(11) /* bool */, e.none(), e.none(), e.none()});
      finish(g, n, e.op("aten::where", {eye, in(0), e.i(0)}));
      return true;
    }
    if ((kind == "aten::cross" || kind == "aten::linalg_cross") && arity == 3) {
      std::optional<int64_t> dim = constantInt(in(2));
      if (!dim && isNone(in(2))) {  // cross's deprecated default: the first dim of size 3
        const auto sizes = in(0)->type()->tensorInfo().concreteSizes();
        if (sizes)
          for (size_t d = 0; d < sizes->size() && !dim; ++d)
            if ((*sizes)[d] == 3) dim = static_cast<int64_t>(d);
      }
      if (!dim) return skip(n, "cross over a dim that is not a constant");
      for (Value* x : {in(0), in(1)})  // PyTorch refuses another length there
        raiseIf(g, e, n, e.op("aten::ne", {e.op("aten::size", {x, e.i(*dim)}, Type::Int()), e.i(3)}, Type::Bool()),
                "linalg.cross: inputs dimension " + std::to_string(*dim) + " must have length 3");
      auto roll = [&](Value* x, int64_t by) { return e.op("aten::roll", {x, e.ints({by}), e.ints({*dim})}); };
      Value* ab = e.op("aten::mul", {roll(in(0), -1), roll(in(1), -2)});
      Value* ba = e.op("aten::mul", {roll(in(0), -2), roll(in(1), -1)});
      finish(g, n, e.op("aten::sub", {ab, ba, e.i(1)}));
      return true;
    }
    if (kind == "aten::linalg_norm" && arity == 5) return linalgNorm(g, e, n);
    if (kind == "aten::kron" && arity == 2) {
      const auto ra = knownRank(in(0)), rb = knownRank(in(1));
      if (!ra || !rb) return skip(n, "the operands' ranks are not known");
      const size_t r = std::max(*ra, *rb);
      auto spread = [&](Value* x, size_t rank, bool first) {  // [.., x_i, 1, ..] (first) or [.., 1, x_i, ..]
        for (size_t k = rank; k < r; ++k) x = e.op("aten::unsqueeze", {x, e.i(0)});
        for (size_t i = 0; i < r; ++i) x = e.op("aten::unsqueeze", {x, e.i(static_cast<int64_t>(first ? 2 * i + 1 : 2 * i))});
        return x;
      };
      Value* out = e.op("aten::mul", {spread(in(0), *ra, true), spread(in(1), *rb, false)});
      for (size_t i = 0; i < r; ++i)
        out = e.op("aten::flatten", {out, e.i(static_cast<int64_t>(i)), e.i(static_cast<int64_t>(i + 1))});
      finish(g, n, out);
      return true;
    }
    return skip(n, "unexpected arity");
  }

  bool linalgNorm(Graph& g, Emitter& e, Node* n) {
    Value* x = n->input(0);
    Value* keepdim = n->input(3);
    Value* dtype = n->input(4);
    std::optional<std::vector<int64_t>> dims;
    if (!isNone(n->input(2))) {
      dims = constantInts(n->input(2));
      if (!dims) return skip(n, "dim is not a constant");
    }
    auto vectorNorm = [&](Value* ord, Value* over) {
      finish(g, n, e.op("aten::linalg_vector_norm", {x, ord, over, keepdim, dtype}));
      return true;
    };
    const auto ord_str = constantString(n->input(1));
    if (isNone(n->input(1))) {  // 2-norm of the vector, or Frobenius of the matrix: the same sum of squares
      if (dims && dims->size() > 2) return skip(n, "more than two dims");
      return vectorNorm(e.f(2.0), dims ? n->input(2) : e.none());
    }
    const std::optional<size_t> rank = knownRank(x);
    if (!dims && rank && *rank <= 2) dims = *rank == 1 ? std::vector<int64_t>{0} : std::vector<int64_t>{0, 1};
    if (!dims) return skip(n, "dim is None and the rank is not known (vector or matrix norm)");
    if (ord_str) {
      if (*ord_str != "fro" || dims->size() != 2) return skip(n, "ord '" + *ord_str + "' needs singular values");
      return vectorNorm(e.f(2.0), e.ints(*dims));
    }
    const auto ord = constantNumber(n->input(1));
    if (!ord) return skip(n, "ord is not a constant");
    if (dims->size() == 1) return vectorNorm(e.f(*ord), e.ints(*dims));
    if (dims->size() != 2 || (std::abs(*ord) != 1.0 && !std::isinf(*ord)))
      return skip(n, "a matrix norm of this ord needs singular values");
    // |x| summed over rows (ord 1: each column's sum) or columns (inf), then the extreme of those
    const int64_t summed = std::isinf(*ord) ? (*dims)[1] : (*dims)[0];
    Value* sums = e.op("aten::sum", {e.op("aten::abs", {x}), e.ints({summed}), e.b(true), dtype});
    finish(g, n, e.op(*ord > 0 ? "aten::amax" : "aten::amin", {sums, e.ints(*dims), keepdim}));
    return true;
  }

  // Whether every use of the complex value v, through views and scalings by
  // real values (|z * c| = |z| |c|, and the abs at the end takes the sign),
  // ends in abs or a size query; `chain` collects those ops (whose results
  // become real).
  static bool readAsMagnitude(const Value* v, std::vector<Node*>& chain, int depth = 0) {
    static const std::set<std::string> views = {"aten::reshape", "aten::view", "aten::transpose", "aten::permute",
                                                "aten::contiguous", "aten::squeeze", "aten::unsqueeze",
                                                "aten::flatten", "aten::select", "aten::slice", "aten::narrow",
                                                "aten::clone"};
    static const std::set<std::string> ends = {"aten::abs", "aten::size", "aten::dim", "aten::numel"};
    if (depth > 16) return false;
    for (const Use& u : v->uses()) {
      const std::string kind = u.user->kind().toQualString();
      if (ends.count(kind) && u.offset == 0) continue;
      const bool scaling = (kind == "aten::mul" || kind == "aten::div" || kind == "aten::mul_" || kind == "aten::div_") &&
                           u.offset == 0 &&
                           u.user->inputs().size() == 2 && knownReal(u.user->input(1));
      if ((!views.count(kind) && !scaling) || u.offset != 0 || u.user->outputs().size() != 1) return false;
      chain.push_back(u.user);
      if (!readAsMagnitude(u.user->output(), chain, depth + 1)) return false;
    }
    return true;
  }

  static int64_t largestPrimeFactor(int64_t n) {
    int64_t largest = 1;
    for (int64_t p = 2; p * p <= n; ++p)
      while (n % p == 0) largest = p, n /= p;
    return std::max(largest, n);
  }

  // Whether v is known to hold real values: a number, a tensor of a real
  // dtype, or computed from such by arithmetic and reductions (a scripted
  // front end's sqrt(sum(window * window)), whose dtype is not known yet here).
  static bool knownReal(const Value* v, int depth = 0) {
    if (!v->type()->isTensor()) return v->type()->isSimple("int") || v->type()->isSimple("float") || v->type()->isSimple("bool");
    if (!isComplex(v)) return true;
    const Node* p = v->node();
    if (depth > 8) return false;
    if (p->kind() == prim::Constant) {
      const AttrValue* a = p->attributes().find(attr::value);
      if (!a || !a->is<TensorRef>()) return false;
      const ScalarType dt = a->get<TensorRef>()->dtype;
      return dt != ScalarType::ComplexHalf && dt != ScalarType::ComplexFloat && dt != ScalarType::ComplexDouble;
    }
    static const std::set<std::string> real_of_real = {"aten::mul", "aten::div", "aten::add", "aten::sub", "aten::sqrt",
                                                       "aten::sum", "aten::mean", "aten::pow", "aten::abs", "aten::rsqrt"};
    if (!real_of_real.count(p->kind().toQualString())) return false;
    for (const Value* in : p->inputs())  // (dims, dtypes and the like are not values of the result)
      if (in->type()->isTensor() && !knownReal(in, depth + 1)) return false;
    return true;
  }

  static bool isComplex(const Value* v) {
    if (!v->type()->isTensor()) return v->type()->isSimple("complex");
    const auto dt = v->type()->tensorInfo().dtype;
    return !dt || *dt == ScalarType::ComplexHalf || *dt == ScalarType::ComplexFloat || *dt == ScalarType::ComplexDouble;
  }

  bool stft(Graph& g, Node* n) {
    if (n->inputs().size() != 8) return skip(n, "unexpected arity");
    auto in = [&](size_t i) { return n->input(i); };
    const auto rank = knownRank(in(0));
    const auto n_fft = constantInt(in(1));
    const auto ret_complex = constantInt(in(7));
    if ((rank && *rank != 1 && *rank != 2) || !n_fft || *n_fft <= 0 || !ret_complex)
      return skip(n, "stft of an input of rank other than 1 or 2, or n_fft or return_complex not constants");
    const int64_t hop = isNone(in(2)) ? *n_fft / 4 : constantInt(in(2)).value_or(-1);
    const int64_t win = isNone(in(3)) ? *n_fft : constantInt(in(3)).value_or(-1);
    const auto normalized = constantInt(in(5));
    const bool onesided = isNone(in(6)) || constantInt(in(6)).value_or(1) != 0;
    if (hop <= 0 || win <= 0 || win > *n_fft || !normalized) return skip(n, "stft's hop, window length or flags");
    // (a dtype not known here: llga::dft_frames and conv1d check it at run time)
    if (const auto dt = knownDtype(in(0)); dt && *dt != ScalarType::Float) return skip(n, "stft of other than a float32 signal");
    std::vector<Node*> chain;
    if (*ret_complex && !readAsMagnitude(n->output(), chain)) return skip(n, "the complex stft is read other than as |.|");
    const int64_t bins = onesided ? *n_fft / 2 + 1 : *n_fft;
    Emitter e(g, n, n);
    Value* window = isNone(in(4)) ? e.op("aten::ones", {e.ints({win}), e.none(), e.none(), e.none(), e.none()}) : in(4);
    const int64_t left = (*n_fft - win) / 2;
    if (win < *n_fft) window = e.op("aten::constant_pad_nd", {window, e.ints({left, *n_fft - win - left}), e.f(0.0)});
    // [signals, 1, samples]; a rank not known here (a scripted front end without
    // examples) is checked at run time and taken as [-1, samples]
    Value* x;
    if (rank) {
      x = e.op("aten::unsqueeze", {*rank == 1 ? e.op("aten::unsqueeze", {in(0), e.i(0)}) : in(0), e.i(1)});
    } else {
      Value* dims = e.op("aten::dim", {in(0)}, Type::Int());
      raiseIf(g, e, n,
              e.op("aten::__or__", {e.op("aten::lt", {dims, e.i(1)}, Type::Bool()), e.op("aten::gt", {dims, e.i(2)}, Type::Bool())},
                   Type::Bool()),
              "stft: expected a 1D or 2D tensor");
      Value* samples = e.op("aten::size", {in(0), e.i(-1)}, Type::Int());
      x = e.op("aten::unsqueeze", {e.op("aten::reshape", {in(0), e.list({e.i(-1), samples}, Type::Int())}), e.i(1)});
    }
    // An FFT (llga::dft_frames) where n_fft has no prime factor above 31, so
    // that its stages cost O(n_fft log n_fft); else the DFT as one conv1d of
    // the 2 * bins kernels window * cos and -window * sin of 2 pi f t / n_fft.
    const bool fft = largestPrimeFactor(*n_fft) <= 31;
    Value* frames;
    if (fft) {
      frames = e.op("llga::dft_frames", {x, window, e.i(*n_fft), e.i(hop), e.i(bins)});
    } else {
      auto table = ConstantTensor::owned(ScalarType::Float, {2 * bins, *n_fft});
      float* tv = static_cast<float*>(table->data);
      for (int64_t f = 0; f < bins; ++f)
        for (int64_t t = 0; t < *n_fft; ++t) {
          const double angle = 2 * M_PI * static_cast<double>((f * t) % *n_fft) / static_cast<double>(*n_fft);
          tv[f * *n_fft + t] = static_cast<float>(std::cos(angle));
          tv[(bins + f) * *n_fft + t] = static_cast<float>(-std::sin(angle));
        }
      Value* kernels = e.op("aten::unsqueeze", {e.op("aten::mul", {e.constant(AttrValue(TensorRef(table)),
                                                                               constantTensorType(*table)),
                                                                    window}),
                                                e.i(1)});
      frames = e.op("aten::conv1d", {x, kernels, e.none(), e.ints({hop}), e.ints({0}), e.ints({1}), e.i(1)});
    }
    Value* re = e.op("aten::narrow", {frames, e.i(1), e.i(0), e.i(bins)});
    Value* im = e.op("aten::narrow", {frames, e.i(1), e.i(bins), e.i(bins)});
    Value* out = *ret_complex
                     ? e.op("aten::sqrt", {e.op("aten::add", {e.op("aten::mul", {re, re}), e.op("aten::mul", {im, im}),
                                                              e.i(1)})})
                     : e.op("aten::stack", {e.list({re, im}, Type::tensor()), e.i(-1)});
    if (*normalized) out = e.op("aten::mul", {out, e.f(1.0 / std::sqrt(static_cast<double>(*n_fft)))});
    if (rank && *rank == 1) {
      out = e.op("aten::squeeze", {out, e.i(0)});
    } else if (!rank) {  // the input's leading dims (none or one), then the spectrum's
      Value* lead = e.op("aten::slice", {e.op("aten::size", {in(0)}, Type::list(Type::Int())), e.i(0), e.i(-1), e.i(1)},
                         Type::list(Type::Int()));
      Value* tail = e.op("aten::slice", {e.op("aten::size", {out}, Type::list(Type::Int())), e.i(1), e.none(), e.i(1)},
                         Type::list(Type::Int()));
      out = e.op("aten::reshape", {out, e.op("aten::add", {lead, tail}, Type::list(Type::Int()))});
    }
    // the views between the stft and its abs now carry the real magnitude
    for (Node* view : chain) {
      TensorInfo t = view->output()->type()->isTensor() ? view->output()->type()->tensorInfo() : TensorInfo{};
      t.dtype = ScalarType::Float;
      t.strides.reset();
      view->output()->setType(Type::tensor(t));
    }
    TensorInfo t = n->output()->type()->tensorInfo();
    t.dtype = ScalarType::Float;
    t.strides.reset();
    if (!*ret_complex && t.sizes) t.sizes->push_back(2);
    out->setType(Type::tensor(t));
    note(where(*n) + ": " + (*ret_complex ? "read only as |stft|: " : "") +
         (fft ? "an FFT of " + std::to_string(*n_fft) + " points per frame (llga::dft_frames), hop "
              : "a conv1d of " + std::to_string(2 * bins) + " DFT kernels of " + std::to_string(*n_fft) +
                    " taps (a prime factor above 31), stride ") +
         std::to_string(hop));
    replaceKeepingName(g, n->output(), out);
    n->destroy();
    return true;
  }

  static bool rename(Graph& g, Node* n, const char* kind) {
    Emitter e(g, n, n);
    finish(g, n, e.op(kind, std::vector<Value*>(n->inputs().begin(), n->inputs().end())));
    return true;
  }

  bool instanceNorm(Graph& g, Node* n) {
    if (n->inputs().size() != 9) return skip(n, "unexpected arity");
    auto input_stats = constantInt(n->input(5));
    if (!input_stats) return skip(n, "use_input_stats is not a constant");
    Emitter e(g, n, n);
    Value* x = n->input(0);
    Value* out;
    if (*input_stats) {
      Value* channels = e.op("aten::size", {x, e.i(1)}, Type::Int());
      out = e.op("aten::group_norm", {x, channels, n->input(1), n->input(2), n->input(7), n->input(8)});
    } else {
      out = e.op("aten::batch_norm", {x, n->input(1), n->input(2), n->input(3), n->input(4), e.b(false), n->input(6),
                                      n->input(7), n->input(8)});
    }
    finish(g, n, out);
    return true;
  }

  // The matrix product inside addmm, baddbmm, addbmm and addmv, or null.
  static const char* product(const Node& n) {
    if (is(n, "aten::addmm")) return "aten::mm";
    if (is(n, "aten::baddbmm") || is(n, "aten::addbmm")) return "aten::bmm";
    if (is(n, "aten::addmv")) return "aten::matmul";
    return nullptr;
  }

  // beta * b + alpha * product(x, y), with constant alpha and beta.
  bool scaledProduct(Graph& g, Node* n) {
    if (n->inputs().size() != 5) return skip(n, "unexpected arity");
    auto beta = constantNumber(n->input(3)), alpha = constantNumber(n->input(4));
    if (!beta || !alpha) return skip(n, "alpha or beta is not a constant");
    Emitter e(g, n, n);
    Value* prod = e.op(product(*n), {n->input(1), n->input(2)});
    if (is(*n, "aten::addbmm")) prod = e.op("aten::sum", {prod, e.ints({0}), e.b(false), e.none()});
    if (*alpha != 1) prod = e.op("aten::mul", {prod, e.f(*alpha)});
    Value* out = prod;
    if (*beta != 0) {
      Value* bias = n->input(0);
      if (*beta != 1) bias = e.op("aten::mul", {bias, e.f(*beta)});
      out = e.op("aten::add", {prod, bias, e.i(1)});
    }
    finish(g, n, out);
    return true;
  }

  struct Heads {
    int64_t embed, heads;
  };

  // The attention core on [B, L, E] inputs; returns [B, L, E].
  static Value* attention(Emitter& e, Value* q_in, Value* k_in, Value* v_in, Heads h, Value* w, Value* b, Value* wo,
                          Value* bo) {
    const int64_t E = h.embed, H = h.heads, D = E / H;
    Value *q, *k, *v;
    auto slice = [&](Value* t, int64_t dim, int64_t i) { return e.op("aten::slice", {t, e.i(dim), e.i(i * E), e.i((i + 1) * E), e.i(1)}); };
    if (q_in == k_in && k_in == v_in) {
      Value* qkv = e.op("aten::linear", {q_in, w, b});
      q = slice(qkv, -1, 0);
      k = slice(qkv, -1, 1);
      v = slice(qkv, -1, 2);
    } else {
      q = e.op("aten::linear", {q_in, slice(w, 0, 0), slice(b, 0, 0)});
      k = e.op("aten::linear", {k_in, slice(w, 0, 1), slice(b, 0, 1)});
      v = e.op("aten::linear", {v_in, slice(w, 0, 2), slice(b, 0, 2)});
    }
    Value* batch = e.op("aten::size", {q_in, e.i(0)}, Type::Int());
    Value* len = e.op("aten::size", {q_in, e.i(1)}, Type::Int());
    Value* src_len = k_in == q_in ? len : e.op("aten::size", {k_in, e.i(1)}, Type::Int());
    auto split = [&](Value* t, Value* l) {
      Value* shape = e.list({batch, l, e.i(H), e.i(D)}, Type::Int());
      return e.op("aten::transpose", {e.op("aten::reshape", {t, shape}), e.i(1), e.i(2)});
    };
    Value* qh = split(q, len);
    Value* kt = e.op("aten::transpose", {split(k, src_len), e.i(-2), e.i(-1)});
    Value* scores = e.op("aten::matmul", {qh, kt});
    scores = e.op("aten::mul", {scores, e.f(1.0 / std::sqrt(static_cast<double>(D)))});
    Value* attn = e.op("aten::softmax", {scores, e.i(-1), e.none()});
    Value* ctx = e.op("aten::matmul", {attn, split(v, src_len)});
    Value* merged = e.op("aten::reshape", {e.op("aten::transpose", {ctx, e.i(1), e.i(2)}), e.list({batch, len, e.i(E)}, Type::Int())});
    return e.op("aten::linear", {merged, wo, bo});
  }

  std::optional<Heads> heads(Node* n, size_t embed_at, size_t heads_at) {
    auto E = constantInt(n->input(embed_at)), H = constantInt(n->input(heads_at));
    if (!E || !H || *H <= 0 || *E % *H != 0) {
      skip(n, "embed_dim/num_heads are not constants (or do not divide)");
      return std::nullopt;
    }
    return Heads{*E, *H};
  }

  bool rank3(Node* n, std::initializer_list<const Value*> vs) {
    for (const Value* v : vs)
      if (knownRank(v) != 3) {
        skip(n, "input %" + v->debugName() + " is not known to be [B, L, E]");
        return false;
      }
    return true;
  }

  bool mha(Graph& g, Node* n) {
    if (n->inputs().size() < 9) return skip(n, "unexpected arity");
    if (n->inputs().size() > 9 && !isNone(n->input(9))) return skip(n, "masked attention");
    if (n->outputs().size() > 1 && n->output(1)->hasUses()) return skip(n, "its attention weights are read");
    auto h = heads(n, 3, 4);
    if (!h || !rank3(n, {n->input(0), n->input(1), n->input(2)})) return false;
    Emitter e(g, n, n);
    Value* out = attention(e, n->input(0), n->input(1), n->input(2), *h, n->input(5), n->input(6), n->input(7), n->input(8));
    out->setType(n->output(0)->type());
    replaceKeepingName(g, n->output(0), out);
    n->destroy();
    return true;
  }

  // The nested fast path as dense ops (see the header): every reader of the
  // nested value must be an unmasked encoder layer (whose result is read the
  // same way) or a to_padded_tensor without output_size.
  bool nestedEncoder(Graph& g, Node* n) {
    if (n->inputs().size() < 2 || n->outputs().size() != 1) return skip(n, "unexpected arity");
    std::vector<Node*> layers, unpad;
    std::vector<Value*> frontier{n->output()};
    while (!frontier.empty()) {
      Value* v = frontier.back();
      frontier.pop_back();
      for (const Use& u : v->uses()) {
        Node* r = u.user;
        if (is(*r, "aten::_transformer_encoder_layer_fwd") && u.offset == 0 && r->inputs().size() >= 18 &&
            (r->inputs().size() == 18 || isNone(r->input(18))) && r->outputs().size() == 1) {
          layers.push_back(r);
          frontier.push_back(r->output());
        } else if (is(*r, "aten::to_padded_tensor") && u.offset == 0 && (r->inputs().size() < 3 || isNone(r->input(2)))) {
          unpad.push_back(r);
        } else {
          return skip(n, "its nested result is read by " + std::string(r->kind().toQualString()));
        }
      }
    }
    Emitter e(g, n, n);
    Value* keep = n->input(1);
    Value* pad = e.op("aten::logical_not", {keep});
    for (Node* l : layers) {
      while (l->inputs().size() < 20) l->addInput(e.none());
      l->replaceInput(18, pad);
      l->replaceInput(19, e.i(1));  // a key padding mask [B, L]
    }
    for (Node* u : unpad) {
      Emitter at(g, u, u);
      Value* rows = at.op("aten::unsqueeze", {pad, at.i(-1)});
      Value* filled = at.op("aten::masked_fill", {u->input(0), rows, u->input(1)});
      Value* lens = at.op("aten::sum", {keep, at.ints({1}), at.b(false), at.none()});
      Value* longest = at.op("aten::Int", {at.op("aten::max", {lens})}, Type::Int());
      Value* out = at.op("aten::slice", {filled, at.i(1), at.i(0), longest, at.i(1)});
      finish(g, u, out);
    }
    n->output()->replaceAllUsesWith(n->input(0));
    n->destroy();
    return true;
  }

  bool encoderLayer(Graph& g, Node* n) {
    if (n->inputs().size() < 18) return skip(n, "unexpected arity");
    if (n->inputs().size() > 18 && !isNone(n->input(18))) return skip(n, "masked attention");
    auto h = heads(n, 1, 2);
    auto gelu = constantInt(n->input(7)), norm_first = constantInt(n->input(8));
    auto eps = constantNumber(n->input(9));
    if (!h) return false;
    if (!gelu || !norm_first || !eps) return skip(n, "use_gelu/norm_first/eps are not constants");
    if (!rank3(n, {n->input(0)})) return false;
    Emitter e(g, n, n);
    Value* shape = e.ints({h->embed});
    auto norm = [&](Value* x, size_t w) {
      return e.op("aten::layer_norm", {x, shape, n->input(w), n->input(w + 1), e.f(*eps), e.b(false)});
    };
    auto attn = [&](Value* x) { return attention(e, x, x, x, *h, n->input(3), n->input(4), n->input(5), n->input(6)); };
    auto ffn = [&](Value* x) {
      Value* hid = e.op("aten::linear", {x, n->input(14), n->input(15)});
      hid = *gelu ? e.op("aten::gelu", {hid, e.constant(AttrValue(std::string("none")), Type::Str())})
                  : e.op("aten::relu", {hid});
      return e.op("aten::linear", {hid, n->input(16), n->input(17)});
    };
    auto add = [&](Value* a, Value* b) { return e.op("aten::add", {a, b, e.i(1)}); };
    Value* x = n->input(0);
    if (*norm_first) {
      x = add(x, attn(norm(x, 10)));
      x = add(x, ffn(norm(x, 12)));
    } else {
      x = norm(add(x, attn(x)), 10);
      x = norm(add(x, ffn(x)), 12);
    }
    finish(g, n, x);
    return true;
  }
};

}  // namespace

LLGA_REGISTER_PASS(Decompose);

const std::vector<std::string>& decomposedKinds() { return kDecomposed; }

}  // namespace llga
