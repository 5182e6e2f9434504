// The dnnl backend's LayoutCodec (runtime/layout_codec.h): a weight kept in
// a primitive's blocked layout goes into a model file as the fields of
// oneDNN's blocked memory descriptor, written out one by one (not the C
// struct's bytes, so that any oneDNN 2.x reads them), and comes back as a
// blocked tensor over the file's bytes. Its fingerprint is oneDNN's
// effective ISA, its version oneDNN's.
//
// Record: [transposed, ndims, dims..., padded dims..., strides..., inner
// block count, inner blocks..., their dim indices...]; `transposed`: the
// descriptor is of w^T (a linear's matmul b, DnnlLayout::transposed).
#include <cstring>
#include <stdexcept>
#include <string>

#include "backend/dnnl/dnnl_utils.h"
#include "backend/dnnl/microbench.h"
#include "runtime/layout_codec.h"

namespace llga {
namespace {

class DnnlLayoutCodec final : public LayoutCodec {
 public:
  std::string version() const override {
    const dnnl_version_t* v = dnnl_version();
    return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
  }
  std::string fingerprint() const override { return dnnlIsaName(); }

  std::optional<std::pair<std::vector<int64_t>, uint64_t>> encode(const Tensor& t) const override {
    if (!t.isBlocked() || t.dtype() != ScalarType::Float) return std::nullopt;
    const auto* layout = dynamic_cast<const DnnlLayout*>(t.blockedLayout().get());
    if (!layout) return std::nullopt;
    const dnnl_memory_desc_t& d = layout->md.data;
    if (d.format_kind != dnnl_blocked || d.data_type != dnnl_f32 || d.offset0 != 0 || d.extra.flags != 0)
      return std::nullopt;
    for (int i = 0; i < d.ndims; ++i)
      if (d.padded_offsets[i] != 0) return std::nullopt;
    std::vector<int64_t> r{layout->transposed ? 1 : 0, d.ndims};
    for (const auto* v : {d.dims, d.padded_dims, d.format_desc.blocking.strides}) r.insert(r.end(), v, v + d.ndims);
    const int nb = d.format_desc.blocking.inner_nblks;
    r.push_back(nb);
    r.insert(r.end(), d.format_desc.blocking.inner_blks, d.format_desc.blocking.inner_blks + nb);
    r.insert(r.end(), d.format_desc.blocking.inner_idxs, d.format_desc.blocking.inner_idxs + nb);
    return std::make_pair(std::move(r), static_cast<uint64_t>(layout->md.get_size()));
  }

  Tensor decode(const std::vector<int64_t>& r, const Shape& sizes, std::shared_ptr<Storage> storage,
                uint64_t nbytes) const override {
    auto bad = [](const std::string& why) { return std::invalid_argument("a pre-packed weight's layout: " + why); };
    size_t at = 0;
    auto next = [&]() {
      if (at >= r.size()) throw bad("its record ends early");
      return r[at++];
    };
    const bool transposed = next() != 0;
    const int64_t nd = next();
    if (nd <= 0 || nd > DNNL_MAX_NDIMS) throw bad(std::to_string(nd) + " dims");
    dnnl_memory_desc_t d;
    std::memset(&d, 0, sizeof d);
    d.ndims = static_cast<int>(nd);
    d.data_type = dnnl_f32;
    d.format_kind = dnnl_blocked;
    std::vector<int64_t> dims(static_cast<size_t>(nd)), padded(static_cast<size_t>(nd)), strides(static_cast<size_t>(nd));
    for (auto* v : {&dims, &padded, &strides})
      for (auto& x : *v) x = next();
    const int64_t nb = next();
    if (nb < 0 || nb > DNNL_MAX_NDIMS) throw bad(std::to_string(nb) + " inner blocks");
    std::vector<int64_t> blks(static_cast<size_t>(nb)), idxs(static_cast<size_t>(nb));
    for (auto* v : {&blks, &idxs})
      for (auto& x : *v) x = next();
    if (at != r.size()) throw bad("its record is longer than its fields");
    std::vector<int64_t> block(static_cast<size_t>(nd), 1);
    for (int64_t i = 0; i < nb; ++i) {
      const int64_t b = blks[static_cast<size_t>(i)], idx = idxs[static_cast<size_t>(i)];
      if (b <= 0 || b > (1 << 16) || idx < 0 || idx >= nd) throw bad("an inner block out of range");
      block[static_cast<size_t>(idx)] *= b;
      if (block[static_cast<size_t>(idx)] > (1 << 16)) throw bad("inner blocks too large");
      d.format_desc.blocking.inner_blks[i] = b;
      d.format_desc.blocking.inner_idxs[i] = idx;
    }
    d.format_desc.blocking.inner_nblks = static_cast<int>(nb);
    for (size_t i = 0; i < static_cast<size_t>(nd); ++i) {
      if (dims[i] <= 0 || dims[i] > (int64_t{1} << 40) || padded[i] < dims[i] || padded[i] > (int64_t{1} << 40) ||
          padded[i] % block[i] != 0 || strides[i] < 0 || strides[i] > (int64_t{1} << 48))
        throw bad("dim " + std::to_string(i) + " out of range");
      d.dims[i] = dims[i];
      d.padded_dims[i] = padded[i];
      d.format_desc.blocking.strides[i] = strides[i];
    }
    const dnnl::memory::desc md(d);
    if (md.get_size() == 0 || md.get_size() != nbytes)
      throw bad("it spans " + std::to_string(md.get_size()) + " bytes, the file holds " + std::to_string(nbytes));
    // The descriptor's dims are the tensor's sizes as its reader sees them
    // (DnnlLayout: as they are, grouped, or transposed).
    const size_t n = static_cast<size_t>(nd);
    const bool same = !transposed && dims == sizes;
    const bool grouped = !transposed && n == sizes.size() + 1 && !sizes.empty() && dims[0] * dims[1] == sizes[0] &&
                         std::equal(dims.begin() + 2, dims.end(), sizes.begin() + 1);
    const bool transposed_fits = transposed && n == 2 && sizes.size() == 2 && dims[0] == sizes[1] && dims[1] == sizes[0];
    if (!same && !grouped && !transposed_fits) throw bad("its dims do not fit the tensor's sizes");
    return Tensor::blocked(std::move(storage), ScalarType::Float, sizes, makeLayout(md, true, transposed));
  }
};

const DnnlLayoutCodec g_codec;
const bool g_registered = (setLayoutCodec(&g_codec), true);

}  // namespace
}  // namespace llga
