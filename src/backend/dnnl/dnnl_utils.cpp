#include "backend/dnnl/dnnl_utils.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "backend/dnnl/image_layout.h"
#include "backend/dnnl/ops/primitive_cache.h"
#include "runtime/plan.h"

namespace llga {

BoundArgs::Slot& BoundArgs::slot(int arg) {
  for (Slot& s : slots_)
    if (s.arg == arg) return s;
  return slots_.emplace_back(Slot{arg, nullptr, nullptr, dnnl::memory(), nullptr, false});
}

dnnl::memory BoundArgs::bind(int arg, const dnnl::memory::desc& md, void* data, std::shared_ptr<const void> owner) {
  Slot& s = slot(arg);
  s.used = true;
  if (s.md == &md && s.mem) {
    if (s.data != data) s.mem.set_data_handle(data);
    s.data = data;
    return s.mem;
  }
  s.mem = dnnl::memory(md, cpuEngine(), data);
  s.md = &md;
  s.data = data;
  s.owner = std::move(owner);
  return s.mem;
}

dnnl::memory BoundArgs::bind(int arg, const dnnl::memory& m) {
  Slot& s = slot(arg);
  s.used = true;
  s.md = nullptr;
  s.data = nullptr;
  s.owner.reset();
  if (s.mem.get(true) != m.get(true)) s.mem = m;
  return s.mem;
}

namespace {
// oneDNN reports a failed allocation (its scratchpad, a jit kernel's code
// buffer, a primitive's workspace) as dnnl::error: the runtime makes it an
// OutOfMemory naming the node, as it does std::bad_alloc.
const bool kOutOfMemoryTest = [] {
  setOutOfMemoryTest([](const std::exception& e) {
    const auto* d = dynamic_cast<const dnnl::error*>(&e);
    return d && d->status == dnnl_out_of_memory;
  });
  return true;
}();
}  // namespace

void BoundArgs::execute(ExecContext& ctx, const dnnl::primitive& prim, const dnnl::memory::desc& scratch_md) {
  if (const size_t bytes = scratch_md.get_size()) bind(DNNL_ARG_SCRATCHPAD, scratch_md, ctx.scratchpadData(bytes));
  c_args_.clear();
  for (Slot& s : slots_) {
    if (s.used) c_args_.push_back({s.arg, s.mem.get()});
    s.used = false;
  }
  dnnl::error::wrap_c_api(
      dnnl_primitive_execute(prim.get(), ctx.stream.get(), static_cast<int>(c_args_.size()), c_args_.data()),
      "could not execute a primitive");
  ctx.stream.wait();
}


void reorder(ExecContext& ctx, const dnnl::memory& src, const dnnl::memory& dst) {
  // a CNN's input into its stem's channels-last (oneDNN's reorder gathers it: image_layout.h)
  const dnnl::memory::data_type to = dst.get_desc().data_type();
  if ((to == dnnl::memory::data_type::f32 || to == dnnl::memory::data_type::bf16) &&
      image::takes(src.get_desc(), dst.get_desc()))
    return image::toChannelsLast(src, dst);
  dnnl::reorder::primitive_desc pd(src, dst, scratchpadAttr());
  execute(ctx, dnnl::reorder(pd), pd.scratchpad_desc(), {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}});
}

bool hasDnnlType(ScalarType t) {
  return t == ScalarType::Float || t == ScalarType::BFloat16 || t == ScalarType::Int || t == ScalarType::Char ||
         t == ScalarType::Byte;
}

dnnl::memory::data_type dnnlType(ScalarType t) {
  using dt = dnnl::memory::data_type;
  switch (t) {
    case ScalarType::Float: return dt::f32;
    case ScalarType::BFloat16: return dt::bf16;
    case ScalarType::Int: return dt::s32;
    case ScalarType::Char: return dt::s8;
    case ScalarType::Byte: return dt::u8;
    default: throw std::invalid_argument("oneDNN has no " + std::string(scalarTypeName(t)) + " data type");
  }
}

Shape unitDimStrides(const Shape& sizes, Shape strides) {
  for (size_t d = sizes.size(); d-- > 0;) {
    if (sizes[d] != 1) continue;
    int64_t span = 1;
    for (size_t e = d + 1; e < sizes.size(); ++e) span = std::max(span, strides[e] * std::max<int64_t>(sizes[e], 1));
    strides[d] = span;
  }
  return strides;
}

bool dnnlDescribable(const Tensor& t) {
  // oneDNN takes at most DNNL_MAX_NDIMS dims, positive strides, and dims
  // that nest (Tensor::stridesNest, which sorts them on the stack)
  if (t.dim() > DNNL_MAX_NDIMS) return false;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) > 1 && t.stride(d) <= 0) return false;
  return t.stridesNest();
}

dnnl::memory::desc plainDesc(const Tensor& t) { return plainDesc(t, t.sizes()); }

dnnl::memory::desc plainDesc(const Tensor& t, const Shape& sizes) {
  if (sizes.empty()) return dnnl::memory::desc({1}, dnnlType(t.dtype()), dnnl::memory::dims{1});
  if (sizes == t.sizes()) return dnnl::memory::desc(sizes, dnnlType(t.dtype()), unitDimStrides(sizes, t.strides()));
  return dnnl::memory::desc(sizes, dnnlType(t.dtype()), Tensor::contiguousStrides(sizes));
}

dnnl::memory wrap(const Tensor& t, const dnnl::memory::desc& md) { return dnnl::memory(md, cpuEngine(), t.data()); }

Tensor allocateFor(const dnnl::memory::desc& md, AllocPurpose purpose) {
  size_t bytes = md.get_size();
  auto st = Storage::allocate(bytes, purpose);
  return Tensor::fromStorage(st, ScalarType::Byte, {static_cast<int64_t>(bytes)}, {1}, 0);
}

namespace {

struct WeightKey {
  const void* data;
  std::string layouts;  // the plain and the target descriptors' bytes
  bool operator<(const WeightKey& o) const { return data != o.data ? data < o.data : layouts < o.layouts; }
};
struct WeightEntry {
  std::weak_ptr<Storage> original;  // the entry is valid only for this very buffer
  std::weak_ptr<Storage> reordered;
};


}  // namespace


std::vector<dnnl::memory::format_tag> blockedTags(int64_t rank) {
  using tag = dnnl::memory::format_tag;
  if (rank == 4) return {tag::nChw16c, tag::nChw8c};
  if (rank == 5) return {tag::nCdhw16c, tag::nCdhw8c};
  return {};
}

std::optional<ChannelBlocking> channelBlocking(const Tensor& t) {
  if (!t.isBlocked() || t.dtype() != ScalarType::Float) return std::nullopt;
  const dnnl::memory::desc md = blockedDesc(t);
  using ft = dnnl::memory::format_tag;
  const std::vector<ft> tags = t.dim() == 3 ? std::vector<ft>{ft::nCw16c, ft::nCw8c} : blockedTags(t.dim());
  for (dnnl::memory::format_tag tag : tags)
    if (md == dnnl::memory::desc(t.sizes(), dnnl::memory::data_type::f32, tag)) {
      const int64_t block = md.data.format_desc.blocking.inner_blks[0];
      if (block > 0 && t.size(1) % block == 0) return ChannelBlocking{tag, block};
    }
  return std::nullopt;
}

bool cpuHasAvx2Fma() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

bool cpuRunsAvx2Kernels() {
  static const bool ok = [] {
    if (!cpuHasAvx2Fma()) return false;
    const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
    return isa != dnnl::cpu_isa::sse41 && isa != dnnl::cpu_isa::avx;
  }();
  return ok;
}

bool envSwitchOn(const char* name) {
  const char* env = std::getenv(name);
  return !(env && std::strcmp(env, "0") == 0);
}

bool cpuRunsAvx512Kernels() {
  static const bool ok = [] {
    switch (dnnl::get_effective_cpu_isa()) {
      case dnnl::cpu_isa::avx512_core:
      case dnnl::cpu_isa::avx512_core_vnni:
      case dnnl::cpu_isa::avx512_core_bf16:
      case dnnl::cpu_isa::avx512_core_amx: return true;
      default: return false;
    }
  }();
  return ok;
}

std::unique_lock<std::recursive_mutex> convolutionCreationLock() {
  static std::recursive_mutex mu;
  return std::unique_lock<std::recursive_mutex>(mu);
}

Tensor reorderedWeight(const Tensor& w, const dnnl::memory::desc& plain, const dnnl::memory::desc& md) {
  if (plain == md)  // already in the wanted layout (a compacted weight, or plain weights wanted): itself
    return Tensor::fromStorage(w.storage(), ScalarType::Byte, {static_cast<int64_t>(md.get_size())}, {1},
                               w.offset() * static_cast<int64_t>(w.itemsize()));
  static std::mutex mu;
  static std::map<WeightKey, WeightEntry> cache;
  static size_t inserts = 0;
  WeightKey key{w.data(), std::string(reinterpret_cast<const char*>(&plain.data), sizeof(plain.data)) +
                              std::string(reinterpret_cast<const char*>(&md.data), sizeof(md.data))};
  auto view = [&md](std::shared_ptr<Storage> st) {
    return Tensor::fromStorage(std::move(st), ScalarType::Byte, {static_cast<int64_t>(md.get_size())}, {1}, 0);
  };
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(key); it != cache.end()) {
      auto orig = it->second.original.lock();
      if (auto st = it->second.reordered.lock(); st && orig && orig == w.storage()) return view(std::move(st));
    }
  }
  Tensor out = allocateFor(md, AllocPurpose::WeightCache);
  ExecContext ctx;
  reorder(ctx, dnnl::memory(plain, cpuEngine(), w.data()), dnnl::memory(md, cpuEngine(), out.data()));
  std::lock_guard<std::mutex> lock(mu);
  if (++inserts % 64 == 0) std::erase_if(cache, [](const auto& kv) { return kv.second.reordered.expired(); });
  cache[key] = WeightEntry{w.storage(), out.storage()};
  return out;
}

dnnl::memory temporary(const dnnl::memory::desc& md, Tensor& keep) {
  keep = allocateFor(md, AllocPurpose::Activation);
  return dnnl::memory(md, cpuEngine(), keep.data());
}

void addBlockedToKey(std::vector<int64_t>& key, const dnnl::memory::desc& md) {
  const dnnl_memory_desc_t& d = md.data;
  const auto& b = d.format_desc.blocking;
  key.push_back(-2 - d.format_kind);  // apart from any size or stride
  key.insert(key.end(), d.padded_dims, d.padded_dims + d.ndims);
  key.insert(key.end(), b.strides, b.strides + d.ndims);
  key.push_back(b.inner_nblks);
  key.insert(key.end(), b.inner_blks, b.inner_blks + b.inner_nblks);
  key.insert(key.end(), b.inner_idxs, b.inner_idxs + b.inner_nblks);
}

std::shared_ptr<const BlockedLayout> makeLayout(const dnnl::memory::desc& md, bool weights, bool transposed) {
  return std::make_shared<const DnnlLayout>(md, layoutName(md, weights), transposed);
}

std::string layoutName(const dnnl::memory::desc& md, bool weights) {
  const dnnl_memory_desc_t& d = md.data;
  if (d.format_kind == dnnl_format_kind_wino) {
    // oneDNN's Winograd weight formats differ between its kernels (and, for
    // 4x3, with the problem's shape): name the format and its blocking, so a
    // reader can tell two of them apart.
    const dnnl_wino_desc_t& w = d.format_desc.wino_desc;
    static const char* const kFormats[] = {"undef", "aaOIoi", "aaOio", "aaOBiOo", "OBaaIBOIio"};
    const int f = static_cast<int>(w.wino_format);
    return std::string("wino_") + (f >= 0 && f < 5 ? kFormats[f] : "?") + "_a" + std::to_string(w.alpha) + "_i" +
           std::to_string(w.ic_block) + "x" + std::to_string(w.ic2_block) + "_o" + std::to_string(w.oc_block) + "x" +
           std::to_string(w.oc2_block);
  }
  if (d.format_kind != dnnl_blocked) return d.format_kind == dnnl_format_kind_any ? "any" : "opaque";
  const int nd = d.ndims;
  const char* letters = weights ? (nd == 3 ? "oiw" : nd == 4 ? "oihw" : nd == 5 ? "goihw" : "abcdefghijkl")
                                : (nd == 3 ? "ncw" : nd == 4 ? "nchw" : nd == 5 ? "ncdhw" : "abcdefghijkl");
  const auto& b = d.format_desc.blocking;
  std::vector<int> order(static_cast<size_t>(nd));
  for (int i = 0; i < nd; ++i) order[static_cast<size_t>(i)] = i;
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return b.strides[x] > b.strides[y]; });
  std::string s;
  for (int i : order) {
    bool inner = false;
    for (int k = 0; k < b.inner_nblks; ++k) inner |= b.inner_idxs[k] == i;
    char c = letters[i];
    s += inner ? static_cast<char>(c - 'a' + 'A') : c;
  }
  for (int k = 0; k < b.inner_nblks; ++k) s += std::to_string(b.inner_blks[k]) + letters[b.inner_idxs[k]];
  if (d.data_type == dnnl_bf16) s += ":bf16";  // fp32 unsaid
  return s;
}

Shape denseStrides(const dnnl::memory::desc& md) {
  const dnnl_memory_desc_t& d = md.data;
  if (d.format_kind != dnnl_blocked || d.format_desc.blocking.inner_nblks != 0)
    throw std::logic_error("denseStrides: " + layoutName(md) + " is not a dense strided layout");
  return Shape(d.format_desc.blocking.strides, d.format_desc.blocking.strides + d.ndims);
}

dnnl::memory memoryOf(const Tensor& t) {
  if (t.isBlocked()) return dnnl::memory(blockedDesc(t), cpuEngine(), t.data());
  return wrap(t);
}

Tensor DnnlLayout::toPlain(ExecContext& ctx, const Tensor& t) const {
  Tensor out = Tensor::empty(t.dtype(), t.sizes());
  const dnnl::memory::dims dims = md.dims();
  const Shape& sizes = t.sizes();
  dnnl::memory::desc dst;
  if (transposed && sizes.size() == 2 && dims.size() == 2 && dims[0] == sizes[1] && dims[1] == sizes[0]) {
    dst = dnnl::memory::desc(dims, md.data_type(), dnnl::memory::dims{1, sizes[1]});  // w^T over contiguous w
  } else if (!transposed && dims == sizes) {
    dst = plainDesc(out);
  } else if (!transposed && dims.size() == sizes.size() + 1 && !sizes.empty() && dims[0] * dims[1] == sizes[0] &&
             std::equal(dims.begin() + 2, dims.end(), sizes.begin() + 1)) {
    dst = plainDesc(out, dims);  // grouped: (g, o/g, ...) over contiguous (o, ...)
  } else {
    throw std::invalid_argument("a blocked tensor (" + name_ + ") whose layout's dims do not match its sizes");
  }
  reorder(ctx, memoryOf(t), wrap(out, dst));
  return out;
}

PrimitiveCacheStats& primitiveCacheStats() {
  static PrimitiveCacheStats stats;
  return stats;
}

std::string implName(const dnnl::primitive_desc_base& pd) { return pd.impl_info_str(); }

}  // namespace llga
