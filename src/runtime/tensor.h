// Tensors: refcounted storage + dtype + sizes + strides + offset, as in PyTorch.
//
// Views (view, transpose, permute, slice, select, expand, unsqueeze, ...)
// share storage; `contiguous()` copies only when the layout requires it.
// Strides and offsets count elements, not bytes.
#pragma once

#include <cstdint>
#include <cstring>
#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/type.h"
#include "runtime/shape.h"

namespace llga {

// Shape (runtime/shape.h): sizes or strides, inline up to 6 dims.

// A buffer. Owned (aligned allocation) or borrowed from someone else (a numpy
// array, a torch tensor), in which case `owner` keeps that memory alive.
// Bytes held by the buffers llga allocates, for compiled.memory: `live` now,
// `peak` the most ever live at once. Safe to update from any thread.
struct MemoryMeter {
  std::atomic<int64_t> live{0}, peak{0};
  void add(int64_t n) {
    int64_t now = live.fetch_add(n) + n, p = peak.load();
    while (now > p && !peak.compare_exchange_weak(p, now)) {
    }
  }
  void sub(int64_t n) { live.fetch_sub(n); }
};

// What a buffer is for: a per-call activation (or scratch) or a kernel's
// cached copy of a weight in a primitive's layout.
enum class AllocPurpose { Activation, WeightCache };

// While alive, buffers the calling thread allocates are counted on these
// meters (each may be null) until they are freed, wherever that happens.
class MeterScope {
 public:
  MeterScope(std::shared_ptr<MemoryMeter> activations, std::shared_ptr<MemoryMeter> weight_cache);
  ~MeterScope();
  MeterScope(const MeterScope&) = delete;
  MeterScope& operator=(const MeterScope&) = delete;

 private:
  std::shared_ptr<MemoryMeter> prev_[2];
};

struct Storage {
  void* data = nullptr;
  size_t nbytes = 0;
  std::shared_ptr<void> owner;
  bool owned = false;  // allocated by llga (not a caller's buffer)
  bool writable = true;  // false: a caller's read-only buffer (a read-only numpy array, bytes, a memmap)

  // Activations come from the calling thread's ActivationSource when one is
  // installed (the memory planner), from the heap otherwise.
  static std::shared_ptr<Storage> allocate(size_t nbytes, AllocPurpose purpose = AllocPurpose::Activation);
  static std::shared_ptr<Storage> borrow(void* data, size_t nbytes, std::shared_ptr<void> owner, bool writable = true);
  // A heap buffer of `rounded` bytes (a multiple of 64), counted on `meter` (may be null) while it lives.
  static std::shared_ptr<Storage> heap(size_t nbytes, size_t rounded, const std::shared_ptr<MemoryMeter>& meter);
};

// Fault injection for tests (SQLite's way of testing out-of-memory paths):
// after `n` more activation allocations, in any thread, the next one throws
// std::bad_alloc, once. n < 0 disarms it. Returns whether it was still armed.
bool failActivationAllocationAfter(int64_t n);

// Where the calling thread's activation buffers come from while installed
// (runtime/arena.h). `rounded` is nbytes rounded up to a multiple of 64.
class ActivationSource {
 public:
  virtual ~ActivationSource() = default;
  virtual std::shared_ptr<Storage> allocate(size_t nbytes, size_t rounded, const std::shared_ptr<MemoryMeter>& meter) = 0;
};

class SourceScope {
 public:
  explicit SourceScope(ActivationSource* source);
  ~SourceScope();
  SourceScope(const SourceScope&) = delete;
  SourceScope& operator=(const SourceScope&) = delete;

 private:
  ActivationSource* prev_;
};

struct BFloat16 {
  uint16_t bits;
  operator float() const {
    uint32_t x = uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &x, 4);
    return f;
  }
  static BFloat16 from(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    return BFloat16{static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16)};
  }
};

class Tensor;
struct ExecContext;

// A layout a tensor's bytes are in that strides cannot describe: a backend's
// blocked format (oneDNN's nChw16c, backend/dnnl/dnnl_utils.h). The runtime
// only names it and asks for a plain copy; only kernels that say they accept
// one ever see it.
struct BlockedLayout {
  virtual ~BlockedLayout() = default;
  virtual const std::string& name() const = 0;  // "nChw16c"
  virtual Tensor toPlain(ExecContext& ctx, const Tensor& t) const = 0;
};

class Tensor {
 public:
  Tensor() = default;  // undefined
  static Tensor empty(ScalarType dtype, const Shape& sizes);
  static Tensor zeros(ScalarType dtype, const Shape& sizes);
  static Tensor scalar(ScalarType dtype, double v);
  static Tensor fromStorage(std::shared_ptr<Storage> s, ScalarType dtype, Shape sizes, Shape strides, int64_t offset);
  // A new dense tensor of `sizes` whose dimensions are laid out in the same
  // order as `like`'s (e.g. channels-last); contiguous if ranks differ.
  static Tensor emptyLike(ScalarType dtype, const Shape& sizes, const Tensor& like);
  // Dense, non-overlapping and not in row-major order (e.g. channels-last).
  bool isPermutedDense() const;
  // The dimensions by decreasing stride, outermost first (ties keep their order).
  std::vector<size_t> dimOrder() const;
  // A tensor whose bytes are in `layout`; sizes are the logical sizes, strides
  // the contiguous ones (for keys and shape records; never for addressing).
  static Tensor blocked(std::shared_ptr<Storage> s, ScalarType dtype, Shape sizes,
                        std::shared_ptr<const BlockedLayout> layout);
  bool isBlocked() const { return blocked_ != nullptr; }
  const std::shared_ptr<const BlockedLayout>& blockedLayout() const { return blocked_; }

  bool defined() const { return storage_ != nullptr; }
  ScalarType dtype() const { return dtype_; }
  size_t itemsize() const { return scalarTypeSize(dtype_); }
  int64_t dim() const { return static_cast<int64_t>(sizes_.size()); }
  const Shape& sizes() const { return sizes_; }
  const Shape& strides() const { return strides_; }
  int64_t size(int64_t d) const { return sizes_[indexDim(d)]; }
  int64_t stride(int64_t d) const { return strides_[indexDim(d)]; }
  int64_t offset() const { return offset_; }
  int64_t numel() const;
  bool isContiguous() const;
  // Each dim of 2+ elements steps at least as far as the next smaller stride's
  // dim spans in whole (stride >= inner stride * inner size): what oneDNN can
  // describe. x[..., ::2] of an odd-width row interleaves (2 x 6 > 11).
  bool stridesNest() const;
  // False when two indices might address the same element (a stride 0
  // over 2+ elements, or strides that interleave): only tensors for which
  // this is proven false may be written in place.
  bool mayOverlapItself() const;
  // PyTorch's partial-overlap rule for an in-place op writing *this while
  // reading o: both dense (in some dim order) in one storage, their byte
  // ranges intersect, and they are not the same view (same start and
  // strides). PyTorch refuses such ops; other sharing (a strided view) it
  // leaves alone, and so does this.
  bool partiallyOverlaps(const Tensor& o) const;
  // Whether the byte ranges the two span intersect, whatever their storages
  // (two arrays over one buffer): a sufficient condition for sharing no
  // element is that this is false (interleaved views are refused too).
  bool spanOverlaps(const Tensor& o) const;
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  void* data() const { return static_cast<char*>(storage_->data) + offset_ * static_cast<int64_t>(itemsize()); }
  template <typename T>
  T* data() const { return static_cast<T*>(data()); }
  // Same storage and same first byte (used to tell aliasing outputs apart).
  bool sharesStorageWith(const Tensor& o) const { return storage_ && storage_ == o.storage_; }

  // Wraps a possibly negative dim into [0, dim()); throws naming the dim otherwise.
  // As in PyTorch, a 0-dim tensor accepts 0 and -1 (wrapped to 0), which do not
  // index sizes(): use indexDim where the dim addresses a size or stride.
  int64_t wrapDim(int64_t d) const { return wrapDim(d, dim()); }
  static int64_t wrapDim(int64_t d, int64_t ndim);
  // wrapDim for a dim that must name one of the tensor's dimensions: throws
  // on a 0-dim tensor ("dimension specified as 0 but tensor has no dimensions").
  int64_t indexDim(int64_t d) const;

  // Views (share storage)
  Tensor asStrided(Shape sizes, Shape strides, int64_t offset) const;
  Tensor view(Shape sizes) const;  // throws if the strides do not allow it; sizes may hold one -1
  Tensor reshape(Shape sizes) const;  // a view when possible, else a copy
  Tensor transpose(int64_t a, int64_t b) const;
  Tensor permute(const Shape& dims) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor expand(const Shape& sizes) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor flatten(int64_t start, int64_t end) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const { return slice(dim, start, start + length, 1); }

  // Copies
  Tensor contiguous() const;  // *this if already contiguous
  Tensor clone() const;
  Tensor to(ScalarType dtype) const;  // *this if already that dtype
  // Elementwise copy of src (same number of elements, any strides, converting dtype).
  void copyFrom(const Tensor& src);
  void fill(double v);

  double item() const;  // one element, as double
  std::string describe() const;  // "Float(1, 3, 224, 224)"
  std::string shapeKey() const;  // "1x3x224x224:Float" (a 0-dim tensor: "scalar:Float")

  // Fills contiguous strides for sizes.
  static Shape contiguousStrides(const Shape& sizes);
  // Infers one -1 in `sizes` for `numel` elements.
  static Shape inferSize(Shape sizes, int64_t numel);

 private:
  std::shared_ptr<Storage> storage_;
  std::shared_ptr<const BlockedLayout> blocked_;
  ScalarType dtype_ = ScalarType::Float;
  Shape sizes_, strides_;
  int64_t offset_ = 0;
};

// Calls fn(T{}) with T the C++ type of dtype (float, double, int64_t, int32_t,
// int16_t, int8_t, uint8_t, bool, BFloat16).
template <typename Fn>
decltype(auto) dispatchDtype(ScalarType t, Fn&& fn) {
  switch (t) {
    case ScalarType::Float: return fn(float{});
    case ScalarType::Double: return fn(double{});
    case ScalarType::Long: return fn(int64_t{});
    case ScalarType::Int: return fn(int32_t{});
    case ScalarType::Short: return fn(int16_t{});
    case ScalarType::Char: return fn(int8_t{});
    case ScalarType::Byte: return fn(uint8_t{});
    case ScalarType::Bool: return fn(bool{});
    case ScalarType::BFloat16: return fn(BFloat16{});
    default:
      throw std::invalid_argument("dtype " + std::string(scalarTypeName(t)) + " is not supported by the runtime");
  }
}

bool isIntegralType(ScalarType t, bool include_bool);
// PyTorch's promotion of two tensor dtypes.
ScalarType promoteTypes(ScalarType a, ScalarType b);

}  // namespace llga
