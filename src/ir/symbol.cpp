#include "ir/symbol.h"

#include <deque>
#include <mutex>
#include <shared_mutex>
#include <stdexcept>
#include <unordered_map>

namespace llga {
namespace {

struct Entry {
  std::string qual;
  size_t sep;  // index of "::"
};

class Interner {
 public:
  uint32_t intern(std::string_view qual) {
    {
      std::shared_lock lock(mu_);
      if (auto it = ids_.find(qual); it != ids_.end()) return it->second;
    }
    std::unique_lock lock(mu_);
    if (auto it = ids_.find(qual); it != ids_.end()) return it->second;
    size_t sep = qual.find("::");
    if (sep == std::string_view::npos || sep == 0 || sep + 2 >= qual.size())
      throw std::invalid_argument("symbol must be namespace::name, got '" + std::string(qual) + "'");
    entries_.push_back(Entry{std::string(qual), sep});
    auto id = static_cast<uint32_t>(entries_.size());  // 0 is the invalid symbol
    ids_.emplace(entries_.back().qual, id);
    return id;
  }
  const Entry& get(uint32_t id) const {
    std::shared_lock lock(mu_);
    if (id == 0 || id > entries_.size()) throw std::out_of_range("invalid Symbol");
    return entries_[id - 1];  // deque: references stay valid as it grows
  }

 private:
  mutable std::shared_mutex mu_;
  std::deque<Entry> entries_;
  std::unordered_map<std::string_view, uint32_t> ids_;
};

Interner& interner() {
  static Interner* table = new Interner();  // never destroyed: symbols outlive statics
  return *table;
}

}  // namespace

Symbol Symbol::fromQualString(std::string_view qual) { return Symbol(interner().intern(qual)); }
Symbol Symbol::attr(std::string_view name) { return fromQualString("attr::" + std::string(name)); }
const std::string& Symbol::toQualString() const { return interner().get(id_).qual; }
std::string_view Symbol::ns() const {
  const Entry& e = interner().get(id_);
  return std::string_view(e.qual).substr(0, e.sep);
}
std::string_view Symbol::name() const {
  const Entry& e = interner().get(id_);
  return std::string_view(e.qual).substr(e.sep + 2);
}

namespace prim {
const Symbol Constant = Symbol::fromQualString("prim::Constant");
const Symbol Param = Symbol::fromQualString("prim::Param");
const Symbol Return = Symbol::fromQualString("prim::Return");
const Symbol If = Symbol::fromQualString("prim::If");
const Symbol Loop = Symbol::fromQualString("prim::Loop");
const Symbol GetAttr = Symbol::fromQualString("prim::GetAttr");
const Symbol CallMethod = Symbol::fromQualString("prim::CallMethod");
const Symbol CallFunction = Symbol::fromQualString("prim::CallFunction");
const Symbol ListConstruct = Symbol::fromQualString("prim::ListConstruct");
const Symbol ListUnpack = Symbol::fromQualString("prim::ListUnpack");
const Symbol TupleConstruct = Symbol::fromQualString("prim::TupleConstruct");
const Symbol TupleUnpack = Symbol::fromQualString("prim::TupleUnpack");
const Symbol DictConstruct = Symbol::fromQualString("prim::DictConstruct");
}  // namespace prim
namespace attr {
const Symbol value = Symbol::attr("value");
const Symbol name = Symbol::attr("name");
const Symbol Subgraph = Symbol::attr("Subgraph");
}  // namespace attr

}  // namespace llga
