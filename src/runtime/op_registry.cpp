// The op registry: every op kind llga can run and the factory of its kernel.
// Op families add themselves from their own files (LLGA_REGISTER_OPS).
#include <algorithm>
#include <stdexcept>

#include "runtime/kernel.h"

namespace llga {

OpRegistry& OpRegistry::global() {
  static OpRegistry r;  // filled by LLGA_REGISTER_OPS in each op family's file, before main
  return r;
}

void OpRegistry::add(std::string kind, size_t min_inputs, size_t max_inputs, KernelFn fn) {
  add(OpDef{std::move(kind), min_inputs, max_inputs,
            [fn = std::move(fn)](const Node&) { return std::make_unique<FnKernel>(fn); }});
}

void OpRegistry::add(OpDef def) {
  Symbol k = Symbol::fromQualString(def.kind);
  if (ops_.count(k)) throw std::logic_error("op kind " + def.kind + " is registered twice");
  ops_[k] = std::move(def);
}

void OpRegistry::addScalar(const std::string& kind, size_t arity, ScalarFn fn) {
  auto it = ops_.find(Symbol::fromQualString(kind));
  if (it == ops_.end()) throw std::logic_error("scalar form of " + kind + ", which is not registered");
  if (it->second.scalar) throw std::logic_error("scalar form of " + kind + " registered twice");
  if (arity < it->second.min_inputs || arity > it->second.max_inputs || arity > kMaxScalarArity)
    throw std::logic_error("scalar form of " + kind + " takes " + std::to_string(arity) + " inputs, outside its arity");
  it->second.scalar = fn;
  it->second.scalar_arity = arity;
}

const OpDef* OpRegistry::find(Symbol kind) const {
  auto it = ops_.find(kind);
  return it == ops_.end() ? nullptr : &it->second;
}

std::vector<std::string> OpRegistry::kinds() const {
  std::vector<std::string> out;
  for (const auto& [k, d] : ops_) out.push_back(d.kind);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace llga
