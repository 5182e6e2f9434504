#include "runtime/threads.h"

#include <omp.h>
#include <sched.h>

#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace llga {
namespace {
std::atomic<int> g_threads{0};  // 0: the default (defaultThreads)

// OMP_NUM_THREADS when set, else the CPUs this process may run on: what
// OpenMP itself would start with. Not omp_get_max_threads(), which whoever
// loaded first may have lowered: importing torch sets it to torch's count of
// physical cores, 1 on a 2-vCPU VM where cpuinfo sees one core, and llga then
// ran every model on one thread of two.
int defaultThreads() {
  static const int n = [] {
    if (const char* env = std::getenv("OMP_NUM_THREADS"); env && std::atoi(env) > 0) return std::atoi(env);
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    return omp_get_num_procs();
  }();
  return n;
}
}  // namespace

void setNumThreads(int n) {
  if (n < 1) throw std::invalid_argument("number of threads must be at least 1, got " + std::to_string(n));
  g_threads = n;
}

int getNumThreads() {
  int n = g_threads;
  return n > 0 ? n : defaultThreads();
}

ThreadsScope::ThreadsScope() : caller_(omp_get_max_threads()) {
  if (const int n = getNumThreads(); n != caller_) omp_set_num_threads(n);
}

ThreadsScope::~ThreadsScope() {
  if (omp_get_max_threads() != caller_) omp_set_num_threads(caller_);
}

SerialScope::SerialScope(bool serial) {
  if (serial && omp_get_max_threads() > 1) {
    caller_ = omp_get_max_threads();
    omp_set_num_threads(1);
  }
}

SerialScope::~SerialScope() {
  if (caller_) omp_set_num_threads(caller_);
}

}  // namespace llga
