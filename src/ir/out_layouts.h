// The out_layouts attribute: in which layouts an op may hand each output to
// its readers. The propagate-layouts pass writes it, the plan applies it;
// both read and write it only through these functions.
//   "any"      blocked (the backend's layout) or strided
//   "blocked"  blocked, not strided
//   "strided"  dense in any dimension order
//   "plain"    row-major contiguous (no attribute when every output is plain)
#pragma once

#include <string_view>
#include <vector>

#include "ir/ir.h"

namespace llga {

struct OutLayout {
  bool blocked = false;
  bool strided = false;
  bool operator==(const OutLayout&) const = default;
};

std::string_view outLayoutName(OutLayout l);
// One entry per output of n (plain where the attribute says nothing).
std::vector<OutLayout> outLayouts(const Node& n);
// Writes `layouts` on n (removing the attribute when all are plain); whether n changed.
bool setOutLayouts(Node& n, const std::vector<OutLayout>& layouts);

}  // namespace llga
