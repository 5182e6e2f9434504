// llga-opt: reads TorchScript IR (a file or stdin), runs passes, prints the result.
//
//   llga-opt model.ir              parse, verify, print
//   llga-opt - < model.ir          the same from stdin
//   llga-opt --passes=remove-dropout,dce model.ir
//       run a pipeline (verifying after every pass); with --print-ir-after-all
//       (or --print-ir-after-change) each pass's IR is printed first, under a
//       "// IR after <pass> (changed|unchanged)" header
//   llga-opt --list-passes
//   llga-opt --split-input-file cases.ir
//       Each case (separated by a line starting "# -----") is handled on its
//       own, with line numbers counted from the case's first line. Output
//       cases are separated by "// -----"; a case that fails prints
//       "error: <message>" lines in its place (and to stderr).
//   llga-opt --verify-each ...
//       verify after every pass (otherwise once, after the pipeline)
//   llga-opt --shapes=functions|execute ...
//       where propagate-shapes takes shapes from: the shape functions only, or
//       running the graph only (default: functions, running what they cannot type)
//   llga-opt --compile model.ir
//       what llga.optimize does (src/driver/compile.h): the default pipeline
//       (or --passes=...), then the plan; prints a "// compiled: ..." line
//       (partitions by pattern, ops outside them) and the final IR. Weights
//       are whatever the IR holds (tensor literals, or graph inputs).
//   llga-opt --precision=bf16 ...
//       what llga.optimize(precision="bf16") asks of assign-precision
//   llga-opt --precision=int8 ...
//       what llga.quantize asks of it, calibrated on one input set per case
//       whose values spread evenly over [-1, 1] (the inputs need complete types);
//       a convolution's signed activation is written as this CPU's oneDNN
//       takes it best, or as --int8-signed=u8 (shifted, zero point 128) or
//       s8 says (golden tests name one, to hold on every CPU);
//       --int8-activations=asymmetric: a signed activation on the u8 grid over
//       its [min, max] with a zero point, as llga.quantize(activations=...)
//
// Method graphs for the inline pass: a line "# method: <class>.<name>" in
// a case starts that method's graph; the text before the first such line is
// the graph to optimize.
//
// Exit status: 0 on success, 1 if any case failed to parse or verify, 2 on usage errors.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "backend/dnnl/quantize.h"
#include "driver/compile.h"
#include "frontend/parser.h"
#include "ir/verifier.h"
#include "passes/pass.h"
#include "runtime/evaluator.h"

namespace {

constexpr std::string_view kSplitMarker = "# -----";

void usage(std::ostream& os) {
  os << "usage: llga-opt [--passes=a,b,c] [--print-ir-after-all|--print-ir-after-change]\n"
        "                [--verify-each] [--split-input-file] [--list-passes] [--shapes=SOURCE] [--compile]\n"
        "                [--precision=fp32|bf16|int8] [--int8-signed=u8|s8]\n"
        "                [--int8-activations=symmetric|asymmetric] [FILE|-]\n"
        "Parses TorchScript IR text, runs passes (verifying the result) and prints it.\n"
        "  --passes=LIST          comma-separated pass names (see --list-passes)\n"
        "  --print-ir-after-all   print the IR after every pass\n"
        "  --print-ir-after-change  print the IR after every pass that changed it\n"
        "  --verify-each          verify after every pass, not only after the pipeline\n"
        "  --split-input-file     handle each '# -----'-separated case on its own\n"
        "  --list-passes          list the registered passes\n"
        "  --shapes=SOURCE        propagate-shapes from 'functions' only or 'execute' only (default: both)\n"
        "  --compile              what llga.optimize runs: the default pipeline (or --passes), then the plan\n"
        "  --precision=P          fp32 (default), bf16 or int8: assign-precision runs the policy's op kinds\n"
        "                         in bf16, or in int8 calibrated on inputs spread over [-1, 1]\n"
        "  --int8-signed=u8|s8    int8: a convolution's signed activation as u8 with zero point 128, or as s8\n"
        "                         (default: as this CPU's oneDNN kernels take it faster)\n"
        "  --int8-activations=A   int8: symmetric (default; signed activations on the s8 grid) or asymmetric\n"
        "                         (the u8 grid over [min, max] with a zero point)\n";
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

constexpr std::string_view kMethodMarker = "# method: ";

// Splits a case into its main graph and "# method: <key>" sections.
std::pair<std::string, std::vector<std::pair<std::string, std::string>>> splitMethods(const std::string& text) {
  std::string main;
  std::vector<std::pair<std::string, std::string>> methods;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(kMethodMarker, 0) == 0) {
      methods.emplace_back(line.substr(kMethodMarker.size()), "");
      continue;
    }
    (methods.empty() ? main : methods.back().second) += line + "\n";
  }
  return {main, methods};
}

std::string baseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

int main(int argc, char** argv) {
  bool split = false, after_all = false, after_change = false, verify_each = false, compile = false,
       pipeline_given = false;
  std::string path = "-", pipeline;
  llga::ShapeSource shapes = llga::ShapeSource::Infer;
  bool bf16 = false, int8 = false;
  std::optional<bool> shift_signed;  // --int8-signed; unset: the backend's answer
  bool asymmetric = false;           // --int8-activations=asymmetric
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--split-input-file") {
      split = true;
    } else if (a.rfind("--passes=", 0) == 0) {
      pipeline = a.substr(9);
      pipeline_given = true;
    } else if (a == "--compile") {
      compile = true;
    } else if (a == "--shapes=functions" || a == "--shapes=execute" || a == "--shapes=infer") {
      shapes = a == "--shapes=functions" ? llga::ShapeSource::Functions
               : a == "--shapes=execute" ? llga::ShapeSource::Execute
                                         : llga::ShapeSource::Infer;
    } else if (a == "--precision=bf16" || a == "--precision=fp32" || a == "--precision=int8") {
      bf16 = a == "--precision=bf16";
      int8 = a == "--precision=int8";
    } else if (a == "--int8-signed=u8" || a == "--int8-signed=s8") {
      shift_signed = a == "--int8-signed=u8";
    } else if (a == "--int8-activations=symmetric" || a == "--int8-activations=asymmetric") {
      asymmetric = a == "--int8-activations=asymmetric";
    } else if (a == "--print-ir-after-all") {
      after_all = true;
    } else if (a == "--print-ir-after-change") {
      after_change = true;
    } else if (a == "--verify-each") {
      verify_each = true;
    } else if (a == "--list-passes") {
      for (const llga::PassInfo* p : llga::PassRegistry::global().list())
        std::cout << "  " << p->name << std::string(p->name.size() < 24 ? 24 - p->name.size() : 1, ' ')
                  << p->description << "\n";
      return 0;
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
  if (compile && !pipeline_given) pipeline = std::string(llga::defaultPipeline());
  auto context = std::make_shared<llga::PassContext>();
  context->evaluator = llga::runtimeEvaluator();
  context->shapes = shapes;
  context->bf16 = bf16;
  context->int8 = int8;
  if (int8) context->int8_shift_signed = shift_signed ? *shift_signed : llga::int8::shiftSignedActivations();
  context->int8_asymmetric = asymmetric;
  std::unique_ptr<llga::PassManager> pm;
  try {
    llga::PassManagerOptions opts;
    opts.verify_each = verify_each;
    opts.context = context;
    opts.after_pass = [&](const llga::PassRecord& r) {
      if (after_all || (after_change && r.changed))
        std::cout << "// IR after " << r.name << (r.changed ? " (changed)" : " (unchanged)") << "\n" << r.ir;
    };
    pm = std::make_unique<llga::PassManager>(pipeline, opts);
  } catch (const std::exception& e) {
    std::cerr << "llga-opt: " << e.what() << "\n";
    return 2;
  }
  std::vector<std::string> cases = split ? splitCases(text) : std::vector<std::string>{text};
  int status = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    if (i) std::cout << "// -----\n";
    try {
      llga::ParseOptions opts;
      opts.filename = path == "-" ? "<stdin>" : baseName(path);
      auto [main_text, methods] = splitMethods(cases[i]);
      context->methods.clear();
      for (const auto& [key, body] : methods) context->methods[key] = llga::parseGraph(body, opts);
      auto g = llga::parseGraph(main_text, opts);
      llga::verifyOrThrow(*g);
      if (compile) {
        llga::CompileOptions copts;
        copts.pipeline = pipeline;
        copts.context = context;
        copts.verify_each = verify_each;
        copts.after_pass = [&](const llga::PassRecord& r) {
          if (after_all || (after_change && r.changed))
            std::cout << "// IR after " << r.name << (r.changed ? " (changed)" : " (unchanged)") << "\n" << r.ir;
        };
        llga::CompileResult r = llga::compile(g, {}, copts);
        std::map<std::string, int> patterns;
        int outside = 0;
        for (const llga::Node* n : g->block()->nodes()) {
          if (n->subgraph()) {
            const llga::AttrValue* p = n->attributes().find(llga::Symbol::fromQualString("attr::pattern"));
            ++patterns[p && p->is<std::string>() ? p->get<std::string>() : "?"];
          } else if (n->kind().ns() == "aten") {
            ++outside;
          }
        }
        std::cout << "// compiled:";
        for (const auto& [name, count] : patterns) std::cout << " " << name << " x" << count << ",";
        std::cout << " " << outside << " aten op(s) outside partitions\n";
      } else {
        pm->run(*g);
      }
      llga::verifyOrThrow(*g);
      if (!pipeline.empty() && (after_all || after_change)) std::cout << "// final IR\n";
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
