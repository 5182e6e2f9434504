// The shape-function registry and the arguments the functions read; the
// functions themselves are in shape_fns_elementwise.cpp, shape_fns_nn.cpp and
// shape_fns_data.cpp, grouped as ir/ops.def groups ops. See shape_functions.h.
#include "passes/shape_functions.h"

#include <string>
#include <unordered_map>

#include "ir/ops.h"
#include "ir/strides.h"
#include "passes/shape_fn_helpers.h"

namespace llga {

namespace {

std::unordered_map<Symbol, ShapeFn>& registry() {
  static std::unordered_map<Symbol, ShapeFn> r;
  return r;
}

}  // namespace

std::optional<std::vector<int64_t>> Known::ints() const {
  if (!items) return std::nullopt;
  std::vector<int64_t> out;
  for (const Known& k : *items) {
    if (!k.i) return std::nullopt;
    out.push_back(*k.i);
  }
  return out;
}

const TensorInfo* ShapeArgs::tensor(size_t i) const {
  return i < in_.size() && in_[i]->tensor ? &*in_[i]->tensor : nullptr;
}

std::optional<int64_t> ShapeArgs::i(size_t i) const {
  if (i >= in_.size()) return std::nullopt;
  return in_[i]->i;
}

std::optional<std::vector<int64_t>> ShapeArgs::ints(size_t i, size_t repeat) const {
  if (i >= in_.size()) return std::nullopt;
  if (auto v = in_[i]->ints()) {
    if (repeat > 0 && v->size() == 1) return std::vector<int64_t>(repeat, (*v)[0]);
    return v;
  }
  if (repeat > 0 && in_[i]->i) return std::vector<int64_t>(repeat, *in_[i]->i);
  return std::nullopt;
}

void registerShapeFn(std::string_view kind, ShapeFn fn) {
  registry()[Symbol::fromQualString(std::string(kind))] = std::move(fn);
}

void registerShapeFnForTraits(uint32_t traits, ShapeFn fn) {
  for (const std::string& kind : opsWith(traits)) registerShapeFn(kind, fn);
}

TensorInfo stridedInfo(ScalarType dtype, const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  TensorInfo t;
  t.dtype = dtype;
  t.sizes.emplace(sizes.begin(), sizes.end());
  t.strides = strides;
  t.requires_grad = false;
  t.device = "cpu";
  return t;
}

TensorInfo contiguousInfo(ScalarType dtype, const std::vector<int64_t>& sizes) {
  return stridedInfo(dtype, sizes, contiguousStrides(sizes));
}

bool isContiguous(const TensorInfo& t) {
  auto sizes = t.concreteSizes();
  if (!sizes || !t.strides) return false;
  // Extents of 1 may carry any stride (PyTorch's rule).
  int64_t acc = 1;
  for (size_t i = sizes->size(); i-- > 0;) {
    if ((*sizes)[i] != 1 && (*t.strides)[i] != acc) return false;
    acc *= (*sizes)[i];
  }
  return true;
}

const ShapeFn* findShapeFn(Symbol kind) {
  auto& r = registry();
  auto it = r.find(kind);
  if (it != r.end()) return &it->second;
  if (hasTrait(kind, op_trait::SameShape | op_trait::Eltwise) && !hasTrait(kind, op_trait::View)) {
    static const ShapeFn same = shape_fn::sameShape;
    return &same;
  }
  return nullptr;
}

}  // namespace llga
