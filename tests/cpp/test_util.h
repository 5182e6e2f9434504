#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace llga::test {

inline std::string readFile(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

inline std::filesystem::path sourceDir() { return LLGA_SOURCE_DIR; }

// The cases of a --split-input-file file.
inline std::vector<std::string> splitCases(const std::string& text) {
  std::vector<std::string> parts(1);
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# -----", 0) == 0) { parts.emplace_back(); continue; }
    parts.back() += line + "\n";
  }
  return parts;
}

}  // namespace llga::test
