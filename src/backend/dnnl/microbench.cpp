#include "backend/dnnl/microbench.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "backend/dnnl/dnnl_utils.h"
#include "backend/dnnl/depthwise_int8.h"
#include "backend/dnnl/gemv.h"
#include "backend/dnnl/im2col.h"
#include "backend/dnnl/quantize.h"
#include "backend/dnnl/row_softmax.h"
#include "backend/dnnl/winograd.h"
#include "runtime/threads.h"

namespace llga {

ConvThroughput convThroughput(int64_t n, int64_t c, int64_t h, int64_t w, int64_t oc, int64_t k,
                              const std::string& dtype, int runs) {
  using dnnl::memory;
  if (dtype != "f32" && dtype != "bf16") throw std::invalid_argument("dtype must be \"f32\" or \"bf16\", got " + dtype);
  if (n <= 0 || c <= 0 || h <= 0 || w <= 0 || oc <= 0 || k <= 0 || runs <= 0)
    throw std::invalid_argument("convThroughput: every size and the run count must be positive");
  ThreadsScope threads;
  ConvThroughput r;
  r.dtype = dtype;
  const auto dt = dtype == "f32" ? memory::data_type::f32 : memory::data_type::bf16;
  const int64_t pad = (k - 1) / 2;
  memory::desc src({n, c, h, w}, dt, memory::format_tag::any);
  memory::desc wei({oc, c, k, k}, dt, memory::format_tag::any);
  memory::desc dst({n, oc, h, w}, dt, memory::format_tag::any);
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::convolution_forward prim;
  {
    const auto creating = convolutionCreationLock();
    try {
      dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src,
                                        wei, dst, {1, 1}, {pad, pad}, {pad, pad});
      pd = dnnl::convolution_forward::primitive_desc(d, cpuEngine());
    } catch (const dnnl::error&) {
      r.supported = false;
      return r;
    }
    prim = dnnl::convolution_forward(pd);
  }
  r.impl = implName(pd);
  if (dtype == "bf16" && r.impl.find("bf16") == std::string::npos && r.impl.find("avx512_core") == std::string::npos) {
    r.supported = false;  // a reference implementation: not a limit worth reporting
  }
  memory s(pd.src_desc(), cpuEngine()), wt(pd.weights_desc(), cpuEngine()), dd(pd.dst_desc(), cpuEngine());
  // Fill with small values (zeros could take fast paths in some kernels).
  for (memory* m : {&s, &wt}) {
    auto* p = static_cast<uint8_t*>(m->get_data_handle());
    for (size_t i = 0; i < m->get_desc().get_size(); ++i) p[i] = static_cast<uint8_t>(0x3c ^ (i & 7));
  }
  dnnl::stream st(cpuEngine());
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, s}, {DNNL_ARG_WEIGHTS, wt}, {DNNL_ARG_DST, dd}};
  prim.execute(st, args);
  st.wait();
  double best = 1e30;
  for (int i = 0; i < runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    prim.execute(st, args);
    st.wait();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  r.flops = 2 * n * oc * h * w * c * k * k;
  r.seconds = best;
  r.gflops = static_cast<double>(r.flops) / best * 1e-9;
  return r;
}

bool dnnlHasWinograd() {
  static const bool has = [] {
    using dnnl::memory;
    memory::desc src({1, 64, 28, 28}, memory::data_type::f32, memory::format_tag::any);
    memory::desc wei({64, 64, 3, 3}, memory::data_type::f32, memory::format_tag::any);
    const auto creating = convolutionCreationLock();
    try {
      dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_winograd, src,
                                        wei, src, {1, 1}, {1, 1}, {1, 1});
      dnnl::convolution_forward::primitive_desc pd(d, cpuEngine());
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return has;
}

std::string dnnlIsaName() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

DnnlCapabilities dnnlCapabilities() {
  DnnlCapabilities c;
  c.isa = dnnlIsaName();
  c.winograd = dnnlHasWinograd();
  c.llga_winograd = winograd::available();
  c.llga_dw_int8 = dw_int8::available();
  c.llga_gemv = gemv::available();
  c.llga_gemv_bf16 = gemv::availableBf16();
  c.llga_softmax = rowsoftmax::available();
  c.im2col_conv = im2col::available();
  c.int8_signed = !int8::hasVnni() ? "" : int8::shiftSignedActivations() ? "u8+128" : "s8";
  ConvThroughput bf = convThroughput(1, 16, 8, 8, 16, 3, "bf16", 1);
  c.bf16 = bf.supported;
  return c;
}

}  // namespace llga
