// libFuzzer target for the model-file loader (driver/model_file.h). Any input
// must either load (the plan built, every tensor's checksum checked) or raise
// FormatError. Each input is tried twice: with the sections' checksums
// checked (what users get) and without, so that mutations reach the section
// readers, the IR parser with its tensor table and the plan builder. Any
// other exception, a crash, a hang or a sanitizer report is a bug.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>

#include "driver/model_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Files are mapped at page boundaries; so are these bytes (the weights
  // section's alignment is checked against the address).
  const size_t cap = (size + 4095) / 4096 * 4096 + 4096;
  std::shared_ptr<uint8_t> buf(static_cast<uint8_t*>(std::aligned_alloc(4096, cap)), std::free);
  if (size) std::memcpy(buf.get(), data, size);
  for (bool check : {true, false}) {
    llga::LoadOptions o;
    o.check_sections = check;
    o.verify_weights = check;
    try {
      llga::loadModel(buf, buf.get(), size, "fuzz.llga", o);
    } catch (const llga::FormatError&) {
    } catch (const std::exception& e) {
      std::cerr << "loadModel threw something other than FormatError: " << e.what() << "\n";
      std::abort();
    }
  }
  return 0;
}
