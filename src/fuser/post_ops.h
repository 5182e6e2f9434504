// Post-op chains: which op, following a convolution or a matrix product,
// joins its primitive as a post-op, and as what. Backend-neutral: the fuser
// asks translatePostOp() whether a node can join a chain; the backend turns
// the same PostOp records into its primitive attribute
// (backend/dnnl/post_ops.h). One decision, so they cannot disagree.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace llga {

// What a post-op computes (alpha and beta as oneDNN's eltwise/binary define them).
enum class PostOpAlg : uint8_t {
  // eltwise
  Relu,      // x > 0 ? x : alpha * x
  Logistic,  // sigmoid
  Tanh, Abs, Exp, Square, Sqrt, Log, Round, Mish,
  Swish,     // x * sigmoid(alpha * x)
  Hardswish,
  Linear,    // alpha * x + beta
  Pow,       // alpha * x^beta (beta = 1: a scale that is not Linear, as oneDNN 2.6 keeps
             // one set of parameters per algorithm in a chain)
  Clip,      // min(max(x, alpha), beta)
  GeluErf, GeluTanh,
  Elu,
  // binary (with an operand)
  Add, Sub, Mul, Div, Max, Min,
};

struct PostOp {
  // Select: x = operand ? alpha : x, operand a bool mask (masked_fill with a
  // constant value, where(mask, value, x)); with `invert`, x = operand ? x :
  // alpha (where(mask, x, value)). No oneDNN primitive applies it: only a
  // pattern whose kernel does (FusionPattern::selects, attention's score
  // chain) takes it.
  enum class Kind { Eltwise, Binary, Sum, Select } kind = Kind::Eltwise;
  PostOpAlg alg = PostOpAlg::Relu;
  float alpha = 0, beta = 0;
  // Binary, Sum and Select: the other operand.
  const Value* operand = nullptr;
  bool invert = false;  // Select: fill where the mask is false
  std::string name;  // "relu", "add", ... for partition tables and logs
};

// The post-ops that `n` contributes when `chain` (one of n's inputs) is the
// value flowing down the chain; or the reason it cannot.
struct PostOpMatch {
  std::vector<PostOp> ops;
  std::string why_not;  // empty on success
  bool ok() const { return why_not.empty(); }
};
PostOpMatch translatePostOp(const Node& n, const Value* chain);

// ops[first, end) as one chain after ops[first - 1]'s result (a group's ops in
// order): each op translated with the previous op's output as the chain
// value. On the first op that is no post-op, why_not names it and says why.
PostOpMatch translateChain(const std::vector<const Node*>& ops, size_t first, size_t end);

}  // namespace llga
