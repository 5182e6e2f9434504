// What a kernel did on its latest call, as fields: compiled.partitions, the
// kernel log, LLGA_VERBOSE and the graph drawing read these, never a string.
#pragma once

#include <string>

namespace llga {

struct KernelReport {
  std::string impl;     // oneDNN's implementation ("brgconv:avx512_core", "+llga_swish" when ours follows), or ""
  std::string src;      // the layouts the primitive used ("nhwc", "nChw16c", "OIhw16i16o", "wino_..."), or ""
  std::string weights;
  std::string dst;
  std::string output;   // where the output went: "kept" (on to its readers in dst's layout), "plain", or "" (not said)
  std::string detail;   // anything else worth saying ("relu fused", "global pool in 2 row chunks")

  bool empty() const { return impl.empty() && src.empty() && dst.empty() && detail.empty(); }
  // The layouts as one line: "src nhwc wei OIhw16i16o dst nhwc (kept)".
  std::string layoutText() const {
    std::string s;
    auto add = [&s](const std::string& part) {
      if (!part.empty()) s += (s.empty() ? "" : " ") + part;
    };
    if (!src.empty()) add("src " + src);
    if (!weights.empty()) add("wei " + weights);
    if (!dst.empty()) add("dst " + dst);
    if (!output.empty()) add(output == "kept" ? "(kept)" : "(to plain)");
    if (!detail.empty()) add("(" + detail + ")");
    return s;
  }
  // impl and layouts: "brgconv:avx512_core src nhwc ... (kept)".
  std::string text() const {
    std::string l = layoutText();
    return impl + (impl.empty() || l.empty() ? "" : " ") + l;
  }
};

}  // namespace llga
