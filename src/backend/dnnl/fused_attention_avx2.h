// llga's attention kernel (fused_attention.h) on CPUs without AVX-512: the
// same blocks of query rows with 8-lane AVX2 + FMA tiles, fp32 products
// only (bf16 products need AVX512-BF16 or AMX). fused_attention.cpp's run()
// lays out the scratch and the threads and calls these where
// attention::availableAvx512() is false.
#pragma once

#include <cstdint>

#include "backend/dnnl/fused_attention.h"

namespace llga::attention {

// What the kernel's two forms (AVX-512 here, AVX2 in fused_attention_avx2.cpp)
// share, defined in fused_attention.cpp:
// batch entry b's first output row, and the floats between its rows (Problem::out);
float* outRows(const Problem& p, int64_t b);
int64_t outRowStride(const Problem& p);
// rows [r0, r0 + rows) of batch entry b's q with contiguous columns, `qs`
// floats apart: q itself, or its rows packed into qp (rows x D) when its
// columns are strided;
const float* qRows(const Problem& p, int64_t b, int64_t r0, int64_t rows, float* qp, int64_t& qs);
// batch entry b's v with contiguous columns, `vs` floats apart: v itself, or packed into vp (S x Dv).
const float* vRows(const Problem& p, int64_t b, float* vp, int64_t& vs);

}  // namespace llga::attention

namespace llga::attention::avx2 {

// The CPU has AVX2 and FMA.
bool available();

// K^T of batch entry b as kp[D x sp] (sp: S rounded up to 16), columns S..sp zero.
void packKt(const Problem& p, int64_t b, int64_t sp, float* kp);

constexpr int64_t kMaxRows = 32;  // rows a block at most (fused_attention.cpp's blocks)

// Query rows [r0, r0 + rows) (rows <= kMaxRows) of batch entry b, start to end, into p.out:
// scores = q @ kt (kp as packKt wrote it), the score ops, the softmax, then @ v.
// Scratch: qp (rows x D floats, used when q's columns are strided), scores
// (rows x sp), vp (S x Dv, used when v's columns are strided).
void block(const Problem& p, int64_t sp, const float* kp, float* qp, float* scores, float* vp, int64_t b, int64_t r0,
           int64_t rows);

}  // namespace llga::attention::avx2
