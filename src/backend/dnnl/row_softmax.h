// llga's softmax over the innermost dim of a dense float32 tensor (AVX-512):
// per row, the maximum, exp(x - max) written with their sum, then one scale
// by 1 / sum (vec::softmaxNumerators, which the attention kernel's rows use).
//
// Why: a softmax outside an attention partition (Swin's shifted windows, whose
// mask is added through a 5-d view) ran on oneDNN 2.6's jit softmax, which
// handles a short row with more fixed cost than work: 64 x 3 x 49 rows of 49
// took 150-270 us in the model. Rows are shared among the threads.
#pragma once

#include <cstdint>

namespace llga::rowsoftmax {

// The CPU runs AVX-512 and oneDNN's effective ISA (which ONEDNN_MAX_CPU_ISA
// caps) is avx512_core or above, and LLGA_OWN_SOFTMAX is not 0 (read per call).
bool available();

// dst[r][j] = softmax(src[r][:])[j] for `rows` rows of `n` floats, each row
// contiguous and the rows `n` apart in both. Requires available().
void run(const float* src, float* dst, int64_t rows, int64_t n);

}  // namespace llga::rowsoftmax
