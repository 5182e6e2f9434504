#include "runtime/profiler.h"

#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>

namespace llga {

Profiler& Profiler::global() {
  static Profiler* p = new Profiler();  // never destroyed: kernels may record during shutdown
  return *p;
}

void Profiler::update() { any_.store(enabled() || kernelLog() || verbose() > 0, std::memory_order_relaxed); }
void Profiler::setEnabled(bool on) {
  enabled_.store(on);
  update();
}
void Profiler::setKernelLog(bool on) {
  kernel_log_.store(on);
  update();
}
void Profiler::setVerbose(int level) {
  verbose_.store(level);
  update();
}

int64_t Profiler::nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int& Profiler::depth() {
  thread_local int d = 0;
  return d;
}

void Profiler::record(ProfileEvent e) {
  e.thread = std::hash<std::thread::id>()(std::this_thread::get_id());
  if (verbose() > 0 && e.depth >= 0) {
    std::string ins, outs;
    for (const auto& s : e.inputs) ins += (ins.empty() ? "" : " ") + s;
    for (const auto& s : e.outputs) outs += (outs.empty() ? "" : " ") + s;
    std::fprintf(stderr, "llga_verbose,exec,%s,%s,%s,%s,in:%s,out:%s,%.4f\n", e.name.c_str(),
                 e.pattern.empty() ? "-" : e.pattern.c_str(), e.primitive.empty() ? "-" : e.primitive.c_str(),
                 e.kernel.empty() ? "-" : e.kernel.text().c_str(), ins.c_str(), outs.c_str(), static_cast<double>(e.dur_ns) * 1e-6);
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (kernelLog() && e.depth >= 0) kernel_events_.push_back(e);
  if (enabled()) events_.push_back(std::move(e));
}

std::vector<ProfileEvent> Profiler::events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_;
}

std::vector<ProfileEvent> Profiler::kernelEvents() const {
  std::lock_guard<std::mutex> lock(mu_);
  return kernel_events_;
}

void Profiler::clearEvents() {
  std::lock_guard<std::mutex> lock(mu_);
  events_.clear();
}

void Profiler::clearKernelLog() {
  std::lock_guard<std::mutex> lock(mu_);
  kernel_events_.clear();
}

}  // namespace llga
