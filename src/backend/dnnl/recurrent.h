// llga's own recurrence for LSTM, GRU and plain RNN cells at small batches.
//
// Why: oneDNN 2.6's RNN primitives are built for batches of many sequences.
// At batch 1 a step is a 128 x 512 matrix-vector product and a few vector
// ops, well under a microsecond, and oneDNN spent several on each (its
// threads meet at every step; its GRU on AVX-512 is the reference kernel):
// torchaudio's DeepSpeech (50 steps of a bidirectional 128-wide RNN) ran
// at 1.44x of ONNX Runtime's time, a bidirectional 2-layer LSTM tagger at
// 1.09x, a GRU encoder at 1.00x (ops/rnn.cpp has the figures after).
//
// How a layer runs (ops/rnn.cpp): the input projection of every step and
// direction is one oneDNN matmul (x W_ih^T + b_ih); then this file's
// recurrence, one direction per thread: per step, the state's product with
// W_hh (kept transposed, P x G*H, so each state value scales a row:
// broadcast and FMA over 16 outputs at a time, 8 vectors in registers) plus
// b_hh, then the cell's gates, in PyTorch's order and formulas:
//   LSTM  (i, f, g, o): c = s(f) c + s(i) tanh(g), h = s(o) tanh(c)
//   GRU   (r, z, n):    n = tanh(x_n + s(r) (W_hn h + b_hn)), h = n + s(z) (h - n)
//   RNN:                h = tanh or relu(x + W_hh h + b_hh)
// with s the logistic function. exp is vec_math.h's (1.7e-7 relative);
// tanh near 0 is its series, so small values keep their relative precision.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "runtime/tensor.h"

namespace llga::recurrent {

enum class Cell : uint8_t { Lstm, Gru, RnnTanh, RnnRelu };

// The CPU has AVX-512F and LLGA_OWN_RNN is not "0".
bool available();

// Gates per cell: 4, 3, 1.
int64_t gatesOf(Cell c);

// One direction's recurrent weights, prepared once: W_hh transposed into
// [P][ldw] (ldw = G * H rounded up to 16, zero padded) and b_hh [ldw].
struct IterWeights {
  int64_t gh = 0, ldw = 0, p = 0;
  std::shared_ptr<Storage> w, b;
  const float* wt() const { return static_cast<const float*>(w->data); }
  const float* bias() const { return static_cast<const float*>(b->data); }
};

// From PyTorch's w_hh ([G * H][P], rows at `w_stride` floats) and b_hh ([G * H], or null).
IterWeights prepareIter(const float* w_hh, int64_t w_stride, const float* b_hh, int64_t gh, int64_t p);

// One direction of one layer over T steps of N sequences (reverse: from the
// last step to the first). The state is H wide (no projection). Step t of
// sequence n reads its input projection (G * H values, b_ih included) at
// xg + t * xg_t + n * xg_n and writes its h at out + t * out_t + n * out_n;
// h0 and c0 (LSTM) are [N][H], the final states go to hT and cT ([N][H]).
// `scratch`: scratchFloats(...) floats. Runs on the calling thread.
struct Direction {
  Cell cell;
  int64_t H, T, N;
  bool reverse;
  const float* xg;
  int64_t xg_t, xg_n;
  const float *h0, *c0;
  float* out;
  int64_t out_t, out_n;
  float *hT, *cT;
};
size_t scratchFloats(const IterWeights& w, int64_t N, int64_t H);
void run(const Direction& d, const IterWeights& w, float* scratch);

}  // namespace llga::recurrent
