// aten::cat and aten::stack. The parts are copied as whole rows (memcpy, the
// rows shared out among the intra-op threads when the copy is large) when
// each is dense in the result's dimension order, which is what models
// concatenate: contiguous tensors, channels-last convolution outputs. Other
// parts (strided views, other dtypes) are copied element by element through
// a view of the result.
//
// Not oneDNN's concat: its simple_concat copied 3 x 64x64x64 floats in 2.0 ms
// where these rows take 0.12 ms, and small concats (emformer's 3 x 4x1x64)
// paid ~8 us a call for wrapping memory objects.
//
// Parts in one channel-blocked layout (convolutions' nChw8c on AVX2),
// concatenated along channels in whole blocks, are rows too (per image, each
// part's blocks one after the other) and the result stays in that layout
// when its readers take it: densenet's concats then feed its batch_norms and
// 1x1 convolutions without a reorder to plain and back.
#include <atomic>
#include <cstring>
#include <optional>

#include "backend/dnnl/dnnl_utils.h"
#include "backend/dnnl/ops/fused.h"
#include "backend/dnnl/ops/op_utils.h"
#include "backend/dnnl/quantize.h"

namespace llga {
namespace {

// Whether t is laid out densely in `order` (dims outermost first); size-1
// dims may have any stride.
bool denseIn(const Tensor& t, const std::vector<size_t>& order) {
  int64_t expect = 1;
  for (size_t k = order.size(); k-- > 0;) {
    const int64_t size = t.size(static_cast<int64_t>(order[k]));
    if (size != 1 && t.stride(static_cast<int64_t>(order[k])) != expect) return false;
    expect *= size;
  }
  return true;
}

// Below this many bytes one thread copies everything.
constexpr size_t kParallelBytes = size_t{1} << 16;

// dst = src, n bytes, split among the threads when large.
void copyBytes(char* dst, const char* src, size_t n) {
  if (n < kParallelBytes) {
    std::memcpy(dst, src, n);
    return;
  }
  constexpr int64_t kPiece = int64_t{1} << 15;
  const int64_t pieces = static_cast<int64_t>((n + kPiece - 1) / kPiece);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < pieces; ++i) {
    const size_t at = static_cast<size_t>(i * kPiece);
    std::memcpy(dst + at, src + at, std::min<size_t>(kPiece, n - at));
  }
}

// `outer` rows into base: row o is each part's o-th chunk (chunks[i] bytes
// of parts[i]), one after the other.
void interleave(char* base, const std::vector<const char*>& parts, const std::vector<size_t>& chunks, int64_t outer) {
  size_t row = 0;
  for (size_t c : chunks) row += c;
  auto copyRow = [&](int64_t o) {
    size_t at = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      std::memcpy(base + static_cast<size_t>(o) * row + at, parts[i] + static_cast<size_t>(o) * chunks[i], chunks[i]);
      at += chunks[i];
    }
  };
  if (outer == 1) {  // each part is one chunk: copyBytes shares a large one among the threads
    size_t at = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      copyBytes(base + at, parts[i], chunks[i]);
      at += chunks[i];
    }
  } else if (row * static_cast<size_t>(outer) < kParallelBytes) {
    for (int64_t o = 0; o < outer; ++o) copyRow(o);
  } else {
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < outer; ++o) copyRow(o);
  }
}

// The parts, each dense in `order`, into out as rows: in memory order, out is
// `outer` rows, each the parts' chunks one after the other.
void catRows(const std::vector<Tensor>& parts, int64_t dim, const std::vector<size_t>& order, Tensor& out) {
  size_t k = 0;
  while (static_cast<int64_t>(order[k]) != dim) ++k;
  int64_t outer = 1, inner = 1;
  for (size_t j = 0; j < order.size(); ++j) {
    const int64_t size = out.size(static_cast<int64_t>(order[j]));
    if (j < k) outer *= size;
    if (j > k) inner *= size;
  }
  std::vector<const char*> srcs;
  std::vector<size_t> chunks;
  for (const Tensor& p : parts) {
    srcs.push_back(static_cast<const char*>(p.data()));
    chunks.push_back(static_cast<size_t>(p.size(dim) * inner) * out.itemsize());
  }
  interleave(static_cast<char*>(out.data()), srcs, chunks, outer);
}

// Float parts all in one of oneDNN's channel-blocked layouts (nChw16c,
// nChw8c, 5-D alike) with whole blocks of channels, concatenated along
// channels: per image each part is one chunk of blocks, so the result in the
// same layout is rows of those chunks. nullopt when that does not hold.
std::optional<Tensor> catBlocked(const std::vector<Tensor>& parts, int64_t dim) {
  if (parts.empty()) return std::nullopt;
  const Tensor& ref = parts[0];
  const std::optional<ChannelBlocking> blocking = channelBlocking(ref);
  if (!blocking || ref.wrapDim(dim) != 1) return std::nullopt;
  Shape shape = ref.sizes();
  shape[1] = 0;
  for (const Tensor& t : parts) {
    const std::optional<ChannelBlocking> b = channelBlocking(t);
    if (!b || b->tag != blocking->tag || t.dim() != ref.dim()) return std::nullopt;
    for (int64_t d = 0; d < t.dim(); ++d)
      if (d != 1 && t.size(d) != ref.size(d)) return std::nullopt;  // the plain path says what is wrong
    shape[1] += t.size(1);
  }
  const dnnl::memory::desc md(shape, dnnl::memory::data_type::f32, blocking->tag);
  Tensor out = Tensor::blocked(Storage::allocate(md.get_size()), ScalarType::Float, shape, makeLayout(md));
  int64_t spatial = 1;
  for (int64_t d = 2; d < ref.dim(); ++d) spatial *= ref.size(d);
  std::vector<const char*> srcs;
  std::vector<size_t> chunks;
  for (const Tensor& p : parts) {
    srcs.push_back(static_cast<const char*>(p.data()));
    chunks.push_back(static_cast<size_t>(p.size(1) * spatial) * sizeof(float));
  }
  interleave(static_cast<char*>(out.data()), srcs, chunks, ref.size(0));
  return out;
}

// The buffer for concatenating the non-empty `parts` along `dim` (wrapped in
// place): sizes checked, dtype promoted; with `follow`, laid out in the parts'
// common dense order when they share one that is not row-major (channels-last
// parts from convolutions).
Tensor catResult(const std::vector<Tensor>& parts, int64_t& dim, bool follow) {
  const Tensor& ref = parts[0];
  dim = ref.wrapDim(dim);
  ScalarType dt = ref.dtype();
  Shape shape = ref.sizes();
  shape[dim] = 0;
  for (const Tensor& t : parts) {
    if (t.dim() != ref.dim()) throw std::invalid_argument("cat: tensors must have the same rank");
    for (int64_t d = 0; d < t.dim(); ++d)
      if (d != dim && t.size(d) != ref.size(d))
        throw std::invalid_argument("cat: sizes must match except in dim " + std::to_string(dim));
    shape[dim] += t.size(dim);
    dt = promoteTypes(dt, t.dtype());
  }
  bool same_order = follow;
  for (const Tensor& t : parts)
    same_order = same_order && t.isPermutedDense() && t.dtype() == dt && t.dimOrder() == ref.dimOrder();
  return same_order ? Tensor::emptyLike(dt, shape, ref) : Tensor::empty(dt, shape);
}

Tensor cat(const std::vector<Tensor>& ts, int64_t dim, bool follow) {
  // Legacy rule: 1-D empty tensors are skipped.
  std::vector<Tensor> parts;
  for (const Tensor& t : ts)
    if (!(t.dim() == 1 && t.numel() == 0)) parts.push_back(t);
  if (parts.empty()) return ts.empty() ? Tensor::empty(ScalarType::Float, {0}) : ts[0].clone();
  Tensor out = catResult(parts, dim, follow);
  if (out.numel() == 0) return out;
  const std::vector<size_t> order = out.dimOrder();
  bool rows = true;
  for (const Tensor& t : parts) rows = rows && t.dtype() == out.dtype() && !t.isBlocked() && denseIn(t, order);
  if (rows) {
    catRows(parts, dim, order, out);
    return out;
  }
  int64_t at = 0;
  for (const Tensor& t : parts) {
    out.narrow(dim, at, t.size(dim)).copyFrom(t);
    at += t.size(dim);
  }
  return out;
}

// cat copies whatever strides its parts have: a list of channels-last parts
// may come in (prim::ListConstruct passes them on), and the result keeps
// their order when its readers take strided tensors. Blocked parts are
// concatenated blocked (catBlocked) when the readers take that, else made
// plain first.
//
// `int8_out` (a concat partition's out_scale and out_dtype: its readers are
// int8 convolutions) makes the result u8/s8: parts that arrive in that type
// (their producers wrote them at this scale for it) are copied as they are,
// float parts are quantized first (in their own layout), then the bytes are
// concatenated as rows.
class CatKernel final : public Kernel {
 public:
  explicit CatKernel(std::optional<ActivationQuant> int8_out = std::nullopt) : int8_out_(int8_out) {}
  bool acceptsStrided(size_t input) const override { return input == 0; }
  void allowStridedOutput(size_t output) override { follow_ = follow_ || output == 0; }
  bool acceptsBlocked(size_t input) const override { return input == 0; }
  void allowBlockedOutput(size_t output) override { keep_blocked_ = keep_blocked_ || output == 0; }
  const char* primitiveKind() const override { return "concat"; }
  KernelReport report() const override {
    if (int8_out_) {
      const int quantized = last_quantized_.load(std::memory_order_relaxed);
      return {"llga", "", "", "", "", std::string("written as ") + (int8_out_->is_unsigned ? "u8" : "s8") +
                                          (quantized < 0 ? "" : ", " + std::to_string(quantized) + " float parts quantized")};
    }
    return last_blocked_.load(std::memory_order_relaxed) ? KernelReport{"llga", "", "", "", "kept", "blocked parts"}
                                                         : KernelReport{};
  }
  void run(const KernelArgs& a) override {
    std::vector<Tensor> parts = tensorList(a.input(0));
    const int64_t dim = a.num_in > 1 ? a.toInt(1) : 0;
    if (int8_out_) return runQuantized(a, std::move(parts), dim);
    if (keep_blocked_)
      if (std::optional<Tensor> out = catBlocked(parts, dim)) {
        last_blocked_.store(true, std::memory_order_relaxed);
        return a.set(0, std::move(*out));
      }
    last_blocked_.store(false, std::memory_order_relaxed);
    for (Tensor& t : parts)
      if (t.isBlocked()) t = toPlain(a.ctx, t);
    a.set(0, cat(parts, dim, follow_));
  }

 private:
  void runQuantized(const KernelArgs& a, std::vector<Tensor> parts, int64_t dim) {
    const ScalarType qt = int8::storageType(*int8_out_);
    int quantized = 0;
    for (Tensor& t : parts) {
      if (t.isBlocked()) t = toPlain(a.ctx, t);
      if (t.dtype() == qt) continue;
      if (t.dtype() != ScalarType::Float)
        throw std::invalid_argument("cat: an int8 result takes float parts or parts of its own type, got " + t.describe());
      t = int8::quantizeTensor(a.ctx, t, *int8_out_);
      ++quantized;
    }
    last_quantized_.store(quantized, std::memory_order_relaxed);
    a.set(0, cat(parts, dim, follow_));
  }

  std::optional<ActivationQuant> int8_out_;
  std::atomic<int> last_quantized_{-1};
  bool follow_ = false;        // every reader takes strided tensors
  bool keep_blocked_ = false;  // every reader takes blocked tensors
  std::atomic<bool> last_blocked_{false};
};

void registerCatOps(OpRegistry& r) {
  r.add(OpDef{"aten::cat", 1, 2, [](const Node&) { return std::make_unique<CatKernel>(); }});
  r.add("aten::stack", 1, 2, [](const KernelArgs& a) {
    std::vector<Tensor> ts = tensorList(a.input(0));
    if (ts.empty()) throw std::invalid_argument("stack expects a non-empty list");
    int64_t dim = Tensor::wrapDim(a.num_in > 1 ? a.toInt(1) : 0, ts[0].dim() + 1);
    for (Tensor& t : ts) t = t.unsqueeze(dim);
    a.set(0, cat(ts, dim, false));
  });
}

}  // namespace

LLGA_REGISTER_OPS(registerCatOps);

std::unique_ptr<Kernel> makeQuantizedCat(const ActivationQuant& int8_out) { return std::make_unique<CatKernel>(int8_out); }

}  // namespace llga
