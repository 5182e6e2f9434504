// TorchScript's builtin library beyond structure (prim.cpp): str, list,
// dict and number operations, range bookkeeping of scripted loops, and the
// queries scripted code makes about a tensor (dtype class, device, grad
// mode), with the answers of CPU inference. aten::warn goes to the calling
// thread's warning sink (runtime/exec_context.h), which the Python layer
// re-raises through Python's warnings.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <iostream>
#include <string_view>

#include "backend/dnnl/ops/op_utils.h"
#include "ir/printer.h"
#include "runtime/exec_context.h"
#include "runtime/plan.h"

namespace llga {
namespace {

std::string scriptStr(const RtValue& v);

// Whether t's dims lie in memory in `order` (outermost first; empty:
// row-major): their strides do not grow along it. Size-1 and broadcast
// (stride-0) dims are passed over, as PyTorch's TensorIterator does when it
// orders a result's dims by its operand's.
bool inMemoryOrder(const Tensor& t, const std::vector<int64_t>& order) {
  if (!order.empty() && static_cast<int64_t>(order.size()) != t.dim()) return false;
  int64_t outer = -1;  // the last stride seen, outermost first (-1: none yet)
  for (int64_t k = 0; k < t.dim(); ++k) {
    const int64_t d = order.empty() ? k : order[static_cast<size_t>(k)];
    if (t.size(d) == 1 || t.stride(d) == 0) continue;
    if (outer >= 0 && t.stride(d) > outer) return false;
    outer = t.stride(d);
  }
  return true;
}

std::string joinItems(const std::vector<RtValue>& items, const char* open, const char* close, bool tuple) {
  std::string s = open;
  for (size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + scriptStr(items[i]);
  if (tuple && items.size() == 1) s += ",";
  return s + close;
}

// str(v) as TorchScript's interpreter prints it (not quite Python's: floats
// as the IR prints them, "2." and "0.10000000000000001"; strings inside
// containers unquoted). Tensors print as llga describes them: PyTorch's
// tensor repr is not reproduced.
std::string scriptStr(const RtValue& v) {
  if (v.isTensor()) return "tensor of " + v.tensor().describe();
  if (v.isNone()) return "None";
  if (v.isBool()) return v.toBool() ? "True" : "False";
  if (v.isInt()) return std::to_string(v.toInt());
  if (v.isDouble()) return formatDouble(v.toDouble());
  if (std::holds_alternative<std::string>(v.v)) return v.str();
  if (std::holds_alternative<RtDevice>(v.v)) return std::get<RtDevice>(v.v).name;
  if (v.isList()) return joinItems(*v.list(), "[", "]", false);
  if (v.isTuple()) return joinItems(v.tuple()->items, "(", ")", true);
  if (std::holds_alternative<RtDict>(v.v)) {
    std::string s = "{";
    bool first = true;
    for (const auto& [k, x] : *v.dict()) {
      s += (first ? "" : ", ") + scriptStr(k) + ": " + scriptStr(x);
      first = false;
    }
    return s + "}";
  }
  return v.kindName();
}

// A one-element tensor's value as TorchScript's item() gives it: int for
// integer dtypes (exact for all of int64), bool for bool, float otherwise.
RtValue tensorItem(const Tensor& t, const char* op) {
  if (t.numel() != 1)
    throw std::invalid_argument(std::string(op) + ": a tensor with " + std::to_string(t.numel()) +
                                " elements cannot be converted to a Python number");
  if (t.dtype() == ScalarType::Bool) return RtValue(t.item() != 0);
  if (t.dtype() == ScalarType::Long) return RtValue(*static_cast<const int64_t*>(t.data()));
  if (!isFloatingType(t.dtype())) return RtValue(static_cast<int64_t>(t.item()));
  return RtValue(t.item());
}

bool contains(const RtValue& container, const RtValue& item) {
  if (std::holds_alternative<std::string>(container.v)) return container.str().find(item.str()) != std::string::npos;
  if (std::holds_alternative<RtDict>(container.v)) {
    for (const auto& kv : *container.dict())
      if (kv.first.sameKey(item)) return true;
    return false;
  }
  for (const RtValue& x : *container.list())
    if (x.sameKey(item)) return true;
  return false;
}

int64_t normIndex(int64_t i, int64_t n, bool clamp) {
  if (i < 0) i += n;
  return clamp ? std::clamp<int64_t>(i, 0, n) : i;
}

// range(lo, hi, step)'s length, as scripted for-loops compute their trip count.
int64_t rangeLength(int64_t lo, int64_t hi, int64_t step) {
  if (step == 0) throw std::invalid_argument("range() arg 3 must not be zero");
  if (step > 0 && lo < hi) return 1 + (hi - 1 - lo) / step;
  if (step < 0 && lo > hi) return 1 + (lo - 1 - hi) / (-step);
  return 0;
}

// prim::isinstance[types=[...]]: whether the value is of one of the listed
// types (by kind: a list of any element type is a `list`).
bool isInstance(const RtValue& v, const Type& t) {
  switch (t.kind()) {
    case TypeKind::Tensor: return v.isTensor();
    case TypeKind::List: return v.isList();
    case TypeKind::Tuple: return v.isTuple();
    case TypeKind::Dict: return std::holds_alternative<RtDict>(v.v);
    case TypeKind::Optional: return v.isNone() || isInstance(v, *t.contained()[0]);
    case TypeKind::Simple: {
      if (t.isSimple("list")) return v.isList();
      if (t.isSimple("tuple")) return v.isTuple();
      if (t.isSimple("int")) return v.isInt();
      if (t.isSimple("float")) return v.isDouble();
      if (t.isSimple("bool")) return v.isBool();
      if (t.isSimple("str")) return std::holds_alternative<std::string>(v.v);
      if (t.isSimple("NoneType")) return v.isNone();
      if (t.isSimple("Device")) return std::holds_alternative<RtDevice>(v.v);
      if (t.isSimple("Any")) return true;
      break;
    }
    default: break;
  }
  throw std::invalid_argument("prim::isinstance: cannot test for type " + t.str());
}

// Python's max()/min() of numbers: the first of the extremes, an int when all are ints or bools.
RtValue extremeOf(bool is_max, const RtValue* const* vals, size_t n) {
  if (n == 0) throw std::invalid_argument(std::string(is_max ? "max" : "min") + "() arg is an empty sequence");
  bool ints = std::all_of(vals, vals + n, [](const RtValue* v) { return v->isInt() || v->isBool(); });
  const RtValue* best = vals[0];
  for (size_t i = 1; i < n; ++i) {
    bool better = ints ? (is_max ? vals[i]->toInt() > best->toInt() : vals[i]->toInt() < best->toInt())
                       : (is_max ? vals[i]->toDouble() > best->toDouble() : vals[i]->toDouble() < best->toDouble());
    if (better) best = vals[i];
  }
  return ints ? RtValue(best->toInt()) : RtValue(best->toDouble());
}

// max(list) or max(a, b)
RtValue pickExtreme(bool is_max, const KernelArgs& a) {
  if (a.num_in == 2) return extremeOf(is_max, a.in, 2);
  const std::vector<RtValue>& items = *a.input(0).list();
  std::vector<const RtValue*> ptrs;
  ptrs.reserve(items.size());
  for (const RtValue& v : items) ptrs.push_back(&v);
  return extremeOf(is_max, ptrs.data(), ptrs.size());
}

// Two results as the node has them: two outputs (TorchScript unpacks a
// builtin's tuple into outputs), or one tuple.
void setPair(const KernelArgs& a, RtValue first, RtValue second) {
  if (a.num_out >= 2) return a.set(0, std::move(first)), a.set(1, std::move(second));
  a.set(0, makeTuple({std::move(first), std::move(second)}));
}

// Python's < between two list items of one type (ints and bools, floats, strings).
bool itemLess(const RtValue& a, const RtValue& b) {
  if (std::holds_alternative<std::string>(a.v) && std::holds_alternative<std::string>(b.v)) return a.str() < b.str();
  if ((a.isInt() || a.isBool()) && (b.isInt() || b.isBool())) return a.toInt() < b.toInt();
  if ((a.isInt() || a.isBool() || a.isDouble()) && (b.isInt() || b.isBool() || b.isDouble()))
    return a.toDouble() < b.toDouble();
  throw std::invalid_argument(std::string("cannot sort a list of ") + a.kindName() + " and " + b.kindName() +
                              " items (ints, floats, bools or strings)");
}

// Where `item` first is in the list (by ==), or -1.
int64_t findItem(const std::vector<RtValue>& items, const RtValue& item) {
  for (size_t i = 0; i < items.size(); ++i)
    if (items[i].sameKey(item)) return static_cast<int64_t>(i);
  return -1;
}

using DictItems = std::vector<std::pair<RtValue, RtValue>>;

DictItems::iterator findKey(DictItems& d, const RtValue& key) {
  return std::find_if(d.begin(), d.end(), [&](const auto& kv) { return kv.first.sameKey(key); });
}

}  // namespace

void sortScriptList(std::vector<RtValue>& items, bool reverse) {
  // stable, as Python's: equal items keep their order either way
  std::stable_sort(items.begin(), items.end(),
                   [reverse](const RtValue& a, const RtValue& b) { return reverse ? itemLess(b, a) : itemLess(a, b); });
}

void registerBuiltinOps(OpRegistry& r) {
  // ---- str
  r.add("aten::str", 1, 1, [](const KernelArgs& a) { a.set(0, RtValue(scriptStr(a.input(0)))); });
  // format(fmt, args...): Python's str.format with "{}" fields, as scripted code builds messages
  r.add("aten::format", 1, 1 << 20, [](const KernelArgs& a) {
    const std::string& fmt = a.input(0).str();
    std::string out;
    size_t next = 1;
    for (size_t i = 0; i < fmt.size(); ++i) {
      if (fmt.compare(i, 2, "{}") == 0) {
        if (next >= a.num_in) throw std::invalid_argument("format: more {} fields than arguments in '" + fmt + "'");
        out += scriptStr(a.input(next++));
        ++i;
      } else {
        out += fmt[i];
      }
    }
    a.set(0, RtValue(out));
  });
  // find(self, sub, start=0, end=-1) -> index or -1 (end=-1: to the end, as TorchScript's schema says)
  r.add("aten::find", 2, 4, [](const KernelArgs& a) {
    const std::string& s = a.input(0).str();
    const std::string& sub = a.input(1).str();
    int64_t n = static_cast<int64_t>(s.size());
    int64_t start = a.num_in > 2 ? normIndex(a.toInt(2), n, true) : 0;
    int64_t end = a.num_in > 3 && a.toInt(3) != -1 ? normIndex(a.toInt(3), n, true) : n;
    int64_t at = -1;
    if (start <= end) {
      size_t p = s.substr(0, static_cast<size_t>(end)).find(sub, static_cast<size_t>(start));
      if (p != std::string::npos) at = static_cast<int64_t>(p);
    }
    a.set(0, RtValue(at));
  });
  r.add("aten::__contains__", 2, 2, [](const KernelArgs& a) { a.set(0, RtValue(contains(a.input(0), a.input(1)))); });
  // str methods as TorchScript's: bytes, classified in the C locale (ASCII)
  // strip/lstrip/rstrip(self, chars): the graph passes chars (" \n\t\f\v" by default)
  for (auto [name, left, right] : {std::tuple{"aten::strip", true, true}, {"aten::lstrip", true, false},
                                   {"aten::rstrip", false, true}}) {
    const bool l = left, rt = right;
    r.add(name, 1, 2, [l, rt](const KernelArgs& a) {
      const std::string& s = a.input(0).str();
      const std::string chars = a.num_in > 1 ? a.input(1).str() : std::string(" \n\t\f\v");
      size_t b = 0, e = s.size();
      while (l && b < e && chars.find(s[b]) != std::string::npos) ++b;
      while (rt && e > b && chars.find(s[e - 1]) != std::string::npos) --e;
      a.set(0, RtValue(s.substr(b, e - b)));
    });
  }
  // replace(self, old, new, max=-1): the first max occurrences (all when negative)
  r.add("aten::replace", 3, 4, [](const KernelArgs& a) {
    const std::string& s = a.input(0).str();
    const std::string& from = a.input(1).str();
    const std::string& to = a.input(2).str();
    int64_t left = a.num_in > 3 ? a.toInt(3) : -1;
    // (Python puts `new` between the characters; TorchScript's interpreter does otherwise)
    if (from.empty()) throw std::invalid_argument("str.replace of an empty string is not supported");
    std::string out;
    size_t i = 0;
    while (left != 0) {
      const size_t at = s.find(from, i);
      if (at == std::string::npos) break;
      out.append(s, i, at - i).append(to);
      i = at + from.size();
      if (left > 0) --left;
    }
    if (i < s.size()) out.append(s, i, std::string::npos);
    a.set(0, RtValue(out));
  });
  using CharTest = int (*)(int);
  for (auto [name, test] : {std::pair<const char*, CharTest>{"aten::isdigit", ::isdigit}, {"aten::isalpha", ::isalpha},
                            {"aten::isalnum", ::isalnum}, {"aten::isspace", ::isspace}}) {
    const CharTest t = test;
    r.add(name, 1, 1, [t](const KernelArgs& a) {  // all characters, and at least one
      const std::string& s = a.input(0).str();
      a.set(0, RtValue(!s.empty() && std::all_of(s.begin(), s.end(), [t](char c) { return t(static_cast<unsigned char>(c)) != 0; })));
    });
  }
  for (auto [name, upper] : {std::pair{"aten::isupper", true}, {"aten::islower", false}}) {
    const bool up = upper;
    r.add(name, 1, 1, [up](const KernelArgs& a) {  // a cased character, and no cased one of the other case
      bool cased = false;
      for (char ch : a.input(0).str()) {
        const int c = static_cast<unsigned char>(ch);
        if (!std::isalpha(c)) continue;
        if ((up ? std::islower(c) : std::isupper(c)) != 0) return a.set(0, RtValue(false));
        cased = true;
      }
      a.set(0, RtValue(cased));
    });
  }
  // zfill(width): zeros on the left (TorchScript's does not move a sign first); ljust / rjust / center(width, fill=" ")
  r.add("aten::zfill", 2, 2, [](const KernelArgs& a) {
    const std::string& s = a.input(0).str();
    const int64_t w = a.toInt(1), n = static_cast<int64_t>(s.size());
    a.set(0, RtValue(w > n ? std::string(static_cast<size_t>(w - n), '0') + s : s));
  });
  for (const char* name : {"aten::ljust", "aten::rjust", "aten::center"}) {
    const std::string kind = name;
    r.add(name, 2, 3, [kind](const KernelArgs& a) {
      const std::string& s = a.input(0).str();
      const int64_t w = a.toInt(1), n = static_cast<int64_t>(s.size());
      const std::string fill = a.num_in > 2 ? a.input(2).str() : " ";
      if (fill.size() != 1) throw std::invalid_argument("The fill character must be exactly one character long");
      if (w <= n) return a.set(0, RtValue(s));
      const int64_t margin = w - n;
      // Python's center: the odd one out goes right, unless both margin and width are odd
      const int64_t left = kind == "aten::ljust" ? 0 : kind == "aten::rjust" ? margin : margin / 2 + (margin & w & 1);
      a.set(0, RtValue(std::string(static_cast<size_t>(left), fill[0]) + s +
                       std::string(static_cast<size_t>(margin - left), fill[0])));
    });
  }
  // rfind(self, sub, start=0, end=-1): the last index or -1 (end -1: to the end, as find's schema)
  r.add("aten::rfind", 2, 4, [](const KernelArgs& a) {
    const std::string& s = a.input(0).str();
    const std::string& sub = a.input(1).str();
    const int64_t n = static_cast<int64_t>(s.size());
    const int64_t start = a.num_in > 2 ? normIndex(a.toInt(2), n, true) : 0;
    const int64_t end = a.num_in > 3 && a.toInt(3) != -1 ? normIndex(a.toInt(3), n, true) : n;
    int64_t at = -1;
    if (start <= end && static_cast<int64_t>(sub.size()) <= end - start) {
      const size_t p = s.substr(static_cast<size_t>(start), static_cast<size_t>(end - start)).rfind(sub);
      if (p != std::string::npos) at = start + static_cast<int64_t>(p);
    }
    a.set(0, RtValue(at));
  });
  // title (a letter after a non-letter upper, the rest lower), capitalize, swapcase
  r.add("aten::title", 1, 1, [](const KernelArgs& a) {
    std::string s = a.input(0).str();
    bool prev_alpha = false;
    for (char& ch : s) {
      const int c = static_cast<unsigned char>(ch);
      ch = static_cast<char>(prev_alpha ? std::tolower(c) : std::toupper(c));
      prev_alpha = std::isalpha(c) != 0;
    }
    a.set(0, RtValue(s));
  });
  r.add("aten::capitalize", 1, 1, [](const KernelArgs& a) {
    std::string s = a.input(0).str();
    for (size_t i = 0; i < s.size(); ++i) {
      const int c = static_cast<unsigned char>(s[i]);
      s[i] = static_cast<char>(i == 0 ? std::toupper(c) : std::tolower(c));
    }
    a.set(0, RtValue(s));
  });
  r.add("aten::swapcase", 1, 1, [](const KernelArgs& a) {
    std::string s = a.input(0).str();
    for (char& ch : s) {
      const int c = static_cast<unsigned char>(ch);
      ch = static_cast<char>(std::isupper(c) ? std::tolower(c) : std::islower(c) ? std::toupper(c) : c);
    }
    a.set(0, RtValue(s));
  });
  // splitlines(keepends=False): a break at each \n, \r, \v, \f or \x1c-\x1e byte (\r\n is two, as
  // TorchScript's), no empty piece after a final break
  r.add("aten::splitlines", 1, 2, [](const KernelArgs& a) {
    const std::string& s = a.input(0).str();
    const bool keep = a.num_in > 1 && a.toBool(1);
    std::vector<RtValue> out;
    size_t start = 0;
    for (size_t i = 0; i < s.size(); ++i)
      if (std::string_view("\n\r\v\f\x1c\x1d\x1e").find(s[i]) != std::string_view::npos) {
        out.push_back(RtValue(s.substr(start, i - start + (keep ? 1 : 0))));
        start = i + 1;
      }
    if (start < s.size()) out.push_back(RtValue(s.substr(start)));
    a.set(0, makeList(std::move(out)));
  });
  // rsplit(sep=" ", max=-1): split from the right, at most max times
  r.add("aten::rsplit", 1, 3, [](const KernelArgs& a) {
    const std::string& s = a.input(0).str();
    const std::string sep = a.num_in > 1 ? a.input(1).str() : " ";
    int64_t left = a.num_in > 2 ? a.toInt(2) : -1;
    if (sep.empty()) throw std::invalid_argument("rsplit: empty separator");
    std::vector<RtValue> out;
    size_t end = s.size();
    while (left != 0 && end >= sep.size()) {
      const size_t at = s.rfind(sep, end - sep.size());
      if (at == std::string::npos) break;
      out.push_back(RtValue(s.substr(at + sep.size(), end - at - sep.size())));
      end = at;
      if (left > 0) --left;
    }
    out.push_back(RtValue(s.substr(0, end)));
    std::reverse(out.begin(), out.end());
    a.set(0, makeList(std::move(out)));
  });
  // partition(sep) -> before, sep, after (three outputs), or s, "", "" without sep
  r.add("aten::partition", 2, 2, [](const KernelArgs& a) {
    const std::string& s = a.input(0).str();
    const std::string& sep = a.input(1).str();
    const size_t at = sep.empty() ? std::string::npos : s.find(sep);
    const bool found = at != std::string::npos;
    const RtValue parts[3] = {RtValue(found ? s.substr(0, at) : s), RtValue(found ? sep : std::string()),
                              RtValue(found ? s.substr(at + sep.size()) : std::string())};
    if (a.num_out == 1) return a.set(0, makeTuple({parts[0], parts[1], parts[2]}));
    for (size_t i = 0; i < 3 && i < a.num_out; ++i) a.set(i, parts[i]);
  });
  // hex(i), bin(i), oct(i): Python's "0x1f", "-0b101", "0o17"
  for (auto [name, base, prefix] : {std::tuple{"aten::hex", 16, "0x"}, {"aten::bin", 2, "0b"}, {"aten::oct", 8, "0o"}}) {
    const int b = base;
    const std::string pre = prefix;
    r.add(name, 1, 1, [b, pre](const KernelArgs& a) {
      const int64_t v = a.toInt(0);
      uint64_t u = v < 0 ? uint64_t{0} - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
      std::string digits;
      do {
        digits += "0123456789abcdef"[u % static_cast<uint64_t>(b)];
        u /= static_cast<uint64_t>(b);
      } while (u);
      std::reverse(digits.begin(), digits.end());
      a.set(0, RtValue((v < 0 ? "-" : "") + pre + digits));
    });
  }
  // ord(c) of a one-character string (a byte); chr(i): the byte i mod 256, as TorchScript's (no range check)
  r.add("aten::ord", 1, 1, [](const KernelArgs& a) {
    const std::string& s = a.input(0).str();
    if (s.size() != 1)
      throw std::invalid_argument("ord() expected a character, but string of length " + std::to_string(s.size()) + " found");
    a.set(0, RtValue(int64_t{static_cast<unsigned char>(s[0])}));
  });
  r.add("aten::chr", 1, 1, [](const KernelArgs& a) {
    a.set(0, RtValue(std::string(1, static_cast<char>(static_cast<uint8_t>(a.toInt(0) & 0xff)))));
  });

  // ---- lists and dicts (shared and mutable, as in TorchScript)
  r.add("aten::extend", 2, 2, [](const KernelArgs& a) {
    auto& items = *a.input(0).list();
    const std::vector<RtValue> more = *a.input(1).list();  // a copy: l.extend(l) doubles l
    items.insert(items.end(), more.begin(), more.end());
  });
  r.add("aten::insert", 3, 3, [](const KernelArgs& a) {
    auto& items = *a.input(0).list();
    int64_t i = normIndex(a.toInt(1), static_cast<int64_t>(items.size()), true);
    items.insert(items.begin() + i, a.input(2));
  });
  r.add("aten::_set_item", 3, 3, [](const KernelArgs& a) {
    const RtValue& c = a.input(0);
    if (std::holds_alternative<RtDict>(c.v)) {
      auto& d = *c.dict();
      auto it = std::find_if(d.begin(), d.end(), [&](const auto& kv) { return kv.first.sameKey(a.input(1)); });
      if (it != d.end()) it->second = a.input(2);
      else d.emplace_back(a.input(1), a.input(2));
    } else {
      auto& items = *c.list();
      int64_t n = static_cast<int64_t>(items.size()), i = normIndex(a.toInt(1), n, false);
      if (i < 0 || i >= n) throw std::out_of_range("list assignment index " + std::to_string(a.toInt(1)) + " out of range");
      items[static_cast<size_t>(i)] = a.input(2);
    }
    if (a.num_out) a.set(0, c);
  });
  r.add("aten::reverse", 1, 1, [](const KernelArgs& a) {
    auto& items = *a.input(0).list();
    std::reverse(items.begin(), items.end());
  });
  // sorted(list): a sorted copy
  r.add("aten::sorted", 1, 1, [](const KernelArgs& a) {
    std::vector<RtValue> items = *a.input(0).list();
    sortScriptList(items, false);
    a.set(0, makeList(std::move(items)));
  });
  // del l[i] / del d[k]
  r.add("aten::Delete", 2, 2, [](const KernelArgs& a) {
    if (std::holds_alternative<RtDict>(a.input(0).v)) {
      auto& d = *a.input(0).dict();
      auto it = findKey(d, a.input(1));
      if (it == d.end()) throw std::out_of_range("KeyError: " + scriptStr(a.input(1)));
      d.erase(it);
      return;
    }
    auto& items = *a.input(0).list();
    const int64_t n = static_cast<int64_t>(items.size()), i = normIndex(a.toInt(1), n, false);
    if (i < 0 || i >= n) throw std::out_of_range("list assignment index " + std::to_string(a.toInt(1)) + " out of range");
    items.erase(items.begin() + i);
  });
  // l.pop(i=-1) / d.pop(k) / d.pop(k, default)
  r.add("aten::pop", 1, 3, [](const KernelArgs& a) {
    if (std::holds_alternative<RtDict>(a.input(0).v)) {
      auto& d = *a.input(0).dict();
      auto it = findKey(d, a.input(1));
      if (it == d.end()) {
        if (a.num_in < 3) throw std::out_of_range("KeyError: " + scriptStr(a.input(1)));
        return a.set(0, a.input(2));
      }
      RtValue v = it->second;
      d.erase(it);
      return a.set(0, std::move(v));
    }
    auto& items = *a.input(0).list();
    const int64_t n = static_cast<int64_t>(items.size());
    if (n == 0) throw std::out_of_range("pop from empty list");
    const int64_t i = normIndex(a.num_in > 1 ? a.toInt(1) : -1, n, false);
    if (i < 0 || i >= n) throw std::out_of_range("pop index out of range");
    RtValue v = items[static_cast<size_t>(i)];
    items.erase(items.begin() + i);
    a.set(0, std::move(v));
  });
  // d.popitem(): TorchScript's takes the first inserted (key, value), not Python's last
  r.add("aten::popitem", 1, 1, [](const KernelArgs& a) {
    auto& d = *a.input(0).dict();
    if (d.empty()) throw std::out_of_range("popitem(): dictionary is empty");
    RtValue item = makeTuple({d.front().first, d.front().second});
    d.erase(d.begin());
    a.set(0, std::move(item));
  });
  r.add("aten::clear", 1, 1, [](const KernelArgs& a) {
    if (std::holds_alternative<RtDict>(a.input(0).v)) a.input(0).dict()->clear();
    else a.input(0).list()->clear();
  });
  // l.remove(x): the first item equal to x
  r.add("aten::remove", 2, 2, [](const KernelArgs& a) {
    auto& items = *a.input(0).list();
    const int64_t i = findItem(items, a.input(1));
    if (i < 0) throw std::invalid_argument("list.remove(x): x not in list");
    items.erase(items.begin() + i);
  });
  // l.copy() / d.copy(): a shallow copy; copy(self, src, non_blocking=False) of tensors (copy_'s
  // functional form, which remove-mutation makes): src broadcast into a new tensor of self's
  // shape and dtype
  r.add("aten::copy", 1, 3, [](const KernelArgs& a) {
    if (a.input(0).isTensor()) {
      if (a.num_in < 2) throw std::invalid_argument("aten::copy of a tensor needs the source to copy");
      const Tensor& self = a.tensor(0);
      const Tensor src = a.input(1).isTensor() ? a.tensor(1) : Tensor::scalar(self.dtype(), a.toDouble(1));
      Tensor out = Tensor::emptyLike(self.dtype(), self.sizes(), self);  // self's dimension order, as copy_'s result
      out.copyFrom(src.expand(self.sizes()));
      return a.set(0, out);
    }
    if (std::holds_alternative<RtDict>(a.input(0).v))
      return a.set(0, RtValue(RtDict(std::make_shared<DictItems>(*a.input(0).dict()))));
    a.set(0, makeList(*a.input(0).list()));
  });
  // l.count(x): items equal to x; s.count(sub): non-overlapping occurrences
  r.add("aten::count", 2, 4, [](const KernelArgs& a) {
    if (std::holds_alternative<std::string>(a.input(0).v)) {
      if (a.num_in > 2) throw std::invalid_argument("str.count: start and end are not supported");
      const std::string& s = a.input(0).str();
      const std::string& sub = a.input(1).str();
      int64_t k = 0;
      if (sub.empty()) k = static_cast<int64_t>(s.size()) + 1;
      else
        for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++k;
      return a.set(0, RtValue(k));
    }
    int64_t k = 0;
    for (const RtValue& x : *a.input(0).list()) k += x.sameKey(a.input(1)) ? 1 : 0;
    a.set(0, RtValue(k));
  });
  // d.get(k) (None when absent) / d.get(k, default)
  r.add("aten::get", 2, 3, [](const KernelArgs& a) {
    auto& d = *a.input(0).dict();
    auto it = findKey(d, a.input(1));
    a.set(0, it != d.end() ? it->second : a.num_in > 2 ? a.input(2) : RtValue());
  });
  // d.setdefault(k, default): d[k], set to default first when absent
  r.add("aten::setdefault", 3, 3, [](const KernelArgs& a) {
    auto& d = *a.input(0).dict();
    auto it = findKey(d, a.input(1));
    if (it == d.end()) {
      d.emplace_back(a.input(1), a.input(2));
      return a.set(0, a.input(2));
    }
    a.set(0, it->second);
  });
  // d.update(other): other's items set into d, in other's order
  r.add("aten::update", 2, 2, [](const KernelArgs& a) {
    auto& d = *a.input(0).dict();
    const DictItems more = *a.input(1).dict();  // a copy: d.update(d)
    for (const auto& kv : more) {
      auto it = findKey(d, kv.first);
      if (it != d.end()) it->second = kv.second;
      else d.push_back(kv);
    }
  });
  // dict() / dict(d): a new dict (a copy); dict(pairs): from a list of (key, value) tuples
  r.add("aten::dict", 0, 1, [](const KernelArgs& a) {
    auto d = std::make_shared<std::vector<std::pair<RtValue, RtValue>>>();
    if (a.num_in && a.input(0).isList()) {
      for (const RtValue& kv : *a.input(0).list()) {
        const auto& items = kv.tuple()->items;
        if (items.size() != 2) throw std::invalid_argument("dict(): each item must be a (key, value) pair");
        auto it = std::find_if(d->begin(), d->end(), [&](const auto& e) { return e.first.sameKey(items[0]); });
        if (it != d->end()) it->second = items[1];
        else d->emplace_back(items[0], items[1]);
      }
    } else if (a.num_in) {
      *d = *a.input(0).dict();
    }
    a.set(0, RtValue(RtDict(std::move(d))));
  });
  r.add("aten::keys", 1, 1, [](const KernelArgs& a) {
    std::vector<RtValue> out;
    for (const auto& kv : *a.input(0).dict()) out.push_back(kv.first);
    a.set(0, makeList(std::move(out)));
  });
  r.add("aten::values", 1, 1, [](const KernelArgs& a) {
    std::vector<RtValue> out;
    for (const auto& kv : *a.input(0).dict()) out.push_back(kv.second);
    a.set(0, makeList(std::move(out)));
  });
  r.add("aten::items", 1, 1, [](const KernelArgs& a) {
    std::vector<RtValue> out;
    for (const auto& kv : *a.input(0).dict()) out.push_back(makeTuple({kv.first, kv.second}));
    a.set(0, makeList(std::move(out)));
  });

  // ---- print(...): its arguments joined by spaces, to standard output as PyTorch's interpreter writes them
  r.add("prim::Print", 0, 1 << 20, [](const KernelArgs& a) {
    std::string line;
    for (size_t i = 0; i < a.num_in; ++i) line += (i ? " " : "") + scriptStr(a.input(i));
    std::cout << line << std::endl;
  });

  // ---- numbers: scripted loops' index bookkeeping, min/max, item
  // abs(n) of an int or a float; math.fabs(n): a float
  r.add("prim::abs", 1, 1, [](const KernelArgs& a) {
    if (a.input(0).isInt()) {  // wrapping as PyTorch's for the lowest int64
      const int64_t v = a.toInt(0);
      return a.set(0, RtValue(v < 0 ? static_cast<int64_t>(uint64_t{0} - static_cast<uint64_t>(v)) : v));
    }
    a.set(0, RtValue(std::fabs(a.toDouble(0))));
  });
  r.add("aten::fabs", 1, 1, [](const KernelArgs& a) { a.set(0, RtValue(std::fabs(a.toDouble(0)))); });
  // math.degrees / radians / gamma / factorial of numbers
  r.add("aten::degrees", 1, 1, [](const KernelArgs& a) { a.set(0, RtValue(a.toDouble(0) * (180.0 / M_PI))); });
  r.add("aten::radians", 1, 1, [](const KernelArgs& a) { a.set(0, RtValue(a.toDouble(0) * (M_PI / 180.0))); });
  r.add("aten::gamma", 1, 1, [](const KernelArgs& a) { a.set(0, RtValue(std::tgamma(a.toDouble(0)))); });
  r.add("aten::factorial", 1, 1, [](const KernelArgs& a) {
    const int64_t n = a.toInt(0);
    if (n < 0) throw std::invalid_argument("factorial() not defined for negative values");
    int64_t f = 1;
    for (int64_t k = 2; k <= n; ++k) f = static_cast<int64_t>(static_cast<uint64_t>(f) * static_cast<uint64_t>(k));
    a.set(0, RtValue(f));
  });
  // divmod(a, b) of ints or floats: (a // b, a % b), Python's floor rules
  r.add("aten::divmod", 2, 2, [](const KernelArgs& a) {
    if (a.input(0).isInt() && a.input(1).isInt()) {
      const int64_t x = a.toInt(0), y = a.toInt(1);
      if (y == 0) throw std::domain_error("ZeroDivisionError: integer division or modulo by zero");
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) --q, m += y;
      return setPair(a, RtValue(q), RtValue(m));
    }
    const double x = a.toDouble(0), y = a.toDouble(1);
    if (y == 0) throw std::domain_error("ZeroDivisionError: float divmod()");
    double m = std::fmod(x, y);  // TorchScript's: the remainder takes the divisor's sign, (x - m) / y beside it
    if (m != 0 && ((x < 0) != (y < 0))) m += y;
    setPair(a, RtValue((x - m) / y), RtValue(m));
  });
  // i << n, i >> n of ints (arithmetic shift right, as Python)
  for (auto [name, left] : {std::pair{"aten::__lshift__", true}, {"aten::__rshift__", false}}) {
    const bool l = left;
    r.add(name, 2, 2, [l](const KernelArgs& a) {
      if (!a.input(0).isInt() || !a.input(1).isInt())
        throw std::invalid_argument(std::string(l ? "<<" : ">>") + ": llga shifts ints only (a tensor shift is not supported)");
      const int64_t v = a.toInt(0), n = a.toInt(1);
      if (n < 0) throw std::invalid_argument("negative shift count");
      if (l) return a.set(0, RtValue(n >= 64 ? int64_t{0} : static_cast<int64_t>(static_cast<uint64_t>(v) << n)));
      a.set(0, RtValue(n >= 64 ? (v < 0 ? int64_t{-1} : int64_t{0}) : v >> n));
    });
  }
  r.add("aten::__range_length", 3, 3, [](const KernelArgs& a) {
    a.set(0, RtValue(rangeLength(a.toInt(0), a.toInt(1), a.toInt(2))));
  });
  r.add("aten::__derive_index", 3, 3, [](const KernelArgs& a) {
    a.set(0, RtValue(a.toInt(1) + a.toInt(0) * a.toInt(2)));
  });
  r.add("prim::max", 1, 2, [](const KernelArgs& a) { a.set(0, pickExtreme(true, a)); });
  r.add("prim::min", 1, 2, [](const KernelArgs& a) { a.set(0, pickExtreme(false, a)); });
  r.addScalar("prim::max", 2, [](const RtValue* const* in) { return extremeOf(true, in, 2); });
  r.addScalar("prim::min", 2, [](const RtValue* const* in) { return extremeOf(false, in, 2); });
  r.add("aten::item", 1, 1, [](const KernelArgs& a) { a.set(0, tensorItem(a.tensor(0), "item()")); });
  r.add("aten::IntImplicit", 1, 1, [](const KernelArgs& a) {
    const Tensor& t = a.tensor(0);
    if (t.dim() != 0) throw std::invalid_argument("an int argument got a tensor of " + t.describe() + " (needs 0 dims)");
    if (isFloatingType(t.dtype())) throw std::invalid_argument("an int argument got a floating-point tensor");
    a.set(0, RtValue(tensorItem(t, "int").toInt()));
  });
  r.add("aten::FloatImplicit", 1, 1, [](const KernelArgs& a) {
    const Tensor& t = a.tensor(0);
    if (t.dim() != 0) throw std::invalid_argument("a float argument got a tensor of " + t.describe() + " (needs 0 dims)");
    a.set(0, RtValue(t.item()));
  });
  // tolist(self, dim, elem_type): a tensor's elements as (nested) Python lists
  r.add("prim::tolist", 1, 3, [](const KernelArgs& a) {
    Tensor t = a.tensor(0).contiguous();
    if (a.num_in > 1 && a.toInt(1) != t.dim())
      throw std::invalid_argument("tolist: the annotated list nests " + std::to_string(a.toInt(1)) +
                                  " deep, the tensor has " + std::to_string(t.dim()) + " dims");
    const auto sizes = t.sizes();
    std::function<RtValue(size_t, int64_t)> build = [&](size_t d, int64_t off) -> RtValue {
      if (d == sizes.size()) return tensorItem(t.asStrided({}, {}, t.offset() + off), "tolist");
      std::vector<RtValue> items;
      int64_t stride = 1;
      for (size_t k = d + 1; k < sizes.size(); ++k) stride *= sizes[k];
      for (int64_t i = 0; i < sizes[d]; ++i) items.push_back(build(d + 1, off + i * stride));
      return makeList(std::move(items));
    };
    a.set(0, build(0, 0));
  });

  // ---- what scripted code asks about tensors and the process
  r.add("aten::is_floating_point", 1, 1, [](const KernelArgs& a) { a.set(0, RtValue(isFloatingType(a.tensor(0).dtype()))); });
  for (const char* k : {"prim::is_cuda", "prim::is_nested", "prim::requires_grad", "prim::is_sparse", "prim::is_mkldnn",
                        "prim::is_quantized", "prim::is_meta", "prim::is_xpu", "prim::is_vulkan", "prim::is_mps"}) {
    r.add(k, 1, 1, [](const KernelArgs& a) {
      (void)a.tensor(0);
      a.set(0, RtValue(false));
    });
  }
  r.add("prim::type", 1, 1, [](const KernelArgs& a) {  // a device's type
    if (!std::holds_alternative<RtDevice>(a.input(0).v))
      throw std::invalid_argument(std::string("prim::type expects a device, got ") + a.input(0).kindName());
    const std::string& name = std::get<RtDevice>(a.input(0).v).name;
    a.set(0, RtValue(name.substr(0, name.find(':'))));
  });
  r.add("aten::is_grad_enabled", 0, 0, [](const KernelArgs& a) { a.set(0, RtValue(false)); });
  r.add("aten::device", 1, 2, [](const KernelArgs& a) {
    std::string name = a.input(0).str();
    if (a.num_in > 1 && !a.isNone(1)) name += ":" + std::to_string(a.toInt(1));
    if (name != "cpu" && name.rfind("cpu:", 0) != 0)
      throw std::invalid_argument("device '" + name + "': llga runs on the CPU only");
    a.set(0, RtValue(RtDevice{"cpu"}));
  });
  // llga::Guard[inputs, ranks, dtypes](x...): the inputs' rank and dtype a
  // specialization assumed (specialize-inputs); llga::Guard[inputs, orders]:
  // their memory order (observable-layouts)
  r.add(OpDef{"llga::Guard", 0, 1 << 20, [](const Node& n) {
                const Attributes& attrs = n.attributes();
                auto ints = [](const AttrValue& list) {
                  std::vector<int64_t> out;
                  for (const AttrValue& v : list.get<AttrList>()) out.push_back(v.get<int64_t>());
                  return out;
                };
                auto get = [&](const char* name) -> const AttrValue& { return attrs.get(Symbol::attr(name)); };
                auto has = [&](const char* name) { return attrs.has(Symbol::attr(name)); };
                std::vector<int64_t> ranks, dtypes;
                std::vector<std::vector<int64_t>> orders;
                if (has("ranks")) ranks = ints(get("ranks")), dtypes = ints(get("dtypes"));
                if (has("orders"))
                  for (const AttrValue& o : get("orders").get<AttrList>()) orders.push_back(ints(o));
                return std::make_unique<FnKernel>([inputs = ints(get("inputs")), ranks, dtypes,
                                                   orders](const KernelArgs& a) {
                  for (size_t i = 0; i < a.num_in; ++i) {
                    const Tensor& t = a.tensor(i);
                    const std::string which = "input " + std::to_string(inputs[i]) + " is " + t.describe();
                    if (!ranks.empty() &&
                        (t.dim() != ranks[i] || static_cast<int64_t>(scalarTypeCode(t.dtype())) != dtypes[i]))
                      throw SpecializationMismatch(which + "; the graph was specialized for rank " +
                                                   std::to_string(ranks[i]) + " and dtype code " +
                                                   std::to_string(dtypes[i]));
                    if (!orders.empty() && !inMemoryOrder(t, orders[i]))
                      throw SpecializationMismatch(
                          which + " with strides " + shapeString(t.strides()) + "; the graph was specialized for " +
                          (orders[i].empty() ? std::string("row-major inputs")
                                             : "inputs whose dims lie in memory in the order " + shapeString(orders[i])) +
                          " (whether its contiguous() or reshape() copies depends on it)");
                  }
                }, /*strided_inputs=*/true);
              }});
  r.add("aten::warn", 1, 2, [](const KernelArgs& a) { emitWarning(a.input(0).str()); });
  r.add(OpDef{"prim::isinstance", 1, 1, [](const Node& n) {
                std::vector<TypePtr> types;
                for (const AttrValue& t : n.attributes().get(Symbol::attr("types")).get<AttrList>()) types.push_back(t.get<TypePtr>());
                return std::make_unique<FnKernel>([types](const KernelArgs& a) {
                  bool yes = false;
                  for (const TypePtr& t : types) yes = yes || isInstance(a.input(0), *t);
                  a.set(0, RtValue(yes));
                });
              }});
}
LLGA_REGISTER_OPS(registerBuiltinOps);

}  // namespace llga
