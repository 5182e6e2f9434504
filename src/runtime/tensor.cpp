#include "runtime/tensor.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <memory_resource>
#include <numeric>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "ir/strides.h"
#include "runtime/strided.h"
#include "runtime/threads.h"

namespace llga {

namespace {
thread_local std::shared_ptr<MemoryMeter> t_meters[2];  // indexed by AllocPurpose
thread_local ActivationSource* t_source = nullptr;
}

MeterScope::MeterScope(std::shared_ptr<MemoryMeter> activations, std::shared_ptr<MemoryMeter> weight_cache) {
  prev_[0] = std::exchange(t_meters[0], std::move(activations));
  prev_[1] = std::exchange(t_meters[1], std::move(weight_cache));
}

MeterScope::~MeterScope() {
  t_meters[0] = std::move(prev_[0]);
  t_meters[1] = std::move(prev_[1]);
}

namespace {

// Small heap blocks (up to 4 KiB, in power-of-two classes from 64 bytes) are
// kept by the thread that frees them, up to kPoolDepth a class, for its next
// allocations: a loop of small-tensor ops (a scripted loop's state, an RNN
// step at batch 1) takes and frees a block or two per op, and glibc's
// aligned_alloc and free were over a third of such a loop's time. Sanitizer
// builds allocate every block from the heap, so they still see every misuse.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr size_t kPooledMax = 0;
#else
constexpr size_t kPooledMax = 4096;
#endif
constexpr size_t kPoolClasses = 7;  // 64 << 0 .. 64 << 6
constexpr size_t kPoolDepth = 32;

struct BlockPool {
  std::array<std::vector<void*>, kPoolClasses> free;
  BlockPool();
  ~BlockPool();
};
// 0: not made yet, 1: alive, 2: destroyed (the thread is exiting).
// Trivially destructible, so readable to the end of the thread.
thread_local int t_pool_state = 0;

BlockPool::BlockPool() { t_pool_state = 1; }
BlockPool::~BlockPool() {
  t_pool_state = 2;
  for (auto& blocks : free)
    for (void* p : blocks) std::free(p);
}

BlockPool& pool() {
  thread_local BlockPool p;
  return p;
}

size_t poolClass(size_t rounded) {
  size_t k = 0;
  while ((size_t{64} << k) < rounded) ++k;
  return k;
}

void* takeBlock(size_t rounded) {
  if (rounded <= kPooledMax && t_pool_state != 2) {
    const size_t k = poolClass(rounded);
    std::vector<void*>& blocks = pool().free[k];
    if (!blocks.empty()) {
      void* p = blocks.back();
      blocks.pop_back();
      return p;
    }
    rounded = size_t{64} << k;
  }
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw std::bad_alloc();
  return p;
}

void giveBlock(void* p, size_t rounded) noexcept {
  if (rounded <= kPooledMax && t_pool_state != 2) {
    std::vector<void*>& blocks = pool().free[poolClass(rounded)];
    if (blocks.capacity() == 0) {  // once per thread and class
      try {
        blocks.reserve(kPoolDepth);
      } catch (...) {
      }
    }
    if (blocks.size() < blocks.capacity() && blocks.size() < kPoolDepth) {
      blocks.push_back(p);  // no allocation: within capacity
      return;
    }
  }
  std::free(p);
}

// A heap buffer's storage: frees (or pools) the buffer and uncounts it when
// the last holder lets go. One allocation besides the buffer.
struct HeapStorage final : Storage {
  size_t rounded = 0;
  std::shared_ptr<MemoryMeter> meter;
  ~HeapStorage() {
    if (meter) meter->sub(static_cast<int64_t>(rounded));
    giveBlock(data, rounded);
  }
};

}  // namespace

std::shared_ptr<Storage> Storage::heap(size_t nbytes, size_t rounded, const std::shared_ptr<MemoryMeter>& meter) {
  void* p = takeBlock(rounded);
  std::shared_ptr<HeapStorage> s;
  try {
    s = std::make_shared<HeapStorage>();
  } catch (...) {
    giveBlock(p, rounded);
    throw;
  }
  s->data = p;
  s->nbytes = nbytes;
  s->owned = true;
  s->rounded = rounded;
  if (meter) {
    meter->add(static_cast<int64_t>(rounded));
    s->meter = meter;
  }
  return s;
}

namespace {
std::atomic<int64_t> g_fail_after{-1};  // armed while >= 0
}

bool failActivationAllocationAfter(int64_t n) { return g_fail_after.exchange(n < 0 ? -1 : n) >= 0; }

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, AllocPurpose purpose) {
  if (g_fail_after.load(std::memory_order_relaxed) >= 0 && purpose == AllocPurpose::Activation) {
    int64_t left = g_fail_after.load();
    while (left >= 0 && !g_fail_after.compare_exchange_weak(left, left - 1)) {
    }
    if (left == 0) throw std::bad_alloc();  // this one takes it from 0 to -1: disarmed
  }
  size_t rounded = std::max<size_t>(64, (nbytes + 63) / 64 * 64);
  const auto& meter = t_meters[static_cast<int>(purpose)];
  if (purpose == AllocPurpose::Activation && t_source) return t_source->allocate(nbytes, rounded, meter);
  return heap(nbytes, rounded, meter);
}

SourceScope::SourceScope(ActivationSource* source) : prev_(std::exchange(t_source, source)) {}
SourceScope::~SourceScope() { t_source = prev_; }

std::shared_ptr<Storage> Storage::borrow(void* data, size_t nbytes, std::shared_ptr<void> owner, bool writable) {
  auto s = std::make_shared<Storage>();
  s->data = data;
  s->nbytes = nbytes;
  s->owner = std::move(owner);
  s->writable = writable;
  return s;
}

Tensor Tensor::emptyLike(ScalarType dtype, const Shape& sizes, const Tensor& like) {
  if (!like.isPermutedDense() || like.dim() != static_cast<int64_t>(sizes.size())) return empty(dtype, sizes);
  const size_t n = sizes.size();
  const std::vector<size_t> order = like.dimOrder();
  Shape strides(n);
  int64_t s = 1;
  for (size_t k = n; k-- > 0;) {
    strides[order[k]] = s;
    s *= std::max<int64_t>(sizes[order[k]], 1);
  }
  auto st = Storage::allocate(static_cast<size_t>(s) * scalarTypeSize(dtype));
  return fromStorage(std::move(st), dtype, sizes, std::move(strides), 0);
}

bool Tensor::isPermutedDense() const {
  if (!defined() || isBlocked() || isContiguous() || dim() < 2) return false;
  const std::vector<size_t> order = dimOrder();
  int64_t expect = 1;
  for (size_t k = order.size(); k-- > 0;) {
    if (sizes_[order[k]] != 1 && strides_[order[k]] != expect) return false;
    expect *= sizes_[order[k]];
  }
  return true;
}

std::vector<size_t> Tensor::dimOrder() const {
  std::vector<size_t> order(static_cast<size_t>(dim()));
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return strides_[a] > strides_[b]; });
  return order;
}

Tensor Tensor::blocked(std::shared_ptr<Storage> s, ScalarType dtype, Shape sizes,
                       std::shared_ptr<const BlockedLayout> layout) {
  Shape strides = contiguousStrides(sizes);
  Tensor t = fromStorage(std::move(s), dtype, std::move(sizes), std::move(strides), 0);
  t.blocked_ = std::move(layout);
  return t;
}

bool isIntegralType(ScalarType t, bool include_bool) {
  switch (t) {
    case ScalarType::Byte: case ScalarType::Char: case ScalarType::Short: case ScalarType::Int: case ScalarType::Long:
      return true;
    case ScalarType::Bool:
      return include_bool;
    default:
      return false;
  }
}

ScalarType promoteTypes(ScalarType a, ScalarType b) {
  if (a == b) return a;
  auto rank = [](ScalarType t) {
    switch (t) {
      case ScalarType::Bool: return 0;
      case ScalarType::Byte: return 1;
      case ScalarType::Char: return 2;
      case ScalarType::Short: return 3;
      case ScalarType::Int: return 4;
      case ScalarType::Long: return 5;
      case ScalarType::BFloat16: return 6;
      case ScalarType::Half: return 6;
      case ScalarType::Float: return 7;
      case ScalarType::Double: return 8;
      default: throw std::invalid_argument("no type promotion for " + std::string(scalarTypeName(t)));
    }
  };
  // uint8 with int8 promotes to int16, as in PyTorch; bf16 with half to float.
  if ((a == ScalarType::Byte && b == ScalarType::Char) || (a == ScalarType::Char && b == ScalarType::Byte))
    return ScalarType::Short;
  if ((a == ScalarType::BFloat16 && b == ScalarType::Half) || (a == ScalarType::Half && b == ScalarType::BFloat16))
    return ScalarType::Float;
  return rank(a) >= rank(b) ? a : b;
}

int64_t Tensor::wrapDim(int64_t d, int64_t ndim) {
  int64_t n = std::max<int64_t>(ndim, 1);
  if (d < -n || d >= n)
    throw std::out_of_range("dimension " + std::to_string(d) + " is out of range for a tensor of rank " +
                            std::to_string(ndim));
  return d < 0 ? d + n : d;
}

int64_t Tensor::indexDim(int64_t d) const {
  if (dim() == 0)
    throw std::out_of_range("dimension specified as " + std::to_string(d) + " but tensor has no dimensions");
  return wrapDim(d);
}

Shape Tensor::contiguousStrides(const Shape& sizes) { return llga::contiguousStrides(sizes); }

Shape Tensor::inferSize(Shape sizes, int64_t numel) {
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1) {
      if (infer >= 0) throw std::invalid_argument("only one dimension can be inferred (-1)");
      infer = static_cast<int>(i);
    } else if (sizes[i] < 0) {
      throw std::invalid_argument("invalid shape dimension " + std::to_string(sizes[i]));
    } else {
      known *= sizes[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel % known != 0) throw std::invalid_argument("shape is invalid for input of size " + std::to_string(numel));
    sizes[static_cast<size_t>(infer)] = numel / known;
  } else if (known != numel) {
    throw std::invalid_argument("shape is invalid for input of size " + std::to_string(numel));
  }
  return sizes;
}

Tensor Tensor::fromStorage(std::shared_ptr<Storage> s, ScalarType dtype, Shape sizes, Shape strides, int64_t offset) {
  Tensor t;
  t.storage_ = std::move(s);
  t.dtype_ = dtype;
  t.sizes_ = std::move(sizes);
  t.strides_ = std::move(strides);
  t.offset_ = offset;
  return t;
}

Tensor Tensor::empty(ScalarType dtype, const Shape& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) {
    if (s < 0) throw std::invalid_argument("negative size in tensor shape");
    n *= s;
  }
  auto st = Storage::allocate(static_cast<size_t>(n) * scalarTypeSize(dtype));
  return fromStorage(std::move(st), dtype, sizes, contiguousStrides(sizes), 0);
}

Tensor Tensor::zeros(ScalarType dtype, const Shape& sizes) {
  Tensor t = empty(dtype, sizes);
  std::memset(t.data(), 0, static_cast<size_t>(t.numel()) * t.itemsize());
  return t;
}

Tensor Tensor::scalar(ScalarType dtype, double v) {
  Tensor t = empty(dtype, {});
  t.fill(v);
  return t;
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes_) n *= s;
  return n;
}

bool Tensor::isContiguous() const {
  int64_t expected = 1;
  for (size_t i = sizes_.size(); i-- > 0;) {
    if (sizes_[i] == 1) continue;
    if (strides_[i] != expected) return false;
    expected *= sizes_[i];
  }
  return true;
}

namespace {

// (stride, size) pairs of a tensor's dims: on the stack for up to 8 dims
// (these checks run on every view a kernel is handed), on the heap beyond.
class DimPairs {
 public:
  explicit DimPairs(size_t n) : res_(buf_.data(), buf_.size()), v_(&res_) { v_.reserve(n); }
  std::pmr::vector<std::pair<int64_t, int64_t>>& operator*() { return v_; }

 private:
  alignas(16) std::array<std::byte, 8 * sizeof(std::pair<int64_t, int64_t>)> buf_;
  std::pmr::monotonic_buffer_resource res_;
  std::pmr::vector<std::pair<int64_t, int64_t>> v_;
};

}  // namespace

bool Tensor::stridesNest() const {
  DimPairs pairs(sizes_.size());
  auto& dims = *pairs;  // (stride, size) of the dims that step
  for (size_t i = 0; i < sizes_.size(); ++i)
    if (sizes_[i] > 1 && strides_[i] != 0) dims.emplace_back(strides_[i] < 0 ? -strides_[i] : strides_[i], sizes_[i]);
  std::sort(dims.begin(), dims.end());
  for (size_t i = 1; i < dims.size(); ++i)
    if (dims[i].first < dims[i - 1].first * dims[i - 1].second) return false;
  return true;
}

bool Tensor::mayOverlapItself() const {
  // Dims of 2+ elements by increasing stride: each must step past everything
  // the smaller ones span (a sufficient condition for distinct addresses).
  DimPairs pairs(sizes_.size());
  auto& dims = *pairs;  // (stride, size)
  for (size_t i = 0; i < sizes_.size(); ++i) {
    if (sizes_[i] == 0) return false;
    if (sizes_[i] > 1) dims.emplace_back(strides_[i] < 0 ? -strides_[i] : strides_[i], sizes_[i]);
  }
  std::sort(dims.begin(), dims.end());
  int64_t span = 1;  // elements covered by the dims so far
  for (const auto& [stride, size] : dims) {
    if (stride < span) return true;
    span = stride * (size - 1) + span;
  }
  return false;
}

bool Tensor::partiallyOverlaps(const Tensor& o) const {
  if (!sharesStorageWith(o) || numel() == 0 || o.numel() == 0 || isBlocked() || o.isBlocked()) return false;
  auto dense = [](const Tensor& t) { return t.isContiguous() || t.isPermutedDense(); };
  if (!dense(*this) || !dense(o)) return false;
  const char* a = static_cast<const char*>(data());
  const char* b = static_cast<const char*>(o.data());
  const char* a_end = a + numel() * static_cast<int64_t>(itemsize());
  const char* b_end = b + o.numel() * static_cast<int64_t>(o.itemsize());
  if (a == b && a_end == b_end) return strides_ != o.strides_;
  return a < b_end && b < a_end;
}

bool Tensor::spanOverlaps(const Tensor& o) const {
  if (!defined() || !o.defined() || numel() == 0 || o.numel() == 0) return false;
  auto span = [](const Tensor& t) {  // [first byte, last byte + 1)
    if (t.isBlocked()) {  // the whole buffer
      const char* at = static_cast<const char*>(t.storage_->data);
      return std::pair<const char*, const char*>(at, at + t.storage_->nbytes);
    }
    int64_t lo = 0, hi = 0;  // element offsets from data()
    for (size_t d = 0; d < t.sizes_.size(); ++d) {
      const int64_t reach = (t.sizes_[d] - 1) * t.strides_[d];
      (reach < 0 ? lo : hi) += reach;
    }
    const char* at = static_cast<const char*>(t.data());
    const auto item = static_cast<int64_t>(t.itemsize());
    return std::pair<const char*, const char*>(at + lo * item, at + (hi + 1) * item);
  };
  const auto [a, a_end] = span(*this);
  const auto [b, b_end] = span(o);
  return a < b_end && b < a_end;
}

Tensor Tensor::asStrided(Shape sizes, Shape strides, int64_t offset) const {
  return fromStorage(storage_, dtype_, std::move(sizes), std::move(strides), offset);
}

Tensor Tensor::view(Shape sizes) const {
  sizes = inferSize(std::move(sizes), numel());
  auto st = viewStrides(sizes_, strides_, sizes);
  if (!st)
    throw std::invalid_argument("view size is not compatible with the input's size and stride; use reshape");
  return asStrided(sizes, *st, offset_);
}

Tensor Tensor::reshape(Shape sizes) const {
  sizes = inferSize(std::move(sizes), numel());
  if (auto st = viewStrides(sizes_, strides_, sizes)) return asStrided(sizes, *st, offset_);
  return contiguous().view(sizes);
}

Tensor Tensor::transpose(int64_t a, int64_t b) const {
  if (dim() == 0) return *this;
  a = wrapDim(a);
  b = wrapDim(b);
  Shape sz = sizes_, st = strides_;
  std::swap(sz[a], sz[b]);
  std::swap(st[a], st[b]);
  return asStrided(sz, st, offset_);
}

Tensor Tensor::permute(const Shape& dims) const {
  if (static_cast<int64_t>(dims.size()) != dim())
    throw std::invalid_argument("permute: number of dims does not match the tensor's rank");
  Shape sz(dims.size()), st(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrapDim(dims[i]);
    if (seen[d]) throw std::invalid_argument("permute: repeated dim");
    seen[d] = true;
    sz[i] = sizes_[d];
    st[i] = strides_[d];
  }
  return asStrided(sz, st, offset_);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  d = indexDim(d);
  if (step <= 0) throw std::invalid_argument("slice step must be positive");
  int64_t n = sizes_[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape sz = sizes_, st = strides_;
  sz[d] = (end - start + step - 1) / step;
  st[d] = strides_[d] * step;
  return asStrided(sz, st, offset_ + start * strides_[d]);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  if (dim() == 0) throw std::invalid_argument("select() cannot be applied to a 0-dim tensor");
  d = wrapDim(d);
  int64_t n = sizes_[d];
  if (index < -n || index >= n)
    throw std::out_of_range("select(): index " + std::to_string(index) + " out of range for size " + std::to_string(n));
  if (index < 0) index += n;
  Shape sz = sizes_, st = strides_;
  sz.erase(sz.begin() + d);
  st.erase(st.begin() + d);
  return asStrided(sz, st, offset_ + index * strides_[d]);
}

Tensor Tensor::expand(const Shape& sizes) const {
  if (sizes.size() < sizes_.size())
    throw std::invalid_argument("expand: the number of sizes must be at least the tensor's rank");
  size_t lead = sizes.size() - sizes_.size();
  Shape sz(sizes.size()), st(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i < lead) {
      if (sizes[i] < 0) throw std::invalid_argument("expand: -1 is not allowed for a new leading dim");
      sz[i] = sizes[i];
      st[i] = 0;
      continue;
    }
    int64_t have = sizes_[i - lead], want = sizes[i] == -1 ? have : sizes[i];
    if (have == want) {
      sz[i] = have;
      st[i] = strides_[i - lead];
    } else if (have == 1) {
      sz[i] = want;
      st[i] = 0;
    } else {
      throw std::invalid_argument("expand: size " + std::to_string(want) + " does not match " + std::to_string(have) +
                                  " at dim " + std::to_string(i));
    }
  }
  return asStrided(sz, st, offset_);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = wrapDim(d, dim() + 1);
  Shape sz = sizes_, st = strides_;
  int64_t s = d < dim() ? sizes_[d] * strides_[d] : 1;
  sz.insert(sz.begin() + d, 1);
  st.insert(st.begin() + d, s);
  return asStrided(sz, st, offset_);
}

Tensor Tensor::squeeze() const {
  Shape sz, st;
  for (size_t i = 0; i < sizes_.size(); ++i)
    if (sizes_[i] != 1) {
      sz.push_back(sizes_[i]);
      st.push_back(strides_[i]);
    }
  return asStrided(sz, st, offset_);
}

Tensor Tensor::squeeze(int64_t d) const {
  if (dim() == 0) return *this;
  d = wrapDim(d);
  if (sizes_[d] != 1) return *this;
  Shape sz = sizes_, st = strides_;
  sz.erase(sz.begin() + d);
  st.erase(st.begin() + d);
  return asStrided(sz, st, offset_);
}

Tensor Tensor::flatten(int64_t start, int64_t end) const {
  if (dim() == 0) return reshape({1});
  start = wrapDim(start);
  end = wrapDim(end);
  if (start > end) throw std::invalid_argument("flatten: start_dim cannot come after end_dim");
  Shape sz(sizes_.begin(), sizes_.begin() + start);
  int64_t n = 1;
  for (int64_t i = start; i <= end; ++i) n *= sizes_[i];
  sz.push_back(n);
  sz.insert(sz.end(), sizes_.begin() + end + 1, sizes_.end());
  return reshape(sz);
}

namespace {

// dst <- src for a loop whose inner dim is contiguous in dst but strided in
// src, where src is contiguous along another dim `t` instead: a transposition
// (channels-last <-> NCHW, a transposed matrix). The element-by-element loop
// reads src a cache line per element there (a [1, 256, 56, 56] channels-last
// tensor made plain took 3.4 ms); this moves 16 x 16 tiles, each side's lines
// reused from L1, split over llga's threads.
template <size_t Bytes>
void transposeCopy(const StridedLoop<2>& loop, size_t t, char* dst, const char* src) {
  struct Elem {
    char b[Bytes];
  };
  constexpr int64_t kTile = 16;
  const size_t inner = loop.sizes.size() - 1;
  const int64_t rows = loop.sizes[t], cols = loop.sizes[inner];
  const int64_t dst_row = loop.strides[0][t], src_col = loop.strides[1][inner];
  std::vector<size_t> others;  // the dims other than t and inner, outer first
  int64_t outer = 1;
  for (size_t d = 0; d < inner; ++d)
    if (d != t) others.push_back(d), outer *= loop.sizes[d];
  const int64_t row_tiles = (rows + kTile - 1) / kTile, col_tiles = (cols + kTile - 1) / kTile;
  const int64_t tasks = outer * row_tiles * col_tiles;
  const int threads = rows * cols * outer < kParallelGrain ? 1 : getNumThreads();
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t task = 0; task < tasks; ++task) {
    int64_t rest = task / (row_tiles * col_tiles);
    const int64_t r0 = (task / col_tiles) % row_tiles * kTile, c0 = task % col_tiles * kTile;
    int64_t od = 0, os = 0;
    for (size_t k = others.size(); k-- > 0;) {
      const size_t d = others[k];
      const int64_t i = rest % loop.sizes[d];
      rest /= loop.sizes[d];
      od += i * loop.strides[0][d];
      os += i * loop.strides[1][d];
    }
    const int64_t r1 = std::min(rows, r0 + kTile), c1 = std::min(cols, c0 + kTile);
    for (int64_t r = r0; r < r1; ++r) {
      Elem* to = reinterpret_cast<Elem*>(dst + od + r * dst_row);
      const char* from = src + os + r * static_cast<int64_t>(Bytes);
      for (int64_t c = c0; c < c1; ++c) to[c] = *reinterpret_cast<const Elem*>(from + c * src_col);
    }
  }
}

// The dim along which src is contiguous when the loop is such a
// transposition (see transposeCopy), big enough to pay for tiling.
std::optional<size_t> transposedDim(const StridedLoop<2>& loop, int64_t itemsize) {
  const size_t nd = loop.sizes.size();
  if (nd < 2 || loop.strides[0][nd - 1] != itemsize || loop.strides[1][nd - 1] == itemsize) return std::nullopt;
  if (loop.sizes[nd - 1] < 4) return std::nullopt;
  for (size_t d = 0; d + 1 < nd; ++d)
    if (loop.strides[1][d] == itemsize && loop.sizes[d] >= 4) return d;
  return std::nullopt;
}

}  // namespace

void Tensor::copyFrom(const Tensor& src) {
  // Elements are found by strides here; a blocked layout's are not (the
  // backend's toPlain makes such a tensor plain first).
  if (src.isBlocked() || isBlocked())
    throw std::logic_error("copy: " + std::string(src.isBlocked() ? "from" : "into") + " a blocked tensor (" +
                           (src.isBlocked() ? src : *this).describe() + "): make it plain first");
  if (src.sizes_ != sizes_) {
    if (src.numel() != numel()) throw std::invalid_argument("copy: " + src.describe() + " into " + describe());
    copyFrom(src.reshape(sizes_));
    return;
  }
  if (numel() == 0) return;
  std::array<Shape, 2> bs;
  for (size_t d = 0; d < sizes_.size(); ++d) {
    bs[0].push_back(strides_[d] * static_cast<int64_t>(itemsize()));
    bs[1].push_back(src.strides_[d] * static_cast<int64_t>(src.itemsize()));
  }
  auto loop = makeLoop<2>(sizes_, bs);
  std::array<char*, 2> base{static_cast<char*>(data()), static_cast<char*>(src.data())};
  if (dtype_ == src.dtype_) {
    if (const std::optional<size_t> t = transposedDim(loop, static_cast<int64_t>(itemsize()))) {
      switch (itemsize()) {
        case 1: return transposeCopy<1>(loop, *t, base[0], base[1]);
        case 2: return transposeCopy<2>(loop, *t, base[0], base[1]);
        case 4: return transposeCopy<4>(loop, *t, base[0], base[1]);
        case 8: return transposeCopy<8>(loop, *t, base[0], base[1]);
        default: break;
      }
    }
  }
  dispatchDtype(dtype_, [&](auto dt) {
    using D = decltype(dt);
    dispatchDtype(src.dtype_, [&](auto st) {
      using S = decltype(st);
      forEachInner(loop, base, [](std::array<char*, 2> p, int64_t n, std::array<int64_t, 2> s) {
        if constexpr (std::is_same_v<D, S>) {
          if (s[0] == sizeof(D) && s[1] == sizeof(S)) {
            std::memcpy(p[0], p[1], static_cast<size_t>(n) * sizeof(D));
            return;
          }
        }
        for (int64_t i = 0; i < n; ++i) {
          S v = *reinterpret_cast<S*>(p[1] + i * s[1]);
          D* out = reinterpret_cast<D*>(p[0] + i * s[0]);
          if constexpr (std::is_same_v<D, BFloat16>) *out = BFloat16::from(static_cast<float>(v));
          else if constexpr (std::is_same_v<S, BFloat16>) *out = static_cast<D>(static_cast<float>(v));
          else *out = static_cast<D>(v);
        }
      });
    });
  });
}

Tensor Tensor::contiguous() const {
  if (isContiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor out = empty(dtype_, sizes_);
  out.copyFrom(*this);
  return out;
}

Tensor Tensor::to(ScalarType dtype) const {
  if (dtype == dtype_) return *this;
  Tensor out = empty(dtype, sizes_);
  out.copyFrom(*this);
  return out;
}

void Tensor::fill(double v) {
  Tensor src = empty(ScalarType::Double, {});
  *src.data<double>() = v;
  copyFrom(src.expand(sizes_));
}

double Tensor::item() const {
  if (numel() != 1) throw std::invalid_argument("a tensor with " + std::to_string(numel()) + " elements cannot be converted to a scalar");
  return dispatchDtype(dtype_, [&](auto t) -> double {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, BFloat16>) return static_cast<float>(*data<T>());
    else return static_cast<double>(*data<T>());
  });
}

std::string Tensor::describe() const {
  if (!defined()) return "undefined tensor";
  std::ostringstream os;
  os << scalarTypeName(dtype_) << "(";
  for (size_t i = 0; i < sizes_.size(); ++i) os << (i ? ", " : "") << sizes_[i];
  os << ")";
  return os.str();
}

std::string Tensor::shapeKey() const {
  std::string s;
  for (size_t d = 0; d < sizes_.size(); ++d) s += (d ? "x" : "") + std::to_string(sizes_[d]);
  if (sizes_.empty()) s = "scalar";
  s += ":";
  s += scalarTypeName(dtype_);
  return s;
}

}  // namespace llga
