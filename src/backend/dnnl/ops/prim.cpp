// TorchScript's structural ops: lists, tuples, scalars <-> tensors, sizes.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>

#include "backend/dnnl/ops/op_utils.h"

namespace llga {
namespace {

// Packs its inputs into a list. The items may arrive strided (e.g.
// channels-last) or blocked exactly when every reader of the list takes such
// items (aten::cat): the plan tells it so through allowStridedOutput and
// allowBlockedOutput, before it asks the items' producers (layout
// propagation visits readers first).
class ListConstructKernel final : public Kernel {
 public:
  void run(const KernelArgs& a) override {
    std::vector<RtValue> items;
    items.reserve(a.num_in);
    for (size_t i = 0; i < a.num_in; ++i) items.push_back(a.input(i));
    a.set(0, makeList(std::move(items)));
  }
  bool acceptsStrided(size_t) const override { return pass_strided_; }
  void allowStridedOutput(size_t) override { pass_strided_ = true; }
  bool acceptsBlocked(size_t) const override { return pass_blocked_; }
  void allowBlockedOutput(size_t) override { pass_blocked_ = true; }

 private:
  bool pass_strided_ = false;
  bool pass_blocked_ = false;
};

bool isString(const RtValue& v) { return std::holds_alternative<std::string>(v.v); }

// Python's int(): a float truncates; NaN, infinities and values past int64 raise; a string parses.
int64_t toPythonInt(const RtValue& v) {
  if (v.isInt()) return v.toInt();
  if (v.isBool()) return v.toBool();
  if (isString(v)) {
    const std::string& s = v.str();
    size_t used = 0;
    int64_t n = 0;
    try {
      n = std::stoll(s, &used, 10);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != s.size()) throw std::invalid_argument("invalid literal for int() with base 10: '" + s + "'");
    return n;
  }
  if (v.isTensor() && !isFloatingType(v.tensor().dtype())) {  // exact, also past 2^53
    v.tensor().item();  // one element, or a clear error
    return *v.tensor().to(ScalarType::Long).contiguous().data<int64_t>();
  }
  const double d = v.isTensor() ? v.tensor().item() : v.toDouble();
  if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0))
    throw std::invalid_argument("value cannot be converted to type int64_t without overflow");
  return static_cast<int64_t>(d);
}

double parseFloat(const std::string& s) {  // out of range: +-inf or 0, as Python
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (s.empty() || std::isspace(static_cast<unsigned char>(s[0])) || end != s.c_str() + s.size())
    throw std::invalid_argument("could not convert string to float: '" + s + "'");
  return d;
}

}  // namespace

void registerPrimOps(OpRegistry& r) {
  r.add(OpDef{"prim::ListConstruct", 0, 1 << 20, [](const Node&) { return std::make_unique<ListConstructKernel>(); }});
  r.add("prim::TupleConstruct", 0, 1 << 20, [](const KernelArgs& a) {
    std::vector<RtValue> items;
    for (size_t i = 0; i < a.num_in; ++i) items.push_back(a.input(i));
    a.set(0, makeTuple(std::move(items)));
  });
  r.add("prim::ListUnpack", 1, 1, [](const KernelArgs& a) {
    const auto& items = *a.input(0).list();
    if (items.size() != a.num_out)
      throw std::invalid_argument("list of " + std::to_string(items.size()) + " items unpacked into " +
                                  std::to_string(a.num_out) + " values");
    for (size_t i = 0; i < items.size(); ++i) a.set(i, items[i]);
  });
  r.add("prim::TupleUnpack", 1, 1, [](const KernelArgs& a) {
    const auto& items = a.input(0).tuple()->items;
    if (items.size() != a.num_out) throw std::invalid_argument("tuple arity does not match TupleUnpack");
    for (size_t i = 0; i < items.size(); ++i) a.set(i, items[i]);
  });
  r.add("prim::TupleIndex", 2, 2, [](const KernelArgs& a) {
    const auto& items = a.input(0).tuple()->items;
    int64_t i = a.toInt(1);
    if (i < 0) i += static_cast<int64_t>(items.size());
    a.set(0, items.at(static_cast<size_t>(i)));
  });
  // A Python number as a 0-dim tensor (int -> Long, float -> Double, as TorchScript does).
  r.add("prim::NumToTensor", 1, 1, [](const KernelArgs& a) {
    const RtValue& v = a.input(0);
    a.set(0, Tensor::scalar(v.isDouble() ? ScalarType::Double : v.isBool() ? ScalarType::Bool : ScalarType::Long,
                            v.toDouble()));
  });
  // int(x), float(x), bool(x) of a number, a one-element tensor or (int, float) a string, as Python.
  r.add("aten::Int", 1, 1, [](const KernelArgs& a) { a.set(0, RtValue(toPythonInt(a.input(0)))); });
  r.addScalar("aten::Int", 1, [](const RtValue* const* in) { return RtValue(toPythonInt(*in[0])); });
  r.add("aten::Float", 1, 1, [](const KernelArgs& a) {
    const RtValue& v = a.input(0);
    a.set(0, RtValue(v.isTensor() ? v.tensor().item() : isString(v) ? parseFloat(v.str()) : v.toDouble()));
  });
  r.addScalar("aten::Float", 1, [](const RtValue* const* in) { return RtValue(in[0]->toDouble()); });
  r.add("aten::Bool", 1, 1, [](const KernelArgs& a) {
    const RtValue& v = a.input(0);
    a.set(0, RtValue(v.isTensor() ? v.tensor().item() != 0 : v.isBool() ? v.toBool() : v.toDouble() != 0));
  });
  // A 0-dim tensor to a Python number of its own kind.
  r.add("aten::ScalarImplicit", 1, 1, [](const KernelArgs& a) {
    const Tensor& t = a.tensor(0);
    if (t.dim() != 0) throw std::invalid_argument("Cannot input a tensor of dimension other than 0 as a scalar argument");
    if (isFloatingType(t.dtype())) a.set(0, RtValue(t.item()));
    else if (t.dtype() == ScalarType::Bool) a.set(0, RtValue(t.item() != 0));
    else a.set(0, RtValue(static_cast<int64_t>(t.item())));
  });
  r.add("aten::size", 1, 2, [](const KernelArgs& a) {
    const Tensor& t = a.tensor(0);
    if (a.num_in == 2) {
      a.set(0, RtValue(t.size(a.toInt(1))));
    } else {
      std::vector<RtValue> dims;
      for (int64_t s : t.sizes()) dims.emplace_back(s);
      a.set(0, makeList(std::move(dims)));
    }
  });
  r.add("aten::dim", 1, 1, [](const KernelArgs& a) { a.set(0, RtValue(a.tensor(0).dim())); });
  r.add("aten::numel", 1, 1, [](const KernelArgs& a) { a.set(0, RtValue(a.tensor(0).numel())); });
  r.add("aten::len", 1, 1, [](const KernelArgs& a) {
    const RtValue& v = a.input(0);
    if (v.isTensor() && v.tensor().dim() == 0) throw std::invalid_argument("len() of a 0-d tensor");
    if (v.isTensor()) a.set(0, RtValue(v.tensor().size(0)));
    else if (isString(v)) a.set(0, RtValue(static_cast<int64_t>(v.str().size())));
    else if (std::holds_alternative<RtDict>(v.v)) a.set(0, RtValue(static_cast<int64_t>(v.dict()->size())));
    else a.set(0, RtValue(static_cast<int64_t>(v.list()->size())));
  });
  r.add("prim::DictConstruct", 0, 1 << 20, [](const KernelArgs& a) {
    if (a.num_in % 2) throw std::invalid_argument("prim::DictConstruct takes key/value pairs");
    auto d = std::make_shared<std::vector<std::pair<RtValue, RtValue>>>();
    for (size_t i = 0; i < a.num_in; i += 2) {
      auto it = std::find_if(d->begin(), d->end(), [&](const auto& kv) { return kv.first.sameKey(a.input(i)); });
      if (it != d->end()) it->second = a.input(i + 1);
      else d->emplace_back(a.input(i), a.input(i + 1));
    }
    a.set(0, RtValue(RtDict(d)));
  });
  r.add("aten::__getitem__", 2, 2, [](const KernelArgs& a) {
    if (std::holds_alternative<RtDict>(a.input(0).v)) {
      for (const auto& [k, v] : *a.input(0).dict())
        if (k.sameKey(a.input(1))) return a.set(0, v);
      throw std::out_of_range("key not found in dict");
    }
    const bool str = isString(a.input(0));
    const int64_t n = static_cast<int64_t>(str ? a.input(0).str().size() : a.input(0).list()->size());
    int64_t i = a.toInt(1);
    if (i < -n || i >= n) throw std::out_of_range(std::string(str ? "string" : "list") + " index " + std::to_string(i) + " out of range");
    const size_t at = static_cast<size_t>(i < 0 ? i + n : i);
    a.set(0, str ? RtValue(std::string(1, a.input(0).str()[at])) : (*a.input(0).list())[at]);
  });
  // list(l): a new list with the same items (scripted code copies size lists so); list(s): its characters
  r.add("aten::list", 1, 1, [](const KernelArgs& a) {
    auto out = std::make_shared<std::vector<RtValue>>();
    if (isString(a.input(0)))
      for (char c : a.input(0).str()) out->emplace_back(std::string(1, c));
    else if (a.input(0).isList()) *out = *a.input(0).list();
    else throw std::invalid_argument("aten::list expects a list or a string");
    a.set(0, RtValue(out));
  });
  r.add("aten::append", 2, 2, [](const KernelArgs& a) {
    a.input(0).list()->push_back(a.input(1));
    a.set(0, a.input(0));
  });
  // str methods
  r.add("aten::join", 2, 2, [](const KernelArgs& a) {
    std::string out;
    const std::string& sep = a.input(0).str();
    const auto& items = *a.input(1).list();
    for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i].str();
    a.set(0, RtValue(out));
  });
  for (bool upper : {true, false}) {
    r.add(upper ? "aten::upper" : "aten::lower", 1, 1, [upper](const KernelArgs& a) {
      std::string s = a.input(0).str();
      for (char& c : s) c = static_cast<char>(upper ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
      a.set(0, RtValue(s));
    });
  }
  // startswith/endswith(self, sub, start=0, end=-1): end=-1 means "to the end" in TorchScript
  for (bool starts : {true, false}) {
    r.add(starts ? "aten::startswith" : "aten::endswith", 2, 4, [starts](const KernelArgs& a) {
      const std::string& s = a.input(0).str();
      const std::string& sub = a.input(1).str();
      int64_t n = static_cast<int64_t>(s.size());
      int64_t start = a.num_in > 2 ? a.toInt(2) : 0, end = a.num_in > 3 ? a.toInt(3) : -1;
      if (start < 0) start = std::max<int64_t>(start + n, 0);
      end = end == -1 ? n : (end < 0 ? std::max<int64_t>(end + n, 0) : std::min(end, n));
      std::string part = start < end ? s.substr(static_cast<size_t>(start), static_cast<size_t>(end - start)) : "";
      bool r = part.size() >= sub.size() &&
               (starts ? part.compare(0, sub.size(), sub) == 0 : part.compare(part.size() - sub.size(), sub.size(), sub) == 0);
      a.set(0, RtValue(r));
    });
  }
  r.add("prim::unchecked_cast", 1, 1, [](const KernelArgs& a) { a.set(0, a.input(0)); });
  // A tensor's dtype (its ScalarType code, what dtype= arguments take) and device (llga runs on the CPU).
  r.add("prim::dtype", 1, 1, [](const KernelArgs& a) {
    a.set(0, RtValue(static_cast<int64_t>(scalarTypeCode(a.tensor(0).dtype()))));
  });
  r.add("prim::device", 1, 1, [](const KernelArgs& a) {
    (void)a.tensor(0);
    a.set(0, RtValue(RtDevice{"cpu"}));
  });
  // A variable TorchScript assigns on every path before reading it: a placeholder.
  r.add("prim::Uninitialized", 0, 0, [](const KernelArgs& a) { a.set(0, RtValue()); });
  r.add("aten::__is__", 2, 2, [](const KernelArgs& a) { a.set(0, RtValue(a.input(0).isNone() && a.input(1).isNone())); });
  r.add("aten::__isnot__", 2, 2, [](const KernelArgs& a) { a.set(0, RtValue(!(a.input(0).isNone() && a.input(1).isNone()))); });
  r.add("aten::__not__", 1, 1, [](const KernelArgs& a) { a.set(0, RtValue(!a.toBool(0))); });
  r.addScalar("aten::__not__", 1, [](const RtValue* const* in) { return RtValue(!in[0]->toBool()); });
  // raise Cls(msg): the message as PyTorch ends its error with it, "builtins.ValueError: msg"
  r.add("prim::RaiseException", 1, 2, [](const KernelArgs& a) {
    std::string cls = a.num_in > 1 && !a.isNone(1) ? a.input(1).str() : "Exception";
    throw std::runtime_error(cls + ": " + a.input(0).str());
  });
}
LLGA_REGISTER_OPS(registerPrimOps);

}  // namespace llga
