// The machine's limit: what one oneDNN convolution achieves here.
// Used by the benchmark suite to put every model's GFLOP/s in proportion.
#pragma once

#include <cstdint>
#include <string>

namespace llga {

struct ConvThroughput {
  double gflops = 0;      // best over the timed runs
  double seconds = 0;     // best time of one execution
  int64_t flops = 0;      // of one execution
  std::string impl;       // oneDNN's implementation, e.g. "brgconv:avx512_core"
  std::string dtype;      // "f32" or "bf16"
  bool supported = true;  // false when the CPU has no such implementation (bf16 without AVX512-BF16)
};

// A forward 2-D convolution n x c x h x w, oc output channels, k x k kernel,
// stride 1, "same" padding, every layout format_tag::any. `dtype` is "f32" or
// "bf16" (bf16 src/weights, f32 accumulate, bf16 dst). Runs `runs` times after
// a warm-up, with the current oneDNN thread count.
ConvThroughput convThroughput(int64_t n, int64_t c, int64_t h, int64_t w, int64_t oc, int64_t k,
                              const std::string& dtype, int runs);

// What oneDNN offers on this CPU (after ONEDNN_MAX_CPU_ISA), asked of oneDNN
// itself: tests and reports read llga's decisions against these, never
// against one machine's choice.
struct DnnlCapabilities {
  std::string isa;        // oneDNN's effective ISA: "avx2", "avx512_core", "avx512_core_bf16", "avx512_core_amx", ...
  bool winograd = false;  // a Winograd fp32 convolution can be created
  bool llga_winograd = false;  // llga's own Winograd (backend/dnnl/winograd.h) can run, for where oneDNN has none
  bool llga_dw_int8 = false;   // llga's own int8 depthwise convolution (backend/dnnl/depthwise_int8.h) can run
  bool llga_gemv = false;      // llga's own one-row fp32 product (backend/dnnl/gemv.h) can run
  bool llga_gemv_bf16 = false; // and its bf16 one (AVX512-BF16)
  bool im2col_conv = false;    // 1-D convolutions that pay run as im2col and a matmul (backend/dnnl/im2col.h)
  bool llga_softmax = false;   // llga's own softmax over the last dim (backend/dnnl/row_softmax.h) can run
  // how a convolution's signed int8 activation is written (int8::shiftSignedActivations):
  // "u8+128" (the s8 grid shifted), "s8", or "" without VNNI (no int8)
  std::string int8_signed;
  bool bf16 = false;      // a bf16 convolution runs on a jit kernel (native with AVX512-BF16/AMX, emulated on AVX-512)
};
DnnlCapabilities dnnlCapabilities();  // runs a small bf16 convolution to find out
std::string dnnlIsaName();            // DnnlCapabilities::isa alone (no primitive is run)
// Whether oneDNN has a Winograd fp32 convolution here (asked once).
bool dnnlHasWinograd();

}  // namespace llga
