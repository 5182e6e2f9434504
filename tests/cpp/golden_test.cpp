// Runs every tests/ir/*.ir file through llga-opt as its "# RUN:" line says and
// checks each case's output against the case's CHECK lines.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "testing/filecheck.h"

namespace fs = std::filesystem;
using llga::testing::parseChecks;
using llga::testing::runChecks;

namespace {

std::string readFile(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::vector<std::string> split(const std::string& text, const std::string& marker) {
  std::vector<std::string> parts(1);
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(marker, 0) == 0) { parts.emplace_back(); continue; }
    parts.back() += line + "\n";
  }
  return parts;
}

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  pclose(p);
  return out;
}

std::vector<fs::path> goldenFiles() {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(fs::path(LLGA_SOURCE_DIR) / "tests" / "ir"))
    if (e.path().extension() == ".ir") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

class Golden : public ::testing::TestWithParam<fs::path> {};

TEST_P(Golden, ChecksPass) {
  const fs::path file = GetParam();
  const std::string text = readFile(file);
  std::string args;
  {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line))
      if (auto p = line.find("RUN: llga-opt"); p != std::string::npos) { args = line.substr(p + 13); break; }
  }
  ASSERT_FALSE(args.empty()) << file << " has no '# RUN: llga-opt ...' line";
  for (size_t p; (p = args.find("%s")) != std::string::npos;) args.replace(p, 2, file.string());
  const std::string output = run(std::string(LLGA_OPT_PATH) + " " + args + " 2>/dev/null");
  const bool split_mode = args.find("--split-input-file") != std::string::npos;
  auto in_cases = split_mode ? split(text, "# -----") : std::vector<std::string>{text};
  auto out_cases = split_mode ? split(output, "// -----") : std::vector<std::string>{output};
  ASSERT_EQ(in_cases.size(), out_cases.size()) << "llga-opt printed a different number of cases";
  for (size_t i = 0; i < in_cases.size(); ++i) {
    auto checks = parseChecks(in_cases[i]);
    if (checks.empty()) continue;  // a case with no checks (e.g. the preamble) only has to not crash
    auto r = runChecks(checks, out_cases[i]);
    EXPECT_TRUE(r.ok) << file.filename().string() << " case " << i << ":\n" << r.message;
  }
}

INSTANTIATE_TEST_SUITE_P(Ir, Golden, ::testing::ValuesIn(goldenFiles()),
                         [](const ::testing::TestParamInfo<fs::path>& info) {
                           std::string n = info.param.stem().string();
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

}  // namespace

namespace {

TEST(LlgaOpt, ReadsStdinAndReportsErrors) {
  const std::string ok = run("printf 'graph(%%x : Tensor):\\n  %%y : Tensor = aten::relu(%%x)\\n  return (%%y)\\n' | " +
                             std::string(LLGA_OPT_PATH) + " - 2>&1; echo \"exit=$?\"");
  EXPECT_EQ(ok, "graph(%x : Tensor):\n  %y : Tensor = aten::relu(%x)\n  return (%y)\nexit=0\n");
  const std::string bad = run("printf 'graph(%%x : Tensor):\\n  return (%%q)\\n' | " + std::string(LLGA_OPT_PATH) +
                              " 2>&1; echo \"exit=$?\"");
  EXPECT_NE(bad.find("<stdin>:2:11: use of undefined value %q"), std::string::npos) << bad;
  EXPECT_NE(bad.find("exit=1"), std::string::npos) << bad;
  const std::string usage = run(std::string(LLGA_OPT_PATH) + " --bogus 2>&1; echo \"exit=$?\"");
  EXPECT_NE(usage.find("unknown option --bogus"), std::string::npos);
  EXPECT_NE(usage.find("exit=2"), std::string::npos);
}

}  // namespace
