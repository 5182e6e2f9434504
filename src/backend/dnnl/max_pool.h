// llga's own 2-D max pooling over nChw8c (AVX2), where oneDNN's is slow
// (global pooling: global_pool.h).
//
// Why: oneDNN 2.6's jit:avx2 max pooling took 390-430 us for resnet's stem
// pool (1x64x112x112, 3x3 stride 2) on an AVX2 EPYC, where ONNX Runtime's
// took 184: every model with a max-pooled stem paid it. This kernel takes
// one 8-channel vector per output pixel and window element (maximum with
// PyTorch's NaN rule: a NaN anywhere in the window gives NaN), rows split
// across llga's threads.
#pragma once

#include <cstdint>

namespace llga::pool8c {

// cpuRunsAvx2Kernels() (backend/dnnl/dnnl_utils.h).
bool available();

struct Geometry {
  int64_t n = 0, c = 0, h = 0, w = 0;  // input, nChw8c, c a multiple of 8
  int64_t oh = 0, ow = 0;              // output, nChw8c
  int64_t kh = 0, kw = 0, sh = 1, sw = 1, pad_t = 0, pad_l = 0;  // dilation 1
};

// dst = max over each window of src (positions outside the input skipped;
// every window holds at least one input position, as PyTorch sizes them).
void run(const Geometry& g, const float* src, float* dst);

}  // namespace llga::pool8c
