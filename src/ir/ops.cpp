#include "ir/ops.h"

#include <unordered_map>

namespace llga {
namespace {

struct OpEntry {
  const char* kind;
  uint32_t traits;
};

using namespace op_trait;
const OpEntry kOps[] = {
#define LLGA_OP(kind, traits) {kind, traits},
#include "ir/ops.def"
#undef LLGA_OP
};

const std::unordered_map<Symbol, uint32_t>& table() {
  static const auto* t = [] {
    auto* m = new std::unordered_map<Symbol, uint32_t>();
    for (const OpEntry& e : kOps) (*m)[Symbol::fromQualString(e.kind)] |= e.traits;
    return m;
  }();
  return *t;
}

}  // namespace

uint32_t opTraits(Symbol kind) {
  auto it = table().find(kind);
  return it == table().end() ? 0 : it->second;
}

std::vector<std::string> opsWith(uint32_t traits) {
  std::vector<std::string> out;
  for (const OpEntry& e : kOps)
    if (e.traits & traits) out.push_back(e.kind);
  return out;
}

}  // namespace llga
