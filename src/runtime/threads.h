// Intra-op threads for oneDNN (OpenMP). The setting is global; each run
// applies it on the thread that executes, so Python threads all honour it.
#pragma once

namespace llga {
void setNumThreads(int n);  // n >= 1
int getNumThreads();
void applyNumThreads();  // on the calling thread
}  // namespace llga
