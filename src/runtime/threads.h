// Intra-op threads for oneDNN (OpenMP). The setting is global; each run
// applies it on the thread that executes (ThreadsScope), so Python threads
// all honour it.
// Unset, it is OMP_NUM_THREADS or the CPUs the process may run on, whatever
// another library (torch) has set OpenMP's default to.
#pragma once

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
}  // namespace llga
