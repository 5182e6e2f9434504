// CRC-32C (Castagnoli), the checksum of model files' sections and tensors:
// the SSE4.2 crc32 instruction where the CPU has it, a table otherwise (same
// result). `crc` continues a running checksum (0 to start).
#pragma once

#include <cstddef>
#include <cstdint>

namespace llga {

uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);

}  // namespace llga
