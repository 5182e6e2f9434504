// The precision policy (an autocast-style table, data): which op kinds run
// in bf16 when a model is compiled with precision="bf16", which in int8 when
// it is quantized (llga.quantize), and which stay fp32 and why.
// assign-precision reads it; llga.precision.policy() lists it.
#pragma once

#include <string>
#include <vector>

#include "ir/precision.h"

namespace llga {

struct PrecisionRule {
  std::string kind;        // "aten::conv2d"
  Precision precision;     // under precision="bf16"
  bool bf16_kernel;        // llga has a bf16 kernel for it (an override may choose bf16)
  std::string why;
  // Its kernel also takes its activation in bf16 and can write its output in
  // bf16 (convolutions, linear): between two such ops the value may stay bf16.
  bool bf16_activations = false;
  // llga.quantize runs it in int8: activation u8/s8 with a calibrated
  // per-tensor scale, weights s8 per output channel, int32 accumulation.
  bool int8_kernel = false;
};

const std::vector<PrecisionRule>& precisionPolicy();

}  // namespace llga
