// Shape, view and data-movement ops in plain C++ (views share storage).
#include <functional>
#include <algorithm>
#include <cctype>
#include <cstring>

#include "backend/dnnl/ops/op_utils.h"
#include "runtime/threads.h"
#include "runtime/exec_context.h"

namespace llga {
namespace {

std::optional<ScalarType> optDtype(const KernelArgs& a, size_t i) {
  if (a.isNone(i)) return std::nullopt;
  auto t = scalarTypeFromCode(a.toInt(i));
  if (!t) throw std::invalid_argument("unknown dtype code " + std::to_string(a.toInt(i)));
  return t;
}

// permute and transpose: the input as a view in another dimension order,
// whose values do not depend on the input's strides. It takes a strided
// input (dense in any order: a convolution's channels-last output) exactly
// when every reader of the view takes strided tensors, since the view keeps
// the input's memory order: convnext's depthwise convolution -> permute(0,
// 2, 3, 1) -> layer_norm then reads the channels-last map as a row-major
// [N, H, W, C], where the convolution had reordered its output to NCHW and
// the norm read channels HW floats apart.
class DimOrderView final : public Kernel {
 public:
  explicit DimOrderView(KernelFn fn) : fn_(std::move(fn)) {}
  void run(const KernelArgs& a) override { fn_(a); }
  bool acceptsStrided(size_t input) const override { return input == 0 && strided_out_; }
  void allowStridedOutput(size_t output) override { strided_out_ = strided_out_ || output == 0; }

 private:
  KernelFn fn_;
  bool strided_out_ = false;
};

void addDimOrderView(OpRegistry& r, const std::string& kind, size_t arity, KernelFn fn) {
  r.add(OpDef{kind, arity, arity, [fn](const Node&) { return std::make_unique<DimOrderView>(fn); }});
}

// Dropout is the identity in eval mode, and with p == 0 in any mode.
void checkEvalDropout(const KernelArgs& a) {
  const double p = a.num_in > 1 ? a.toDouble(1) : 0.5;
  if (!(p >= 0.0 && p <= 1.0))  // PyTorch checks in eval mode too
    throw std::invalid_argument("dropout probability has to be between 0 and 1, but got " + std::to_string(p));
  if (a.num_in > 2 && a.toBool(2) && p != 0.0)
    throw std::invalid_argument("dropout with p=" + std::to_string(p) +
                                " in training mode; call model.eval() before tracing");
}


// Memory formats as TorchScript numbers them: 0 contiguous, 1 preserve,
// 2 channels_last (rank 4), 3 channels_last_3d (rank 5).
bool channelsLastFormat(int64_t format, int64_t rank) { return (format == 2 && rank == 4) || (format == 3 && rank == 5); }

// Dense strides of `sizes` in `format`'s order: channels innermost, then the
// spatial dims from the last, batch outermost; row-major otherwise.
Shape formatStrides(const Shape& sizes, int64_t format) {
  if (!channelsLastFormat(format, static_cast<int64_t>(sizes.size()))) return Tensor::contiguousStrides(sizes);
  Shape strides(sizes.size());
  int64_t step = 1;
  strides[1] = step, step *= std::max<int64_t>(sizes[1], 1);
  for (size_t d = sizes.size() - 1; d >= 2; --d) strides[d] = step, step *= std::max<int64_t>(sizes[d], 1);
  strides[0] = step;
  return strides;
}

// A fresh copy of x, dense in `format`'s order.
Tensor copyInFormat(const Tensor& x, int64_t format) {
  if (!channelsLastFormat(format, x.dim())) return x.clone();
  Tensor out = Tensor::fromStorage(Storage::allocate(static_cast<size_t>(std::max<int64_t>(x.numel(), 1)) * scalarTypeSize(x.dtype())),
                                   x.dtype(), x.sizes(), formatStrides(x.sizes(), format), 0);
  out.copyFrom(x);
  return out;
}

}  // namespace

std::vector<Tensor> tensorList(const RtValue& v) {
  std::vector<Tensor> out;
  for (const RtValue& x : *v.list()) out.push_back(x.tensor());
  return out;
}

// split.str(s, separator=None, max=-1): str.split as TorchScript has it (None: runs of white space).
static void splitString(const KernelArgs& a) {
  const std::string& s = a.input(0).str();
  const bool by_space = a.num_in < 2 || a.isNone(1);
  const std::string sep = by_space ? std::string() : a.input(1).str();
  int64_t max = a.num_in > 2 ? a.toInt(2) : -1;
  if (!by_space && sep.empty()) throw std::invalid_argument("empty separator");
  auto out = std::make_shared<std::vector<RtValue>>();
  size_t at = 0;
  auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  if (by_space) {  // TorchScript ignores `max` here (Python does not)
    while (true) {
      while (at < s.size() && space(s[at])) ++at;
      if (at == s.size()) break;
      size_t end = at;
      while (end < s.size() && !space(s[end])) ++end;
      out->emplace_back(s.substr(at, end - at));
      at = end;
    }
  } else {
    for (size_t hit; max != 0 && (hit = s.find(sep, at)) != std::string::npos; --max) {
      out->emplace_back(s.substr(at, hit - at));
      at = hit + sep.size();
    }
    out->emplace_back(s.substr(at));
  }
  a.set(0, RtValue(out));
}

// split(x, size | sizes, dim) and split_with_sizes(x, sizes, dim): views.
void split(const KernelArgs& a) {
  if (std::holds_alternative<std::string>(a.input(0).v)) return splitString(a);
  const Tensor& t = a.tensor(0);
  if (t.dim() == 0) throw std::invalid_argument("split expects at least a 1-dimensional tensor");
  int64_t dim = t.wrapDim(a.num_in > 2 ? a.toInt(2) : 0), size = t.size(dim);
  std::vector<RtValue> parts;
  if (a.input(1).isList()) {
    int64_t at = 0;
    for (int64_t len : a.intList(1)) {
      if (len < 0) throw std::invalid_argument("split sizes must not be negative");
      if (at + len > size) throw std::invalid_argument("split sizes add up to more than the dimension's size");
      parts.emplace_back(t.narrow(dim, at, len));
      at += len;
    }
    if (at != size) throw std::invalid_argument("split sizes do not add up to the dimension's size");
  } else {
    int64_t step = a.toInt(1);
    if (step <= 0) throw std::invalid_argument("split expects a positive split size");
    // as PyTorch: at least one piece (an empty dim gives one empty piece)
    for (int64_t s = 0; s < size || parts.empty(); s += step) parts.emplace_back(t.narrow(dim, s, std::min(step, size - s)));
  }
  a.set(0, makeList(std::move(parts)));
}

// tensor_split(x, sections | indices, dim): views; n sections of which the
// first size % n are one longer, or the pieces between the indices (clamped).
void tensorSplit(const KernelArgs& a) {
  const Tensor& t = a.tensor(0);
  int64_t dim = t.wrapDim(a.num_in > 2 ? a.toInt(2) : 0), size = t.size(dim);
  std::vector<int64_t> bounds{0};
  if (a.input(1).isList()) {
    for (int64_t i : a.intList(1)) bounds.push_back(std::clamp<int64_t>(i < 0 ? i + size : i, 0, size));
  } else {
    int64_t n = a.toInt(1);
    if (n <= 0) throw std::invalid_argument("tensor_split expects a positive number of sections, got " + std::to_string(n));
    for (int64_t i = 0, at = 0; i + 1 < n; ++i) bounds.push_back(at += size / n + (i < size % n ? 1 : 0));
  }
  bounds.push_back(size);
  std::vector<RtValue> parts;
  for (size_t i = 0; i + 1 < bounds.size(); ++i) {
    int64_t start = std::min(bounds[i], size), end = std::max(start, bounds[i + 1]);
    parts.emplace_back(t.narrow(dim, start, end - start));
  }
  a.set(0, makeList(std::move(parts)));
}

// repeat(x, repeats): x tiled; one strided copy of an expanded view.
Tensor repeatTensor(const Tensor& x, const Shape& reps) {
  if (reps.size() < static_cast<size_t>(x.dim()))
    throw std::invalid_argument("repeat: the number of repeats (" + std::to_string(reps.size()) +
                                ") is smaller than the tensor's rank (" + std::to_string(x.dim()) + ")");
  Shape padded(reps.size() - static_cast<size_t>(x.dim()), 1);
  padded.insert(padded.end(), x.sizes().begin(), x.sizes().end());
  Shape split, expanded, out;
  for (size_t i = 0; i < reps.size(); ++i) {
    if (reps[i] < 0) throw std::invalid_argument("repeat: repeats must not be negative");
    split.insert(split.end(), {1, padded[i]});
    expanded.insert(expanded.end(), {reps[i], padded[i]});
    out.push_back(reps[i] * padded[i]);
  }
  Tensor t = x.reshape(split).expand(expanded);
  Tensor r = Tensor::empty(x.dtype(), expanded);
  r.copyFrom(t);
  return r.view(out);
}

// repeat_interleave(x, repeats: int | Tensor, dim=None, output_size=None): each
// element (slice along dim) `repeats` (or repeats[i]) times in a row; and
// repeat_interleave(repeats: Tensor, output_size=None): the indices so repeated.
// Index i repeats[i] times in a row, as a Long tensor.
Tensor repeatedIndices(const Tensor& repeats) {
  const Tensor r = repeats.to(ScalarType::Long).contiguous();
  std::vector<int64_t> out;
  for (int64_t i = 0; i < r.numel(); ++i) {
    if (r.data<int64_t>()[i] < 0) throw std::invalid_argument("repeat_interleave: repeats must not be negative");
    out.insert(out.end(), static_cast<size_t>(r.data<int64_t>()[i]), i);
  }
  Tensor t = Tensor::empty(ScalarType::Long, {static_cast<int64_t>(out.size())});
  std::copy(out.begin(), out.end(), t.data<int64_t>());
  return t;
}

void repeatInterleave(const KernelArgs& a) {
  if (a.num_in <= 2) {  // repeat_interleave(repeats: Tensor, output_size=None)
    if (a.tensor(0).dim() > 1) throw std::invalid_argument("repeat_interleave: repeats must be 0-D or 1-D, got " + a.tensor(0).describe());
    return a.set(0, repeatedIndices(a.tensor(0)));
  }
  Tensor x = a.tensor(0);
  if (a.isNone(2)) x = x.reshape({x.numel()});
  const int64_t dim = a.isNone(2) ? 0 : x.wrapDim(a.toInt(2));
  if (a.input(1).isTensor() && a.tensor(1).numel() != 1) {  // one count per slice along dim
    const Tensor& r = a.tensor(1);
    if (r.dim() != 1 || r.numel() != x.size(dim))
      throw std::invalid_argument("repeat_interleave: repeats " + r.describe() + " must have one count for each of the " +
                                  std::to_string(x.size(dim)) + " slices along dim " + std::to_string(dim));
    return a.set(0, indexSelectOp(x, dim, repeatedIndices(r)));
  }
  const int64_t reps = a.input(1).isTensor() ? static_cast<int64_t>(a.tensor(1).item()) : a.toInt(1);
  if (reps < 0) throw std::invalid_argument("repeat_interleave: repeats must not be negative");
  Shape expanded = x.sizes(), out = x.sizes();
  expanded.insert(expanded.begin() + dim + 1, reps);
  out[dim] *= reps;
  Tensor r = Tensor::empty(x.dtype(), expanded);
  r.copyFrom(x.unsqueeze(dim + 1).expand(expanded));
  a.set(0, r.view(out));
}

// tril/triu(x, diagonal): the last two dimensions' lower/upper triangle, the
// rest zeroed; rows in parallel, each a copy and a fill of one run.
Tensor triangle(const Tensor& x, int64_t diagonal, bool lower) {
  if (x.dim() < 2) throw std::invalid_argument(std::string(lower ? "tril" : "triu") + " needs at least 2 dimensions, got " + x.describe());
  Tensor out = x.contiguous().clone();
  const int64_t rows = x.size(-2), cols = x.size(-1), mats = rows * cols == 0 ? 0 : out.numel() / (rows * cols);
  const size_t item = scalarTypeSize(x.dtype());
  auto* base = static_cast<char*>(out.data());
  parallelFor(mats * rows, out.numel() >= kParallelGrain, [&](int64_t m) {
    const int64_t i = m % rows;
    char* row = base + static_cast<size_t>(m * cols) * item;
    // lower keeps columns j <= i + diagonal; upper keeps j >= i + diagonal.
    int64_t edge = std::clamp<int64_t>(i + diagonal + (lower ? 1 : 0), 0, cols);
    if (lower) std::memset(row + edge * item, 0, static_cast<size_t>(cols - edge) * item);
    else std::memset(row, 0, static_cast<size_t>(edge) * item);
  });
  return out;
}

// meshgrid(tensors, indexing="ij"): each 1-D input as a view expanded over
// the grid; "xy" swaps the first two grid dimensions.
void meshgrid(const KernelArgs& a) {
  std::vector<Tensor> ts = tensorList(a.input(0));
  std::string indexing = a.num_in > 1 && !a.isNone(1) ? a.input(1).str() : "ij";
  if (indexing != "ij" && indexing != "xy")
    throw std::invalid_argument("meshgrid: indexing must be 'ij' or 'xy', got '" + indexing + "'");
  Shape grid;
  for (const Tensor& t : ts) {
    if (t.dim() > 1) throw std::invalid_argument("meshgrid expects 0-D or 1-D tensors, got " + t.describe());
    grid.push_back(t.numel());
  }
  const bool swap = indexing == "xy" && ts.size() >= 2;
  if (swap) std::swap(grid[0], grid[1]);
  std::vector<RtValue> out;
  for (size_t i = 0; i < ts.size(); ++i) {
    size_t at = swap && i < 2 ? 1 - i : i;
    Shape shape(ts.size(), 1);
    shape[at] = grid[at];
    out.emplace_back(ts[i].reshape(shape).expand(grid));
  }
  a.set(0, makeList(std::move(out)));
}

void registerShapeOps(OpRegistry& r) {
  r.add("aten::view", 2, 2, [](const KernelArgs& a) { a.set(0, a.tensor(0).view(a.intList(1))); });
  r.add("aten::reshape", 2, 2, [](const KernelArgs& a) { a.set(0, a.tensor(0).reshape(a.intList(1))); });
  r.add("aten::flatten", 1, 3, [](const KernelArgs& a) {
    a.set(0, a.tensor(0).flatten(a.num_in > 1 ? a.toInt(1) : 0, a.num_in > 2 ? a.toInt(2) : -1));
  });
  addDimOrderView(r, "aten::transpose", 3, [](const KernelArgs& a) { a.set(0, a.tensor(0).transpose(a.toInt(1), a.toInt(2))); });
  r.add("aten::t", 1, 1, [](const KernelArgs& a) {
    const Tensor& t = a.tensor(0);
    if (t.dim() > 2) throw std::invalid_argument("t() expects a tensor with <= 2 dims");
    a.set(0, t.dim() < 2 ? t : t.transpose(0, 1));
  });
  addDimOrderView(r, "aten::permute", 2, [](const KernelArgs& a) { a.set(0, a.tensor(0).permute(a.intList(1))); });
  // contiguous(x, memory_format): x itself when already dense in that order,
  // else a copy in it, as PyTorch (channels_last: 2, channels_last_3d: 3), so
  // an in-place write after it reaches x exactly when PyTorch's would (the
  // contiguous-as-traced pass makes it a clone where PyTorch's copied but
  // llga's x is laid out differently).
  r.add("aten::contiguous", 1, 2, [](const KernelArgs& a) {
    const Tensor& x = a.tensor(0);
    const int64_t format = a.num_in > 1 && !a.isNone(1) ? a.toInt(1) : 0;
    if (format == 1) throw std::invalid_argument("contiguous: preserve memory format is unsupported by the contiguous operator");
    if (!channelsLastFormat(format, x.dim())) return a.set(0, x.contiguous());
    if (x.isBlocked()) throw std::invalid_argument("contiguous: a blocked input");
    const Shape strides = formatStrides(x.sizes(), format);
    bool dense = x.offset() >= 0;
    for (int64_t d = 0; d < x.dim(); ++d) dense = dense && (x.size(d) == 1 || x.stride(d) == strides[static_cast<size_t>(d)]);
    a.set(0, dense ? x : copyInFormat(x, format));
  });
  r.add("aten::unsqueeze", 2, 2, [](const KernelArgs& a) { a.set(0, a.tensor(0).unsqueeze(a.toInt(1))); });
  r.add("aten::squeeze", 1, 2, [](const KernelArgs& a) {
    a.set(0, a.num_in > 1 ? a.tensor(0).squeeze(a.toInt(1)) : a.tensor(0).squeeze());
  });
  r.add("aten::select", 3, 3, [](const KernelArgs& a) { a.set(0, a.tensor(0).select(a.toInt(1), a.toInt(2))); });
  // slice(self, dim=0, start=None, end=None, step=1)
  r.add("aten::slice", 1, 5, [](const KernelArgs& a) {
    const bool str = std::holds_alternative<std::string>(a.input(0).v);
    if (a.input(0).isList() || str) {  // slice.t(list, ...) / slice.str(s, ...): Python's l[start:end:step]
      const int64_t n = static_cast<int64_t>(str ? a.input(0).str().size() : a.input(0).list()->size());
      const int64_t step = a.num_in > 3 ? a.toInt(3) : 1;
      if (step == 0) throw std::invalid_argument("slice step cannot be zero");
      std::vector<size_t> picked;
      if (step > 0) {
        auto bound = [n](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + n : v, 0, n); };
        const int64_t start = a.isNone(1) ? 0 : bound(a.toInt(1)), end = a.isNone(2) ? n : bound(a.toInt(2));
        for (int64_t i = start; i < end; i += step) picked.push_back(static_cast<size_t>(i));
      } else {  // l[::-1]: from the end (or start) down to, not including, end
        auto bound = [n](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + n : v, -1, n - 1); };
        const int64_t start = a.isNone(1) ? n - 1 : bound(a.toInt(1)), end = a.isNone(2) ? -1 : bound(a.toInt(2));
        for (int64_t i = start; i > end; i += step) picked.push_back(static_cast<size_t>(i));
      }
      if (str) {
        std::string out;
        for (size_t i : picked) out += a.input(0).str()[i];
        return a.set(0, RtValue(out));
      }
      auto out = std::make_shared<std::vector<RtValue>>();
      for (size_t i : picked) out->push_back((*a.input(0).list())[i]);
      a.set(0, RtValue(out));
      return;
    }
    const Tensor& t = a.tensor(0);
    int64_t dim = a.num_in > 1 ? a.toInt(1) : 0;
    int64_t start = a.isNone(2) ? 0 : a.toInt(2);
    int64_t end = a.isNone(3) ? INT64_MAX : a.toInt(3);
    int64_t step = a.num_in > 4 ? a.toInt(4) : 1;
    a.set(0, t.slice(dim, start, end, step));
  });
  r.add("aten::narrow", 4, 4, [](const KernelArgs& a) {
    a.set(0, a.tensor(0).narrow(a.toInt(1), a.toInt(2), a.toInt(3)));
  });
  // as_strided(self, size, stride, storage_offset=None): a view on the same storage, checked against it
  r.add("aten::as_strided", 3, 4, [](const KernelArgs& a) {
    const Tensor& t = a.tensor(0);
    Shape sizes = a.intList(1), strides = a.intList(2);
    int64_t offset = a.isNone(3) ? t.offset() : a.toInt(3);
    if (sizes.size() != strides.size()) throw std::invalid_argument("as_strided: size and stride differ in length");
    int64_t last = offset;
    for (size_t d = 0; d < sizes.size(); ++d) {
      if (sizes[d] < 0 || strides[d] < 0) throw std::invalid_argument("as_strided: negative size or stride");
      if (sizes[d] == 0) last = -1;
      else if (last >= 0) last += (sizes[d] - 1) * strides[d];
    }
    if (offset < 0 || (last >= 0 && (last + 1) * static_cast<int64_t>(t.itemsize()) > static_cast<int64_t>(t.storage()->nbytes)))
      throw std::out_of_range("as_strided: the view reaches outside the tensor's storage");
    a.set(0, t.asStrided(sizes, strides, offset));
  });
  r.add("aten::expand", 2, 3, [](const KernelArgs& a) { a.set(0, a.tensor(0).expand(a.intList(1))); });
  r.add("aten::expand_as", 2, 2, [](const KernelArgs& a) { a.set(0, a.tensor(0).expand(a.tensor(1).sizes())); });
  r.add("aten::view_as", 2, 2, [](const KernelArgs& a) { a.set(0, a.tensor(0).view(a.tensor(1).sizes())); });
  r.add("aten::reshape_as", 2, 2, [](const KernelArgs& a) { a.set(0, a.tensor(0).reshape(a.tensor(1).sizes())); });
  // chunk(self, chunks, dim=0): PyTorch's split into ceil(size/chunks) pieces (unsafe_chunk alike)
  auto chunk = [](const KernelArgs& a) {
    const Tensor& t = a.tensor(0);
    if (t.dim() == 0) throw std::invalid_argument("chunk expects at least a 1-dimensional tensor");
    int64_t chunks = a.toInt(1), dim = t.wrapDim(a.num_in > 2 ? a.toInt(2) : 0);
    if (chunks <= 0) throw std::invalid_argument("chunk expects a positive number of chunks");
    int64_t size = t.size(dim), step = (size + chunks - 1) / chunks;
    std::vector<RtValue> parts;
    if (size == 0)  // as PyTorch: `chunks` empty pieces
      for (int64_t i = 0; i < chunks; ++i) parts.emplace_back(t);
    for (int64_t s = 0; s < size; s += step) parts.emplace_back(t.narrow(dim, s, std::min(step, size - s)));
    a.set(0, makeList(std::move(parts)));
  };
  r.add("aten::chunk", 2, 3, chunk);
  r.add("aten::unsafe_chunk", 2, 3, chunk);
  r.add("aten::split", 2, 3, split);
  r.add("aten::split_with_sizes", 2, 3, split);
  r.add("aten::unsafe_split", 2, 3, split);  // the same views (PyTorch only skips autograd's checks)
  r.add("aten::unsafe_split_with_sizes", 2, 3, split);
  r.add("aten::tensor_split", 2, 3, tensorSplit);
  r.add("aten::repeat", 2, 2, [](const KernelArgs& a) { a.set(0, repeatTensor(a.tensor(0), a.intList(1))); });
  r.add("aten::repeat_interleave", 1, 4, repeatInterleave);
  r.add("aten::tril", 1, 2, [](const KernelArgs& a) { a.set(0, triangle(a.tensor(0), a.num_in > 1 ? a.toInt(1) : 0, true)); });
  r.add("aten::triu", 1, 2, [](const KernelArgs& a) { a.set(0, triangle(a.tensor(0), a.num_in > 1 ? a.toInt(1) : 0, false)); });
  r.add("aten::meshgrid", 1, 2, meshgrid);
  r.add("aten::unbind", 1, 2, [](const KernelArgs& a) {
    const Tensor& t = a.tensor(0);
    int64_t dim = a.num_in > 1 ? a.toInt(1) : 0;
    std::vector<RtValue> parts;
    for (int64_t i = 0; i < t.size(dim); ++i) parts.emplace_back(t.select(dim, i));
    a.set(0, makeList(std::move(parts)));
  });
  // clone(x, memory_format=None): a copy, in x's own dense order by default
  // (preserve_format) or in the order asked.
  r.add("aten::clone", 1, 2, [](const KernelArgs& a) {
    const Tensor& x = a.tensor(0);
    const int64_t format = a.num_in > 1 && !a.isNone(1) ? a.toInt(1) : 1;
    if (format < 0 || format > 3) throw std::invalid_argument("clone: unknown memory format " + std::to_string(format));
    if (format != 1) return a.set(0, copyInFormat(x, format));
    Tensor out = Tensor::emptyLike(x.dtype(), x.sizes(), x);  // row-major unless x is dense in another order
    out.copyFrom(x);
    a.set(0, out);
  });
  r.add("aten::detach", 1, 1, [](const KernelArgs& a) { a.set(0, a.tensor(0)); });
  // to(self, dtype, non_blocking, copy, memory_format) or to(self, device, dtype, ...)
  // or to(self, dtype?, layout?, device?, pin_memory?, non_blocking, copy, memory_format)
  r.add("aten::to", 2, 8, [](const KernelArgs& a) {
    const Tensor& t = a.tensor(0);
    if (a.num_in == 8) {
      std::optional<ScalarType> dt = optDtype(a, 1);
      Tensor out = dt ? t.to(*dt) : t;
      if (a.toBool(6) && out.sharesStorageWith(t)) out = out.clone();
      return a.set(0, out);
    }
    size_t dt_at = a.input(1).isInt() ? 1 : 2;
    if (a.input(1).isTensor()) {
      a.set(0, t.to(a.tensor(1).dtype()));
      return;
    }
    std::optional<ScalarType> dt = dt_at < a.num_in ? optDtype(a, dt_at) : std::nullopt;
    bool copy = dt_at + 2 < a.num_in && a.input(dt_at + 2).isBool() && a.toBool(dt_at + 2);
    Tensor out = dt ? t.to(*dt) : t;
    if (copy && out.sharesStorageWith(t)) out = out.clone();
    a.set(0, out);
  });
  r.add("aten::type_as", 2, 2, [](const KernelArgs& a) { a.set(0, a.tensor(0).to(a.tensor(1).dtype())); });
  for (const char* name : {"aten::dropout", "aten::feature_dropout", "aten::alpha_dropout", "aten::feature_alpha_dropout"}) {
    r.add(name, 1, 3, [](const KernelArgs& a) { checkEvalDropout(a); a.set(0, a.tensor(0)); });
    r.add(std::string(name) + "_", 1, 3, [](const KernelArgs& a) { checkEvalDropout(a); a.set(0, a.tensor(0)); });
  }
  // Factories: zeros/ones(size, dtype, layout, device, pin_memory)
  for (auto [name, value] : {std::pair{"aten::zeros", 0.0}, {"aten::ones", 1.0}}) {
    double v = value;
    r.add(name, 1, 5, [v](const KernelArgs& a) {
      Tensor t = Tensor::empty(optDtype(a, 1).value_or(ScalarType::Float), a.intList(0));
      t.fill(v);
      a.set(0, t);
    });
  }
  for (auto [name, value] : {std::pair{"aten::zeros_like", 0.0}, {"aten::ones_like", 1.0}, {"aten::empty_like", 0.0}}) {
    double v = value;
    r.add(name, 1, 6, [v](const KernelArgs& a) {
      const Tensor& src = a.tensor(0);
      Tensor t = Tensor::empty(optDtype(a, 1).value_or(src.dtype()), src.sizes());
      t.fill(v);
      a.set(0, t);
    });
  }
  // new_zeros(self, size, dtype, layout, device, pin_memory)
  r.add("aten::new_zeros", 2, 6, [](const KernelArgs& a) {
    a.set(0, Tensor::zeros(optDtype(a, 2).value_or(a.tensor(0).dtype()), a.intList(1)));
  });
  // new_full(self, size, fill, dtype?, ...) and new_empty(self, size, dtype?, ...) (zero-filled)
  r.add("aten::new_full", 3, 7, [](const KernelArgs& a) {
    Tensor t = Tensor::empty(optDtype(a, 3).value_or(a.tensor(0).dtype()), a.intList(1));
    t.fill(a.input(2).toDouble());
    a.set(0, t);
  });
  r.add("aten::new_empty", 2, 6, [](const KernelArgs& a) {
    a.set(0, Tensor::zeros(optDtype(a, 2).value_or(a.tensor(0).dtype()), a.intList(1)));
  });
  // full_like(x, fill, dtype?, layout?, device?, pin_memory?, memory_format?)
  r.add("aten::full_like", 2, 7, [](const KernelArgs& a) {
    Tensor t = Tensor::empty(optDtype(a, 2).value_or(a.tensor(0).dtype()), a.tensor(0).sizes());
    t.fill(a.input(1).toDouble());
    a.set(0, t);
  });
  // empty(size, dtype, layout, device, pin, memory_format): zero-filled, so no run reads old bytes.
  r.add("aten::empty", 1, 6, [](const KernelArgs& a) {
    a.set(0, Tensor::zeros(optDtype(a, 1).value_or(ScalarType::Float), a.intList(0)));
  });
  r.add("aten::_shape_as_tensor", 1, 1, [](const KernelArgs& a) {
    const Tensor& x = a.tensor(0);
    Tensor t = Tensor::empty(ScalarType::Long, {x.dim()});
    for (int64_t d = 0; d < x.dim(); ++d) t.data<int64_t>()[d] = x.size(d);
    a.set(0, t);
  });
  // tensor(data, dtype?, device?, requires_grad) / as_tensor(data, dtype?, device?):
  // a number or a nested list of them; float if any is a float, else int64 (bool if all are bools).
  auto fromData = [](const KernelArgs& a) {
    const RtValue& data = a.input(0);
    if (data.isTensor()) return a.set(0, data.tensor().to(optDtype(a, 1).value_or(data.tensor().dtype())).clone());
    Shape shape;
    std::vector<double> values;
    bool any_float = false, all_bool = true;
    std::function<void(const RtValue&, size_t)> walk = [&](const RtValue& v, size_t depth) {
      if (v.isList()) {
        const RtList& l = v.list();
        if (depth == shape.size()) shape.push_back(static_cast<int64_t>(l->size()));
        else if (shape[depth] != static_cast<int64_t>(l->size()))
          throw std::invalid_argument("tensor(): nested lists of different lengths at depth " + std::to_string(depth));
        for (const RtValue& x : *l) walk(x, depth + 1);
        return;
      }
      if (depth != shape.size()) throw std::invalid_argument("tensor(): a number where a list was expected");
      if (v.isTensor()) throw std::invalid_argument("tensor(): a list of tensors; use torch.stack");
      any_float |= v.isDouble();
      all_bool &= v.isBool();
      values.push_back(v.toDouble());
    };
    walk(data, 0);
    const ScalarType def = any_float ? ScalarType::Float : all_bool && !values.empty() ? ScalarType::Bool : ScalarType::Long;
    Tensor d = Tensor::empty(ScalarType::Double, shape);
    std::copy(values.begin(), values.end(), d.data<double>());
    a.set(0, d.to(optDtype(a, 1).value_or(def)));
  };
  // TorchScript's tensor(int[]) warns when the list is empty and no dtype is given (Python would make Float).
  for (auto [kind, arity] : {std::pair{"aten::tensor", size_t{4}}, {"aten::as_tensor", size_t{3}}})
    r.add(OpDef{kind, 1, arity, [fromData](const Node& n) {
                  const TypePtr& t = n.input(0)->type();
                  const bool int_list = t->kind() == TypeKind::List && t->contained()[0]->isSimple("int");
                  return std::make_unique<FnKernel>([fromData, int_list](const KernelArgs& a) {
                    if (int_list && a.input(0).list()->empty() && !optDtype(a, 1))
                      emitWarning("Creating a tensor from an empty intlist will create a tensor of default floating point "
                                  "type  (currently Float) in python but a tensor of type int in torchscript.\nPass in a "
                                  "dtype argument to ensure consistent behavior");
                    fromData(a);
                  });
                }});
  // scalar_tensor(s, dtype?, layout?, device?, pin?)
  r.add("aten::scalar_tensor", 1, 5, [](const KernelArgs& a) {
    a.set(0, Tensor::scalar(optDtype(a, 1).value_or(ScalarType::Float), a.toDouble(0)));
  });
  // eye(n, dtype, layout, device, pin) / eye(n, m, dtype, layout, device, pin)
  r.add("aten::eye", 5, 6, [](const KernelArgs& a) {
    const int64_t n = a.toInt(0), m = a.num_in == 6 ? a.toInt(1) : n;
    if (n < 0 || m < 0) throw std::invalid_argument("eye: sizes must not be negative, got " + std::to_string(n) + ", " + std::to_string(m));
    Tensor t = Tensor::zeros(optDtype(a, a.num_in == 6 ? 2 : 1).value_or(ScalarType::Float), {n, m});
    for (int64_t i = 0; i < std::min(n, m); ++i) t.select(0, i).select(0, i).fill(1.0);
    a.set(0, t);
  });
  // linspace(start, end, steps, dtype, layout, device, pin): evenly spaced,
  // from both ends towards the middle as PyTorch computes it.
  r.add("aten::linspace", 3, 7, [](const KernelArgs& a) {
    const double start = a.toDouble(0), end = a.toDouble(1);
    if (a.isNone(2)) throw std::invalid_argument("linspace needs steps");
    const int64_t steps = a.toInt(2);
    if (steps < 0) throw std::invalid_argument("linspace: steps must not be negative, got " + std::to_string(steps));
    const ScalarType dt = optDtype(a, 3).value_or(ScalarType::Float);
    Tensor d = Tensor::empty(ScalarType::Double, {steps});
    const double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
    for (int64_t i = 0; i < steps; ++i)
      d.data<double>()[i] = steps == 1 ? start : i < steps / 2 ? start + step * static_cast<double>(i) : end - step * static_cast<double>(steps - 1 - i);
    a.set(0, d.to(dt));
  });
  r.add("aten::full", 2, 6, [](const KernelArgs& a) {
    const RtValue& fill = a.input(1);
    ScalarType def = fill.isDouble() ? ScalarType::Float : fill.isBool() ? ScalarType::Bool : ScalarType::Long;
    Tensor t = Tensor::empty(optDtype(a, 2).value_or(def), a.intList(0));
    t.fill(fill.toDouble());
    a.set(0, t);
  });
  // arange(end, dtype, layout, device, pin), arange(start, end, dtype, ...),
  // arange(start, end, step, dtype, ...): the scalars are all but the last four inputs.
  r.add("aten::arange", 5, 7, [](const KernelArgs& a) {
    size_t nums = a.num_in - 4;
    double start = 0, end, step = 1;
    bool any_float = false;
    for (size_t i = 0; i < nums; ++i) any_float |= a.input(i).isDouble();
    if (nums == 1) end = a.toDouble(0);
    else { start = a.toDouble(0); end = a.toDouble(1); if (nums == 3) step = a.toDouble(2); }
    ScalarType dt = optDtype(a, nums).value_or(any_float ? ScalarType::Float : ScalarType::Long);
    if (step == 0) throw std::invalid_argument("arange: step must be nonzero");
    if ((step > 0 && start > end) || (step < 0 && start < end))
      throw std::invalid_argument("arange: upper bound and larger bound inconsistent with step sign");
    int64_t n = std::max<int64_t>(static_cast<int64_t>(std::ceil((end - start) / step)), 0);
    Tensor t = Tensor::empty(dt, {n});
    dispatchDtype(dt, [&](auto z) {
      using T = decltype(z);
      T* p = t.data<T>();
      for (int64_t k = 0; k < n; ++k) p[k] = fromDouble<T>(start + static_cast<double>(k) * step);
    });
    a.set(0, t);
  });
  // hann_window / hamming_window(N, periodic=True, alpha=0.54, beta=0.46) / blackman_window /
  // bartlett_window (N, [periodic], [alpha, beta], dtype, layout, device, pin): a periodic window of
  // N is the symmetric one of N + 1 without its last point
  for (const char* name : {"aten::hann_window", "aten::hamming_window", "aten::blackman_window", "aten::bartlett_window"}) {
    const std::string kind = name;
    r.add(name, 5, 9, [kind](const KernelArgs& a) {
      const int64_t n = a.toInt(0);
      if (n < 0) throw std::invalid_argument(kind.substr(6) + " requires non-negative window_length, got " + std::to_string(n));
      const size_t params = a.num_in - 5;  // periodic, alpha, beta before the four factory arguments
      const bool periodic = params < 1 || a.toBool(1);
      const double alpha = params > 1 ? a.toDouble(2) : 0.54, beta = params > 2 ? a.toDouble(3) : 0.46;
      const ScalarType dt = optDtype(a, a.num_in - 4).value_or(ScalarType::Float);
      if (!isFloatingType(dt)) throw std::invalid_argument(kind.substr(6) + " expects floating point dtypes");
      Tensor t = Tensor::empty(dt, {n});
      const double span = static_cast<double>(periodic ? n : n - 1);  // the symmetric window's last index
      dispatchDtype(dt, [&](auto z) {
        using T = decltype(z);
        T* p = t.data<T>();
        for (int64_t k = 0; k < n; ++k) {
          const double x = n == 1 ? 0.0 : 2 * M_PI * static_cast<double>(k) / span;
          double w;
          if (n == 1) w = 1.0;
          else if (kind == "aten::hann_window") w = 0.5 - 0.5 * std::cos(x);
          else if (kind == "aten::hamming_window") w = alpha - beta * std::cos(x);
          else if (kind == "aten::blackman_window") w = 0.42 - 0.5 * std::cos(x) + 0.08 * std::cos(2 * x);
          else w = 1.0 - std::abs(2.0 * static_cast<double>(k) / span - 1.0);
          p[k] = fromDouble<T>(w);
        }
      });
      a.set(0, t);
    });
  }
  r.add("aten::fill_", 2, 2, [](const KernelArgs& a) {
    Tensor t = a.tensor(0);
    t.fill(a.input(1).isTensor() ? a.tensor(1).item() : a.toDouble(1));
    a.set(0, t);
  });
  // copy_(self, src, non_blocking): src broadcast to self's shape and converted to its dtype,
  // written into self (a slice of a padded batch, as torchvision's transform fills it)
  r.add("aten::copy_", 2, 3, [](const KernelArgs& a) {
    Tensor t = a.tensor(0);
    Tensor src = a.tensor(1);
    if (t.mayOverlapItself())
      throw std::invalid_argument("copy_: more than one element of the written-to tensor " + t.describe() +
                                  " refers to a single memory location");
    if (t.partiallyOverlaps(src)) throw std::invalid_argument(kPartialOverlap);
    if (src.sharesStorageWith(t)) src = src.clone();  // other sharing (a strided view): read before writing
    t.copyFrom(src.expand(t.sizes()));
    a.set(0, t);
  });
  r.add("aten::zero_", 1, 1, [](const KernelArgs& a) {
    Tensor t = a.tensor(0);
    t.fill(0);
    a.set(0, t);
  });
  // embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse)
  r.add("aten::embedding", 2, 5, [](const KernelArgs& a) {
    Tensor w = a.tensor(0);
    Tensor idx = a.tensor(1).to(ScalarType::Long).contiguous();
    if (w.dim() != 2) throw std::invalid_argument("embedding weight must be 2-D");
    Shape shape = idx.sizes();
    shape.push_back(w.size(1));
    Tensor out = Tensor::empty(w.dtype(), shape);
    const int64_t* ip = idx.data<int64_t>();
    int64_t rows = w.size(0), n = idx.numel();
    for (int64_t k = 0; k < n; ++k)
      if (ip[k] < 0 || ip[k] >= rows)
        throw std::out_of_range("embedding index " + std::to_string(ip[k]) + " out of range [0, " + std::to_string(rows) + ")");
    Tensor flat = out.view({n, w.size(1)});
    if (!w.isBlocked() && w.stride(1) == 1) {  // rows copied as bytes (a Tensor per row cost ~0.5 us)
      const size_t row_bytes = static_cast<size_t>(w.size(1)) * scalarTypeSize(w.dtype());
      const auto* src = static_cast<const char*>(w.data());
      auto* dst = static_cast<char*>(flat.data());
      const size_t src_stride = static_cast<size_t>(w.stride(0)) * scalarTypeSize(w.dtype());
      for (int64_t k = 0; k < n; ++k)
        std::memcpy(dst + static_cast<size_t>(k) * row_bytes, src + static_cast<size_t>(ip[k]) * src_stride, row_bytes);
    } else {
      for (int64_t k = 0; k < n; ++k) flat.select(0, k).copyFrom(w.select(0, ip[k]));
    }
    a.set(0, out);
  });
  // masked_fill(self, mask, value)
  for (bool inplace : {false, true}) {
    r.add(inplace ? "aten::masked_fill_" : "aten::masked_fill", 3, 3, [inplace](const KernelArgs& a) {
      Tensor self = a.tensor(0);
      Tensor mask = a.tensor(1);
      if (mask.dtype() != ScalarType::Bool) throw std::invalid_argument("masked_fill expects a bool mask");
      double v = a.input(2).isTensor() ? a.tensor(2).item() : a.toDouble(2);
      Shape shape = broadcastShapes(self.sizes(), mask.sizes());
      // In place, the mask must fit the tensor; otherwise both broadcast (PyTorch's out-of-place rule).
      if (inplace && shape != self.sizes())
        throw std::invalid_argument("masked_fill_: the mask " + mask.describe() + " must broadcast to the tensor " + self.describe());
      // (clone, not contiguous(): an expanded 0-dim self is "contiguous" and would be written through)
      Tensor out = inplace ? self : self.expand(shape).clone();
      Tensor m = mask.expand(shape).contiguous();
      Tensor o = out.contiguous();
      const bool* mp = m.data<bool>();
      dispatchDtype(o.dtype(), [&](auto z) {
        using T = decltype(z);
        T* p = o.data<T>();
        T fill = fromDouble<T>(v);
        for (int64_t k = 0, n = o.numel(); k < n; ++k)
          if (mp[k]) p[k] = fill;
      });
      if (!o.sharesStorageWith(out)) out.copyFrom(o);
      a.set(0, out);
    });
  }
  // roll(self, shifts, dims)
  r.add("aten::roll", 2, 3, [](const KernelArgs& a) {
    Tensor t = a.tensor(0);
    Shape shifts = a.intList(1), dims = a.num_in > 2 ? Shape(a.intList(2)) : Shape{};
    if (dims.empty()) {
      Tensor flat = t.contiguous().view({t.numel()});
      dims = {0};
      t = flat;
    }
    if (shifts.size() != dims.size()) throw std::invalid_argument("roll: shifts and dims must have the same length");
    Tensor cur = t;
    for (size_t k = 0; k < dims.size(); ++k) {
      int64_t d = cur.wrapDim(dims[k]), n = cur.size(d);
      if (n == 0) continue;
      int64_t s = ((shifts[k] % n) + n) % n;
      Tensor out = Tensor::empty(cur.dtype(), cur.sizes());
      out.narrow(d, s, n - s).copyFrom(cur.narrow(d, 0, n - s));
      if (s) out.narrow(d, 0, s).copyFrom(cur.narrow(d, n - s, s));
      cur = out;
    }
    a.set(0, cur.sizes() == a.tensor(0).sizes() ? cur : cur.view(a.tensor(0).sizes()));
  });
}
LLGA_REGISTER_OPS(registerShapeOps);

}  // namespace llga
