// Small helpers shared by rewriting passes: reading constants, describing
// nodes in notes, and emitting replacement nodes that keep their origin's
// scope and source (so dumps and error messages still point at user code).
#pragma once

#include <optional>
#include <unordered_set>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace llga {

// The tensor a prim::Constant holds, when its contents are bound.
const ConstantTensor* boundTensor(const Value* v);
bool isNone(const Value* v);
// A constant int, float or bool, as a double.
std::optional<double> constantNumber(const Value* v);
std::optional<int64_t> constantInt(const Value* v);
// A constant str (an equation, a mode name).
std::optional<std::string> constantString(const Value* v);
// A constant dim argument made non-negative for a tensor of `rank`; nullopt
// when it is not a constant, the rank is unknown, or it is out of range.
std::optional<int64_t> constantDim(const Value* v, std::optional<size_t> rank);
// An int[] given as a constant or as a prim::ListConstruct of constant ints.
std::optional<std::vector<int64_t>> constantInts(const Value* v);
// The permutation an aten::permute or aten::transpose node applies to its
// rank-`rank` input (output dim d is input dim perm[d]), or nothing when its
// dims are not constants in range.
std::optional<std::vector<int64_t>> permutationOf(const Node* n, int64_t rank);
// Ops that read their first input's shape, dtype or device and not its values.
bool readsMetadataOnly(const Node& n);
// aten::slice(x, dim, start, end, step) taking every element: start 0 (or
// None), end None or past any extent, step 1 (a traced x[:, i] or x[:, 1:]
// slices dim 0 so). Not from the traced sizes: other calls bring others.
bool wholeSlice(const Node& n);
// "aten::relu_ at f.py:3:4 (%y)"
std::string where(const Node& n);
// The type of a constant holding `t`: dtype, sizes, strides, cpu.
TypePtr constantTensorType(const ConstantTensor& t);
// The dtype a value's type records, if any.
std::optional<ScalarType> knownDtype(const Value* v);

// Emits nodes before `at`, each taking scope and source from `origin`.
class Emitter {
 public:
  Emitter(Graph& g, Node* at, const Node* origin) : g_(g), at_(at), origin_(origin) {}
  // One node of `kind` with `inputs` and one output of `type` (plain Tensor if null).
  Value* op(const char* kind, const std::vector<Value*>& inputs, TypePtr type = nullptr);
  Node* node(const char* kind, const std::vector<Value*>& inputs, size_t outputs);
  Value* constant(AttrValue v, TypePtr type);
  Value* i(int64_t v);
  Value* f(double v);
  Value* b(bool v);
  Value* none();
  Value* ints(const std::vector<int64_t>& v);  // int[] constant
  Value* list(const std::vector<Value*>& items, TypePtr elem);

 private:
  Node* place(Node* n);
  Graph& g_;
  Node* at_;
  const Node* origin_;
};

// Replaces every use of `from` by `to`, and lets `to` keep `from`'s name
// when it has none of its own choosing (dumps stay readable).
void replaceKeepingName(Graph& g, Value* from, Value* to);

// Values of block `b` a pass deciding how they travel between b's ops must
// leave alone: b's outputs and every value read inside b's nested blocks.
std::unordered_set<const Value*> valuesLeavingOps(Block* b);

}  // namespace llga
