// How a model file (driver/model_file.cpp) stores a tensor kept in a
// backend's blocked layout (a weight compacted into its primitive's layout),
// and what it records of the machine it was written on. The backend
// registers one codec (backend/dnnl/layout_record.cpp); without one, model
// files hold plain weights only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/tensor.h"

namespace llga {

class LayoutCodec {
 public:
  virtual ~LayoutCodec() = default;
  virtual std::string version() const = 0;      // the backend library's version ("2.6.3")
  virtual std::string fingerprint() const = 0;  // the ISA its kernels are chosen for ("avx512_core_amx")
  // A blocked tensor's layout as integers, and the bytes it occupies; nullopt
  // when this layout cannot be stored (the file then keeps a plain copy).
  virtual std::optional<std::pair<std::vector<int64_t>, uint64_t>> encode(const Tensor& t) const = 0;
  // The blocked tensor of `sizes` over `storage` (`nbytes` long) that `record`
  // describes; std::invalid_argument when the record is inconsistent or does
  // not fit.
  virtual Tensor decode(const std::vector<int64_t>& record, const Shape& sizes, std::shared_ptr<Storage> storage,
                        uint64_t nbytes) const = 0;
};

void setLayoutCodec(const LayoutCodec* codec);  // once, by the backend, at static initialisation
const LayoutCodec* layoutCodec();               // null when no backend registered one

}  // namespace llga
