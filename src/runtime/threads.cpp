#include "runtime/threads.h"

#include <omp.h>

#include <atomic>
#include <stdexcept>
#include <string>

namespace llga {
namespace {
std::atomic<int> g_threads{0};  // 0: OpenMP's default
}

void setNumThreads(int n) {
  if (n < 1) throw std::invalid_argument("number of threads must be at least 1, got " + std::to_string(n));
  g_threads = n;
  omp_set_num_threads(n);
}

int getNumThreads() {
  int n = g_threads;
  return n > 0 ? n : omp_get_max_threads();
}

void applyNumThreads() {
  int n = g_threads;
  if (n > 0 && omp_get_max_threads() != n) omp_set_num_threads(n);
}

}  // namespace llga
