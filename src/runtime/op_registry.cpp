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
