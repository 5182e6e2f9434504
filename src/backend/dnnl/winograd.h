// llga's own Winograd F(2x2, 3x3) convolution for CPUs where oneDNN has none.
//
// Why: oneDNN 2.6 implements Winograd only for AVX-512 (jit_fp32_wino_2x3,
// jit_wino_4x3). On an AVX2-only CPU every 3x3 convolution ran as its direct
// jit:avx2 kernel, which on resnet18's stride-1 3x3 convolutions reached
// 100-125 GFLOP/s against ONNX Runtime's 127-150 (MLAS, NCHWc): resnet18 at
// 1.3-1.4x of ONNX Runtime's time. F(2x2,3x3) computes a 2x2 output tile
// from a 4x4 input tile with 16 products per input channel instead of 36.
//
// The algorithm (Lavin and Gray, "Fast Algorithms for Convolutional Neural
// Networks"), for a chunk of output tiles at a time:
//   1. input transform  V[p][t][c] = (B^T d B)[p] for each 4x4 input tile t;
//   2. 16 matrix products M[p] = V[p] U[p], U[p] = (G g G^T)[p] the weights
//      transformed once at compile time (register-blocked 6x16 AVX2+FMA
//      micro-kernel, weights packed in 16-channel slabs);
//   3. output transform  Y = A^T M A, plus bias, then the chain's sum
//      (the residual already in dst) and relu steps, stored in place.
// Activations are nChw8c (oneDNN's AVX2 blocked layout, which the
// neighbouring jit:avx2 primitives read and write), channels multiples of 8.
// The transforms' matrices have entries 0, +-1 and +-1/2 only: results differ
// from a direct convolution by a few ulp of the output's scale.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/tensor.h"

namespace llga::winograd {

// cpuRunsAvx2Kernels() (backend/dnnl/dnnl_utils.h) and LLGA_WINOGRAD is not "0".
bool available();

// The weights transformed and packed (immutable; shared by every call), in
// memory counted as the weight cache's.
struct Weights {
  int64_t k = 0, c = 0;  // output and input channels, multiples of 8
  std::shared_ptr<Storage> storage;  // [16 points][k/16 slabs of c x 16, then one of c x 8 when k % 16 == 8]
  const float* u() const { return static_cast<const float*>(storage->data); }
};

// From a [k][c][3][3] float weight at the given element strides.
std::shared_ptr<const Weights> transformWeights(const float* w, const int64_t strides[4], int64_t k, int64_t c);

struct Geometry {
  int64_t n = 0, c = 0, h = 0, w = 0;  // input, nChw8c
  int64_t k = 0, oh = 0, ow = 0;       // output, nChw8c
  int64_t pad_t = 0, pad_l = 0;        // rows/columns of zeros before the input (the rest follows from oh, ow)
};

// What follows conv + bias, in order.
struct Step {
  enum class Kind : uint8_t { Sum, Relu } kind;
  float alpha = 0;  // Relu: the slope below zero
};

// Whether the kernel takes this convolution: channels multiples of 8.
bool supports(const Geometry& g);

// Scratch the run needs (bytes).
size_t scratchBytes(const Geometry& g);

// dst = steps(conv(src) + bias). A Sum step adds what dst holds before the
// call. `bias` may be null. `scratch`: scratchBytes(g), 32-byte aligned.
// Uses llga's threads (OpenMP).
void run(const Weights& u, const Geometry& g, const float* src, float* dst, const float* bias,
         const std::vector<Step>& steps, float* scratch);

}  // namespace llga::winograd
