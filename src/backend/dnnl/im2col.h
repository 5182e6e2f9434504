// A 1-D convolution as one matrix product: the input's windows copied into
// rows (im2col), times the weights as a [c * k, oc] matrix.
//
// Why: oneDNN 2.6's brgconv on a 1-D convolution whose windows overlap at a
// stride of 2 or more, with weights too large for the core's cache, runs
// well below the machine's limit: wav2vec2's feature extractor (512 -> 512,
// kernel 3, stride 2, 3 MiB of weights) at 120-180 GFLOP/s on the Zen 4 (2
// threads), against 205-223 for the copy and a brg matmul on the same
// shapes; ONNX Runtime runs them this way. At stride 1, or with windows that
// do not overlap, or with smaller weights, brgconv is at the limit and stays
// (docs/benchmarks.md).
//
// Layout: the input channels-last ([n, w, c], dense); row r = i * ow + j of
// the copy is output pixel j of image i, its columns channel-major (ic * k +
// tap), so that the weights' [oc, c, k] buffer is the [c * k, oc] matrix with
// strides (1, c * k) as it lies; taps in the padding are zeros. The product
// writes [n * ow, oc]: the output channels-last. Copy and product go a
// chunk of rows at a time (chunkRows).
#pragma once

#include <cstdint>

namespace llga::im2col {

struct Geometry {
  int64_t n = 0, c = 0, w = 0;  // input [n, w, c]
  int64_t oc = 0, ow = 0, k = 0, stride = 1, dilation = 1, pad_l = 0;
  int64_t rows() const { return n * ow; }
  int64_t cols() const { return c * k; }
};

// oneDNN's effective ISA is avx512_core or later (where it was measured:
// ONEDNN_MAX_CPU_ISA=AVX2 turns it off), and LLGA_IM2COL is not "0" (the
// switch compares against oneDNN's convolution).
bool available();
// The product pays over brgconv for g: windows that overlap at stride 2 or
// more (k > stride), dilation 1, weights of at least kMinWeightFloats. With
// LLGA_IM2COL=all every geometry does (for tests: the path on small
// shapes).
constexpr int64_t kMinWeightFloats = int64_t{1} << 19;  // 2 MiB of fp32
bool pays(const Geometry& g);

// The copy and the product go in chunks of rows, each copy at most
// kChunkBytes (a long signal's whole copy would be 1.5x its input at kernel
// 3, stride 2): rows per chunk, at least 1.
constexpr int64_t kChunkBytes = int64_t{8} << 20;
int64_t chunkRows(const Geometry& g);

// col [end - begin, cols]: rows [begin, end) of the copy, from src [n, w, c]
// (dense), on llga's threads.
void copy(const Geometry& g, const float* src, float* col, int64_t begin, int64_t end);

}  // namespace llga::im2col
