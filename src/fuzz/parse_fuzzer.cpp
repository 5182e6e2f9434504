// libFuzzer target for the IR parser. Any input must either parse or raise
// ParseError; a graph that parses must print, re-parse and print the same.
// Any other exception, a crash, a hang or a sanitizer report is a bug.
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string_view>

#include "frontend/parser.h"
#include "ir/verifier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::shared_ptr<llga::Graph> g;
  try {
    g = llga::parseGraph(text);
  } catch (const llga::ParseError&) {
    return 0;
  }
  if (!llga::verify(*g).empty()) {
    std::cerr << "parsed graph fails verification\n";
    std::abort();
  }
  const std::string printed = g->toString();
  std::shared_ptr<llga::Graph> again;
  try {
    again = llga::parseGraph(printed);
  } catch (const llga::ParseError& e) {
    std::cerr << "printed graph does not parse: " << e.what() << "\n" << printed;
    std::abort();
  }
  if (again->toString() != printed) {
    std::cerr << "print(parse(print(g))) != print(g)\n";
    std::abort();
  }
  return 0;
}
