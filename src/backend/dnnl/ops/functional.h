// Op cores callable from other kernels (composite ops such as attention).
// Each takes the caller's cache so primitives are built once per shape.
#pragma once

#include <memory>
#include <optional>

#include "backend/dnnl/dnnl_utils.h"
#include "fuser/post_ops.h"
#include "backend/dnnl/quantize.h"
#include "ir/precision.h"
#include "runtime/tensor.h"

namespace llga {

struct MatmulCache;   // matmul.cpp
struct SoftmaxCache;  // norm.cpp
struct LayerNormCache;
std::shared_ptr<MatmulCache> makeMatmulCache();
std::shared_ptr<SoftmaxCache> makeSoftmaxCache();
std::shared_ptr<LayerNormCache> makeLayerNormCache();

// x[..., K] . w[N, K]^T + b; `constant_w`: w never changes (its reorder is cached);
// `precision` bf16: x and w rounded to bf16, fp32 accumulation and output;
// int8 with `quant` (and a constant w): x quantized with its scale, w to s8
// per output feature, int32 accumulation, fp32 output; with `dynamic_act`
// instead, x's scale taken per call from its largest magnitude.
Tensor linearOp(ExecContext& ctx, const Tensor& x, const Tensor& w, const std::optional<Tensor>& b, MatmulCache& cache,
                bool constant_w, Precision precision = Precision::F32,
                const std::optional<int8::OpQuant>& quant = std::nullopt, bool dynamic_act = false);
// linearOp followed by a post-op chain in the same primitive: eltwise ops,
// and binary ops whose operands (in order) have the output's shape.
Tensor linearChainOp(ExecContext& ctx, const Tensor& x, const Tensor& w, const std::optional<Tensor>& b,
                     MatmulCache& cache, bool constant_w, Precision precision, const std::vector<PostOp>& post,
                     const std::vector<Tensor>& operands);
// One matmul cache per kernel (addCached): made on construction.
struct MatmulCacheHolder {
  std::shared_ptr<MatmulCache> cache = makeMatmulCache();
};
// x summed over `dims` (float32 on oneDNN's reduction).
Tensor sumOp(ExecContext& ctx, const Tensor& x, const Shape& dims, bool keepdim);
// numpy-style matmul
Tensor matmulOp(ExecContext& ctx, const Tensor& a, const Tensor& b, MatmulCache& cache,
                Precision precision = Precision::F32);
// The indices of x's nonzero elements, [count, x.dim()] int64 (indexing.cpp).
Tensor nonzero(const Tensor& x);
Tensor softmaxOp(ExecContext& ctx, const Tensor& x, int64_t dim, SoftmaxCache& cache);
Tensor layerNormOp(ExecContext& ctx, const Tensor& x, int64_t normalized_numel, const std::optional<Tensor>& w,
                   const std::optional<Tensor>& b, double eps, LayerNormCache& cache);

}  // namespace llga
