// Kernels for fusion groups: an anchor op (convolution, linear, matmul)
// whose post-op chain runs inside the same oneDNN primitive. Their inputs
// are the anchor's inputs followed by the chain's operands (Binary/Sum
// post-ops, in chain order).
#pragma once

#include <memory>
#include <vector>

#include <optional>

#include "ir/precision.h"
#include "runtime/kernel.h"
#include "backend/dnnl/post_ops.h"

namespace llga {

// `constant_weight`: the anchor's weight (input 1) never changes, so its
// reorder into the primitive's layout is done once and kept.
// `bf16_out`: the partition hands its output on in bf16 (out_dtype="bf16");
// `int8_out`: quantized so (out_scale, out_dtype="u8"/"s8").
// `residual_quant`: how the chain's residual arrives quantized (its
// producer's out_scale and out_dtype), where it does.
std::unique_ptr<Kernel> makeFusedConv(const Node& anchor, std::vector<PostOp> post, bool constant_weight,
                                      bool bf16_out = false, std::optional<ActivationQuant> int8_out = std::nullopt,
                                      std::optional<ActivationQuant> residual_quant = std::nullopt);
// `bf16_out` (a linear's partition, out_dtype="bf16"): its readers take bf16.
std::unique_ptr<Kernel> makeFusedMatmul(const Node& anchor, std::vector<PostOp> post, bool constant_weight,
                                        bool bf16_out = false);
// aten::layer_norm's kernel writing its result in bf16 (a layernorm partition's out_dtype="bf16").
std::unique_ptr<Kernel> makeLayerNormBf16();
// aten::batch_norm's kernel with relu in the same primitive (oneDNN's fuse_norm_relu).
std::unique_ptr<Kernel> makeBatchNormRelu();
// concat -> batch_norm [-> relu] as one kernel (the concat_batchnorm pattern):
// inputs are the concat's (parts, dim), then the batch_norm's from weight on;
// `int8_out`: the result quantized so (the partition's out_scale and out_dtype);
// `bf16_out`: in bf16 (out_dtype="bf16").
std::unique_ptr<Kernel> makeConcatBatchNorm(const Node& cat, bool relu,
                                            std::optional<ActivationQuant> int8_out = std::nullopt,
                                            bool bf16_out = false);
// aten::cat whose result is quantized so (a concat partition's out_scale and
// out_dtype): its parts arrive in that type or as floats to quantize.
std::unique_ptr<Kernel> makeQuantizedCat(const ActivationQuant& int8_out);

}  // namespace llga
