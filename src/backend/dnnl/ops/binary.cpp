// Binary elementwise ops with broadcasting, scalar operands and PyTorch's type
// promotion. Python-number operands (int/float/bool) with no tensor compute
// a Python number, as TorchScript's aten::add(int, int) does.
#include <array>
#include <cmath>
#include <numeric>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <type_traits>

#include "backend/dnnl/dnnl_utils.h"
#include "backend/dnnl/ops/functional.h"
#include "backend/dnnl/post_ops.h"
#include "backend/dnnl/ops/op_utils.h"
#include "backend/dnnl/ops/primitive_cache.h"
#include "backend/dnnl/quantize.h"
#include "ir/precision.h"
#include "runtime/strided.h"
#include "runtime/threads.h"

namespace llga {

Shape broadcastShapes(const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (x != y && x != 1 && y != 1) {
      auto str = [](const Shape& s) {
        std::string r = "(";
        for (size_t k = 0; k < s.size(); ++k) r += (k ? ", " : "") + std::to_string(s[k]);
        return r + ")";
      };
      throw std::invalid_argument("shapes " + str(a) + " and " + str(b) + " cannot be broadcast together");
    }
    out[i] = x == 1 ? y : x;
  }
  return out;
}

ScalarType resultType(const std::vector<const RtValue*>& ops) {
  // Three priority classes: tensors with dims, 0-dim tensors, Python scalars.
  // A lower class only matters if it is of a higher category (bool < int < float).
  auto category = [](ScalarType t) { return t == ScalarType::Bool ? 0 : isIntegralType(t, false) ? 1 : 2; };
  std::optional<ScalarType> dim_t, zero_t, scalar_t;
  for (const RtValue* v : ops) {
    if (v->isTensor()) {
      const Tensor& t = v->tensor();
      auto& slot = t.dim() > 0 ? dim_t : zero_t;
      slot = slot ? promoteTypes(*slot, t.dtype()) : t.dtype();
    } else {
      ScalarType s = v->isDouble() ? ScalarType::Float : v->isBool() ? ScalarType::Bool : ScalarType::Long;
      scalar_t = scalar_t ? promoteTypes(*scalar_t, s) : s;
    }
  }
  std::optional<ScalarType> r = dim_t;
  for (auto lower : {zero_t, scalar_t}) {
    if (!lower) continue;
    if (!r) r = lower;
    else if (category(*lower) > category(*r)) r = *lower;  // Python floats count as Float (the default dtype)
  }
  return r.value_or(ScalarType::Float);
}

Tensor asTensor(const RtValue& v, ScalarType dtype) {
  if (v.isTensor()) return v.tensor();
  return Tensor::scalar(dtype, v.toDouble());
}

namespace {

enum class Bin { Add, Sub, Mul, Div, DivTrunc, DivFloor, FloorDivide, Remainder, Pow, Max, Min, Atan2,
                 Fmod, Copysign, Hypot, NextAfter, LogAddExp, FMax, FMin, Gcd, Xlogy, Heaviside,
                 Eq, Ne, Lt, Le, Gt, Ge, And, Or, Xor };

// Ops whose integral operands compute in float (true division, atan2, ...).
bool floatOnly(Bin op) {
  return op == Bin::Div || op == Bin::Atan2 || op == Bin::Copysign || op == Bin::Hypot || op == Bin::Xlogy;
}

bool isComparison(Bin op) { return op >= Bin::Eq && op <= Bin::Ge; }

template <typename T>
T applyBin(Bin op, T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    switch (op) {
      case Bin::Add: case Bin::Or: case Bin::Max: return a || b;
      case Bin::Mul: case Bin::And: case Bin::Min: return a && b;
      case Bin::Xor: case Bin::Sub: return a != b;
      default: throw std::invalid_argument("operation not supported for bool tensors");
    }
  } else if constexpr (std::is_integral_v<T>) {
    switch (op) {
      case Bin::Add: return a + b;
      case Bin::Sub: return a - b;
      case Bin::Mul: return a * b;
      case Bin::DivTrunc: if (b == 0) throw std::domain_error("integer division by zero"); return a / b;
      case Bin::DivFloor: case Bin::FloorDivide: {
        if (b == 0) throw std::domain_error("integer division by zero");
        T q = a / b;
        return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
      }
      case Bin::Remainder: {
        if (b == 0) throw std::domain_error("integer modulo by zero");
        T m = a % b;
        return (m != 0 && ((m < 0) != (b < 0))) ? m + b : m;
      }
      case Bin::Pow: {  // as PyTorch: by squaring, wrapping on overflow; a negative power of 1, -1 or else 0
        if (b < 0) return a == 1 ? T(1) : a == -1 ? ((-(b + 1)) % 2 == 0 ? T(-1) : T(1)) : T(0);
        uint64_t r = 1, base = static_cast<uint64_t>(a);
        for (auto e = static_cast<std::make_unsigned_t<T>>(b); e; e >>= 1) {
          if (e & 1u) r *= base;
          base *= base;
        }
        return static_cast<T>(r);
      }
      case Bin::Max: case Bin::FMax: return a > b ? a : b;
      case Bin::Min: case Bin::FMin: return a < b ? a : b;
      case Bin::Fmod: if (b == 0) throw std::domain_error("ZeroDivisionError: integer fmod by zero"); return a % b;
      case Bin::Gcd: {
        using U = std::make_unsigned_t<T>;
        const U x = a < 0 ? U(0) - U(a) : U(a), y = b < 0 ? U(0) - U(b) : U(b);
        return static_cast<T>(std::gcd(x, y));
      }
      case Bin::Heaviside: return a == 0 ? b : T(a > 0);
      case Bin::And: return a & b;
      case Bin::Or: return a | b;
      case Bin::Xor: return a ^ b;
      default: throw std::invalid_argument("bad integer op");
    }
  } else {
    double x = toDouble(a), y = toDouble(b), r;
    switch (op) {
      case Bin::Add: r = x + y; break;
      case Bin::Sub: r = x - y; break;
      case Bin::Mul: r = x * y; break;
      case Bin::Div: r = x / y; break;
      case Bin::DivTrunc: r = std::trunc(x / y); break;
      case Bin::DivFloor: case Bin::FloorDivide: r = std::floor(x / y); break;
      case Bin::Remainder: { r = std::fmod(x, y); if (r != 0 && ((r < 0) != (y < 0))) r += y; break; }
      case Bin::Pow: r = std::pow(x, y); break;
      case Bin::Max: r = std::isnan(x) || x > y ? x : y; break;
      case Bin::Min: r = std::isnan(x) || x < y ? x : y; break;
      case Bin::Atan2: r = std::atan2(x, y); break;
      case Bin::Fmod: r = std::fmod(x, y); break;
      case Bin::Copysign: r = std::copysign(x, y); break;
      case Bin::Hypot: r = std::hypot(x, y); break;
      case Bin::NextAfter:  // in the operands' own type: the next float, not the next double
        if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) return std::nextafter(a, b);
        else throw std::invalid_argument("nextafter takes float32 or float64 tensors");
      case Bin::LogAddExp:  // as PyTorch: two equal infinities stay themselves
        r = std::isinf(x) && x == y ? x : std::max(x, y) + std::log1p(std::exp(-std::abs(x - y)));
        break;
      case Bin::FMax: r = std::isnan(x) ? y : std::isnan(y) ? x : std::max(x, y); break;
      case Bin::FMin: r = std::isnan(x) ? y : std::isnan(y) ? x : std::min(x, y); break;
      case Bin::Xlogy: r = std::isnan(y) ? y : x == 0 ? 0.0 : x * std::log(y); break;
      case Bin::Heaviside: r = x == 0 ? y : double(x > 0); break;
      case Bin::Gcd: throw std::invalid_argument("gcd takes integer tensors");
      default: throw std::invalid_argument("bad float op");
    }
    return fromDouble<T>(r);
  }
}

template <typename T>
bool applyCmp(Bin op, T a, T b) {
  double x = toDouble(a), y = toDouble(b);
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    switch (op) {
      case Bin::Eq: return a == b; case Bin::Ne: return a != b; case Bin::Lt: return a < b;
      case Bin::Le: return a <= b; case Bin::Gt: return a > b; default: return a >= b;
    }
  }
  switch (op) {
    case Bin::Eq: return x == y; case Bin::Ne: return x != y; case Bin::Lt: return x < y;
    case Bin::Le: return x <= y; case Bin::Gt: return x > y; default: return x >= y;
  }
}

dnnl::algorithm dnnlBinary(Bin op) {
  switch (op) {
    case Bin::Add: return dnnl::algorithm::binary_add;
    case Bin::Sub: return dnnl::algorithm::binary_sub;
    case Bin::Mul: return dnnl::algorithm::binary_mul;
    case Bin::Div: return dnnl::algorithm::binary_div;
    case Bin::Max: return dnnl::algorithm::binary_max;
    case Bin::Min: return dnnl::algorithm::binary_min;
    default: return dnnl::algorithm::undef;
  }
}

// out = a op b in float32 over any strides (a and b broadcast to out's
// shape), for the six ops oneDNN's binary has: what it runs only in its
// reference kernel (a strided dst such as mvit's attn[:, :, 1:, 1:] +=
// rel_pos: 172 ms there for 2.4M floats) and broadcasts of the first operand.
// Rows of the merged loop (in chunks when long) are shared among the threads;
// unit-stride and broadcast-scalar rows are `omp simd` loops (at -O2 GCC 12
// vectorises only loops that need no alias check: these stayed scalar).
// The loop itself is strided(): any operand type T and result type R (bool
// for comparisons), `parallel` false where f may throw (integer division by
// zero: an exception may not leave an OpenMP region).
template <typename T, typename R, typename F>
void strided(const Tensor& a, const Tensor& b, const Tensor& out, F f, bool parallel = true) {
  constexpr int64_t kT = sizeof(T), kR = sizeof(R);
  Tensor ea = a.expand(out.sizes()), eb = b.expand(out.sizes());
  std::array<Shape, 3> bs;
  for (int64_t d = 0; d < out.dim(); ++d) {
    bs[0].push_back(out.stride(d) * kR);
    bs[1].push_back(ea.stride(d) * kT);
    bs[2].push_back(eb.stride(d) * kT);
  }
  const StridedLoop<3> loop = makeLoop<3>(out.sizes(), bs);
  const size_t nd = loop.sizes.size();
  const int64_t inner = loop.sizes[nd - 1];
  int64_t outer = 1;
  for (size_t d = 0; d + 1 < nd; ++d) outer *= loop.sizes[d];
  constexpr int64_t kChunk = 16384;
  const int64_t chunks = (inner + kChunk - 1) / kChunk, items = outer * chunks;
  const std::array<int64_t, 3> is{loop.strides[0][nd - 1] / kR, loop.strides[1][nd - 1] / kT, loop.strides[2][nd - 1] / kT};
  char* const o0 = static_cast<char*>(out.data());
  const char* const a0 = static_cast<const char*>(ea.data());
  const char* const b0 = static_cast<const char*>(eb.data());
  // Items [it0, it1): the first row's offsets come from one division per
  // dim, the next rows' from an odometer (a division per row per dim cost
  // more than the row itself where rows are short: Swin's scaled q, a view
  // of 9,408 rows of 32 floats, took 283 us).
  auto range = [&](int64_t it0, int64_t it1) {
    if (it0 >= it1) return;
    Shape idx(nd, 0);
    std::array<int64_t, 3> off{0, 0, 0};  // bytes to the row
    int64_t chunk = it0 % chunks;
    for (int64_t row = it0 / chunks, d = static_cast<int64_t>(nd) - 2; d >= 0; --d) {
      const size_t du = static_cast<size_t>(d);
      idx[du] = row % loop.sizes[du];
      row /= loop.sizes[du];
      for (size_t k = 0; k < 3; ++k) off[k] += idx[du] * loop.strides[k][du];
    }
    for (int64_t it = it0; it < it1; ++it) {
      const int64_t begin = chunk * kChunk, n = std::min(kChunk, inner - begin);
      R* o = reinterpret_cast<R*>(o0 + off[0]) + begin * is[0];
      const T* x = reinterpret_cast<const T*>(a0 + off[1]) + begin * is[1];
      const T* y = reinterpret_cast<const T*>(b0 + off[2]) + begin * is[2];
      if (is[0] == 1 && is[1] == 1 && is[2] == 1) {
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
      } else if (is[0] == 1 && is[1] == 1 && is[2] == 0) {
        const T yv = *y;
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], yv);
      } else if (is[0] == 1 && is[1] == 0 && is[2] == 1) {
        const T xv = *x;
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) o[i] = f(xv, y[i]);
      } else {
        for (int64_t i = 0; i < n; ++i) o[i * is[0]] = f(x[i * is[1]], y[i * is[2]]);
      }
      if (++chunk < chunks) continue;
      chunk = 0;
      for (size_t d = nd - 1; d-- > 0;) {  // the next row
        for (size_t k = 0; k < 3; ++k) off[k] += loop.strides[k][d];
        if (++idx[d] < loop.sizes[d]) break;
        for (size_t k = 0; k < 3; ++k) off[k] -= loop.strides[k][d] * loop.sizes[d];
        idx[d] = 0;
      }
    }
  };
  if (out.numel() < 32768 || !parallel) {
    range(0, items);
  } else {
    const int64_t blocks = std::min<int64_t>(items, 64);
#pragma omp parallel for schedule(static)
    for (int64_t blk = 0; blk < blocks; ++blk) range(items * blk / blocks, items * (blk + 1) / blocks);
  }
}

template <typename F>
void stridedBinaryF32(const Tensor& a, const Tensor& b, const Tensor& out, F f) {
  strided<float, float>(a, b, out, f);
}

// out[i] = a[i] op b[i] with broadcasting, a and b already in the compute
// dtype, for every op and dtype oneDNN's binary does not take: strided()
// with the op chosen once (not per element), so unit-stride rows vectorise
// where the op does (comparisons, min/max, remainder) and large tensors
// split among the threads (x > 0.1 over 1M floats: 4.7 ms as one scalar
// loop with a switch per element, 3.4x PyTorch's).
void binaryLoop(Bin op, const Tensor& a, const Tensor& b, Tensor& out) {
  // refusals by dtype before the loop (a throw inside its threads would abort)
  if (op == Bin::Gcd && !isIntegralType(a.dtype(), false))
    throw std::invalid_argument("gcd takes integer tensors, got " + a.describe());
  if (op == Bin::NextAfter && a.dtype() != ScalarType::Float && a.dtype() != ScalarType::Double)
    throw std::invalid_argument("nextafter takes float32 or float64 tensors, got " + a.describe());
  // an integer divisor of 0 (the loop's vectorised rows cannot throw)
  if (out.numel() > 0 && isIntegralType(b.dtype(), false) && (op == Bin::DivTrunc || op == Bin::DivFloor || op == Bin::FloorDivide ||
                                           op == Bin::Remainder || op == Bin::Fmod)) {
    const Tensor d = b.to(ScalarType::Long).contiguous();
    const int64_t* dv = d.data<int64_t>();
    if (std::find(dv, dv + d.numel(), 0) != dv + d.numel())
      throw std::domain_error(op == Bin::Remainder || op == Bin::Fmod ? "ZeroDivisionError: integer modulo by zero"
                                                                       : "ZeroDivisionError: integer division by zero");
  }
  dispatchDtype(a.dtype(), [&](auto t) {
    using T = decltype(t);
    {
      // integer division and remainder throw on a zero divisor, bool ops on those bool lacks
      const bool parallel = std::is_floating_point_v<T> ||
                            (!std::is_same_v<T, bool> && op != Bin::DivTrunc && op != Bin::DivFloor &&
                             op != Bin::FloorDivide && op != Bin::Remainder && op != Bin::Fmod);
      auto run = [&](auto f) {
        using R = decltype(f(T{}, T{}));
        strided<T, R>(a, b, out, f, parallel);
      };
      switch (op) {
#define LLGA_BIN_CASE(o) \
  case Bin::o: return run([](T x, T y) { return applyBin<T>(Bin::o, x, y); });
        LLGA_BIN_CASE(Add) LLGA_BIN_CASE(Sub) LLGA_BIN_CASE(Mul) LLGA_BIN_CASE(Div) LLGA_BIN_CASE(DivTrunc)
        LLGA_BIN_CASE(DivFloor) LLGA_BIN_CASE(FloorDivide) LLGA_BIN_CASE(Remainder) LLGA_BIN_CASE(Pow)
        LLGA_BIN_CASE(Max) LLGA_BIN_CASE(Min) LLGA_BIN_CASE(Atan2) LLGA_BIN_CASE(And) LLGA_BIN_CASE(Or)
        LLGA_BIN_CASE(Xor) LLGA_BIN_CASE(Fmod) LLGA_BIN_CASE(Copysign) LLGA_BIN_CASE(Hypot) LLGA_BIN_CASE(NextAfter)
        LLGA_BIN_CASE(LogAddExp) LLGA_BIN_CASE(FMax) LLGA_BIN_CASE(FMin) LLGA_BIN_CASE(Gcd) LLGA_BIN_CASE(Xlogy)
        LLGA_BIN_CASE(Heaviside)
#undef LLGA_BIN_CASE
#define LLGA_CMP_CASE(o) \
  case Bin::o: return run([](T x, T y) { return applyCmp<T>(Bin::o, x, y); });
        LLGA_CMP_CASE(Eq) LLGA_CMP_CASE(Ne) LLGA_CMP_CASE(Lt) LLGA_CMP_CASE(Le) LLGA_CMP_CASE(Gt) LLGA_CMP_CASE(Ge)
#undef LLGA_CMP_CASE
      }
    }
  });
}

// Whether stridedBinaryF32 computes `op`, and then computes it.
bool stridedBinaryF32(Bin op, const Tensor& a, const Tensor& b, const Tensor& out) {
  switch (op) {
    case Bin::Add: stridedBinaryF32(a, b, out, [](float x, float y) { return x + y; }); return true;
    case Bin::Sub: stridedBinaryF32(a, b, out, [](float x, float y) { return x - y; }); return true;
    case Bin::Mul: stridedBinaryF32(a, b, out, [](float x, float y) { return x * y; }); return true;
    case Bin::Div: stridedBinaryF32(a, b, out, [](float x, float y) { return x / y; }); return true;
    // as applyBin: NaN propagates from either side
    case Bin::Max: stridedBinaryF32(a, b, out, [](float x, float y) { return std::isnan(x) || x > y ? x : y; }); return true;
    case Bin::Min: stridedBinaryF32(a, b, out, [](float x, float y) { return std::isnan(x) || x < y ? x : y; }); return true;
    default: return false;
  }
}

struct BinEntry {
  std::string impl;  // blockedBinary's entries: oneDNN's implementation
  dnnl::binary prim;
  dnnl::memory::desc a_md, b_md, out_md, scratch_md;
  bool copy_a = false, copy_b = false;  // src0, src1 are made contiguous first
  bool ref = false;  // oneDNN has only its reference kernel: stridedBinaryF32 runs instead
  bool rows = false;  // oneDNN would need copies, and llga's loop reads the operands' rows as they lie
  SharedBoundArgs bound;
};
using BinCache = PrimitiveCache<BinEntry>;

// Runs an entry's primitive on these buffers (serially when small).
void executeBinary(ExecContext& ctx, BinEntry& e, const void* a, const void* b, void* out, int64_t numel) {
  SharedBoundArgs::Lease args = e.bound.lease();
  args->bind(DNNL_ARG_SRC_0, e.a_md, const_cast<void*>(a));
  args->bind(DNNL_ARG_SRC_1, e.b_md, const_cast<void*>(b));
  args->bind(DNNL_ARG_DST, e.out_md, out);
  SerialScope serial(numel < kParallelGrain);
  args->execute(ctx, e.prim, e.scratch_md);
}

// Views of dense a, b, out with adjacent dims where b broadcasts alike merged
// and dims of size 1 dropped, if that leaves fewer dims.
std::optional<std::array<Tensor, 3>> mergedDims(const Tensor& a, const Tensor& b, const Tensor& out) {
  if (out.dim() < 2 || !out.isContiguous() || !a.isContiguous() || a.sizes() != out.sizes() || !b.isContiguous() ||
      b.dim() != out.dim())
    return std::nullopt;
  Shape os, bs;
  for (int64_t d = 0; d < out.dim(); ++d) {
    if (out.size(d) == 1) continue;
    const bool bcast = b.size(d) == 1;
    if (!os.empty() && (bs.back() == 1) == bcast) {
      os.back() *= out.size(d);
      bs.back() *= b.size(d);
    } else {
      os.push_back(out.size(d));
      bs.push_back(b.size(d));
    }
  }
  if (os.empty()) os = bs = {1};
  if (static_cast<int64_t>(os.size()) >= out.dim()) return std::nullopt;
  return std::array<Tensor, 3>{a.view(os), b.view(bs), out.view(os)};
}

// a op b into out (float32, a has out's shape, b broadcasts) on oneDNN.
void dnnlBinaryRun(ExecContext& ctx, BinCache& cache, Bin op, const Tensor& a_in, const Tensor& b, const Tensor& out) {
  if (out.numel() <= kSmallBinaryElements && stridedBinaryF32(op, a_in, b, out)) return;  // b broadcasts as it is
  Shape bshape(out.dim() - b.dim(), 1);
  bshape.insert(bshape.end(), b.sizes().begin(), b.sizes().end());
  Tensor a = a_in, bb = b.dim() == out.dim() ? b : b.view(bshape);
  if (bb.dim() == 0) bb = bb.view({1});
  // An elementwise result does not depend on the order of the dims: run in
  // out's memory order, where oneDNN sees a row-major dst and takes its jit
  // kernel (a transposed 4x25x16 times a scalar, emformer's scaled query, went
  // to its reference kernel: 120 us instead of 2).
  if (out.dim() > 1 && !out.isContiguous() && out.isPermutedDense()) {
    const std::vector<size_t> order = out.dimOrder();
    const Shape perm(order.begin(), order.end());
    dnnlBinaryRun(ctx, cache, op, a.permute(perm), bb.permute(perm), out.permute(perm));
    return;
  }
  // Strides oneDNN cannot describe (an in-place write through x[..., ::2] of
  // an odd-width row: the steps interleave): llga's own loop.
  if ((!out.stridesNest() || !a.stridesNest() || !bb.stridesNest()) && stridedBinaryF32(op, a, bb, out)) return;
  thread_local std::vector<int64_t> key;  // reused: no allocation per call
  key.assign(1, static_cast<int64_t>(op));
  addToKey(key, a);
  addToKey(key, bb);
  addToKey(key, out);
  auto e = cache.get(key, [&] {
    BinEntry en;
    en.a_md = out.dim() == 0 ? plainDesc(a, {1}) : plainDesc(a);
    en.b_md = plainDesc(bb);
    en.out_md = out.dim() == 0 ? plainDesc(out, {1}) : plainDesc(out);
    dnnl::binary::primitive_desc pd(dnnl::binary::desc(dnnlBinary(op), en.a_md, en.b_md, en.out_md), scratchpadAttr(),
                                    cpuEngine());
    // Dense operands where oneDNN has only ref for these dims: adjacent dims
    // where b broadcasts alike merged and dims of size 1 dropped (the same
    // bytes). Its jit kernel takes 64x3x2401 + 64x1x2401 but not the same as
    // 1x64x3x49x49 + 1x64x1x49x49 (swin's shifted-window mask: 55 ms in ref
    // instead of 0.15).
    if (isReference(pd))
      if (auto merged = mergedDims(a, bb, out)) {
        auto [ma, mb, mo] = *merged;
        dnnl::binary::primitive_desc pd2(dnnl::binary::desc(dnnlBinary(op), plainDesc(ma), plainDesc(mb), plainDesc(mo)),
                                         scratchpadAttr(), cpuEngine());
        if (!isReference(pd2))
          pd = pd2, en.a_md = plainDesc(ma), en.b_md = plainDesc(mb), en.out_md = plainDesc(mo);
      }
    // oneDNN's jit kernel wants dense operands in dst's order: a sliced src0
    // (RAFT's x of a split (x, y) grid) or an src1 in another layout
    // (convnext's NCHW shortcut added to an NHWC branch: 14 ms instead of
    // 0.1) is copied first rather than left to ref. The fewest copies win.
    if (isReference(pd) && out.dim() > 0) {
      auto denseDesc = [](const Tensor& t) { return plainDesc(Tensor::empty(t.dtype(), t.sizes())); };
      for (int mask : {1, 2, 3}) {
        const bool ca = mask & 1, cb = mask & 2;
        if ((ca && a.isContiguous()) || (cb && bb.isContiguous())) continue;
        dnnl::memory::desc amd = ca ? denseDesc(a) : en.a_md, bmd = cb ? denseDesc(bb) : en.b_md;
        dnnl::binary::primitive_desc pd2(dnnl::binary::desc(dnnlBinary(op), amd, bmd, en.out_md), scratchpadAttr(),
                                         cpuEngine());
        if (isReference(pd2)) continue;
        pd = pd2, en.a_md = amd, en.b_md = bmd, en.copy_a = ca, en.copy_b = cb;
        break;
      }
    }
    en.ref = isReference(pd);
    // Copies the loop does not need: rows of the operands contiguous (or a
    // broadcast value) and a dense dst, e.g. a bidirectional RNN's two
    // halves added (DeepSpeech: [50, 1, 256] sliced in two, 14 us with the
    // copies, 2 without).
    auto unitRows = [&](const Tensor& t) { return t.size(-1) == 1 || t.stride(-1) == 1; };
    en.rows = (en.copy_a || en.copy_b) && out.dim() > 0 && out.isContiguous() && out.size(-1) >= 16 && unitRows(a) &&
              unitRows(bb);
    en.prim = dnnl::binary(pd);
    en.scratch_md = pd.scratchpad_desc();
    return en;
  });
  if ((e->ref || e->rows) && stridedBinaryF32(op, a, bb, out)) return;
  if (e->copy_a) a = a.contiguous();
  if (e->copy_b) bb = bb.contiguous();
  executeBinary(ctx, *e, a.data(), bb.data(), out.data(), out.numel());
}

// Python's == on lists of numbers, bools, strings, None and lists of them.
bool listsEqual(const RtValue& a, const RtValue& b) {
  if (a.isList() != b.isList()) return false;
  if (a.isList()) {
    const RtList &x = a.list(), &y = b.list();
    if (x->size() != y->size()) return false;
    for (size_t i = 0; i < x->size(); ++i)
      if (!listsEqual((*x)[i], (*y)[i])) return false;
    return true;
  }
  if (a.isTensor() || b.isTensor()) throw std::invalid_argument("== on lists of tensors is not supported");
  if (a.isNone() || b.isNone()) return a.isNone() && b.isNone();
  if (std::holds_alternative<std::string>(a.v) || std::holds_alternative<std::string>(b.v))
    return std::holds_alternative<std::string>(a.v) && std::holds_alternative<std::string>(b.v) && a.str() == b.str();
  if (a.isDouble() || b.isDouble()) return a.toDouble() == b.toDouble();
  return a.toInt() == b.toInt();
}

// Python number arithmetic: int, float or bool operands (the plan's scalar path calls it directly).
RtValue numberBinary(Bin op, const RtValue& av, const RtValue& bv) {
  bool floats = av.isDouble() || bv.isDouble() || floatOnly(op) || (op == Bin::Pow && bv.isInt() && bv.toInt() < 0);
  if (isComparison(op)) return RtValue(floats ? applyCmp<double>(op, av.toDouble(), bv.toDouble())
                                              : applyCmp<int64_t>(op, av.toInt(), bv.toInt()));
  if (floats) return RtValue(applyBin<double>(op, av.toDouble(), bv.toDouble()));
  if (av.isBool() && bv.isBool() && (op == Bin::And || op == Bin::Or || op == Bin::Xor))  // bool & bool is a bool
    return RtValue(applyBin<int64_t>(op, av.toInt(), bv.toInt()) != 0);
  return RtValue(applyBin<int64_t>(op, av.toInt(), bv.toInt()));
}

template <Bin op>
RtValue scalarBinary(const RtValue* const* in) {
  return numberBinary(op, *in[0], *in[1]);
}

// Computes a op b (tensors or scalars). `out` (when given) is written in place.
// `follow_layout`: the result may take the dimension order of the operand of the
// result's shape (channels-last in, channels-last out), as PyTorch's ops do.
RtValue binary(ExecContext& ctx, BinCache& cache, Bin op, const RtValue& av, const RtValue& bv, std::optional<Tensor> inplace,
               bool follow_layout = false) {
  if (std::holds_alternative<std::string>(av.v) || std::holds_alternative<std::string>(bv.v)) {
    const std::string &x = av.str(), &y = bv.str();
    if (op == Bin::Add) return RtValue(x + y);
    if (op == Bin::Eq) return RtValue(x == y);
    if (op == Bin::Ne) return RtValue(x != y);
    if (op == Bin::Lt) return RtValue(x < y);  // byte order: code point order for UTF-8, as Python's
    if (op == Bin::Le) return RtValue(x <= y);
    if (op == Bin::Gt) return RtValue(x > y);
    if (op == Bin::Ge) return RtValue(x >= y);
    throw std::invalid_argument("unsupported operation on strings");
  }
  if (std::holds_alternative<RtDevice>(av.v) || std::holds_alternative<RtDevice>(bv.v)) {  // x.device == device
    if (op != Bin::Eq && op != Bin::Ne) throw std::invalid_argument("unsupported operation on devices (only == and !=)");
    bool same = std::holds_alternative<RtDevice>(av.v) && std::holds_alternative<RtDevice>(bv.v) &&
                std::get<RtDevice>(av.v).name == std::get<RtDevice>(bv.v).name;
    return RtValue(same == (op == Bin::Eq));
  }
  if (av.isList() && bv.isList()) {  // aten::add.t: list concatenation; eq/ne: element by element
    if (op == Bin::Eq || op == Bin::Ne) return RtValue(listsEqual(av, bv) == (op == Bin::Eq));
    if (op != Bin::Add) throw std::invalid_argument("unsupported operation on lists (only +, == and !=)");
    auto out = std::make_shared<std::vector<RtValue>>(*av.list());
    out->insert(out->end(), bv.list()->begin(), bv.list()->end());
    return RtValue(out);
  }
  if ((av.isList() && bv.isInt()) || (av.isInt() && bv.isList())) {  // [x] * n: the list repeated
    if (op != Bin::Mul) throw std::invalid_argument("unsupported operation on a list and an int (only *)");
    const RtList& items = av.isList() ? av.list() : bv.list();
    const int64_t n = std::max<int64_t>(av.isList() ? bv.toInt() : av.toInt(), 0);
    auto out = std::make_shared<std::vector<RtValue>>();
    out->reserve(items->size() * static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out->insert(out->end(), items->begin(), items->end());
    return RtValue(out);
  }
  if (!av.isTensor() && !bv.isTensor()) return numberBinary(op, av, bv);
  ScalarType common = resultType({&av, &bv});
  if (floatOnly(op) && isIntegralType(common, true)) common = ScalarType::Float;
  if ((op == Bin::And || op == Bin::Or || op == Bin::Xor) && !isIntegralType(common, true))  // also when empty
    throw std::invalid_argument("bitwise operations take integer or bool tensors, not " + std::string(scalarTypeName(common)));
  Tensor a = asTensor(av, common), b = asTensor(bv, common);
  Shape shape = broadcastShapes(a.sizes(), b.sizes());
  ScalarType out_t = isComparison(op) ? ScalarType::Bool : common;
  Tensor out;
  if (inplace) {
    out = *inplace;
    if (out.sizes() != shape)
      throw std::invalid_argument("in-place op: the result shape does not match the tensor being written");
    if (!isComparison(op) && isIntegralType(out.dtype(), true) && !isIntegralType(common, true))
      throw std::invalid_argument("result type Float cannot be cast to the in-place tensor's integral dtype");
    for (const Tensor* in : {&a, &b})
      if (out.partiallyOverlaps(*in)) throw std::invalid_argument(kPartialOverlap);
  } else if (a.sizes() == shape && a.isPermutedDense()) {  // computed in the operand's order (fast), see below
    out = Tensor::emptyLike(out_t, shape, a);
  } else if (b.sizes() == shape && b.isPermutedDense()) {
    out = Tensor::emptyLike(out_t, shape, b);
  } else {
    out = Tensor::empty(out_t, shape);
  }
  // A result that took an operand's channels-last order goes out contiguous
  // unless every reader takes strided tensors.
  auto finish = [&](const Tensor& t) { return follow_layout || inplace ? t : t.contiguous(); };
  a = a.to(common);
  b = b.to(common);
  // oneDNN takes float32 with only the second operand broadcast.
  if (common == ScalarType::Float && out.dtype() == ScalarType::Float && dnnlBinary(op) != dnnl::algorithm::undef &&
      out.numel() > 0 && dnnlDescribable(out)) {
    if (a.sizes() == shape && dnnlDescribable(a) && dnnlDescribable(b)) {
      dnnlBinaryRun(ctx, cache, op, a, b, out);
      return finish(out);
    }
    bool commutes = op == Bin::Add || op == Bin::Mul || op == Bin::Max || op == Bin::Min;
    if (commutes && b.sizes() == shape && dnnlDescribable(a) && dnnlDescribable(b)) {
      dnnlBinaryRun(ctx, cache, op, b, a, out);
      return finish(out);
    }
  }
  if (common == ScalarType::Float && out.dtype() == ScalarType::Float && out.numel() > 0 && dnnlDescribable(out) &&
      stridedBinaryF32(op, a, b, out)) {
    // a broadcast first operand of a non-commuting op (1 - x), or zero strides
  } else if (out.dtype() == common || isComparison(op)) {
    binaryLoop(op, a, b, out);
  } else {
    Tensor tmp = Tensor::empty(common, shape);
    binaryLoop(op, a, b, tmp);
    out.copyFrom(tmp);
  }
  return finish(out);
}

// b * alpha when an alpha other than 1 is given (alpha scaling is rare: no
// cache), kept in `tmp`; b itself otherwise.
const RtValue& scaled(ExecContext& ctx, const KernelArgs& a, size_t alpha_at, const RtValue& b, RtValue& tmp) {
  if (a.num_in <= alpha_at) return b;
  const RtValue& alpha = a.input(alpha_at);
  if ((alpha.isInt() && alpha.toInt() == 1) || (alpha.isDouble() && alpha.toDouble() == 1.0)) return b;
  BinCache once;
  tmp = binary(ctx, once, Bin::Mul, b, alpha, std::nullopt);
  return tmp;
}

// An out-of-place float op may write into a dying operand of the result's
// shape (saves a buffer and the cache misses of a fresh one; efficientnet's
// squeeze-excite scale x * s). Only the operand oneDNN reads as src0: it
// supports dst == src0. It must keep the order the readers need.
std::optional<Tensor> reuseTarget(const KernelArgs& a, Bin op, const RtValue& b) {
  const RtValue& av = a.input(0);
  if (!av.isTensor() || (b.isTensor() && b.tensor().dtype() != ScalarType::Float) ||
      (!b.isTensor() && !b.isDouble() && !b.isInt()))
    return std::nullopt;
  const bool commutes = op == Bin::Add || op == Bin::Mul;
  Shape shape = broadcastShapes(av.tensor().sizes(), b.isTensor() ? b.tensor().sizes() : Shape{});
  auto fits = [&](size_t i, const Tensor& t) {
    return a.reusable(i) && t.dtype() == ScalarType::Float && t.sizes() == shape &&
           (t.isContiguous() || (t.isPermutedDense() && a.stridedOutputOk(0)));
  };
  if (fits(0, av.tensor())) return av.tensor();
  // b: only when a broadcasts (so b is oneDNN's src0), and only input 1 itself, not alpha * input 1
  if (commutes && av.tensor().sizes() != shape && &b == &a.input(1) && fits(1, b.tensor())) return b.tensor();
  return std::nullopt;
}

// x op y with x in a oneDNN blocked layout (a convolution's nChw8c kept
// between partitions) and y either in the same layout or a per-channel (or
// one-element) broadcast, as a binary primitive in that layout: the result
// stays blocked. Where x went to plain only for this op, the squeeze-excite
// scale of efficientnet and regnet (conv -> x * sigmoid(...) -> conv) cost
// three passes over the block's largest tensor on AVX2 (x to plain, the
// pool's and the next convolution's reorders back). nullopt when the case
// does not apply (the caller then runs the op on plain tensors).
// What blockedBinary did on its latest call, for the kernel's report.
struct BlockedTrace {
  SharedSlot<const BinEntry> last;
  std::atomic<bool> in_place{false};
  // The latest call declined the blocked form: oneDNN has only its reference
  // kernel for it (nChw16c times a per-(batch, channel) scale on AVX-512).
  SharedSlot<const BinEntry> declined;
};

std::optional<Tensor> blockedBinary(ExecContext& ctx, BinCache& cache, Bin op, const KernelArgs& a, bool keep_blocked,
                                    BlockedTrace& trace) {
  if (!keep_blocked || a.num_in < 2 || !a.input(0).isTensor() || !a.input(1).isTensor()) return std::nullopt;
  if (a.num_in > 2 && !(a.input(2).isInt() && a.input(2).toInt() == 1) &&
      !(a.input(2).isDouble() && a.input(2).toDouble() == 1.0))
    return std::nullopt;  // alpha
  // x: the operand of the result's shape, in a blocked layout; src0 unless the op commutes
  const Shape shape = broadcastShapes(a.tensor(0).sizes(), a.tensor(1).sizes());
  auto candidate = [&](size_t i) { return a.tensor(i).isBlocked() && a.tensor(i).sizes() == shape; };
  size_t xi = 0, yi = 1;
  if (!candidate(0)) {
    if (!candidate(1) || (op != Bin::Add && op != Bin::Mul)) return std::nullopt;
    std::swap(xi, yi);
  }
  const Tensor& x = a.tensor(xi);
  const Tensor y = postOpOperand(a.tensor(yi), x.numel());  // a strided per-channel one dense (postOpOperand)
  if (x.dtype() != ScalarType::Float || y.dtype() != ScalarType::Float) return std::nullopt;
  const dnnl::memory::desc& xmd = blockedDesc(x);
  // per channel: y's sizes (right-aligned to x's rank) are 1 except the
  // channel dim (x's) and the batch dim (1 or x's)
  bool per_channel = y.dim() <= x.dim();
  for (int64_t d = 0, lead = x.dim() - y.dim(); per_channel && d < x.dim(); ++d) {
    const int64_t yd = d < lead ? 1 : y.size(d - lead);
    per_channel = yd == 1 || ((d == 0 || d == 1) && yd == x.size(d));
  }
  dnnl::memory::desc ymd;
  if (y.isBlocked()) {  // the same layout, or a blocked per-channel scale (a 1x1 conv's nChw8c output)
    if (!(blockedDesc(y) == xmd || (per_channel && y.dim() == x.dim()))) return std::nullopt;
    ymd = blockedDesc(y);
  } else {
    if (!per_channel || !dnnlDescribable(y)) return std::nullopt;
    ymd = binaryOperandDesc(y, static_cast<size_t>(x.dim()));
  }
  thread_local std::vector<int64_t> key;
  key.assign(1, static_cast<int64_t>(op) + 1000);  // apart from dnnlBinaryRun's plain entries
  addToKey(key, x);
  addBlockedToKey(key, xmd);
  addToKey(key, y);
  if (y.isBlocked()) addBlockedToKey(key, blockedDesc(y));
  auto e = cache.get(key, [&] {
    BinEntry en;
    en.a_md = xmd;
    en.b_md = ymd;
    en.out_md = xmd;
    dnnl::binary::primitive_desc pd(dnnl::binary::desc(dnnlBinary(op), en.a_md, en.b_md, en.out_md), scratchpadAttr(),
                                    cpuEngine());
    en.ref = isReference(pd);
    en.impl = implName(pd);
    en.prim = dnnl::binary(pd);
    en.scratch_md = pd.scratchpad_desc();
    return en;
  });
  if (e->ref) {  // oneDNN's reference kernel: slower than the reorders
    trace.declined.store(e);
    return std::nullopt;
  }
  trace.declined.store(nullptr);
  // x's buffer becomes the result when this is its last reader and nobody else holds it (dst == src0)
  const bool in_place = a.inputDies(xi) && x.storage()->owned && x.storage().use_count() == 1 &&
                        (y.storage() != x.storage());
  Tensor out = in_place ? x : Tensor::blocked(Storage::allocate(xmd.get_size()), ScalarType::Float, x.sizes(),
                                              x.blockedLayout());
  executeBinary(ctx, *e, x.data(), y.data(), out.data(), x.numel());
  trace.last.store(e);
  trace.in_place.store(in_place, std::memory_order_relaxed);
  return out;
}

// add, sub, mul, div out of place: the ops between convolutions. They take
// strided inputs and may give the result their dimension order, and take
// blocked ones (blockedBinary) and may keep the result so.
//
// `int8_out` (the node's out_scale and out_dtype: under llga.quantize, a
// float mul whose only readers are int8 convolutions) writes the result
// quantized as they read it. A channels-last map times one number per
// channel and image (squeeze-excite's scale) is multiplied and quantized in
// one pass (int8::quantizeScaledRows); anything else is computed in fp32,
// then quantized. `bf16_out` (out_dtype="bf16": under precision="bf16", its
// only readers are bf16 convolutions) computes it in fp32 and converts it,
// in its own dimension order, as such a reader would.
class ArithKernel final : public Kernel {
 public:
  ArithKernel(Bin op, std::function<void(const KernelArgs&, BinCache&)> fn, std::optional<ActivationQuant> int8_out,
              bool bf16_out)
      : op_(op), fn_(std::move(fn)), int8_out_(int8_out), bf16_out_(bf16_out && !int8_out) {}
  bool acceptsBlocked(size_t input) const override { return input < 2; }
  bool acceptsStrided(size_t) const override { return true; }
  // After a call in a blocked layout: the binary primitive and that layout.
  KernelReport report() const override {
    std::shared_ptr<const BinEntry> e = trace_.last.load();
    if (!e) {
      std::shared_ptr<const BinEntry> d = trace_.declined.load();
      if (!d) return {};
      return {"", layoutName(d->a_md), "", "", "plain",
              "not in " + layoutName(d->a_md) + ": oneDNN has only its reference kernel (" + d->impl + ") there"};
    }
    return {e->impl, layoutName(e->a_md), "", layoutName(e->out_md), "kept",
            trace_.in_place.load(std::memory_order_relaxed) ? "in place" : ""};
  }
  void allowStridedOutput(size_t output) override { strided_out_ = strided_out_ || output == 0; }
  void allowBlockedOutput(size_t output) override { blocked_out_ = blocked_out_ || output == 0; }
  void run(const KernelArgs& a) override {
    if (!int8_out_ && !bf16_out_) return runFloat(a);
    if (int8_out_ && op_ == Bin::Mul && a.num_in == 2 && strided_out_ && scaledMapQuantized(a)) return;
    RtValue y;  // the fp32 result, then quantized or converted
    RtValue* outs[] = {&y};
    runFloat(KernelArgs{a.in, a.num_in, outs, 1, a.ctx, /*dying=*/0, a.strided_out});
    const Tensor& f = y.tensor();
    if (int8_out_) return a.set(0, int8::quantizeTensor(a.ctx, f, *int8_out_));
    Tensor h = !f.isBlocked() && f.isPermutedDense() ? Tensor::emptyLike(ScalarType::BFloat16, f.sizes(), f)
                                                      : Tensor::empty(ScalarType::BFloat16, f.sizes());
    reorder(a.ctx, memoryOf(f), wrap(h));  // round to nearest even
    a.set(0, std::move(h));
  }

 private:
  // x [N, C, H, W] channels-last (dense, float) times s [N, C, 1, 1] (float,
  // channels contiguous), either order: the product quantized into a
  // channels-last result, one pass. False (nothing done) for anything else.
  bool scaledMapQuantized(const KernelArgs& a) const {
    if (!a.input(0).isTensor() || !a.input(1).isTensor()) return false;
    const bool first_is_map = a.tensor(0).dim() == 4 && a.tensor(0).size(2) * a.tensor(0).size(3) > 1;
    const Tensor& x = a.tensor(first_is_map ? 0 : 1);
    const Tensor& s = a.tensor(first_is_map ? 1 : 0);
    if (x.dtype() != ScalarType::Float || s.dtype() != ScalarType::Float || x.isBlocked() || s.isBlocked() ||
        x.dim() != 4 || s.dim() != 4)
      return false;
    const int64_t n = x.size(0), c = x.size(1), hw = x.size(2) * x.size(3);
    if (s.size(0) != n || s.size(1) != c || s.size(2) != 1 || s.size(3) != 1 || (c > 1 && s.stride(1) != 1))
      return false;
    if (x.stride(1) != 1 || x.stride(3) != c || x.stride(2) != x.size(3) * c || x.stride(0) != hw * c) return false;
    Tensor q = Tensor::emptyLike(int8::storageType(*int8_out_), x.sizes(), x);
    for (int64_t i = 0; i < n; ++i)
      int8::quantizeScaledRows(x.data<float>() + i * x.stride(0), hw, c, c, s.data<float>() + i * s.stride(0),
                               static_cast<float>(int8_out_->scale), int8_out_->zero_point, int8_out_->is_unsigned,
                               static_cast<char*>(q.data()) + i * hw * c, c);
    a.set(0, std::move(q));
    return true;
  }

  void runFloat(const KernelArgs& a) {
    KernelArgs b = a;
    b.strided_out = strided_out_ ? 1 : 0;
    const bool blocked = (a.input(0).isTensor() && a.tensor(0).isBlocked()) ||
                         (a.num_in > 1 && a.input(1).isTensor() && a.tensor(1).isBlocked());
    if (!blocked) return fn_(b, cache_);
    if (std::optional<Tensor> out = blockedBinary(a.ctx, cache_, op_, a, blocked_out_, trace_))
      return a.set(0, std::move(*out));
    trace_.last.store(nullptr);
    RtValue plain[2];  // the blocked operands in plain form
    RtValue* in[3] = {a.in[0], a.num_in > 1 ? a.in[1] : nullptr, a.num_in > 2 ? a.in[2] : nullptr};
    for (size_t i = 0; i < 2 && i < a.num_in; ++i)
      if (a.input(i).isTensor() && a.tensor(i).isBlocked()) plain[i] = RtValue(toPlain(a.ctx, a.tensor(i))), in[i] = &plain[i];
    b.in = in;
    b.dying = 0;  // the copies are this call's own; the registers' buffers are not to be reused
    fn_(b, cache_);
  }

  Bin op_;
  std::function<void(const KernelArgs&, BinCache&)> fn_;
  std::optional<ActivationQuant> int8_out_;
  bool bf16_out_;
  BinCache cache_;
  BlockedTrace trace_;
  bool strided_out_ = false;
  bool blocked_out_ = false;
};

// `strided`: the out-of-place op takes strided and blocked inputs and may give
// its result their dimension order or layout (add, sub, mul, div: ArithKernel).
void addArith(OpRegistry& r, const std::string& name, Bin op, bool has_alpha, bool strided = false) {
  size_t max_in = has_alpha ? 3 : 2;
  auto fn = [op, has_alpha, strided](const KernelArgs& a, BinCache& c) {
    RtValue tmp;
    const RtValue& b = has_alpha ? scaled(a.ctx, a, 2, a.input(1), tmp) : a.input(1);
    a.set(0, binary(a.ctx, c, op, a.input(0), b, strided ? reuseTarget(a, op, b) : std::nullopt, a.stridedOutputOk(0)));
  };
  if (strided)
    r.add(OpDef{"aten::" + name, 2, max_in,
                [op, fn](const Node& n) { return std::make_unique<ArithKernel>(op, fn, int8OutputOf(n), bf16Output(n)); }});
  else
    addCached<BinCache>(r, "aten::" + name, 2, max_in, fn);
  addCached<BinCache>(r, "aten::" + name + "_", 2, max_in, [op, has_alpha](const KernelArgs& a, BinCache& c) {
    if (op == Bin::Add && a.input(0).isList() && a.input(1).isList()) {  // l += m: l itself, extended
      const std::vector<RtValue> more = *a.input(1).list();  // a copy: l += l doubles l
      a.input(0).list()->insert(a.input(0).list()->end(), more.begin(), more.end());
      return a.set(0, a.input(0));
    }
    RtValue tmp;
    const RtValue& b = has_alpha ? scaled(a.ctx, a, 2, a.input(1), tmp) : a.input(1);
    a.set(0, binary(a.ctx, c, op, a.input(0), b, a.tensor(0)));
  });
}

}  // namespace

void registerBinaryOps(OpRegistry& r) {
  // logical_not(x) = (x == 0): NaN counts as true, as in PyTorch.
  addCached<BinCache>(r, "aten::logical_not", 1, 1, [](const KernelArgs& a, BinCache& c) {
    a.set(0, binary(a.ctx, c, Bin::Eq, a.input(0), RtValue(int64_t{0}), std::nullopt));
  });
  addArith(r, "add", Bin::Add, true, true);
  r.addScalar("aten::add", 2, scalarBinary<Bin::Add>);
  addArith(r, "sub", Bin::Sub, true, true);
  r.addScalar("aten::sub", 2, scalarBinary<Bin::Sub>);
  addArith(r, "mul", Bin::Mul, false, true);
  r.addScalar("aten::mul", 2, scalarBinary<Bin::Mul>);
  addArith(r, "floor_divide", Bin::FloorDivide, false);
  addArith(r, "remainder", Bin::Remainder, false);
  r.addScalar("aten::remainder", 2, scalarBinary<Bin::Remainder>);
  addArith(r, "pow", Bin::Pow, false);
  addArith(r, "maximum", Bin::Max, false);
  addArith(r, "atan2", Bin::Atan2, false);
  // C's fmod (the dividend's sign), copysign, hypot, nextafter (in the operands' type),
  // logaddexp, fmax/fmin (a NaN loses), gcd (integers), xlogy (0 where x is 0), heaviside
  for (auto [name, op] : {std::pair{"fmod", Bin::Fmod}, {"copysign", Bin::Copysign}, {"hypot", Bin::Hypot},
                          {"nextafter", Bin::NextAfter}, {"logaddexp", Bin::LogAddExp}, {"fmax", Bin::FMax},
                          {"fmin", Bin::FMin}, {"gcd", Bin::Gcd}, {"xlogy", Bin::Xlogy}, {"heaviside", Bin::Heaviside}})
    addArith(r, name, op, false);
  addArith(r, "minimum", Bin::Min, false);
  addArith(r, "__and__", Bin::And, false);
  addArith(r, "__or__", Bin::Or, false);
  addArith(r, "__xor__", Bin::Xor, false);
  addArith(r, "bitwise_and", Bin::And, false);
  // logical_and/or/xor: both operands as truth values (x != 0) first, a bool result.
  for (auto [name, op] : {std::pair{"logical_and", Bin::And}, {"logical_or", Bin::Or}, {"logical_xor", Bin::Xor}}) {
    const Bin o = op;
    addCached<BinCache>(r, std::string("aten::") + name, 2, 2, [o](const KernelArgs& a, BinCache& c) {
      RtValue x = binary(a.ctx, c, Bin::Ne, a.input(0), RtValue(int64_t{0}), std::nullopt);
      RtValue y = binary(a.ctx, c, Bin::Ne, a.input(1), RtValue(int64_t{0}), std::nullopt);
      a.set(0, binary(a.ctx, c, o, x, y, std::nullopt));
    });
  }
  for (auto [name, op] : {std::pair{"eq", Bin::Eq}, {"ne", Bin::Ne}, {"lt", Bin::Lt}, {"le", Bin::Le},
                          {"gt", Bin::Gt}, {"ge", Bin::Ge}}) {
    addArith(r, name, op, false);
  }
  r.addScalar("aten::eq", 2, scalarBinary<Bin::Eq>);
  r.addScalar("aten::ne", 2, scalarBinary<Bin::Ne>);
  r.addScalar("aten::lt", 2, scalarBinary<Bin::Lt>);
  r.addScalar("aten::le", 2, scalarBinary<Bin::Le>);
  r.addScalar("aten::gt", 2, scalarBinary<Bin::Gt>);
  r.addScalar("aten::ge", 2, scalarBinary<Bin::Ge>);
  // rsub(a, b, alpha) = b - alpha * a
  addCached<BinCache>(r, "aten::rsub", 2, 3, [](const KernelArgs& a, BinCache& c) {
    RtValue tmp;
    a.set(0, binary(a.ctx, c, Bin::Sub, a.input(1), scaled(a.ctx, a, 2, a.input(0), tmp), std::nullopt));
  });
  // div(a, b, rounding_mode=None|"trunc"|"floor"); Python's int / int is true division too.
  auto div = [](bool inplace) {
    return [inplace](const KernelArgs& a, BinCache& c) {
      Bin op = Bin::Div;
      if (a.num_in > 2 && !a.isNone(2)) {
        const std::string& mode = a.input(2).str();
        if (mode == "trunc") op = Bin::DivTrunc;
        else if (mode == "floor") op = Bin::DivFloor;
        else throw std::invalid_argument("div: rounding_mode must be None, 'trunc' or 'floor', got '" + mode + "'");
      }
      std::optional<Tensor> out;
      if (inplace) out = a.tensor(0);
      a.set(0, binary(a.ctx, c, op, a.input(0), a.input(1), out, a.stridedOutputOk(0)));
    };
  };
  addCached<BinCache>(r, "aten::div", 2, 3, div(false), /*strided=*/true);
  addCached<BinCache>(r, "aten::div_", 2, 3, div(true));
  r.addScalar("aten::div", 2, scalarBinary<Bin::Div>);
  // where(condition, a, b): a where condition else b, broadcasting all three;
  // where(condition): the nonzero positions, one index tensor per dim (a 0-dim condition counts as 1-d)
  r.add("aten::where", 1, 3, [](const KernelArgs& a) {
    const Tensor& cond = a.tensor(0);
    if (a.num_in == 1) {
      Tensor nz = nonzero(cond.dim() == 0 ? cond.unsqueeze(0) : cond);
      std::vector<RtValue> per_dim;
      for (int64_t d = 0; d < nz.size(1); ++d) per_dim.emplace_back(nz.select(1, d).contiguous());
      return a.set(0, makeList(std::move(per_dim)));
    }
    if (a.num_in != 3) throw std::invalid_argument("where takes a condition, or a condition and two values");
    if (cond.dtype() != ScalarType::Bool && cond.dtype() != ScalarType::Byte)
      throw std::invalid_argument("where expects a bool condition, got " + cond.describe());
    ScalarType common = resultType({&a.input(1), &a.input(2)});
    Tensor x = asTensor(a.input(1), common).to(common), y = asTensor(a.input(2), common).to(common);
    Shape shape = broadcastShapes(broadcastShapes(cond.sizes(), x.sizes()), y.sizes());
    Tensor c = cond.expand(shape).contiguous(), xe = x.expand(shape).contiguous(), ye = y.expand(shape).contiguous();
    Tensor out = Tensor::empty(common, shape);
    const auto* cp = static_cast<const uint8_t*>(c.data());
    const size_t item = out.itemsize();
    auto* o = static_cast<char*>(out.data());
    const auto* xp = static_cast<const char*>(xe.data());
    const auto* yp = static_cast<const char*>(ye.data());
    for (int64_t i = 0, n = out.numel(); i < n; ++i)
      std::memcpy(o + i * item, (cp[i] ? xp : yp) + i * item, item);
    a.set(0, out);
  });
  addCached<BinCache>(r, "aten::floordiv", 2, 2, [](const KernelArgs& a, BinCache& c) {
    a.set(0, binary(a.ctx, c, Bin::FloorDivide, a.input(0), a.input(1), std::nullopt));
  });
  r.addScalar("aten::floordiv", 2, scalarBinary<Bin::FloorDivide>);
}

}  // namespace llga
