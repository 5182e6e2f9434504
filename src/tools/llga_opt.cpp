// llga-opt: reads TorchScript IR (a file or stdin), prints it back.
//
//   llga-opt model.ir            parse, verify, print
//   llga-opt - < model.ir        the same from stdin
//   llga-opt --split-input-file cases.ir
//                                each case (separated by a line "# -----")
//                                is handled on its own; output cases are
//                                separated by "// -----"
// Exit status: 0 on success, 1 on a parse or verification error (printed to stderr).
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "frontend/parser.h"
#include "ir/verifier.h"

namespace {

constexpr std::string_view kSplitMarker = "# -----";

void usage() {
  std::cerr << "usage: llga-opt [--split-input-file] [FILE|-]\n"
               "Parses TorchScript IR text, verifies it and prints it back.\n";
}

std::vector<std::string> splitCases(const std::string& text) {
  std::vector<std::string> cases(1);
  std::istringstream in(text);
  std::string line;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.rfind(kSplitMarker, 0) == 0) {
      cases.emplace_back();
      continue;
    }
    cases.back() += line + "\n";
  }
  return cases;
}

// Keeps line numbers of split cases pointing into the original file.
std::string padLines(const std::vector<std::string>& cases, size_t index) {
  size_t lines = 0;
  for (size_t i = 0; i < index; ++i) lines += std::count(cases[i].begin(), cases[i].end(), '\n') + 1;
  return std::string(lines, '\n') + cases[index];
}

}  // namespace

int main(int argc, char** argv) {
  bool split = false;
  std::string path = "-";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--split-input-file") split = true;
    else if (a == "-h" || a == "--help") { usage(); return 0; }
    else if (a.size() > 1 && a[0] == '-' ) { std::cerr << "llga-opt: unknown option " << a << "\n"; usage(); return 2; }
    else path = a;
  }
  std::stringstream buf;
  if (path == "-") {
    buf << std::cin.rdbuf();
  } else {
    std::ifstream f(path, std::ios::binary);
    if (!f) { std::cerr << "llga-opt: cannot open " << path << "\n"; return 2; }
    buf << f.rdbuf();
  }
  const std::string text = buf.str();
  std::vector<std::string> cases = split ? splitCases(text) : std::vector<std::string>{text};
  int status = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    if (i) std::cout << "// -----\n";
    try {
      llga::ParseOptions opts;
      opts.filename = path == "-" ? "<stdin>" : path;
      auto g = llga::parseGraph(split ? padLines(cases, i) : cases[i], opts);
      llga::verifyOrThrow(*g);
      std::cout << *g;
    } catch (const std::exception& e) {
      std::cerr << e.what() << "\n";
      status = 1;
    }
  }
  return status;
}
