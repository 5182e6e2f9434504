// llga's own global pooling (average or max over a whole plane) for the
// layouts convolutions hand on: channels-last and nChw{8,16}c.
//
// Why: oneDNN 2.6 has no fast kernel for it at batch 1. Its nhwc pooling is
// its scalar simple_nhwc one on AVX-512, so llga reordered the input into
// nChw16c first (a second pass over it: efficientnet_b0's squeeze-excite
// pools spent 0.65 ms a call in those reorders and 0.32 ms pooling, of
// 9.4 ms); and its jit kernels split the work over channel blocks, so at
// batch 1 every thread reads every cache line of an input written split by
// rows. This is one pass over the input: positions are split into chunks
// across llga's threads, each chunk summed (or maxed) into its own row of
// partial results, streaming the input in memory order, and the partials
// combined at the end.
#pragma once

#include <cstdint>

namespace llga::global_pool {

// The input: `images` images at `image_stride` floats apart; each holds
// `outer` runs of `spatial` positions at `outer_stride` floats apart; a
// position is `inner` contiguous floats.
//   channels-last [N, C, H, W]: outer = 1, inner = C, spatial = H*W
//   nChw16c with C % 16 == 0:   outer = C/16, inner = 16, outer_stride = H*W*16
struct Geometry {
  int64_t images = 0, image_stride = 0;
  int64_t outer = 1, outer_stride = 0;
  int64_t spatial = 0, inner = 0;
};

// How many chunks each run's positions are split into (1: not split): runs
// fewer than llga's threads are split so that every thread has a chunk, when
// the input is large enough to wake them (runtime/threads.h's grain).
int64_t chunks(const Geometry& g);

// dst[(image * outer + o) * inner + i] = mean (or max) over the positions.
// For max, a NaN anywhere in a run gives NaN, as PyTorch.
void run(const Geometry& g, bool max, const float* src, float* dst);

}  // namespace llga::global_pool
