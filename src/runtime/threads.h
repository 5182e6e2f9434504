// Intra-op threads for oneDNN (OpenMP). The setting is global; each run
// applies it on the thread that executes (ThreadsScope), so Python threads
// all honour it.
// Unset, it is OMP_NUM_THREADS or the CPUs the process may run on, whatever
// another library (torch) has set OpenMP's default to.
#pragma once

#include <cstdint>

namespace llga {
void setNumThreads(int n);  // n >= 1
int getNumThreads();  // the setting, or the default

// llga's threads on the calling thread for its lifetime, then the caller's
// OpenMP setting again: a call never changes what torch (which reads
// OpenMP's setting for its own ops) does next on that thread.
class ThreadsScope {
 public:
  ThreadsScope();
  ~ThreadsScope();
  ThreadsScope(const ThreadsScope&) = delete;
  ThreadsScope& operator=(const ThreadsScope&) = delete;

 private:
  int caller_;
};

// Elementwise work below this many elements runs on the calling thread:
// waking OpenMP's team for it costs more than the second thread saves (a
// tanh of 4 floats in a scripted loop took 10 us). PyTorch's grain for its
// elementwise loops (at::internal::GRAIN_SIZE) is the same 32768.
constexpr int64_t kParallelGrain = 32768;
// Elementwise float ops (add, mul, tanh, ...) on at most this many elements
// skip oneDNN: a primitive's execution costs 1-3 us however small its work
// (a scripted loop's tanh(h * 0.5 + c) on 4x4: 13.5 us per trip against
// PyTorch's 12), where a loop over a few hundred floats costs well under one.
constexpr int64_t kTinyElements = 256;
// Float add, sub, mul, div, max and min on at most this many elements run
// llga's loop (no oneDNN primitive, any strides): its few cycles an element
// beat the primitive's fixed cost up to here (a small transformer's 640-float
// residual add took 5 us through the primitive, a scaled and transposed q of
// 640 with its relu 12.7).
constexpr int64_t kSmallBinaryElements = 4096;
// A matrix product below this many multiply-adds likewise (a 10x32x32 one of
// a small transformer took 10 us with the team).
constexpr int64_t kSerialMacs = 1 << 17;

// body(i) for i in [0, n): on OpenMP's team when `parallel`, else a plain
// loop on the calling thread that does not enter OpenMP at all. A parallel
// region that runs on one thread (an if() clause that is false,
// num_threads(1)) still makes and frees a team: 0.3 us a call, where the
// loops this serves take a few hundred nanoseconds at small sizes.
template <typename Body>
void parallelFor(int64_t n, bool parallel, const Body& body) {
  if (!parallel || n < 2) {
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) body(i);
}

// One OpenMP thread on the calling thread for its lifetime when `serial`
// (oneDNN's parallel sections then run inline), then the setting before.
class SerialScope {
 public:
  explicit SerialScope(bool serial);
  ~SerialScope();
  SerialScope(const SerialScope&) = delete;
  SerialScope& operator=(const SerialScope&) = delete;

 private:
  int caller_ = 0;  // 0: nothing changed
};
}  // namespace llga
