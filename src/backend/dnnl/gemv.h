// llga's own one-row matrix product (AVX-512 or AVX2; fp32, or bf16 with
// AVX512-BF16): y = x . b + bias for a single row x, the shape of a CNN's
// classifier or a transformer's head at batch 1.
//
// Why: with one row, every weight is read once and used once, so the product
// is bound by reading the weights. oneDNN 2.6's brg matmul for M = 1 reads
// them slower than the memory system allows. On the Zen 4 (2 threads),
// a 1280 -> 1000 product took 117-122 us with the weights coming from
// memory, against 86-98 us here; 2048 -> 1000 took 236-252 against 174-189;
// with the weights in cache, 31-36 against 28-32 (docs/benchmarks.md). ONNX
// Runtime's classifier beat llga's in mobilenet_v2 and regnet_y_800mf by
// that margin. In bf16, oneDNN's took mobilenet_v2's classifier 156-172 us
// (6.5% of its bf16 call), this kernel 63.
//
// How: the weights are packed once into panels of 16 columns, panel after
// panel, each K rows of 16 floats (the last panel's missing columns zero);
// in bf16, pairs of rows interleaved for vdpbf16ps. The layout is described
// to oneDNN as a blocked one (panelDesc, panelDescBf16), so its reorder packs
// the weights into the weight cache, and weight compaction can keep the
// fp32 panels alone. Each thread takes a contiguous range of panels and
// streams it: per panel, four accumulators of 16 columns over k (one
// broadcast of x[k], or of a pair, and one fused multiply-add a row or
// pair), then the bias, an eltwise chain (relu, clip, linear, sigmoid,
// swish) in registers, and a masked store for a partial last panel.
//
// Where it runs: one row, a constant b, a bias of N values or none, a chain
// of those steps or none, oneDNN's ISA avx512_core or later or AVX2 (bf16:
// avx512_core_bf16 or later) and LLGA_GEMV not "0": a linear or matmul
// (matmulCore in ops/matmul.cpp, fp32 and bf16), and in fp32 a 1x1
// convolution on one pixel of one image (ops/conv.cpp: the squeeze-excite
// convolutions of efficientnet and regnet at batch 1, whose weights are the
// same panels in oneDNN's Oihw16o). More rows stay on oneDNN: its kernel
// reuses each weight across rows, and 4 rows here measured 1.05-1.08x its
// time.
#pragma once

#include <cstdint>
#include <vector>

#include <dnnl.hpp>

#include "backend/dnnl/eltwise_step.h"

namespace llga::gemv {

constexpr int64_t kPanel = 16;  // columns per panel

// oneDNN's effective ISA is avx512_core or later, or AVX2 with FMA (a panel
// row is then two vectors of 8), and LLGA_GEMV is not "0" (the switch
// compares against oneDNN's kernel).
bool available();
// "llga_gemv:avx512" or "llga_gemv:avx2": the fp32 kernel run() uses here.
const char* implName();
// The bf16 product (runBf16) too: oneDNN's ISA is avx512_core_bf16 or later
// (AVX512-BF16: vdpbf16ps), and LLGA_GEMV is not "0".
bool availableBf16();

// The panels' layout for b [k, n] (f32): n in blocks of 16, each block k
// rows of 16, blocks in order. Padded to a whole block (zeros).
dnnl::memory::desc panelDesc(int64_t k, int64_t n);
// The same in bf16 for vdpbf16ps: each block k / 2 pairs of rows, each 16
// columns of two bf16 (row 2i, row 2i + 1). k padded to even, n to 16 (zeros).
dnnl::memory::desc panelDescBf16(int64_t k, int64_t n);

// An eltwise step after the bias, in chain order (eltwiseSteps in
// backend/dnnl/post_ops.h makes them from a chain).
using Step = vec::Step;

// y[j] = steps(sum_i x[i] * b[i][j] + bias[j]) for j < n: x dense (k
// floats), b in panelDesc(k, n), bias (n floats) may be null, y dense (n
// floats). On llga's threads (OpenMP), or the calling thread alone for a
// product under kSerialMacs multiply-adds or inside a parallel region.
void run(const float* x, const float* b_panels, int64_t k, int64_t n, const float* bias, float* y,
         const std::vector<Step>& steps = {});
// The same with b in bf16 (panelDescBf16) and x rounded to bf16 (to nearest
// even, as oneDNN's reorder), products summed in fp32: a bf16 product's
// arithmetic (oneDNN's bf16 matmul with an fp32 dst). Reads half the bytes.
void runBf16(const float* x, const uint16_t* b_panels, int64_t k, int64_t n, const float* bias, float* y,
             const std::vector<Step>& steps = {});

}  // namespace llga::gemv
