// llga's attention kernel (the `attention` pattern, fuser/patterns.cpp):
//   out = softmax(f(q @ kt), dim=-1) @ v
// where f is the chain between the first product and the softmax (a scale,
// an additive mask: alpha * s + beta, + - * / a broadcast operand, or a
// bool mask selecting a constant: masked_fill, where).
//
// oneDNN 2.6 has no primitive for it; op by op it is two matmul primitives, a
// softmax primitive and a [B, H, L, S] score tensor written and read three
// times. Here each block of 32 query rows is done start to end while its
// scores stay in the core's cache: q_blk @ kt (an 8x32 AVX-512 FMA tile over
// K^T packed once per batch entry), f, the row maxima, exp and sums, then the
// unnormalised probabilities @ v (a 6x64 tile) and one scale of the output
// rows by 1 / sum. On a CPU without AVX-512 the same blocks run on 8-lane
// AVX2 tiles (6x16 both), in fp32. Every step is fp32 with fp32 accumulation, as the op-by-op
// path; the results differ from it by rounding only (the division by the sum
// is applied to the output rows instead of the probabilities).
//
// A product the precision pass assigned bf16 (precision="bf16") takes its
// operands rounded to bf16 (q and k; the unnormalised probabilities and v)
// and accumulates in fp32 on AVX512-BF16's vdpbf16ps, as oneDNN's bf16
// matmul would; f and the softmax stay fp32. On AMX (Bf16Path::Amx) both
// products of a block of 32 query rows are tile products.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace llga::attention {

// One step of f, applied to every score s.
struct ScoreOp {
  enum class Kind : uint8_t { Linear, Add, Sub, Mul, Div, Select } kind = Kind::Linear;
  float alpha = 1, beta = 0;  // Linear: alpha * s + beta; Select: the fill value
  // Add..Div: s op operand, the operand read at data + batch_offset[b] +
  // row * row_stride + col * col_stride (strides 0 where it broadcasts).
  // Select: s = mask ? alpha : s (with `invert`, mask ? s : alpha), the bool
  // mask read at `mask` + the same offsets.
  const float* data = nullptr;
  const bool* mask = nullptr;
  bool invert = false;
  std::vector<int64_t> batch_offset;
  int64_t row_stride = 0, col_stride = 0;
};

// A strided operand: element (b, i, j) at data + batch_offset[b] + i * row_stride + j * col_stride.
struct Operand {
  const float* data = nullptr;
  std::vector<int64_t> batch_offset;
  int64_t row_stride = 0, col_stride = 0;
};

// bf16 products on AMX tiles (32 x 32-pair blocks of tdpbf16ps) or on
// AVX512-BF16's vdpbf16ps in the fp32 path's register tiles. Which one is
// the backend's choice from oneDNN's ISA (Sapphire Rapids' vdpbf16ps
// multiplies no faster than its fp32 FMAs; its AMX does 8x that).
enum class Bf16Path : uint8_t { Avx512Bf16, Amx };

struct Problem {
  int64_t batch = 0, L = 0, S = 0, D = 0, Dv = 0;
  Operand q;   // [batch, L, D]
  Operand kt;  // [batch, D, S]
  Operand v;   // [batch, S, Dv]
  std::vector<ScoreOp> ops;
  // Output row i of batch entry b at out + out_batch_offset[b] + i *
  // out_row_stride, its Dv values contiguous; empty / 0: [batch, L, Dv]
  // row-major. (A permuted output, dense: the heads merged in place.)
  float* out = nullptr;
  std::vector<int64_t> out_batch_offset;
  int64_t out_row_stride = 0;
  bool bf16_qk = false, bf16_pv = false;  // the products in bf16
  Bf16Path bf16_path = Bf16Path::Avx512Bf16;  // on which instructions (availableAmx(), availableBf16())
};

// Whether this CPU runs the kernel: its AVX-512 tiles (F, BW, VL), or without
// them its 8-lane fp32 tiles (AVX2 and FMA: fused_attention_avx2.h); and its
// bf16 products (AVX512-BF16).
bool available();
bool availableAvx512();
bool availableBf16();
bool availableAmx();  // AMX-BF16 and the kernel's permission to use its tiles
// Where products are assigned bf16, their instructions here: AMX tiles where
// oneDNN runs AMX, vdpbf16ps where it runs avx512_core_bf16 (oneDNN's
// effective ISA, which ONEDNN_MAX_CPU_ISA caps, so an emulated older CPU gets
// the older path), none where it emulates bf16 (the ops one by one).
std::optional<Bf16Path> bf16Path();
const char* bf16PathName(Bf16Path path);  // "amx", "avx512_bf16"
// Scratch `run` needs with `threads` threads.
size_t scratchBytes(const Problem& p, int threads);
// Runs on `threads` threads (OpenMP) with `scratch` of scratchBytes(p, threads)
// bytes, 64-byte aligned. Requires available().
void run(const Problem& p, int threads, void* scratch);

}  // namespace llga::attention
