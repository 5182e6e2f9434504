// prepare-binary: binary ops in the shape the fuser (and oneDNN's binary
// post-ops) want, following PyTorch's type promotion:
//   * add/sub(x, y, alpha) with a constant alpha != 1  ->  add/sub(x, mul(y, alpha), 1)
//   * x + 0, x - 0, x * 1, x / 1 (a scalar constant)    ->  x, where the result
//     provably has x's dtype (x floating; or x integral and the scalar an int);
//     clone(x) where x is a graph input the graph returns (the caller's
//     array never comes back as a result PyTorch would have made new)
//   * a scalar constant operand of add/sub/mul/div on a floating tensor  ->
//     a 0-dim tensor constant of that tensor's dtype (the dtype PyTorch
//     would compute in: a Python scalar never promotes a floating tensor)
//
//   Given:  %y = aten::add(%x, %c2, %alpha3)      Result:  %s = aten::mul(%c2, %alpha3)
//                                                          %y = aten::add(%x, %s, %one)
// Left alone, with a note: dtypes unknown, a result read by an in-place op,
// an x whose memory is written in place (the result must be the value before
// the write) or that is a view of a graph input the graph would return.
#include "ir/effects.h"
#include "passes/pass.h"
#include "passes/pass_utils.h"

namespace llga {
namespace {

bool isFloating(ScalarType t) {
  return t == ScalarType::Float || t == ScalarType::Double || t == ScalarType::Half || t == ScalarType::BFloat16;
}

bool isScalarConstant(const Value* v) {
  return v->node()->kind() == prim::Constant && (v->type()->isSimple("int") || v->type()->isSimple("float"));
}

// A bound 0-dim tensor constant (what tracing records for `x * 1`): it
// promotes like a Python scalar of its category.
const ConstantTensor* zeroDimConstant(const Value* v) {
  const ConstantTensor* t = boundTensor(v);
  return t && t->sizes.empty() ? t : nullptr;
}

bool isIntegral(ScalarType t) {
  return t == ScalarType::Byte || t == ScalarType::Char || t == ScalarType::Short || t == ScalarType::Int ||
         t == ScalarType::Long;
}

bool isGraphInput(const Value* v) { return v->node() == v->owningGraph()->block()->paramNode(); }

// Returned by the graph, directly or inside a tuple or list.
bool isGraphOutput(const Value* v) {
  for (const Use& u : v->uses()) {
    if (u.user == v->owningGraph()->block()->returnNode()) return true;
    if ((u.user->kind() == prim::TupleConstruct || u.user->kind() == prim::ListConstruct) && isGraphOutput(u.user->output()))
      return true;
  }
  return false;
}

class PrepareBinary final : public Pass {
 public:
  std::string_view name() const override { return "prepare-binary"; }
  std::string_view description() const override { return "alpha to mul, drop x+0 / x*1, scalars to tensors"; }

  bool run(Graph& g) override {
    std::vector<Node*> todo;
    g.forEachNode([&](Node* n) {
      std::string k = n->kind().toQualString();
      if (k == "aten::add" || k == "aten::sub" || k == "aten::mul" || k == "aten::div") todo.push_back(n);
    });
    bool changed = false;
    for (Node* n : todo) {
      if (!n->input(0)->type()->isTensor()) continue;  // int/float arithmetic
      changed |= splitAlpha(g, n);
      if (dropIdentity(g, n)) {
        changed = true;
        continue;
      }
      changed |= scalarToTensor(g, n);
    }
    return changed;
  }

 private:
  static bool additive(const Node* n) { return n->kind().name() == "add" || n->kind().name() == "sub"; }

  bool splitAlpha(Graph& g, Node* n) {
    if (!additive(n) || n->inputs().size() != 3) return false;
    auto alpha = constantNumber(n->input(2));
    if (!alpha) {
      note(where(*n) + ": alpha is not a constant");
      return false;
    }
    if (*alpha == 1) return false;
    Emitter e(g, n, n);
    const Type& y = *n->input(1)->type();
    TypePtr t = y.isTensor() ? n->input(1)->type()
                             : (y.isSimple("int") && n->input(2)->type()->isSimple("int") ? Type::Int() : Type::Float());
    Value* scaled = e.op("aten::mul", {n->input(1), n->input(2)}, t);
    n->replaceInput(1, scaled);
    n->replaceInput(2, e.i(1));
    return true;
  }

  bool dropIdentity(Graph& g, Node* n) {
    Value* x = n->input(0);
    Value* c = n->input(1);
    std::optional<double> v;
    bool int_operand = false;
    if (isScalarConstant(c)) {
      v = constantNumber(c);
      int_operand = c->type()->isSimple("int");
    } else if (const ConstantTensor* t = zeroDimConstant(c)) {
      v = t->scalarAsDouble(0);
      int_operand = isIntegral(t->dtype);
      if (!int_operand && !isFloating(t->dtype)) return false;
    } else {
      return false;
    }
    bool identity = additive(n) ? *v == 0 : *v == 1;
    if (!identity) return false;
    auto dt = knownDtype(x);
    if (!dt) return fail(n, "x's dtype is unknown, so x + 0 may promote");
    bool keeps = isFloating(*dt) || (isIntegral(*dt) && int_operand && n->kind().name() != "div");
    if (!keeps) return fail(n, "the result's dtype differs from x's");
    if (writerOf(*n->output())) return fail(n, "its result is written in place (directly or through a view)");
    // x's memory: the tensor x is a view of (a chunk of a graph input, ...).
    const Value* base = aliasRoot(*x);
    if (writerOf(*base)) return fail(n, "x's memory is written in place: the result must be a copy");
    if (isGraphOutput(n->output()) && base != x && isGraphInput(base)) return fail(n, "x is a view of a graph input");
    if (isGraphInput(x) && isGraphOutput(n->output())) {
      // The bridge drops the op and returns x itself; PyTorch's result is a new
      // tensor, so the caller's array must not come back: a copy stands in.
      Emitter e(g, n, n);
      Value* copy = e.op("aten::clone", {x, e.none()}, n->output()->type());
      replaceKeepingName(g, n->output(), copy);
      n->destroy();
      return true;
    }
    if (x->type()->isTensor() && n->output()->type()->isTensor()) {
      const auto& xs = x->type()->tensorInfo().sizes;
      const auto& os = n->output()->type()->tensorInfo().sizes;
      if (xs && os && *xs != *os) return fail(n, "shapes differ");
    }
    n->output()->replaceAllUsesWith(x);
    n->destroy();
    return true;
  }

  bool scalarToTensor(Graph& g, Node* n) {
    Value* c = n->input(1);
    // A traced Python float is a 0-dim Double constant: on a floating tensor
    // (0-dim too) it must not promote, so it becomes one of that tensor's dtype.
    const ConstantTensor* traced = zeroDimConstant(c);
    const bool traced_float = traced && traced->dtype == ScalarType::Double && knownDtype(n->input(0)) &&
                              isFloating(*knownDtype(n->input(0))) && *knownDtype(n->input(0)) != ScalarType::Double;
    if (!isScalarConstant(c) && !traced_float) return false;
    auto dt = knownDtype(n->input(0));
    if (!dt || !isFloating(*dt)) return fail(n, "scalar operand kept: the tensor's dtype is not known to be floating");
    auto t = ConstantTensor::owned(*dt, {});
    double v = traced_float ? traced->scalarAsDouble(0) : *constantNumber(c);
    switch (*dt) {
      case ScalarType::Float: *static_cast<float*>(t->data) = static_cast<float>(v); break;
      case ScalarType::Double: *static_cast<double*>(t->data) = v; break;
      default: return fail(n, "scalar operand kept: no 0-dim constant for half types");
    }
    Emitter e(g, n, n);
    n->replaceInput(1, e.constant(AttrValue(TensorRef(t)), constantTensorType(*t)));
    return true;
  }

  bool fail(Node* n, const std::string& why) {
    note(where(*n) + ": " + why);
    return false;
  }
};

}  // namespace

LLGA_REGISTER_PASS(PrepareBinary);

}  // namespace llga
