// Tensor constants as PyTorch prints them inside IR attributes, e.g.
//   value= 1.5000  2.0000 [ CPUFloatType{2} ]
//   value=0.01 * -3.8909  4.0122 [ CPUFloatType{2} ]
//   value=(1,.,.) =    1  2   3  4  (2,.,.) = ... [ CPUFloatType{2,2,2} ]
// (newlines replaced by spaces; matrices wider than a line are printed in
// "Columns a to b" chunks). Floating values carry ~4 significant digits, so
// such constants are marked approximate.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "ir/attributes.h"

namespace llga {

using LiteralErrorFn = std::function<void(size_t pos, const std::string& message)>;

// If a tensor literal starts at `pos`, decodes it, sets *end past it and
// returns it; returns null when the text there is not a tensor literal.
// Malformed literals call `error` (which must throw).
std::shared_ptr<ConstantTensor> tryParseTensorLiteral(std::string_view text, size_t pos, size_t* end,
                                                      const LiteralErrorFn& error);

// Dtypes whose elements storeElement can write (not complex or quantized ones).
bool canStoreElements(ScalarType t);

// Writes element `i` (row-major, contiguous tensor) from a double or an integer.
void storeElement(ConstantTensor& t, size_t i, double v, int64_t iv);

}  // namespace llga
