// llga-opt: reads TorchScript IR (a file or stdin), verifies it and prints it back.
//
//   llga-opt model.ir              parse, verify, print
//   llga-opt - < model.ir          the same from stdin
//   llga-opt --split-input-file cases.ir
//       Each case (separated by a line starting "# -----") is handled on its
//       own, with line numbers counted from the case's first line. Output
//       cases are separated by "// -----"; a case that fails prints
//       "error: <message>" lines in its place (and to stderr).
//
// Exit status: 0 on success, 1 if any case failed to parse or verify, 2 on usage errors.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "frontend/parser.h"
#include "ir/verifier.h"

namespace {

constexpr std::string_view kSplitMarker = "# -----";

void usage(std::ostream& os) {
  os << "usage: llga-opt [--split-input-file] [FILE|-]\n"
        "Parses TorchScript IR text, verifies it and prints it back.\n"
        "  --split-input-file  handle each '# -----'-separated case on its own\n";
}

std::vector<std::string> splitCases(const std::string& text) {
  std::vector<std::string> cases(1);
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(kSplitMarker, 0) == 0) {
      cases.emplace_back();
      continue;
    }
    cases.back() += line + "\n";
  }
  return cases;
}

std::string baseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

int main(int argc, char** argv) {
  bool split = false;
  std::string path = "-";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--split-input-file") {
      split = true;
    } else if (a == "-h" || a == "--help") {
      usage(std::cout);
      return 0;
    } else if (a.size() > 1 && a[0] == '-') {
      std::cerr << "llga-opt: unknown option " << a << "\n";
      usage(std::cerr);
      return 2;
    } else {
      path = a;
    }
  }
  std::stringstream buf;
  if (path == "-") {
    buf << std::cin.rdbuf();
  } else {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
      std::cerr << "llga-opt: cannot open " << path << "\n";
      return 2;
    }
    buf << f.rdbuf();
  }
  const std::string text = buf.str();
  std::vector<std::string> cases = split ? splitCases(text) : std::vector<std::string>{text};
  int status = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    if (i) std::cout << "// -----\n";
    try {
      llga::ParseOptions opts;
      opts.filename = path == "-" ? "<stdin>" : baseName(path);
      auto g = llga::parseGraph(cases[i], opts);
      llga::verifyOrThrow(*g);
      std::cout << *g;
    } catch (const std::exception& e) {
      std::string msg = e.what();
      std::cerr << msg << "\n";
      if (split) {
        std::istringstream lines(msg);
        std::string l;
        while (std::getline(lines, l)) std::cout << "error: " << l << "\n";
      }
      status = 1;
    }
  }
  return status;
}
