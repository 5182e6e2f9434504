#include "backend/dnnl/depthwise_int8.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "backend/dnnl/quantize.h"
#include "backend/dnnl/vec_math.h"

// AVX-512 BW for the byte unpacks and packs, VNNI for vpdpbusd.
#define LLGA_AVX512_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

namespace llga::dw_int8 {
namespace {

constexpr int64_t kBlock = 64;      // channels of a full unit (one zmm of bytes)
constexpr int64_t kMaxTaps = 8;     // kernel rows and columns
constexpr size_t kVecBytes = 64;

// The channels split into units of work: full blocks of 64 (interleaved by
// unpacks, the channels of each in kernel order, below), then what is left:
// up to 16 channels as a narrow unit (interleaved by widening loads and
// shifts, channels in their own order), more as one more block of 64 that
// ends at the last channel and writes only the channels no block before it
// did (a narrow unit costs about half a block: 96 channels are a block and
// an overlapping one, 144 two blocks and a narrow unit, not three blocks).
struct Units {
  int64_t c = 0, full = 0, rest = 0;
  explicit Units(int64_t channels) : c(channels), full(channels / kBlock), rest(channels % kBlock) {}
  bool narrow() const { return rest > 0 && rest <= 16; }
  bool wide() const { return rest > 16; }
  int64_t count() const { return full + (rest > 0 ? 1 : 0); }
  int64_t positions() const { return full * kBlock + (narrow() ? 16 : wide() ? kBlock : 0); }  // kernel order, padded
  int64_t first(int64_t u) const { return u < full ? u * kBlock : wide() ? std::max<int64_t>(0, c - kBlock) : full * kBlock; }
  int64_t vectors(int64_t u) const { return u < full || wide() ? 4 : 1; }
};

int64_t rowGroups(int64_t kh) { return (kh + 3) / 4; }
// Two output rows one input row apart read kh + 1 input rows. Where those
// fit the groups of four one row reads (3x3: 4 of 4, 5x5 and 7x7: 6 and 8
// of 8), one interleaved buffer serves both rows at stride 1: the second
// row's taps are packed one byte further into each dword (a second set),
// so each buffer vector feeds two vpdpbusd and each input column is
// interleaved once for two rows instead of once for each.
bool pairable(int64_t kh) { return kh + 1 <= 4 * rowGroups(kh); }
int64_t tapSets(int64_t kh) { return pairable(kh) ? 2 : 1; }
bool pairsRows(const Geometry& g) { return g.stride_h == 1 && pairable(g.kh) && g.oh >= 2; }
// Input columns an output row reads: its buffer holds them interleaved.
int64_t bufferColumns(const Geometry& g) { return (g.ow - 1) * g.stride_w + g.kw; }
size_t bufferBytes(const Geometry& g) {
  return static_cast<size_t>(bufferColumns(g) * rowGroups(g.kh)) * 4 * kVecBytes;
}

// The packed storage: taps, a vector per kernel column and group of rows for
// each 16 channels ([set][unit][kw][group][vectors of the unit]; set 1, where
// the kernel is pairable, for the second row of a pair), then scale and
// compensation for each padded channel, then each position's channel as an
// int32 (c for a padding position: its bias is 0), all in kernel order.
size_t tapBytes(int64_t c, int64_t kh, int64_t kw) {
  return static_cast<size_t>(tapSets(kh) * Units(c).positions() / 16 * kw * rowGroups(kh)) * kVecBytes;
}
const float* scales(const Weights& wt) {
  return reinterpret_cast<const float*>(static_cast<const char*>(wt.storage->data) + tapBytes(wt.c, wt.kh, wt.kw));
}
const int32_t* channels(const Weights& wt) {
  return reinterpret_cast<const int32_t*>(scales(wt) + 2 * Units(wt.c).positions());
}

// Channel of a full block's vector j, dword p: the order the byte and word
// unpacks leave four interleaved rows of 64 channels in (lane L = p / 4 holds
// channels 16 L + 4 j .. 16 L + 4 j + 3).
constexpr int64_t channelOf(int64_t j, int64_t p) { return 16 * (p / 4) + 4 * j + p % 4; }
// The channel at position `at` of the kernel order (unit at / 64).
int64_t channelAt(const Units& u, int64_t at) {
  const int64_t unit = at / kBlock;
  if (u.vectors(unit) == 1) return at;
  return u.first(unit) + channelOf(at % kBlock / 16, at % 16);
}

// Rows r0..r3 (64 channels each) into 4 vectors: dword p of vector j holds
// channel channelOf(j, p)'s bytes from r0, r1, r2, r3.
LLGA_AVX512_VNNI inline void interleave(__m512i r0, __m512i r1, __m512i r2, __m512i r3, __m512i* out) {
  const __m512i lo01 = _mm512_unpacklo_epi8(r0, r1), hi01 = _mm512_unpackhi_epi8(r0, r1);
  const __m512i lo23 = _mm512_unpacklo_epi8(r2, r3), hi23 = _mm512_unpackhi_epi8(r2, r3);
  _mm512_store_si512(out + 0, _mm512_unpacklo_epi16(lo01, lo23));
  _mm512_store_si512(out + 1, _mm512_unpackhi_epi16(lo01, lo23));
  _mm512_store_si512(out + 2, _mm512_unpacklo_epi16(hi01, hi23));
  _mm512_store_si512(out + 3, _mm512_unpackhi_epi16(hi01, hi23));
}

// The chain reduced to what the row loop applies without a branch, with
// y = sum * scale[c] + bias[c]:
//   Affine: y                                   (the scale and bias absorb a linear tail)
//   Clamp:  min(max(y, lo), hi)                 (relu, clip, relu6 before it)
//   Swish:  swish(y) * a + b
//   Steps:  any other chain, step by step.
// For a quantized output the pack saturates: a clamp at or beyond the
// output type's range is left to it.
enum class Form : uint8_t { Affine, Clamp, Swish, Steps };

struct Epilogue {
  Form form = Form::Clamp;
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity(), a = 1, b = 0;
  std::vector<Step> steps;  // Steps

  Epilogue(const std::vector<Step>& chain, Output out) {
    size_t i = 0;
    if (!chain.empty() && chain[0].kind == Step::Kind::Swish) {
      form = Form::Swish, i = 1;
    } else {
      for (; i < chain.size(); ++i) {
        const Step& s = chain[i];
        if (s.kind == Step::Kind::Relu && s.alpha == 0) lo = std::max(lo, 0.0f);
        else if (s.kind == Step::Kind::Clip) lo = std::max(lo, s.alpha), hi = std::min(hi, s.beta);
        else break;
      }
    }
    for (; i < chain.size() && chain[i].kind == Step::Kind::Linear; ++i)
      a *= chain[i].alpha, b = b * chain[i].alpha + chain[i].beta;
    // (disjoint clips, NaN bounds, and a linear that is no positive scale: step by step)
    if (i < chain.size() || !(lo <= hi) || (form == Form::Clamp && !(a > 0 && std::isfinite(a)))) {
      form = Form::Steps, steps = chain;
      return;
    }
    if (form != Form::Clamp) return;
    lo = lo * a + b, hi = hi * a + b;  // into the scaled output's units
    const float sat_lo = out == Output::U8 ? 0.0f : out == Output::S8 ? -128.0f : -std::numeric_limits<float>::infinity();
    const float sat_hi = out == Output::U8 ? 255.0f : out == Output::S8 ? 127.0f : std::numeric_limits<float>::infinity();
    if (lo <= sat_lo && hi >= sat_hi) form = Form::Affine;
  }
  // Whether scale and bias absorb a and b.
  bool folded() const { return form == Form::Affine || form == Form::Clamp; }
};

struct Item {
  const Weights& wt;
  const Geometry& g;
  const uint8_t* src;
  void* dst;
  Output out;
  const float* scale;     // kernel order, this call's (Epilogue::folded)
  const float* bias;      // kernel order, compensation included
  const uint8_t* zp_row;  // 64 bytes of a real 0 in the source's bytes: padding rows
  const Epilogue& epilogue;
};

// R output rows (1, or 2 at stride 1 where the kernel is pairable) from oh,
// of one unit of channels (V = 4: a full block of 64; V = 1: 16 channels of
// the tail): the input columns they read interleaved into `buf`, then KW x G
// vpdpbusd per vector, output pixel and row. KW and G fixed at compile time
// for the common kernels (0: read from g). Everything the loops read is
// copied to locals first: the stores go through char pointers, which may
// alias anything the compiler cannot see is local.
template <int KW_, int G_, Form F, int V, int R>
LLGA_AVX512_VNNI void row(const Item& it, int64_t n, int64_t oh, int64_t unit, __m512i* __restrict buf) {
  const Geometry& g = it.g;
  const Units units(g.c);
  const int64_t KW = KW_ ? KW_ : g.kw, G = G_ ? G_ : rowGroups(g.kh);
  // channels c0 .. c0 + cn read; those from c0 + skip written (the others
  // are an earlier block's, where this is the last one, overlapping it)
  const int64_t c0 = units.first(unit), cn = std::min<int64_t>(16 * V, g.c - c0);
  const int64_t skip = unit < units.full ? 0 : units.full * kBlock - c0;
  const int64_t in_w = g.w, pad_l = g.pad_l, sw = g.stride_w, kh = g.kh + R - 1;  // input rows read
  const __mmask64 cm = cn == 64 ? ~__mmask64{0} : (__mmask64{1} << cn) - 1;
  const __mmask64 store = cm & (~__mmask64{0} << skip);
  const uint8_t* rows[4 * 2];
  int64_t col_stride[4 * 2];
  for (int64_t r = 0; r < 4 * G; ++r) {  // rows outside the image read the zero point (beyond the kernel: weight 0)
    const int64_t ih = oh * g.stride_h - g.pad_t + r;
    const bool inside = r < kh && ih >= 0 && ih < g.h;
    rows[r] = inside ? it.src + n * g.src_strides[0] + ih * g.src_strides[1] + c0 : it.zp_row;
    col_stride[r] = inside ? g.src_strides[2] : 0;
  }
  const __m512i zp = _mm512_set1_epi8(static_cast<char>(it.wt.src_zero_point));
  const bool flip = it.wt.src_s8;  // s8 bytes: + 128 as u8 (padding columns are stored as the zero point)
  const __m512i top = _mm512_set1_epi8(static_cast<char>(0x80));
  // Column `col` of the buffer (input column col - pad_l) interleaved. Each
  // output pixel builds the columns the next one is the first to read, before
  // its own epilogue, so the unpacks (port 5) overlap the vpdpbusd (port 0)
  // rather than running as a phase of their own (which took a third of the time).
  auto build = [&](int64_t col) LLGA_AVX512_VNNI {
    const int64_t iw = col - pad_l;
    __m512i* v = buf + col * G * V;
    const bool outside = iw < 0 || iw >= in_w;
    for (int64_t gi = 0; gi < G; ++gi, v += V) {
      const int64_t r = 4 * gi;
      if (outside) {
#pragma GCC unroll 4
        for (int j = 0; j < V; ++j) _mm512_store_si512(v + j, zp);
      } else if constexpr (V == 4) {
        // (a masked byte load costs a vector ALU op besides the load: only
        // for a block past the last channel; rows past the kernel's are 0)
        auto load = [&](int64_t k) LLGA_AVX512_VNNI {
          if (r + k >= kh) return _mm512_setzero_si512();
          const uint8_t* at = rows[r + k] + iw * col_stride[r + k];
          const __m512i x = cn == kBlock ? _mm512_loadu_si512(at) : _mm512_maskz_loadu_epi8(cm, at);
          return flip ? _mm512_xor_si512(x, top) : x;
        };
        interleave(load(0), load(1), load(2), load(3), v);
      } else {  // 16 channels: each row's bytes widened to dwords and shifted into place
        const __mmask16 m = static_cast<__mmask16>(cm);
        auto widen = [&](int64_t k) LLGA_AVX512_VNNI {
          const __m128i x = _mm_maskz_loadu_epi8(m, rows[r + k] + iw * col_stride[r + k]);
          return _mm512_cvtepu8_epi32(flip ? _mm_xor_si128(x, _mm512_castsi512_si128(top)) : x);
        };
        const __m512i a01 = _mm512_or_si512(widen(0), _mm512_slli_epi32(widen(1), 8));
        const __m512i a012 = _mm512_or_si512(a01, _mm512_slli_epi32(widen(2), 16));
        _mm512_store_si512(v, r + 3 < kh ? _mm512_or_si512(a012, _mm512_slli_epi32(widen(3), 24)) : a012);
      }
    }
  };
  int64_t built = 0;
  const int64_t cols = bufferColumns(g);

  const __m512i* __restrict taps = static_cast<const __m512i*>(it.wt.storage->data) + unit * 4 * KW * G;
  const __m512i* __restrict taps2 = taps + units.positions() / 16 * KW * G;  // set 1: the pair's second row
  const float* scale = it.scale + unit * kBlock;
  const float* bias = it.bias + unit * kBlock;
  __m512 sv[V], bv[V];
#pragma GCC unroll 4
  for (int j = 0; j < V; ++j) {
    sv[j] = _mm512_load_ps(scale + 16 * j);
    bv[j] = _mm512_load_ps(bias + 16 * j);
  }
  const Epilogue& ep = it.epilogue;
  const __m512 lo = _mm512_set1_ps(ep.lo), hi = _mm512_set1_ps(ep.hi), ea = _mm512_set1_ps(ep.a), eb = _mm512_set1_ps(ep.b);
  const Output out = it.out;
  const int64_t ow_n = g.ow, elem = out == Output::F32 ? 4 : 1, dst_step = g.dst_strides[2] * elem;
  char* d = static_cast<char*>(it.dst) + (n * g.dst_strides[0] + oh * g.dst_strides[1] + c0) * elem;
  const int64_t row_step = g.dst_strides[1] * elem;
  const __m512i* v = buf;
  // The epilogue of one output pixel's V vectors into d.
  auto finish = [&](const __m512i* acc, char* d) LLGA_AVX512_VNNI {
    __m512 y[V];
#pragma GCC unroll 4
    for (int j = 0; j < V; ++j) {
      y[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[j]), sv[j], bv[j]);
      if constexpr (F == Form::Clamp) y[j] = _mm512_min_ps(_mm512_max_ps(y[j], lo), hi);
      if constexpr (F == Form::Swish) y[j] = _mm512_fmadd_ps(vec::swish16(y[j]), ea, eb);
      if constexpr (F == Form::Steps)
        for (const Step& st : ep.steps) y[j] = vec::applyStep16(y[j], st);
    }
    if constexpr (V == 1) {  // channels in their own order
      const __mmask16 m = static_cast<__mmask16>(store);
      if (out == Output::F32) {
        _mm512_mask_storeu_ps(d, m, y[0]);
      } else if (out == Output::U8) {  // (vpmovusdb reads dwords as unsigned: negatives first to 0)
        _mm512_mask_cvtusepi32_storeu_epi8(d, m, _mm512_max_epi32(_mm512_cvtps_epi32(y[0]), _mm512_setzero_si512()));
      } else {
        _mm512_mask_cvtsepi32_storeu_epi8(d, m, _mm512_cvtps_epi32(y[0]));
      }
    } else if (out == Output::F32) {  // kernel order back to channel order: a 4 x 4 transpose of 128-bit lanes
      const __m512 t0 = _mm512_shuffle_f32x4(y[0], y[1], 0x44), t1 = _mm512_shuffle_f32x4(y[0], y[1], 0xEE);
      const __m512 t2 = _mm512_shuffle_f32x4(y[2], y[3], 0x44), t3 = _mm512_shuffle_f32x4(y[2], y[3], 0xEE);
      float* f = reinterpret_cast<float*>(d);
      _mm512_mask_storeu_ps(f, static_cast<__mmask16>(store), _mm512_shuffle_f32x4(t0, t2, 0x88));
      _mm512_mask_storeu_ps(f + 16, static_cast<__mmask16>(store >> 16), _mm512_shuffle_f32x4(t0, t2, 0xDD));
      _mm512_mask_storeu_ps(f + 32, static_cast<__mmask16>(store >> 32), _mm512_shuffle_f32x4(t1, t3, 0x88));
      _mm512_mask_storeu_ps(f + 48, static_cast<__mmask16>(store >> 48), _mm512_shuffle_f32x4(t1, t3, 0xDD));
    } else {  // the packs put kernel order back into channel order
      const __m512i p01 = _mm512_packs_epi32(_mm512_cvtps_epi32(y[0]), _mm512_cvtps_epi32(y[1]));
      const __m512i p23 = _mm512_packs_epi32(_mm512_cvtps_epi32(y[2]), _mm512_cvtps_epi32(y[3]));
      _mm512_mask_storeu_epi8(d, store, out == Output::U8 ? _mm512_packus_epi16(p01, p23) : _mm512_packs_epi16(p01, p23));
    }
  };
  for (; built < KW; ++built) build(built);
  for (int64_t ow = 0; ow < ow_n; ++ow, d += dst_step, v += sw * G * V) {
    __m512i acc[R][V];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int j = 0; j < V; ++j) acc[r][j] = _mm512_setzero_si512();
#pragma GCC unroll 16
    for (int64_t k = 0; k < KW * G; ++k)
#pragma GCC unroll 4
      for (int j = 0; j < V; ++j) {
        const __m512i x = _mm512_load_si512(v + V * k + j);
        acc[0][j] = _mm512_dpbusd_epi32(acc[0][j], x, taps[V * k + j]);
        if constexpr (R == 2) acc[1][j] = _mm512_dpbusd_epi32(acc[1][j], x, taps2[V * k + j]);
      }
    for (const int64_t need = std::min((ow + 1) * sw + KW, cols); built < need; ++built) build(built);
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) finish(acc[r], d + r * row_step);
  }
}

using RowFn = void (*)(const Item&, int64_t, int64_t, int64_t, __m512i*);

template <Form F, int V, int R>
RowFn rowFor(const Geometry& g) {
  if (g.kw == 3 && rowGroups(g.kh) == 1) return row<3, 1, F, V, R>;
  if (g.kw == 5 && rowGroups(g.kh) == 2) return row<5, 2, F, V, R>;
  return row<0, 0, F, V, R>;
}

template <int V, int R>
RowFn rowFor(const Geometry& g, Form f) {
  switch (f) {
    case Form::Affine: return rowFor<Form::Affine, V, R>(g);
    case Form::Clamp: return rowFor<Form::Clamp, V, R>(g);
    case Form::Swish: return rowFor<Form::Swish, V, R>(g);
    case Form::Steps: break;
  }
  return rowFor<Form::Steps, V, R>(g);
}

}  // namespace

bool available() {
  static const bool yes = [] {
    const char* env = std::getenv("LLGA_DW_INT8");
    return !(env && std::string(env) == "0") && int8::hasAvx512Vnni();
  }();
  return yes;
}

bool supports(const Geometry& g) {
  return g.kh >= 1 && g.kh <= kMaxTaps && g.kw >= 1 && g.kw <= kMaxTaps && g.stride_h >= 1 && g.stride_w >= 1 &&
         g.pad_t >= 0 && g.pad_l >= 0 && g.c >= 1 && g.oh >= 1 && g.ow >= 1;
}

std::shared_ptr<const Weights> pack(const int8_t* w, const float* scale, int64_t c, int64_t kh, int64_t kw,
                                    int32_t src_zero_point, bool src_s8) {
  if (kh < 1 || kh > kMaxTaps || kw < 1 || kw > kMaxTaps)
    throw std::invalid_argument("dw_int8::pack: a " + std::to_string(kh) + "x" + std::to_string(kw) + " kernel");
  if (src_s8 && src_zero_point != 0) throw std::invalid_argument("dw_int8::pack: an s8 source with a zero point");
  if (c < 1 || c > std::numeric_limits<int32_t>::max() - kBlock)  // (the channel table is int32)
    throw std::invalid_argument("dw_int8::pack: " + std::to_string(c) + " channels");
  auto wt = std::make_shared<Weights>();
  if (src_s8) src_zero_point = 128;  // x + 128 as u8 (run flips each byte's top bit)
  wt->c = c, wt->kh = kh, wt->kw = kw, wt->src_zero_point = src_zero_point, wt->src_s8 = src_s8;
  const Units units(c);
  const int64_t G = rowGroups(kh), positions = units.positions();
  const size_t taps = tapBytes(c, kh, kw), set_bytes = taps / static_cast<size_t>(tapSets(kh));
  wt->storage = Storage::allocate(taps + 2 * static_cast<size_t>(positions) * sizeof(float) +
                                  static_cast<size_t>(positions) * sizeof(int32_t));
  auto* t = static_cast<int8_t*>(wt->storage->data);
  std::memset(t, 0, taps);
  auto* sc = reinterpret_cast<float*>(static_cast<char*>(wt->storage->data) + taps);
  float* comp = sc + positions;
  auto* chan = reinterpret_cast<int32_t*>(comp + positions);
  for (int64_t at = 0; at < positions; ++at) {
    const int64_t ch = channelAt(units, at);
    chan[at] = static_cast<int32_t>(std::min(ch, c));
    if (ch >= c) {
      sc[at] = 0.0f, comp[at] = 0.0f;
      continue;
    }
    // the unit's taps start at vector unit * 4 * kw * G; each tap has nv vectors, this channel's is v
    const int64_t unit = at / kBlock, nv = units.vectors(unit), v = nv == 4 ? at % kBlock / 16 : 0, dword = at % 16;
    int64_t sum = 0;
    // set 1 (the second row of a pair) has kernel row kr at slot kr + 1
    for (int64_t set = 0; set < tapSets(kh); ++set)
      for (int64_t x = 0; x < kw; ++x)
        for (int64_t slot = set; slot < kh + set; ++slot) {
          const int8_t value = w[(ch * kh + slot - set) * kw + x];
          const int64_t gi = slot / 4, r = slot % 4;
          t[set * set_bytes + ((unit * 4 * kw * G) + (x * G + gi) * nv + v) * 64 + 4 * dword + r] = value;
          if (set == 0) sum += value;
        }
    sc[at] = scale[ch];
    comp[at] = -scale[ch] * static_cast<float>(static_cast<int64_t>(src_zero_point) * sum);
  }
  return wt;
}

namespace {

// A thread's part of the scratch: this call's scale and bias in kernel order
// (the compensation plus the bias, and where the epilogue folds it, its
// linear tail), 64 bytes of the zero point, and its row buffer. Each thread
// fills its own: written by one thread and read by the other, they moved
// between the cores' caches on every call (a 960-channel 7x7 layer ran
// slower on two threads than on one).
size_t frameBytes(const Geometry& g) {
  return 2 * static_cast<size_t>(Units(g.c).positions()) * sizeof(float) + kVecBytes + bufferBytes(g);
}

// scale_k = scale * fa and bias_k = (compensation + bias[channel]) * fa + fb
// for every position, 16 at a time (a bias gathered by the packed channel
// table). Per position through channelAt this was a sixth of a 960-channel
// 7x7 layer's time, on every call and both threads.
LLGA_AVX512_VNNI void fillFrame(const Weights& wt, const float* bias, float fa, float fb, float* scale_k, float* bias_k) {
  const int64_t padded = Units(wt.c).positions();
  const float* scale = scales(wt);
  const float* comp = scale + padded;
  const int32_t* chan = channels(wt);
  const __m512 a = _mm512_set1_ps(fa), b = _mm512_set1_ps(fb);
  const __m512i c = _mm512_set1_epi32(static_cast<int32_t>(wt.c));
  for (int64_t at = 0; at < padded; at += 16) {  // (positions are whole vectors)
    _mm512_store_ps(scale_k + at, _mm512_mul_ps(_mm512_loadu_ps(scale + at), a));
    __m512 y = _mm512_loadu_ps(comp + at);
    if (bias) {
      const __m512i ch = _mm512_loadu_si512(chan + at);
      y = _mm512_add_ps(y, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), _mm512_cmplt_epi32_mask(ch, c), ch, bias, 4));
    }
    _mm512_store_ps(bias_k + at, _mm512_fmadd_ps(y, a, b));
  }
}

}  // namespace

size_t scratchBytes(const Geometry& g, int threads) { return static_cast<size_t>(std::max(threads, 1)) * frameBytes(g); }

void run(const Weights& wt, const Geometry& g, const void* src_bytes, void* dst, Output out, const float* bias,
         const std::vector<Step>& steps, void* scratch) {
  if (wt.c != g.c || wt.kh != g.kh || wt.kw != g.kw)
    throw std::logic_error("dw_int8::run: weights packed for another kernel");
  const auto* src = static_cast<const uint8_t*>(src_bytes);
  const Units units(g.c);
  // items: a unit of channels in one output row, or in a pair of rows (pairsRows)
  const int64_t per_row = units.count(), padded = units.positions(), rows_per = pairsRows(g) ? 2 : 1;
  const int64_t row_items = (g.oh + rows_per - 1) / rows_per, items = g.n * row_items * per_row;
  // One thread's share: items [begin, end) with its own frame.
  auto part = [&](int tid, int64_t begin, int64_t end) {
    const Epilogue epilogue(steps, out);
    char* frame = static_cast<char*>(scratch) + static_cast<size_t>(tid) * frameBytes(g);
    auto* scale_k = reinterpret_cast<float*>(frame);
    float* bias_k = scale_k + padded;
    const float fa = epilogue.folded() ? epilogue.a : 1.0f, fb = epilogue.folded() ? epilogue.b : 0.0f;
    fillFrame(wt, bias, fa, fb, scale_k, bias_k);
    auto* zp_row = reinterpret_cast<uint8_t*>(bias_k + padded);
    // a real 0 as the source holds it (read like the source: an s8 one flipped into the zero point)
    std::memset(zp_row, wt.src_s8 ? 0 : static_cast<int>(static_cast<uint8_t>(wt.src_zero_point)), kVecBytes);
    auto* buf = reinterpret_cast<__m512i*>(zp_row + kVecBytes);
    const Item it{wt, g, src, dst, out, scale_k, bias_k, zp_row, epilogue};
    const RowFn full = rowFor<4, 1>(g, epilogue.form), tail = rowFor<1, 1>(g, epilogue.form);
    const RowFn full2 = rowFor<4, 2>(g, epilogue.form), tail2 = rowFor<1, 2>(g, epilogue.form);
    for (int64_t i = begin; i < end; ++i) {
      const int64_t u = i % per_row, oh = (i / per_row) % row_items * rows_per;
      const bool pair = rows_per == 2 && oh + 1 < g.oh;
      const bool wide = units.vectors(u) == 4;
      (pair ? (wide ? full2 : tail2) : (wide ? full : tail))(it, i / (per_row * row_items), oh, u, buf);
    }
  };
  const int threads = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), items));
  if (threads <= 1 || omp_in_parallel()) {  // no team (parallelFor's reason)
    part(0, 0, items);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
    part(tid, items * tid / nt, items * (tid + 1) / nt);
  }
}

}  // namespace llga::dw_int8
