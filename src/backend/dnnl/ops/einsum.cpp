// aten::einsum(equation, tensors[], path=None): any equation, planned at run
// time into the ops that do the work, with the contractions on oneDNN matmul:
//   1. labels repeated inside one operand take that operand's diagonal (a view);
//   2. labels no one else needs (not in the output, not in another operand)
//      are summed out of their operand first;
//   3. operands contract left to right, as PyTorch's default path: each pair is
//      permuted to [batch, left, contracted] x [batch, contracted, right],
//      reshaped to 3-D and multiplied by one batched matmul (views where the
//      strides allow, oneDNN reads transposed operands as they are);
//   4. the result is permuted into the output's order.
// "..." stands for the same broadcast dimensions in every operand (aligned
// from the right, as numpy); size-1 dimensions broadcast against their label's size.
// aten::bilinear(x1, x2, W, b?) is one such einsum, "...i,oij,...j->...o", after the
// checks PyTorch makes (its inputs broadcast nothing), then the bias.
#include <algorithm>
#include <map>
#include <numeric>
#include <optional>

#include "backend/dnnl/ops/functional.h"
#include "backend/dnnl/ops/op_utils.h"
#include "runtime/threads.h"

namespace llga {
namespace {

using Labels = std::vector<int>;  // 'a'..'z', 'A'..'Z' as chars; ellipsis dims as 1000 + i

struct Operand {
  Tensor t;
  Labels labels;
};

[[noreturn]] void bad(const std::string& eq, const std::string& why) {
  throw std::invalid_argument("einsum(\"" + eq + "\"): " + why);
}

// One term's labels; `ellipsis_dims` the dims "..." stands for in it (-1: unknown, for the output).
Labels parseTerm(const std::string& eq, const std::string& term, int64_t ellipsis_dims, int64_t max_ellipsis, bool* has_ellipsis) {
  Labels out;
  *has_ellipsis = false;
  for (size_t i = 0; i < term.size(); ++i) {
    const char c = term[i];
    if (c == ' ') continue;
    if (c == '.') {
      if (term.compare(i, 3, "...") != 0 || *has_ellipsis) bad(eq, "'.' that is not one '...' in \"" + term + "\"");
      *has_ellipsis = true;
      const int64_t n = ellipsis_dims < 0 ? max_ellipsis : ellipsis_dims;
      for (int64_t k = max_ellipsis - n; k < max_ellipsis; ++k) out.push_back(1000 + static_cast<int>(k));
      i += 2;
    } else if (std::isalpha(static_cast<unsigned char>(c))) {
      out.push_back(c);
    } else {
      bad(eq, std::string("invalid subscript '") + c + "'");
    }
  }
  return out;
}

std::vector<std::string> splitTerms(const std::string& s) {
  std::vector<std::string> out(1);
  for (char c : s) {
    if (c == ',') out.emplace_back();
    else out.back() += c;
  }
  return out;
}

int64_t letters(const std::string& term) {
  return std::count_if(term.begin(), term.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)); });
}

// Sums the dims of `op` whose labels `keep` rejects.
void sumOut(ExecContext& ctx, Operand& op, const std::function<bool(int)>& keep) {
  Shape dims;
  Labels rest;
  for (size_t d = 0; d < op.labels.size(); ++d) {
    if (keep(op.labels[d])) rest.push_back(op.labels[d]);
    else dims.push_back(static_cast<int64_t>(d));
  }
  if (dims.empty()) return;
  op.t = sumOp(ctx, op.t, dims, false);
  op.labels = rest;
}

// Takes the diagonal for every label that appears twice in one operand.
void diagonals(Operand& op) {
  for (bool again = true; again;) {
    again = false;
    for (size_t i = 0; i < op.labels.size() && !again; ++i)
      for (size_t j = i + 1; j < op.labels.size() && !again; ++j) {
        if (op.labels[i] != op.labels[j]) continue;
        const Tensor& t = op.t;
        if (t.size(static_cast<int64_t>(i)) != t.size(static_cast<int64_t>(j)))
          throw std::invalid_argument(std::string("einsum: subscript '") + static_cast<char>(op.labels[i]) +
                                      "' repeats in an operand over dimensions of different sizes");
        Shape sizes, strides;
        Labels labels;
        for (size_t d = 0; d < op.labels.size(); ++d)
          if (d != i && d != j) {
            sizes.push_back(t.size(static_cast<int64_t>(d)));
            strides.push_back(t.stride(static_cast<int64_t>(d)));
            labels.push_back(op.labels[d]);
          }
        sizes.push_back(t.size(static_cast<int64_t>(i)));
        strides.push_back(t.stride(static_cast<int64_t>(i)) + t.stride(static_cast<int64_t>(j)));
        labels.push_back(op.labels[i]);
        op.t = Tensor::fromStorage(t.storage(), t.dtype(), sizes, strides, t.offset());
        op.labels = labels;
        again = true;
      }
  }
}

Operand contract(ExecContext& ctx, MatmulCache& cache, Operand a, Operand b, const std::function<bool(int)>& needed) {
  // Size per label, broadcasting 1s; each side's dims expanded to the common size.
  std::map<int, int64_t> size;
  for (const Operand* o : {&a, &b})
    for (size_t d = 0; d < o->labels.size(); ++d) {
      int64_t s = o->t.size(static_cast<int64_t>(d));
      auto [it, fresh] = size.try_emplace(o->labels[d], s);
      if (!fresh && it->second != s) {
        if (it->second == 1) it->second = s;
        else if (s != 1)
          throw std::invalid_argument(std::string("einsum: subscript ") +
                                      (o->labels[d] >= 1000 ? "'...'" : std::string("'") + static_cast<char>(o->labels[d]) + "'") +
                                      " has sizes " + std::to_string(it->second) + " and " + std::to_string(s));
      }
    }
  auto in = [](const Labels& l, int x) { return std::find(l.begin(), l.end(), x) != l.end(); };
  Labels batch, left, right, inner;
  for (int l : a.labels) {
    if (in(b.labels, l)) (needed(l) ? batch : inner).push_back(l);
    else left.push_back(l);
  }
  for (int l : b.labels)
    if (!in(a.labels, l)) right.push_back(l);
  auto arrange = [&](const Operand& o, const std::vector<const Labels*>& groups) {
    Shape perm, sizes;
    for (const Labels* g : groups)
      for (int l : *g) {
        auto it = std::find(o.labels.begin(), o.labels.end(), l);
        perm.push_back(it - o.labels.begin());
        sizes.push_back(size[l]);
      }
    return o.t.permute(perm).expand(sizes);
  };
  auto prod = [&](const Labels& g) {
    int64_t p = 1;
    for (int l : g) p *= size[l];
    return p;
  };
  const int64_t B = prod(batch), L = prod(left), C = prod(inner), R = prod(right);
  Tensor a3 = arrange(a, {&batch, &left, &inner}).reshape({B, L, C});
  Tensor b3 = arrange(b, {&batch, &inner, &right}).reshape({B, C, R});
  Tensor out = matmulOp(ctx, a3, b3, cache);
  Shape out_sizes;
  Labels out_labels;
  for (const Labels* g : {&batch, &left, &right})
    for (int l : *g) {
      out_sizes.push_back(size[l]);
      out_labels.push_back(l);
    }
  return {out.reshape(out_sizes), out_labels};
}

Tensor einsum(ExecContext& ctx, MatmulCache& cache, const std::string& eq, std::vector<Tensor> tensors) {
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms = splitTerms(lhs);
  if (terms.size() != tensors.size())
    bad(eq, std::to_string(terms.size()) + " operand subscripts for " + std::to_string(tensors.size()) + " tensors");
  int64_t max_ellipsis = 0;
  std::vector<int64_t> ell(terms.size(), 0);
  for (size_t i = 0; i < terms.size(); ++i) {
    const bool has = terms[i].find("...") != std::string::npos;
    ell[i] = tensors[i].dim() - letters(terms[i]);
    if ((!has && ell[i] != 0) || ell[i] < 0)
      bad(eq, "operand " + std::to_string(i) + " has " + std::to_string(tensors[i].dim()) + " dims for subscripts \"" + terms[i] + "\"");
    max_ellipsis = std::max(max_ellipsis, ell[i]);
  }
  std::vector<Operand> ops;
  std::map<int, int> count;
  for (size_t i = 0; i < terms.size(); ++i) {
    bool has = false;
    Labels l = parseTerm(eq, terms[i], ell[i], max_ellipsis, &has);
    for (int x : l) ++count[x];
    ops.push_back({tensors[i], l});
  }
  Labels out;
  if (arrow != std::string::npos) {
    bool has = false;
    out = parseTerm(eq, eq.substr(arrow + 2), -1, max_ellipsis, &has);
    for (int l : out) {
      if (!count.count(l)) bad(eq, std::string("output subscript '") + static_cast<char>(l) + "' is in no operand");
      if (std::count(out.begin(), out.end(), l) > 1) bad(eq, std::string("output subscript '") + static_cast<char>(l) + "' repeats");
    }
  } else {  // implicit: the broadcast dims, then the labels used once, in alphabetical order
    for (int64_t k = 0; k < max_ellipsis; ++k) out.push_back(1000 + static_cast<int>(k));
    Labels once;
    for (auto [l, c] : count)
      if (l < 1000 && c == 1) once.push_back(l);
    std::sort(once.begin(), once.end(), [](int x, int y) {  // PyTorch: upper case before lower case
      return x < y;
    });
    out.insert(out.end(), once.begin(), once.end());
  }
  for (Operand& o : ops) {
    if (!isFloatingType(o.t.dtype())) bad(eq, "operands must be floating point, got " + o.t.describe());
    if (o.t.dtype() != ScalarType::Float) o.t = o.t.to(ScalarType::Float);
    diagonals(o);
  }
  auto inOut = [&](int l) { return std::find(out.begin(), out.end(), l) != out.end(); };
  // Labels still needed after operand i: in the output or in a later operand.
  auto neededAfter = [&](size_t i) {
    return [&, i](int l) {
      if (inOut(l)) return true;
      for (size_t j = i + 1; j < ops.size(); ++j)
        if (std::find(ops[j].labels.begin(), ops[j].labels.end(), l) != ops[j].labels.end()) return true;
      return false;
    };
  };
  Operand acc = ops[0];
  {  // labels only operand 0 has
    auto keep = [&](int l) {
      if (inOut(l)) return true;
      for (size_t j = 1; j < ops.size(); ++j)
        if (std::find(ops[j].labels.begin(), ops[j].labels.end(), l) != ops[j].labels.end()) return true;
      return false;
    };
    sumOut(ctx, acc, keep);
  }
  for (size_t i = 1; i < ops.size(); ++i) {
    Operand& b = ops[i];
    auto needed = neededAfter(i);
    // b's labels that neither acc, the output nor later operands have.
    sumOut(ctx, b, [&](int l) { return needed(l) || std::find(acc.labels.begin(), acc.labels.end(), l) != acc.labels.end(); });
    acc = contract(ctx, cache, acc, b, needed);
  }
  sumOut(ctx, acc, inOut);
  // Output labels the operands broadcast away (a size-1 "..." dim in none): size 1.
  Shape perm, sizes;
  for (int l : out) {
    auto it = std::find(acc.labels.begin(), acc.labels.end(), l);
    if (it == acc.labels.end()) bad(eq, "internal: output subscript lost");
    perm.push_back(it - acc.labels.begin());
  }
  Tensor r = acc.t.permute(perm);
  return tensors.size() == 1 && r.storage() == tensors[0].storage() ? r.contiguous() : r;
}

// aten::bilinear(x1, x2, W, b?): out[..., o] = x1[..., i] W[o, i, j] x2[..., j] + b[o].
// PyTorch's checks first (einsum would broadcast a size-1 feature or batch dim
// where bilinear takes none), then one einsum and the bias over each row.
Tensor bilinear(ExecContext& ctx, MatmulCache& cache, const Tensor& x1, const Tensor& x2, const Tensor& w,
                const std::optional<Tensor>& b) {
  auto fail = [](const std::string& why) { throw std::invalid_argument("bilinear(): " + why); };
  auto num = [](int64_t v) { return std::to_string(v); };
  if (x1.dim() != x2.dim()) fail("input dimensions do not match: got " + num(x1.dim()) + " and " + num(x2.dim()));
  if (x1.dim() == 0) fail("inputs must have at least one dimension");
  if (w.dim() != 3) fail("weight must be 3-D (out, in1, in2), got " + w.describe());
  for (int64_t d = 0; d + 1 < x1.dim(); ++d)
    if (x1.size(d) != x2.size(d))
      fail("input batch dimensions do not match at dim " + num(d) + ": got " + num(x1.size(d)) + " and " +
           num(x2.size(d)));
  if (x1.size(-1) != w.size(1))
    fail("input1 size does not match weight size: got " + num(x1.size(-1)) + " but expected " + num(w.size(1)));
  if (x2.size(-1) != w.size(2))
    fail("input2 size does not match weight size: got " + num(x2.size(-1)) + " but expected " + num(w.size(2)));
  if (b && (b->dim() == 0 || b->size(0) != w.size(0)))
    fail("bias size does not match weight size: got " + (b->dim() ? num(b->size(0)) : std::string("a 0-dim bias")) +
         " but expected " + num(w.size(0)));
  if (b && b->dim() != 1) fail("bias must be 1-D, got " + b->describe());
  if (w.size(1) == 0 || w.size(2) == 0)  // PyTorch 1.13 fails to reshape the empty product there
    fail("input features must not be 0 (PyTorch rejects them: 'cannot reshape tensor of 0 elements')");
  if (x1.dtype() != ScalarType::Float || x2.dtype() != ScalarType::Float || w.dtype() != ScalarType::Float ||
      (b && b->dtype() != ScalarType::Float))
    fail("expected float32 inputs, weight and bias");
  Tensor out = einsum(ctx, cache, "...i,oij,...j->...o", {x1, w, x2}).contiguous();
  if (!b || out.numel() == 0) return out;
  const int64_t n = w.size(0), rows = out.numel() / n, bs = b->stride(0);
  float* o = out.data<float>();
  const float* bias = b->data<float>();
  parallelFor(rows, out.numel() >= kParallelGrain, [&](int64_t r) {
    float* row = o + r * n;
#pragma omp simd
    for (int64_t k = 0; k < n; ++k) row[k] += bias[k * bs];
  });
  return out;
}

}  // namespace

void registerEinsumOps(OpRegistry& r) {
  addCached<MatmulCacheHolder>(r, "aten::bilinear", 3, 4, [](const KernelArgs& a, MatmulCacheHolder& c) {
    std::optional<Tensor> b;
    if (a.num_in > 3 && !a.isNone(3)) b = a.tensor(3);
    a.set(0, bilinear(a.ctx, *c.cache, a.tensor(0), a.tensor(1), a.tensor(2), b));
  });
  addCached<MatmulCacheHolder>(r, "aten::einsum", 2, 3, [](const KernelArgs& a, MatmulCacheHolder& c) {
    if (a.num_in > 2 && !a.isNone(2)) throw std::invalid_argument("einsum with an explicit contraction path is not supported");
    std::vector<Tensor> ts;
    for (const RtValue& v : *a.input(1).list()) ts.push_back(v.tensor());
    if (ts.empty()) throw std::invalid_argument("einsum needs at least one operand");
    a.set(0, einsum(a.ctx, *c.cache, a.input(0).str(), std::move(ts)));
  });
}
LLGA_REGISTER_OPS(registerEinsumOps);

}  // namespace llga
