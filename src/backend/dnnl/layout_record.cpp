#include "backend/dnnl/layout_record.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "backend/dnnl/dnnl_utils.h"

namespace llga {

std::optional<LayoutRecord> layoutRecordOf(const Tensor& t) {
  if (!t.isBlocked() || t.dtype() != ScalarType::Float) return std::nullopt;
  const auto* layout = dynamic_cast<const DnnlLayout*>(t.blockedLayout().get());
  if (!layout) return std::nullopt;
  const dnnl_memory_desc_t& d = layout->md.data;
  if (d.format_kind != dnnl_blocked || d.data_type != dnnl_f32 || d.offset0 != 0 || d.extra.flags != 0) return std::nullopt;
  LayoutRecord r;
  r.transposed = layout->transposed;
  for (int i = 0; i < d.ndims; ++i) {
    if (d.padded_offsets[i] != 0) return std::nullopt;
    r.dims.push_back(d.dims[i]);
    r.padded_dims.push_back(d.padded_dims[i]);
    r.strides.push_back(d.format_desc.blocking.strides[i]);
  }
  for (int i = 0; i < d.format_desc.blocking.inner_nblks; ++i) {
    r.inner_blks.push_back(d.format_desc.blocking.inner_blks[i]);
    r.inner_idxs.push_back(d.format_desc.blocking.inner_idxs[i]);
  }
  return r;
}

uint64_t layoutBytes(const Tensor& t) { return blockedDesc(t).get_size(); }

Tensor blockedFromRecord(const LayoutRecord& r, const Shape& sizes, std::shared_ptr<Storage> storage, uint64_t nbytes) {
  auto bad = [](const std::string& why) { return std::invalid_argument("a pre-packed weight's layout: " + why); };
  const size_t nd = r.dims.size();
  if (nd == 0 || nd > DNNL_MAX_NDIMS || r.padded_dims.size() != nd || r.strides.size() != nd)
    throw bad(std::to_string(nd) + " dims");
  if (r.inner_blks.size() != r.inner_idxs.size() || r.inner_blks.size() > DNNL_MAX_NDIMS)
    throw bad("inconsistent inner blocks");
  dnnl_memory_desc_t d;
  std::memset(&d, 0, sizeof d);
  d.ndims = static_cast<int>(nd);
  d.data_type = dnnl_f32;
  d.format_kind = dnnl_blocked;
  std::vector<int64_t> block(nd, 1);
  for (size_t i = 0; i < r.inner_blks.size(); ++i) {
    const int64_t b = r.inner_blks[i], idx = r.inner_idxs[i];
    if (b <= 0 || b > (1 << 16) || idx < 0 || static_cast<size_t>(idx) >= nd) throw bad("an inner block out of range");
    block[static_cast<size_t>(idx)] *= b;
    if (block[static_cast<size_t>(idx)] > (1 << 16)) throw bad("inner blocks too large");
    d.format_desc.blocking.inner_blks[i] = b;
    d.format_desc.blocking.inner_idxs[i] = idx;
  }
  d.format_desc.blocking.inner_nblks = static_cast<int>(r.inner_blks.size());
  for (size_t i = 0; i < nd; ++i) {
    if (r.dims[i] <= 0 || r.dims[i] > (int64_t{1} << 40) || r.padded_dims[i] < r.dims[i] ||
        r.padded_dims[i] > (int64_t{1} << 40) || r.padded_dims[i] % block[i] != 0 || r.strides[i] < 0 ||
        r.strides[i] > (int64_t{1} << 48))
      throw bad("dim " + std::to_string(i) + " out of range");
    d.dims[i] = r.dims[i];
    d.padded_dims[i] = r.padded_dims[i];
    d.format_desc.blocking.strides[i] = r.strides[i];
  }
  const dnnl::memory::desc md(d);
  if (md.get_size() == 0 || md.get_size() != nbytes)
    throw bad("it spans " + std::to_string(md.get_size()) + " bytes, the file holds " + std::to_string(nbytes));
  // The descriptor's dims must be the tensor's sizes as its reader sees them
  // (DnnlLayout: as is, grouped, or transposed).
  const bool same = !r.transposed && r.dims == sizes;
  const bool grouped = !r.transposed && nd == sizes.size() + 1 && !sizes.empty() && r.dims[0] * r.dims[1] == sizes[0] &&
                       std::equal(r.dims.begin() + 2, r.dims.end(), sizes.begin() + 1);
  const bool transposed = r.transposed && nd == 2 && sizes.size() == 2 && r.dims[0] == sizes[1] && r.dims[1] == sizes[0];
  if (!same && !grouped && !transposed) throw bad("its dims do not fit the tensor's sizes");
  return Tensor::blocked(std::move(storage), ScalarType::Float, sizes, makeLayout(md, true, r.transposed));
}

}  // namespace llga
