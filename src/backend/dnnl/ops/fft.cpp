// llga::dft_frames(x, window, n_fft, hop, bins) -> [B, 2 * bins, F]: the
// discrete Fourier transform of each windowed frame of a signal, as
// torch.stft computes it (decompose rewrites a real stft into it):
//   out[b, k, f]        =  sum_t x[b, 0, f * hop + t] * window[t] * cos(2 pi k t / n_fft)
//   out[b, bins + k, f] = -sum_t x[b, 0, f * hop + t] * window[t] * sin(2 pi k t / n_fft)
// for k < bins (n_fft / 2 + 1 one-sided, n_fft two-sided) and the
// F = (L - n_fft) / hop + 1 frames of x [B, 1, L] (any strides); window has
// n_fft elements.
//
// How: a mixed-radix Stockham FFT (decimation in frequency, results in
// natural order, no bit reversal) of n_fft points, radix 4 first, then 2, 3,
// 5, and any other prime by its direct sum, with twiddle factors computed once
// per kernel in double. The frames are real, so each complex transform takes
// two: frame a as the real part, frame b as the imaginary part, separated
// after it (A[k] = (Z[k] + conj Z[n - k]) / 2, B[k] = (Z[k] - conj Z[n - k]) / 2i).
// Sixteen such pairs go through it at once, one per SIMD lane (each point of
// the transform is a vector of 16, so every butterfly is a vector operation,
// and the frames come out contiguous as the result lays them out), compiled
// for AVX-512, for AVX2 with FMA, and for neither, picked by oneDNN's
// effective ISA; blocks of 32 frames and signals run in parallel. A transform
// of n points costs O(n log n) where the conv1d of DFT kernels it replaces
// cost O(n^2): 400 points, 81 frames, 0.7 against 26 MFLOP.
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/dnnl/dnnl_utils.h"
#include "backend/dnnl/ops/op_utils.h"
#include "backend/dnnl/vec_math.h"

namespace llga {
namespace {

constexpr int kLanes = 16;  // frames per transform

// One stage of the Stockham recursion: radix r over sub-transforms of n points, stride s.
struct Stage {
  int64_t r = 0, n = 0, s = 0;
  std::vector<float> tw_re, tw_im;  // W_n^(p k), p < n / r, 1 <= k < r: [p][k - 1]
  std::vector<float> root_re, root_im;  // W_r^(j k mod r), for the direct sum of an odd radix
};

std::vector<Stage> plan(int64_t n) {
  std::vector<int64_t> radices;
  int64_t rest = n;
  while (rest % 4 == 0) radices.push_back(4), rest /= 4;
  while (rest % 2 == 0) radices.push_back(2), rest /= 2;
  for (int64_t p = 3; p * p <= rest; p += 2)
    while (rest % p == 0) radices.push_back(p), rest /= p;
  if (rest > 1) radices.push_back(rest);
  std::vector<Stage> stages;
  int64_t cur = n, s = 1;
  for (int64_t r : radices) {
    Stage st;
    st.r = r, st.n = cur, st.s = s;
    const int64_t m = cur / r;
    st.tw_re.resize(static_cast<size_t>(m * (r - 1)));
    st.tw_im.resize(st.tw_re.size());
    for (int64_t p = 0; p < m; ++p)
      for (int64_t k = 1; k < r; ++k) {
        const double a = -2 * M_PI * static_cast<double>((p * k) % cur) / static_cast<double>(cur);
        st.tw_re[static_cast<size_t>(p * (r - 1) + k - 1)] = static_cast<float>(std::cos(a));
        st.tw_im[static_cast<size_t>(p * (r - 1) + k - 1)] = static_cast<float>(std::sin(a));
      }
    for (int64_t j = 0; j < r; ++j) {
      const double a = -2 * M_PI * static_cast<double>(j) / static_cast<double>(r);
      st.root_re.push_back(static_cast<float>(std::cos(a)));
      st.root_im.push_back(static_cast<float>(std::sin(a)));
    }
    stages.push_back(std::move(st));
    cur = m, s *= r;
  }
  return stages;
}

// A point of the transform: 16 lanes' real and imaginary parts, at index i of a buffer.
struct Buf {
  float* re;
  float* im;
};

#define LLGA_FFT_INLINE [[gnu::always_inline]] inline

// y[q + s (r p + k)] = W_n^(p k) sum_j x[q + s (p + j m)] W_r^(j k), for every p < m, q < s.
LLGA_FFT_INLINE void runStage(const Stage& st, const Buf& x, const Buf& y, float* scratch) {
  const int64_t r = st.r, m = st.n / r, s = st.s;
  for (int64_t p = 0; p < m; ++p) {
    const float* twr = st.tw_re.data() + p * (r - 1);
    const float* twi = st.tw_im.data() + p * (r - 1);
    for (int64_t q = 0; q < s; ++q) {
      const int64_t in0 = (q + s * p) * kLanes, in_step = s * m * kLanes;  // x[q + s (p + j m)]
      const int64_t out0 = (q + s * r * p) * kLanes, out_step = s * kLanes;  // y[q + s (r p + k)]
      const float* ar = x.re + in0;
      const float* ai = x.im + in0;
      float* br = y.re + out0;
      float* bi = y.im + out0;
      if (r == 2) {
        const float wr = twr[0], wi = twi[0];
#pragma omp simd
        for (int l = 0; l < kLanes; ++l) {
          const float a0r = ar[l], a0i = ai[l], a1r = ar[in_step + l], a1i = ai[in_step + l];
          const float dr = a0r - a1r, di = a0i - a1i;
          br[l] = a0r + a1r, bi[l] = a0i + a1i;
          br[out_step + l] = dr * wr - di * wi, bi[out_step + l] = dr * wi + di * wr;
        }
      } else if (r == 4) {
        const float w1r = twr[0], w1i = twi[0], w2r = twr[1], w2i = twi[1], w3r = twr[2], w3i = twi[2];
#pragma omp simd
        for (int l = 0; l < kLanes; ++l) {
          const float a0r = ar[l], a0i = ai[l], a1r = ar[in_step + l], a1i = ai[in_step + l];
          const float a2r = ar[2 * in_step + l], a2i = ai[2 * in_step + l];
          const float a3r = ar[3 * in_step + l], a3i = ai[3 * in_step + l];
          const float t0r = a0r + a2r, t0i = a0i + a2i, t1r = a0r - a2r, t1i = a0i - a2i;
          const float t2r = a1r + a3r, t2i = a1i + a3i, t3r = a1r - a3r, t3i = a1i - a3i;
          // b1 = t1 - i t3, b3 = t1 + i t3 (W_4 = -i)
          const float c1r = t1r + t3i, c1i = t1i - t3r, c2r = t0r - t2r, c2i = t0i - t2i;
          const float c3r = t1r - t3i, c3i = t1i + t3r;
          br[l] = t0r + t2r, bi[l] = t0i + t2i;
          br[out_step + l] = c1r * w1r - c1i * w1i, bi[out_step + l] = c1r * w1i + c1i * w1r;
          br[2 * out_step + l] = c2r * w2r - c2i * w2i, bi[2 * out_step + l] = c2r * w2i + c2i * w2r;
          br[3 * out_step + l] = c3r * w3r - c3i * w3i, bi[3 * out_step + l] = c3r * w3i + c3i * w3r;
        }
      } else if (r == 3) {
        const float w1r = twr[0], w1i = twi[0], w2r = twr[1], w2i = twi[1];
        const float c = 0.86602540378443864676f;  // sqrt(3) / 2
#pragma omp simd
        for (int l = 0; l < kLanes; ++l) {
          const float a0r = ar[l], a0i = ai[l], a1r = ar[in_step + l], a1i = ai[in_step + l];
          const float a2r = ar[2 * in_step + l], a2i = ai[2 * in_step + l];
          const float sr = a1r + a2r, si = a1i + a2i, dr = a1r - a2r, di = a1i - a2i;
          const float mr = a0r - 0.5f * sr, mi = a0i - 0.5f * si;
          // b1 = m - i c d, b2 = m + i c d (W_3 = -1/2 - i sqrt(3)/2)
          const float c1r = mr + c * di, c1i = mi - c * dr, c2r = mr - c * di, c2i = mi + c * dr;
          br[l] = a0r + sr, bi[l] = a0i + si;
          br[out_step + l] = c1r * w1r - c1i * w1i, bi[out_step + l] = c1r * w1i + c1i * w1r;
          br[2 * out_step + l] = c2r * w2r - c2i * w2i, bi[2 * out_step + l] = c2r * w2i + c2i * w2r;
        }
      } else if (r == 5) {
        const float w1r = twr[0], w1i = twi[0], w2r = twr[1], w2i = twi[1];
        const float w3r = twr[2], w3i = twi[2], w4r = twr[3], w4i = twi[3];
        // cos and sin of 2 pi / 5 and 4 pi / 5
        const float c1 = 0.30901699437494742410f, c2 = -0.80901699437494742410f;
        const float s1 = 0.95105651629515357212f, s2 = 0.58778525229247312917f;
#pragma omp simd
        for (int l = 0; l < kLanes; ++l) {
          const float a0r = ar[l], a0i = ai[l], a1r = ar[in_step + l], a1i = ai[in_step + l];
          const float a2r = ar[2 * in_step + l], a2i = ai[2 * in_step + l];
          const float a3r = ar[3 * in_step + l], a3i = ai[3 * in_step + l];
          const float a4r = ar[4 * in_step + l], a4i = ai[4 * in_step + l];
          const float t1r = a1r + a4r, t1i = a1i + a4i, t2r = a2r + a3r, t2i = a2i + a3i;
          const float t3r = a1r - a4r, t3i = a1i - a4i, t4r = a2r - a3r, t4i = a2i - a3i;
          const float m1r = a0r + c1 * t1r + c2 * t2r, m1i = a0i + c1 * t1i + c2 * t2i;
          const float m2r = a0r + c2 * t1r + c1 * t2r, m2i = a0i + c2 * t1i + c1 * t2i;
          const float u1r = s1 * t3r + s2 * t4r, u1i = s1 * t3i + s2 * t4i;
          const float u2r = s2 * t3r - s1 * t4r, u2i = s2 * t3i - s1 * t4i;
          // b1 = m1 - i u1, b4 = m1 + i u1, b2 = m2 - i u2, b3 = m2 + i u2
          const float e1r = m1r + u1i, e1i = m1i - u1r, e4r = m1r - u1i, e4i = m1i + u1r;
          const float e2r = m2r + u2i, e2i = m2i - u2r, e3r = m2r - u2i, e3i = m2i + u2r;
          br[l] = a0r + t1r + t2r, bi[l] = a0i + t1i + t2i;
          br[out_step + l] = e1r * w1r - e1i * w1i, bi[out_step + l] = e1r * w1i + e1i * w1r;
          br[2 * out_step + l] = e2r * w2r - e2i * w2i, bi[2 * out_step + l] = e2r * w2i + e2i * w2r;
          br[3 * out_step + l] = e3r * w3r - e3i * w3i, bi[3 * out_step + l] = e3r * w3i + e3i * w3r;
          br[4 * out_step + l] = e4r * w4r - e4i * w4i, bi[4 * out_step + l] = e4r * w4i + e4i * w4r;
        }
      } else {  // any other radix: the direct sum
        float* accr = scratch;
        float* acci = scratch + kLanes;
        for (int64_t k = 0; k < r; ++k) {
#pragma omp simd
          for (int l = 0; l < kLanes; ++l) accr[l] = 0.f, acci[l] = 0.f;
          for (int64_t j = 0; j < r; ++j) {
            const float wr = st.root_re[static_cast<size_t>((j * k) % r)], wi = st.root_im[static_cast<size_t>((j * k) % r)];
            const float* jr = ar + j * in_step;
            const float* ji = ai + j * in_step;
#pragma omp simd
            for (int l = 0; l < kLanes; ++l) accr[l] += jr[l] * wr - ji[l] * wi, acci[l] += jr[l] * wi + ji[l] * wr;
          }
          const float wr = k ? twr[k - 1] : 1.f, wi = k ? twi[k - 1] : 0.f;
          float* kr = br + k * out_step;
          float* ki = bi + k * out_step;
#pragma omp simd
          for (int l = 0; l < kLanes; ++l) kr[l] = accr[l] * wr - acci[l] * wi, ki[l] = accr[l] * wi + acci[l] * wr;
        }
      }
    }
  }
}

// One block: frames f0 .. f0 + 31 of one signal (those below `frames`).
struct Block {
  const std::vector<Stage>* stages;
  int64_t n, bins, hop, frames;
  const float* sig;  // the signal, element stride xt
  int64_t xt;
  const float* window;
  float* out;  // [2 * bins, frames] of this signal
};

LLGA_FFT_INLINE void transformBlock(const Block& b, int64_t f0, float* buf, float* scratch) {
  const int64_t n = b.n;
  Buf x{buf, buf + n * kLanes}, y{buf + 2 * n * kLanes, buf + 3 * n * kLanes};
  // lane l: frame f0 + l as the real part, frame f0 + 16 + l as the imaginary part
  const int64_t first = std::min<int64_t>(kLanes, b.frames - f0);
  const int64_t second = std::max<int64_t>(0, std::min<int64_t>(kLanes, b.frames - f0 - kLanes));
  // sample t of every lane's frame at once (a gather across the frames); a
  // lane past the last frame reads frame f0 and is zeroed by its mask
  int32_t off_a[kLanes], off_b[kLanes];  // (32-bit: a vector gather; the caller checks the signal's extent)
  float keep_a[kLanes], keep_b[kLanes];
  for (int64_t l = 0; l < kLanes; ++l) {
    off_a[l] = static_cast<int32_t>((l < first ? f0 + l : f0) * b.hop * b.xt);
    off_b[l] = static_cast<int32_t>((l < second ? f0 + kLanes + l : f0) * b.hop * b.xt);
    keep_a[l] = l < first ? 1.f : 0.f;
    keep_b[l] = l < second ? 1.f : 0.f;
  }
  for (int64_t t = 0; t < n; ++t) {
    const float w = b.window[t];
    const float* at = b.sig + t * b.xt;
    float* re = x.re + t * kLanes;
    float* im = x.im + t * kLanes;
#pragma omp simd
    for (int l = 0; l < kLanes; ++l) {
      re[l] = at[off_a[l]] * w * keep_a[l];
      im[l] = at[off_b[l]] * w * keep_b[l];
    }
  }
  for (const Stage& st : *b.stages) {
    runStage(st, x, y, scratch);
    std::swap(x, y);
  }
  // A[k] = (Z[k] + conj Z[n-k]) / 2, B[k] = (Z[k] - conj Z[n-k]) / 2i
  float* ra = scratch;
  float* ia = scratch + kLanes;
  float* rb = scratch + 2 * kLanes;
  float* ib = scratch + 3 * kLanes;
  for (int64_t k = 0; k < b.bins; ++k) {
    const int64_t nk = k ? n - k : 0;
    const float* zr = x.re + k * kLanes;
    const float* zi = x.im + k * kLanes;
    const float* cr = x.re + nk * kLanes;
    const float* ci = x.im + nk * kLanes;
#pragma omp simd
    for (int l = 0; l < kLanes; ++l) {
      ra[l] = 0.5f * (zr[l] + cr[l]), ia[l] = 0.5f * (zi[l] - ci[l]);
      rb[l] = 0.5f * (zi[l] + ci[l]), ib[l] = 0.5f * (cr[l] - zr[l]);
    }
    float* o_re = b.out + k * b.frames + f0;
    float* o_im = b.out + (b.bins + k) * b.frames + f0;
    std::memcpy(o_re, ra, static_cast<size_t>(first) * sizeof(float));
    std::memcpy(o_im, ia, static_cast<size_t>(first) * sizeof(float));
    if (second > 0) {
      std::memcpy(o_re + kLanes, rb, static_cast<size_t>(second) * sizeof(float));
      std::memcpy(o_im + kLanes, ib, static_cast<size_t>(second) * sizeof(float));
    }
  }
}

LLGA_AVX512 void blockAvx512(const Block& b, int64_t f0, float* buf, float* scratch) { transformBlock(b, f0, buf, scratch); }
LLGA_AVX2_FMA void blockAvx2(const Block& b, int64_t f0, float* buf, float* scratch) { transformBlock(b, f0, buf, scratch); }
void blockPlain(const Block& b, int64_t f0, float* buf, float* scratch) { transformBlock(b, f0, buf, scratch); }

class DftFrames final : public Kernel {
 public:
  void run(const KernelArgs& a) override {
    const Tensor& x = a.tensor(0);
    const Tensor& window = a.tensor(1);
    const int64_t n = a.toInt(2), hop = a.toInt(3), bins = a.toInt(4);
    if (x.dtype() != ScalarType::Float || x.dim() != 3 || x.size(1) != 1)
      throw std::invalid_argument("dft_frames: the signal must be float32 [batch, 1, length], got " + x.describe());
    if (window.dtype() != ScalarType::Float || window.dim() != 1 || window.size(0) != n)
      throw std::invalid_argument("dft_frames: the window must be float32 of " + std::to_string(n) + " elements, got " +
                                  window.describe());
    if (n <= 0 || hop <= 0 || bins <= 0 || bins > n)
      throw std::invalid_argument("dft_frames: bad n_fft " + std::to_string(n) + ", hop " + std::to_string(hop) +
                                  " or bins " + std::to_string(bins));
    const int64_t batch = x.size(0), len = x.size(2);
    if (len < n)
      throw std::invalid_argument("dft_frames: a signal of " + std::to_string(len) + " samples is shorter than n_fft " +
                                  std::to_string(n));
    const int64_t frames = (len - n) / hop + 1;
    if (len * std::abs(x.stride(2)) >= (int64_t{1} << 31))
      throw std::invalid_argument("dft_frames: a signal of 2^31 elements or more (" + x.describe() + ") is not supported");
    const std::shared_ptr<const std::vector<Stage>> stages_of_n = stagesFor(n);
    const Tensor w = window.contiguous();
    Tensor out = Tensor::empty(ScalarType::Float, {batch, 2 * bins, frames});
    const int64_t per_block = 2 * kLanes;
    const int64_t blocks = (frames + per_block - 1) / per_block;
    const int64_t work = batch * blocks;
    static const auto run_block = cpuRunsAvx512Kernels() ? blockAvx512 : cpuRunsAvx2Kernels() ? blockAvx2 : blockPlain;
    Block b{stages_of_n.get(), n, bins, hop, frames, nullptr, x.stride(2), w.data<float>(), nullptr};
#pragma omp parallel if (work > 1 && n * frames * batch > 8192)
    {
      std::vector<float> buf(static_cast<size_t>(4 * n * kLanes)), scratch(4 * kLanes);
#pragma omp for schedule(static)
      for (int64_t wi = 0; wi < work; ++wi) {
        Block mine = b;
        mine.sig = x.data<float>() + (wi / blocks) * x.stride(0);
        mine.out = out.data<float>() + (wi / blocks) * 2 * bins * frames;
        run_block(mine, (wi % blocks) * per_block, buf.data(), scratch.data());
      }
    }
    a.set(0, out);
  }

 private:
  // The plan of n points, made on the first call (calls may come from several threads).
  std::shared_ptr<const std::vector<Stage>> stagesFor(int64_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    if (n != n_) n_ = n, stages_ = std::make_shared<const std::vector<Stage>>(plan(n));
    return stages_;
  }
  std::mutex mu_;
  int64_t n_ = -1;
  std::shared_ptr<const std::vector<Stage>> stages_;
};

}  // namespace

void registerFftOps(OpRegistry& r) {
  r.add(OpDef{"llga::dft_frames", 5, 5, [](const Node&) { return std::make_unique<DftFrames>(); }});
}

LLGA_REGISTER_OPS(registerFftOps);

}  // namespace llga
