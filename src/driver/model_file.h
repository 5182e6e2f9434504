// A compiled model in one file (".llga"): what `compiled.save(path)` writes
// and `llga.load(path)` reads. The file holds the graph the passes left (its
// partitions, precision and layout decisions are on the IR), the weights it
// binds, the graph before the passes and the pass records, so loading is
// parsing plus binding: no pass runs and PyTorch is not needed.
//
// Layout (little-endian; docs/deploy.md has the same with the reasons):
//
//   header   64 bytes   magic "\x89LLGA\r\n\x1a", u32 format version, u32 section
//                       count, u64 file size, u64 section table offset,
//                       u32 CRC-32C of the table, u32 CRC-32C of header bytes [0, 36)
//   table    48 bytes per section: name (16 bytes, NUL-padded), u64 offset,
//                       u64 size, u32 CRC-32C of the section, u32 flags
//   "meta"     text, "key: value" lines: format, llga and oneDNN versions,
//              oneDNN's ISA where it was written (the CPU fingerprint)
//   "ir"       the compiled graph as IR text, tensors as <Tensor:N>
//   "source"   the graph before the passes (text; its weights are not stored)
//   "tensors"  the tensor table: per tensor dtype, sizes, strides, offset and
//              bytes in "weights", CRC-32C of its bytes
//   "names"    weights bound by name (prim::GetAttr paths): tensor index, name
//   "passes"   the pass records (PassRecord), IR dumps included
//   "python"   the Python layer's manifest (JSON), opaque here
//   "weights"  tensor bytes, each at a 64-byte aligned offset; the section
//              starts at a page boundary so that it is mapped, not read
//
// Every section but "weights" is checked against its CRC on load; the
// weights are mapped (mmap, copy-on-write: processes loading one file share
// its pages) and each tensor's CRC is checked only on request (reading every
// page would cost more than the rest of loading; see LoadOptions).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "passes/pass.h"
#include "runtime/compiled.h"

namespace llga {

inline constexpr uint32_t kModelFormatVersion = 1;

// A file that is not a model file llga can read: wrong magic, a newer format
// version, truncated, a checksum that does not match, or contents that do not
// parse or bind. The message says which, and where.
struct FormatError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What a file holds besides the compiled graph.
struct ModelExtras {
  std::string source_ir;           // the graph before the passes
  std::vector<PassRecord> passes;  // the pipeline's records
  std::string python;              // the Python layer's manifest (JSON), opaque here
};

// Writes `compiled` to `path` (through a temporary file renamed into place:
// an existing file is replaced whole or not at all). Weights compacted into
// a primitive's layout after the first call are written back in their plain
// layout. Throws std::system_error (I/O, with the OS's errno) and
// std::invalid_argument (a graph the format cannot hold, e.g. a tensor
// attribute without data).
void saveModel(const std::string& path, const CompiledGraph& compiled, const ModelExtras& extras);

struct LoadOptions {
  bool verify_weights = false;  // also check every tensor's CRC (reads every weight page)
  bool build = true;            // build the plan (false: read and check only, e.g. inspect)
  bool check_sections = true;   // check the sections' CRCs (the fuzzer turns it off to reach the parsers)
};

struct LoadedModel {
  std::shared_ptr<Graph> graph;            // the compiled graph as the file has it
  std::shared_ptr<CompiledGraph> compiled;  // null unless options.build
  ModelExtras extras;
  std::map<std::string, std::string> meta;  // the "meta" section
  uint32_t format_version = 0;
  uint64_t file_bytes = 0, weight_bytes = 0;
  size_t tensors = 0;
  size_t packed = 0;         // tensors stored pre-packed (in a primitive's blocked layout)
  bool packed_used = false;  // this process's oneDNN and ISA are the writer's: they are used as stored
};

// Throws FormatError for anything wrong with the file (and std::system_error
// when it cannot be opened or mapped, with the OS's errno).
LoadedModel loadModel(const std::string& path, const LoadOptions& options = {});
// The same from bytes in memory, kept alive by `owner` (weights point into them).
LoadedModel loadModel(std::shared_ptr<const void> owner, const uint8_t* data, size_t size, const std::string& name,
                      const LoadOptions& options = {});

// The oneDNN ISA this process runs (the fingerprint "meta" records as cpu_isa).
std::string cpuFingerprint();

}  // namespace llga
