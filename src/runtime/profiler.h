// Execution recording for llga.profiler: per-instruction times, the kernel
// log, and LLGA_VERBOSE lines. Off by default; the plan then pays one relaxed
// atomic load per instruction.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/kernel_report.h"

namespace llga {

struct ProfileEvent {
  std::string name;     // op kind ("aten::relu", "llga::FusionGroup"), "llga::call" for a whole call, or
                        // "llga::batch_split" for a call run as chunks (each chunk an llga::call)
  std::string pattern;  // the partition's pattern, or ""
  int partition = -1;   // the partition's index in the graph (program order), or -1
  int depth = 0;        // 0: an instruction of the graph; 1+: inside a partition run op by op; -1: a whole
                        // call (of a chunk, when split); -2: a call split into chunks
  int64_t start_ns = 0, dur_ns = 0;  // steady clock
  uint64_t thread = 0;
  std::string source;  // where the op came from
  // Kernel log and verbose only:
  std::string primitive;  // oneDNN primitive kind ("convolution", "matmul"), or ""
  KernelReport kernel;     // what the kernel said it did (Kernel::report)
  std::vector<std::string> inputs, outputs;  // "1x64x56x56:Float nhwc"
};

class Profiler {
 public:
  static Profiler& global();
  // The profiler if anything records, else null (the fast path).
  static Profiler* active() {
    Profiler& p = global();
    return p.any_.load(std::memory_order_relaxed) ? &p : nullptr;
  }
  void setEnabled(bool on);      // llga.profiler.enable()/disable()
  void setKernelLog(bool on);    // llga.profiler.kernel_log
  void setVerbose(int level);    // LLGA_VERBOSE
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
  bool kernelLog() const { return kernel_log_.load(std::memory_order_relaxed); }
  int verbose() const { return verbose_.load(std::memory_order_relaxed); }
  bool wantsDetails() const { return kernelLog() || verbose() > 0; }

  void record(ProfileEvent e);
  std::vector<ProfileEvent> events() const;
  std::vector<ProfileEvent> kernelEvents() const;
  void clearEvents();
  void clearKernelLog();
  static int64_t nowNs();
  static int& depth();  // of the calling thread: instructions being run around it

 private:
  void update();
  std::atomic<bool> enabled_{false}, kernel_log_{false}, any_{false};
  std::atomic<int> verbose_{0};
  mutable std::mutex mu_;
  std::vector<ProfileEvent> events_, kernel_events_;
};

class Kernel;
class Node;
struct KernelArgs;
// Runs `kernel` for `node` and records it (Profiler::active() must be set):
// what the interpreter does for each instruction while something records, and
// what a kernel that runs an inner op directly does for it (a partition's one
// op), so that the inner op shows as when its own plan ran it.
void runKernelProfiled(const Node& node, const std::string& pattern, int partition, Kernel& kernel, const KernelArgs& args);

}  // namespace llga
