#include "ir/out_layouts.h"

#include <string>

namespace llga {
namespace {

const Symbol& attrName() {
  static const Symbol s = Symbol::fromQualString("attr::out_layouts");
  return s;
}

}  // namespace

std::string_view outLayoutName(OutLayout l) {
  return l.blocked && l.strided ? "any" : l.blocked ? "blocked" : l.strided ? "strided" : "plain";
}

std::vector<OutLayout> outLayouts(const Node& n) {
  std::vector<OutLayout> out(n.outputs().size());
  const AttrValue* a = n.attributes().find(attrName());
  if (!a || !a->is<AttrList>()) return out;
  const AttrList& items = a->get<AttrList>();
  for (size_t j = 0; j < items.size() && j < out.size(); ++j) {
    const std::string name = items[j].is<std::string>() ? items[j].get<std::string>() : "";
    out[j] = {name == "any" || name == "blocked", name == "any" || name == "strided"};
  }
  return out;
}

bool setOutLayouts(Node& n, const std::vector<OutLayout>& layouts) {
  bool all_plain = true;
  for (const OutLayout& l : layouts) all_plain = all_plain && l == OutLayout{};
  if (all_plain) return n.attributes().remove(attrName());
  if (n.attributes().find(attrName()) && outLayouts(n) == layouts) return false;
  AttrList items;
  for (const OutLayout& l : layouts) items.emplace_back(std::string(outLayoutName(l)));
  n.setAttr(attrName(), AttrValue(std::move(items)));
  return true;
}

}  // namespace llga
