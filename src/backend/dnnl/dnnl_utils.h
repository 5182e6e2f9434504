// Small helpers between llga tensors and oneDNN memory.
#pragma once

#include <optional>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include <unordered_map>

#include "backend/dnnl/bound_args.h"
#include "runtime/exec_context.h"
#include "runtime/tensor.h"

namespace llga {

// A primitive built from `d` with a user-managed scratchpad, whose descriptor
// goes to `scratch` (pass it to execute()); `impl`, if given, gets oneDNN's
// implementation name ("jit:avx512_core").
template <typename Prim>
Prim makePrimitive(const typename Prim::desc& d, dnnl::memory::desc& scratch, std::string* impl = nullptr) {
  typename Prim::primitive_desc pd(d, scratchpadAttr(), cpuEngine());
  scratch = pd.scratchpad_desc();
  if (impl) *impl = pd.impl_info_str();
  return Prim(pd);
}

// src -> dst reorder (a reorder primitive with a user scratchpad).
void reorder(ExecContext& ctx, const dnnl::memory& src, const dnnl::memory& dst);

bool hasDnnlType(ScalarType t);
dnnl::memory::data_type dnnlType(ScalarType t);
// The stride of a dim of size 1 addresses nothing, but oneDNN reads a layout
// from all strides: a permuted 96x1x1 broadcast (1x1x1x96 with a transposed
// view's strides) read as `adbc` and sent a binary to the reference kernel
// (convnext's layer scale: 24 ms instead of 0.1), and a matmul with such an
// operand failed to execute. Such a dim gets the stride it would have as the
// outermost of the dims after it, so a row-major tensor reads as row-major.
Shape unitDimStrides(const Shape& sizes, Shape strides);
// Whether oneDNN can describe t's strides: every dim of extent > 1 has a
// positive stride, and those dims nest (sorted by stride, each stride is at
// least the span of the dims inside it). A view taking every other row of a
// 5x3 matrix (strides 6, 1 over 3x3) does not nest: oneDNN refuses to make a
// descriptor for it, so kernels run such tensors through their own loops or
// a dense copy.
bool dnnlDescribable(const Tensor& t);
// A plain (strided) memory descriptor for t (size-1 dims as unitDimStrides);
// rank-0 tensors become {1}.
// The strides (in elements) of a dense layout without inner blocks (nchw,
// nhwc, ...); throws std::logic_error for a blocked one (nChw16c).
Shape denseStrides(const dnnl::memory::desc& md);
dnnl::memory::desc plainDesc(const Tensor& t);
dnnl::memory::desc plainDesc(const Tensor& t, const Shape& as_sizes);  // same strides, fewer/more dims
// oneDNN memory over the tensor's own buffer (no copy).
dnnl::memory wrap(const Tensor& t, const dnnl::memory::desc& md);
inline dnnl::memory wrap(const Tensor& t) { return wrap(t, plainDesc(t)); }
// A tensor whose bytes oneDNN may treat as any layout: by default a cached
// weight in a primitive's layout, counted as weight cache.
Tensor allocateFor(const dnnl::memory::desc& md, AllocPurpose purpose = AllocPurpose::WeightCache);
// The constant weight `w` (described by `plain`) reordered into `md`, made
// once and shared by every kernel that asks for the same tensor in the same
// layout while any of them holds it (shape specializations of one model
// share their weights this way). Counted as weight cache.
// When `md` equals `plain` (see PlainWeightsScope), `w`'s own bytes, no copy.
Tensor reorderedWeight(const Tensor& w, const dnnl::memory::desc& plain, const dnnl::memory::desc& md);

// Held while a oneDNN convolution or deconvolution primitive (descriptor) is
// made: one at a time in the process. oneDNN 2.6's brgemm convolutions keep
// the weights' VNNI granularity in one process-wide variable while they pick
// their blocking (brg_blocking_t::last_ic_block_size: 1 for f32, 2 for bf16,
// 4 for int8; thread-local from oneDNN 2.7), so two threads making
// convolutions of two data types at once could each get the other's
// blocking: wrong results and reads past a buffer (four threads, fp32 and
// bf16 models on new shapes: 4-9 of 4,800 calls a run, 1.6 off or 1e34).
// Recursive: choosing a kernel may measure one (microbench.h). A caller
// that makes oneDNN convolutions itself (PyTorch in the same process) does
// not take it.
std::unique_lock<std::recursive_mutex> convolutionCreationLock();

// oneDNN memory of layout `md` for this call only (counted as an activation);
// `keep` owns the bytes and must outlive the memory's use.
dnnl::memory temporary(const dnnl::memory::desc& md, Tensor& keep);
// A oneDNN layout a tensor's bytes are in (Tensor::blocked).
// `md`'s dims are the tensor's sizes, or what a primitive sees of a weight
// compacted into its layout: a grouped convolution's (groups, out/groups,
// in, ...) or, `transposed`, a linear's w as the matmul's b = w^T.
struct DnnlLayout final : BlockedLayout {
  DnnlLayout(dnnl::memory::desc md, std::string name, bool transposed = false)
      : md(std::move(md)), name_(std::move(name)), transposed(transposed) {}
  const std::string& name() const override { return name_; }
  Tensor toPlain(ExecContext& ctx, const Tensor& t) const override;  // contiguous in t's own sizes
  dnnl::memory::desc md;
  std::string name_;  // "nChw16c"
  bool transposed;
};
// The oneDNN descriptor of a blocked tensor's layout (t.isBlocked(); every blocked tensor is the backend's).
inline const dnnl::memory::desc& blockedDesc(const Tensor& t) {
  return static_cast<const DnnlLayout&>(*t.blockedLayout()).md;
}
std::shared_ptr<const BlockedLayout> makeLayout(const dnnl::memory::desc& md, bool weights = false,
                                                bool transposed = false);  // named as layoutName
// Appends a blocked descriptor's layout (strides, inner blocks, padded dims) to a primitive cache key.
void addBlockedToKey(std::vector<int64_t>& key, const dnnl::memory::desc& md);
// oneDNN's name-like spelling of a layout: "nchw", "nhwc", "nChw16c" (for
// weights, "OIhw16i16o"), from the blocking strides and inner blocks.
std::string layoutName(const dnnl::memory::desc& md, bool weights = false);
// oneDNN memory over the tensor's bytes in whatever layout they are (blocked or strided).
dnnl::memory memoryOf(const Tensor& t);

// Short name of the implementation oneDNN chose ("brgconv:avx512_core").
std::string implName(const dnnl::primitive_desc_base& pd);
// oneDNN's reference kernel ("ref:any"): correct but 50-200x slower than its jit ones.
inline bool isReference(const std::string& impl) { return impl.rfind("ref", 0) == 0; }
inline bool isReference(const dnnl::primitive_desc_base& pd) { return isReference(implName(pd)); }

// oneDNN's channel-blocked layouts for a rank-4 or rank-5 activation, widest
// first (none for other ranks): what to try where oneDNN has only a scalar
// kernel for plain NCHW (pooling, batch_norm).
std::vector<dnnl::memory::format_tag> blockedTags(int64_t rank);
// A float tensor laid out exactly in one of blockedTags(its rank) or, 3-D,
// nCw16c or nCw8c, its channels whole blocks (no padding): the tag and its
// block (16 or 8).
struct ChannelBlocking {
  dnnl::memory::format_tag tag;
  int64_t block;
};
std::optional<ChannelBlocking> channelBlocking(const Tensor& t);

// Whether the CPU itself has AVX2 and FMA (llga's swish needs no more).
bool cpuHasAvx2Fma();
// Whether llga's own AVX2 kernels (Winograd, max pooling) may run: the CPU
// has AVX2 and FMA and oneDNN's effective ISA, which ONEDNN_MAX_CPU_ISA caps,
// is AVX2 or above (an emulated older CPU gets none of them either).
bool cpuRunsAvx2Kernels();
// The same for llga's own AVX-512 kernels (the one-row product, the softmax):
// oneDNN's effective ISA is avx512_core or above.
bool cpuRunsAvx512Kernels();
// An LLGA_* switch (LLGA_GEMV, LLGA_WINOGRAD, ...): on unless the variable
// is "0". Read at each decision, so a test or bench.ab can flip it in a
// running process.
bool envSwitchOn(const char* name);

}  // namespace llga
