// TorchScript's structural ops: lists, tuples, scalars <-> tensors, sizes.
#include "runtime/ops/op_utils.h"

namespace llga {

void registerPrimOps(OpRegistry& r) {
  r.add("prim::ListConstruct", 0, 1 << 20, [](const KernelArgs& a) {
    std::vector<RtValue> items;
    for (size_t i = 0; i < a.num_in; ++i) items.push_back(a.input(i));
    a.set(0, makeList(std::move(items)));
  });
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
  auto toInt = [](const KernelArgs& a) {
    const RtValue& v = a.input(0);
    a.set(0, RtValue(v.isTensor() ? static_cast<int64_t>(v.tensor().item()) : static_cast<int64_t>(v.toDouble())));
  };
  r.add("aten::Int", 1, 1, toInt);
  r.add("aten::Float", 1, 1, [](const KernelArgs& a) {
    const RtValue& v = a.input(0);
    a.set(0, RtValue(v.isTensor() ? v.tensor().item() : v.toDouble()));
  });
  r.add("aten::Bool", 1, 1, [](const KernelArgs& a) {
    const RtValue& v = a.input(0);
    a.set(0, RtValue(v.isTensor() ? v.tensor().item() != 0 : v.toBool()));
  });
  // A 0-dim tensor to a Python number of its own kind.
  r.add("aten::ScalarImplicit", 1, 1, [](const KernelArgs& a) {
    const Tensor& t = a.tensor(0);
    if (isFloatingType(t.dtype())) a.set(0, RtValue(t.item()));
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
    if (v.isTensor()) a.set(0, RtValue(v.tensor().dim() ? v.tensor().size(0) : int64_t{0}));
    else a.set(0, RtValue(static_cast<int64_t>(v.list()->size())));
  });
  r.add("aten::__getitem__", 2, 2, [](const KernelArgs& a) {
    const auto& items = *a.input(0).list();
    int64_t i = a.toInt(1), n = static_cast<int64_t>(items.size());
    if (i < -n || i >= n) throw std::out_of_range("list index " + std::to_string(i) + " out of range");
    a.set(0, items[static_cast<size_t>(i < 0 ? i + n : i)]);
  });
  r.add("aten::append", 2, 2, [](const KernelArgs& a) {
    a.input(0).list()->push_back(a.input(1));
    a.set(0, a.input(0));
  });
  r.add("prim::unchecked_cast", 1, 1, [](const KernelArgs& a) { a.set(0, a.input(0)); });
  r.add("aten::__is__", 2, 2, [](const KernelArgs& a) { a.set(0, RtValue(a.input(0).isNone() && a.input(1).isNone())); });
  r.add("aten::__isnot__", 2, 2, [](const KernelArgs& a) { a.set(0, RtValue(!(a.input(0).isNone() && a.input(1).isNone()))); });
  r.add("aten::__not__", 1, 1, [](const KernelArgs& a) { a.set(0, RtValue(!a.toBool(0))); });
  r.add("prim::RaiseException", 1, 2, [](const KernelArgs& a) {
    throw std::runtime_error("the model raised: " + a.input(0).str());
  });
}

}  // namespace llga
