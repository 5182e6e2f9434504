// Padding: aten::pad in every mode and constant_pad_nd (a constant fill and
// one copy of the kept region), and the reflection_/replication_pad kinds of
// scripted graphs (index_selects, one per padded dim).
#include <algorithm>
#include <string>

#include "backend/dnnl/ops/functional.h"
#include "backend/dnnl/ops/op_utils.h"

namespace llga {
namespace {

// Non-constant padding: output position i of a padded dim reads input position
// j = i - lo mapped into [0, n): mirrored without the edge (reflect), clamped
// (replicate) or wrapped (circular), as PyTorch's pad modes.
Tensor padByIndex(const Tensor& t, const Shape& p, const std::string& mode) {
  if (mode != "reflect" && mode != "replicate" && mode != "circular")
    throw std::invalid_argument("pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got '" + mode + "'");
  if (p.size() % 2 || static_cast<int64_t>(p.size() / 2) > t.dim() - 1 || p.size() > 6)
    throw std::invalid_argument("pad: '" + mode + "' pads 1 to 3 trailing dimensions of a batched tensor, got " +
                                std::to_string(p.size()) + " values for " + t.describe());
  if (mode != "circular")  // as PyTorch: only a batch dim (rank = padded dims + 2) may be empty
    for (int64_t d = t.dim() == static_cast<int64_t>(p.size() / 2) + 2 ? 1 : 0; d < t.dim(); ++d)
      if (t.size(d) == 0)
        throw std::invalid_argument("pad: '" + mode + "' padding expects non-empty dims but the batch, got " + t.describe());
  Tensor out = t;
  for (size_t k = 0; k < p.size() / 2; ++k) {
    const int64_t d = t.dim() - 1 - static_cast<int64_t>(k), lo = p[2 * k], hi = p[2 * k + 1], n = t.size(d);
    // Negative padding crops [c0, c1) first; the positive sides then read the cropped range.
    const int64_t c0 = std::max<int64_t>(-lo, 0), c1 = n - std::max<int64_t>(-hi, 0), m = c1 - c0;
    const int64_t size = n + lo + hi;
    if (mode == "reflect" && (lo >= n || hi >= n))
      throw std::invalid_argument("pad: reflect padding (" + std::to_string(lo) + ", " + std::to_string(hi) +
                                  ") must be smaller than the dimension's size " + std::to_string(n) + " of " + t.describe());
    if (mode == "circular" && (lo > n || hi > n))
      throw std::invalid_argument("pad: circular padding (" + std::to_string(lo) + ", " + std::to_string(hi) +
                                  ") must not exceed the dimension's size " + std::to_string(n) + " of " + t.describe());
    if (n == 0 || size < 0 || m <= 0)
      throw std::invalid_argument("pad: '" + mode + "' padding (" + std::to_string(lo) + ", " + std::to_string(hi) +
                                  ") leaves nothing of a dimension of " + t.describe());
    // The kept range [c0, c0 + m) lands at [i0, i0 + m) in one copy; only the
    // border positions go through index_select (a signal padded by 200 on
    // each side of 16000 samples: 0.2 ms as one index_select of every
    // position, a copy and two small selects now).
    const int64_t i0 = std::max<int64_t>(lo, 0);
    auto border = [&](int64_t from, int64_t count) {  // out's positions [from, from + count) of the padded dim
      Tensor idx = Tensor::empty(ScalarType::Long, {count});
      int64_t* q = idx.data<int64_t>();
      for (int64_t i = from; i < from + count; ++i) {
        int64_t j = i - lo;
        if (mode == "reflect") j = j < 0 ? -j : j >= n ? 2 * (n - 1) - j : j;
        else if (mode == "replicate") j = std::min(std::max<int64_t>(j, 0), n - 1);
        else j = c0 + (((i - i0) % m) + m) % m;
        q[i - from] = j;
      }
      return indexSelectOp(out, d, idx);
    };
    Shape sizes = out.sizes();
    sizes[static_cast<size_t>(d)] = size;
    Tensor next = Tensor::empty(out.dtype(), sizes);
    if (next.numel()) {
      next.narrow(d, i0, m).copyFrom(out.narrow(d, c0, m));
      if (i0 > 0) next.narrow(d, 0, i0).copyFrom(border(0, i0));
      if (i0 + m < size) next.narrow(d, i0 + m, size - i0 - m).copyFrom(border(i0 + m, size - i0 - m));
    }
    out = next;
  }
  return p.empty() ? t.clone() : out;
}

}  // namespace

void registerPadOps(OpRegistry& r) {
  // constant_pad_nd / pad(self, pad, mode="constant", value=None); the other
  // modes (reflect, replicate, circular) are index_selects, one per padded dim.
  auto pad = [](const KernelArgs& a) {
    const Tensor& t = a.tensor(0);
    Shape p = a.intList(1);
    const std::string mode = a.num_in > 2 && !a.isNone(2) ? a.input(2).str() : "constant";
    if (mode != "constant") return a.set(0, padByIndex(t, p, mode));
    double value = a.num_in > 3 && !a.isNone(3) ? a.toDouble(3) : 0.0;
    if (p.size() % 2 || static_cast<int64_t>(p.size() / 2) > t.dim())
      throw std::invalid_argument("pad: the padding list must have an even length <= 2 * rank");
    // PyTorch's order: negative pads first narrow the input, then, if any pad is
    // positive, every padded dim must come out non-empty.
    Shape shape = t.sizes();
    const bool grows = std::any_of(p.begin(), p.end(), [](int64_t v) { return v > 0; });
    for (size_t k = 0; k < p.size() / 2; ++k) {
      int64_t d = t.dim() - 1 - static_cast<int64_t>(k), lo = p[2 * k], hi = p[2 * k + 1];
      const int64_t kept = t.size(d) + std::min<int64_t>(lo, 0) + std::min<int64_t>(hi, 0);
      if (kept < 0)
        throw std::invalid_argument("pad: start (" + std::to_string(std::max<int64_t>(-lo, 0)) + ") + length (" +
                                    std::to_string(kept) + ") exceeds dimension size (" + std::to_string(t.size(d)) + ")");
      shape[d] += lo + hi;
      if (grows && shape[d] <= 0)
        throw std::invalid_argument("pad: the input size " + std::to_string(t.size(d)) + " plus padding " + std::to_string(lo) +
                                    " and " + std::to_string(hi) + " resulted in an output size of " + std::to_string(shape[d]));
    }
    // No padding at all (Swin pads each window partition to a multiple of 7,
    // which at 224 is nothing: 15 copies a call): the input itself where its
    // buffer dies here and nothing else holds it, else one copy.
    if (std::all_of(p.begin(), p.end(), [](int64_t v) { return v == 0; }) && a.reusable(0) && t.isContiguous())
      return a.set(0, t);
    Tensor out = Tensor::empty(t.dtype(), shape);
    if (grows) out.fill(value);  // else the copy below writes every element
    Tensor src = t, dst = out;
    for (size_t k = 0; k < p.size() / 2; ++k) {
      int64_t d = t.dim() - 1 - static_cast<int64_t>(k), lo = p[2 * k], hi = p[2 * k + 1];
      int64_t s0 = std::max<int64_t>(-lo, 0), s1 = t.size(d) - std::max<int64_t>(-hi, 0);
      src = src.narrow(d, s0, std::max<int64_t>(s1 - s0, 0));
      dst = dst.narrow(d, std::max<int64_t>(lo, 0), std::max<int64_t>(s1 - s0, 0));
    }
    if (src.numel()) dst.copyFrom(src);
    a.set(0, out);
  };
  r.add("aten::pad", 2, 4, pad);
  for (const char* mode : {"reflection", "replication"})
    for (int nd = 1; nd <= 3; ++nd)
      r.add(std::string("aten::") + mode + "_pad" + std::to_string(nd) + "d", 2, 2, [mode](const KernelArgs& a) {
        a.set(0, padByIndex(a.tensor(0), a.intList(1), std::string(mode) == "reflection" ? "reflect" : "replicate"));
      });
  r.add("aten::constant_pad_nd", 2, 3, [pad](const KernelArgs& a) {
    const Tensor& t = a.tensor(0);
    double value = a.num_in > 2 ? a.toDouble(2) : 0.0;
    RtValue mode(std::string("constant")), val(value);
    RtValue* ins[] = {a.in[0], a.in[1], &mode, &val};
    pad(KernelArgs{ins, 4, a.out, a.num_out, a.ctx});
    (void)t;
  });
}
LLGA_REGISTER_OPS(registerPadOps);

}  // namespace llga
