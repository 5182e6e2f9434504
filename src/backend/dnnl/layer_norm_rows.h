// llga's layer_norm over the innermost dim of a dense float32 tensor whose
// result goes to bf16 readers (AVX-512): per row, the mean, the variance
// about it, then (x - mean) / sqrt(var + eps) * weight + bias stored as bf16
// (rounded as vcvtneps2bf16, vec::bf16Bits16). Rows are shared among the
// threads.
//
// Why: under precision="bf16" a transformer's layer_norm is read only by the
// bf16 linear after it (pre-norm blocks: vit, swin, convnext, GPT), which
// converted its fp32 result in a pass of its own. oneDNN 2.6's layer
// normalization writes its source's data type only.
#pragma once

#include <cstdint>

namespace llga::lnrows {

// The CPU runs llga's AVX-512 kernels (cpuRunsAvx512Kernels).
bool available();

// dst[r][j] = bf16((src[r][j] - mean_r) * rstd_r * w[j] + b[j]) for `rows`
// rows of `n` floats (rows `n` apart), mean_r and the biased variance var_r
// over the row in fp32, rstd_r = 1 / sqrt(var_r + eps); w, b may be null (1,
// 0). A row holding NaN or inf gives NaN, as PyTorch's layer_norm.
// Requires available().
void toBf16(const float* src, uint16_t* dst, int64_t rows, int64_t n, const float* w, const float* b, float eps);

}  // namespace llga::lnrows
