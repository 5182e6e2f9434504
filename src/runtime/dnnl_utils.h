// Small helpers between llga tensors and oneDNN memory.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include "runtime/tensor.h"

namespace llga {

dnnl::engine& cpuEngine();

struct ExecContext {
  dnnl::stream stream{cpuEngine()};
};

bool hasDnnlType(ScalarType t);
dnnl::memory::data_type dnnlType(ScalarType t);
// A plain (strided) memory descriptor for t; rank-0 tensors become {1}.
dnnl::memory::desc plainDesc(const Tensor& t);
dnnl::memory::desc plainDesc(const Tensor& t, const Shape& as_sizes);  // same strides, fewer/more dims
// oneDNN memory over the tensor's own buffer (no copy).
dnnl::memory wrap(const Tensor& t, const dnnl::memory::desc& md);
inline dnnl::memory wrap(const Tensor& t) { return wrap(t, plainDesc(t)); }
// A tensor whose bytes oneDNN may treat as any layout (for reordered weights).
Tensor allocateFor(const dnnl::memory::desc& md);
// Short name of the implementation oneDNN chose ("brgconv:avx512_core").
std::string implName(const dnnl::primitive_desc_base& pd);

}  // namespace llga
