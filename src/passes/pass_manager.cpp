#include <chrono>
#include <optional>

#include "ir/verifier.h"
#include "passes/pass.h"

namespace llga {

PassRegistry& PassRegistry::global() {
  static PassRegistry r;  // filled by LLGA_REGISTER_PASS in each pass's file, before main
  return r;
}

void PassRegistry::add(PassInfo info) {
  std::string name = info.name;
  passes_[name] = std::move(info);
}

const PassInfo* PassRegistry::find(std::string_view name) const {
  auto it = passes_.find(name);
  return it == passes_.end() ? nullptr : &it->second;
}

std::vector<const PassInfo*> PassRegistry::list() const {
  std::vector<const PassInfo*> out;
  for (const auto& [k, v] : passes_) out.push_back(&v);
  return out;
}

GraphStats graphStats(const Graph& g) {
  GraphStats s;
  g.forEachNode([&](Node* n) {
    ++s.nodes;
    ++s.kinds[n->kind().toQualString()];
    if (n->subgraph()) ++s.fusion_groups;
  });
  return s;
}

std::string_view defaultPipeline() {
  // A scripted model's branches on constants (training, padding modes, a
  // lazily set-up attribute) fold early, so that the passes after see the
  // straight-line graph (conv -> batch_norm for fold-batchnorm); objects
  // whose identity that folding reveals get their fields forwarded then.
  // With example inputs, rank and dtype queries are answered first (guarded).
  return "inline,forward-attributes,freeze,specialize-inputs,canonicalize,constant-propagation,forward-attributes,"
         "remove-dropout,observable-layouts,remove-mutation,decompose,lower-einsum,import-quantization,merge-linears,"
         "propagate-shapes,prepare-binary,fold-batchnorm,canonicalize,constant-propagation,"
         "defer-size-check,cse,dce,fuse,assign-precision,propagate-layouts,batch-rows,mark-shape-only";
}

PassManager::PassManager(std::string_view pipeline, PassManagerOptions options) : options_(std::move(options)) {
  size_t start = 0;
  while (start <= pipeline.size()) {
    size_t comma = pipeline.find(',', start);
    if (comma == std::string_view::npos) comma = pipeline.size();
    std::string_view name = pipeline.substr(start, comma - start);
    while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    if (!name.empty()) {
      if (!PassRegistry::global().find(name)) {
        std::string known;
        for (const PassInfo* p : PassRegistry::global().list()) known += (known.empty() ? "" : ", ") + p->name;
        throw std::invalid_argument("unknown pass '" + std::string(name) + "' (known passes: " + known + ")");
      }
      names_.emplace_back(name);
    }
    start = comma + 1;
  }
}

std::vector<PassRecord> PassManager::run(Graph& g) const {
  std::vector<PassRecord> records;
  std::string before_ir = options_.keep_ir ? g.toString() : "";
  GraphStats before = graphStats(g);
  for (const std::string& name : names_) {
    auto pass = PassRegistry::global().find(name)->make();
    pass->setContext(options_.context.get());
    PassRecord rec;
    rec.name = name;
    rec.before = before;
    auto t0 = std::chrono::steady_clock::now();
    try {
      rec.changed = pass->run(g);
    } catch (const std::exception& e) {
      rec.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      rec.error = e.what();
      rec.ir = before_ir;
      rec.after = before;
      records.push_back(rec);
      if (options_.after_pass) options_.after_pass(records.back());
      throw PassError("pass '" + name + "' failed: " + rec.error, std::move(records));
    }
    rec.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rec.notes = pass->notes();
    rec.unfused = pass->unfused();
    if (options_.verify_each) rec.verify_errors = verify(g);
    rec.after = graphStats(g);
    if (options_.keep_ir) rec.ir = rec.changed ? g.toString() : before_ir;
    before = rec.after;
    before_ir = rec.ir;
    std::optional<std::string> invalid;  // the verifier's first complaint
    if (!rec.verify_errors.empty()) invalid = rec.verify_errors.front();
    records.push_back(std::move(rec));
    if (options_.after_pass) options_.after_pass(records.back());
    if (invalid) throw PassError("pass '" + name + "' left an invalid graph: " + *invalid, std::move(records));
  }
  return records;
}

}  // namespace llga
