// Recurrent layers on oneDNN's RNN primitives, one primitive per layer (both
// directions in one, outputs concatenated), weights rearranged once:
//   aten::lstm(input, hx[h0, c0], params[], has_biases, num_layers, dropout, train, bidirectional, batch_first)
//       -> (output, hy, cy)                                          lstm_forward (with projection: LSTMP)
//   aten::gru(input, hx, params[], ...)     -> (output, hy)          lbr_gru_forward
//   aten::rnn_tanh / aten::rnn_relu(...)    -> (output, hy)          vanilla_rnn_forward
// PyTorch's params are, per layer and direction, w_ih, w_hh[, b_ih, b_hh][, w_hr].
// Its gates and oneDNN's differ in order for GRU (PyTorch r, z, n; oneDNN u=z,
// r, o=n), and PyTorch's GRU applies the reset gate after the hidden product,
// which is oneDNN's linear-before-reset GRU with a fourth bias (b_hn). Two
// biases become one sum per gate. The rearranged weights are PyTorch's
// ldgoi order, reordered into the layout the primitive picks; with constant
// params this happens once per shape specialization.
//
// At small batches without LSTM projection, where the CPU has AVX-512, a
// layer runs instead as one oneDNN matmul for the input projection of every
// step and direction, then llga's own recurrence (backend/dnnl/recurrent.h,
// one direction per thread, PyTorch's gate order and formulas):
// ownRecurrencePays has the figures.
#include <omp.h>

#include <cstring>

#include "backend/dnnl/dnnl_utils.h"
#include "backend/dnnl/recurrent.h"
#include "backend/dnnl/ops/op_utils.h"
#include "backend/dnnl/ops/primitive_cache.h"
#include "runtime/exec_context.h"
#include "runtime/threads.h"

namespace llga {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

using recurrent::Cell;
using recurrent::gatesOf;
const char* cellName(Cell c) {
  switch (c) {
    case Cell::Lstm: return "lstm";
    case Cell::Gru: return "gru";
    case Cell::RnnTanh: return "rnn_tanh";
    case Cell::RnnRelu: return "rnn_relu";
  }
  return "";
}
// oneDNN gate g reads PyTorch gate kGatePerm[g].
int64_t pytorchGate(Cell c, int64_t g) { return c == Cell::Gru ? (g == 0 ? 1 : g == 1 ? 0 : 2) : g; }

struct Config {
  Cell cell;
  bool has_biases, bidirectional, batch_first, batched;
  int64_t layers, dirs, T, N, I, H, P;  // P: the recurrent state's size (H, or LSTM's proj_size)
  int64_t perLayerDir() const { return 2 + (has_biases ? 2 : 0) + (P != H ? 1 : 0); }
};

// llga's recurrence for a layer: the input projection [T*N, in] x [in, D*G*H]
// + b_ih as a oneDNN matmul (PyTorch's gate order), then recurrent::run per direction.
struct OwnLayer {
  dnnl::primitive proj;
  memory::desc x_md, w_md, b_md, xg_md, scratch_md;
  memory w, b;  // constant params: in the matmul's layout, once
  Tensor keep_w, keep_b;
  std::vector<recurrent::IterWeights> iter;  // per direction (constant params)
};

struct LayerEntry {
  OwnLayer own;
  dnnl::primitive prim;
  memory::desc scratch_md, wl_md, wi_md, bias_md, proj_md, src_md, dst_md, iter_md, iter_c_md;
  memory wl, wi, bias, proj;  // reordered constant weights (empty when the params change per call)
  Tensor keep_wl, keep_wi, keep_bias, keep_proj;
};
struct RnnEntry {
  std::vector<LayerEntry> layers;
  std::string impl;
  bool own = false;  // llga's recurrence (OwnLayer), else oneDNN's RNN primitives
};

float* f(Tensor& t) { return t.data<float>(); }

// One layer's weights in PyTorch's gate-major order with oneDNN's gate order:
// [d][g][o][i] (ldgoi) for the layer and iteration weights, [d][g][o] for the bias.
struct LayerWeights {
  Tensor wl, wi, bias, proj;
};

// A layer's weight as float, contiguous, checked against the shape the config implies.
Tensor checkedParam(const Config& c, const Tensor& t, const Shape& s, int64_t layer, const char* what) {
  if (t.sizes() != s)
    throw std::invalid_argument(std::string(cellName(c.cell)) + ": layer " + std::to_string(layer) + " " + what + " is " +
                                t.describe() + ", expected " + shapeString(s));
  return t.to(ScalarType::Float).contiguous();
}

LayerWeights rearrange(const Config& c, const std::vector<Tensor>& params, int64_t layer, int64_t in_size) {
  const int64_t G = gatesOf(c.cell), Gb = c.cell == Cell::Gru ? 4 : G, H = c.H, P = c.P, D = c.dirs;
  LayerWeights w{Tensor::empty(ScalarType::Float, {D, G, H, in_size}), Tensor::empty(ScalarType::Float, {D, G, H, P}),
                 Tensor::zeros(ScalarType::Float, {D, Gb, H}), Tensor()};
  if (P != H) w.proj = Tensor::empty(ScalarType::Float, {D, P, H});
  auto expect = [&](const Tensor& t, const Shape& s, const char* what) { return checkedParam(c, t, s, layer, what); };
  for (int64_t d = 0; d < D; ++d) {
    const size_t base = static_cast<size_t>((layer * D + d) * c.perLayerDir());
    Tensor w_ih = expect(params[base], {G * H, in_size}, "w_ih");
    Tensor w_hh = expect(params[base + 1], {G * H, P}, "w_hh");
    for (int64_t g = 0; g < G; ++g) {
      const int64_t pg = pytorchGate(c.cell, g);
      std::memcpy(f(w.wl) + (d * G + g) * H * in_size, w_ih.data<float>() + pg * H * in_size,
                  static_cast<size_t>(H * in_size) * sizeof(float));
      std::memcpy(f(w.wi) + (d * G + g) * H * P, w_hh.data<float>() + pg * H * P, static_cast<size_t>(H * P) * sizeof(float));
    }
    if (c.has_biases) {
      Tensor b_ih = expect(params[base + 2], {G * H}, "b_ih"), b_hh = expect(params[base + 3], {G * H}, "b_hh");
      float* out = f(w.bias) + d * Gb * H;
      for (int64_t g = 0; g < G; ++g) {
        const int64_t pg = pytorchGate(c.cell, g);
        const float *bi = b_ih.data<float>() + pg * H, *bh = b_hh.data<float>() + pg * H;
        const bool lbr_new_gate = c.cell == Cell::Gru && g == 2;  // b_hn stays inside r * (W_hn h + b_hn)
        for (int64_t o = 0; o < H; ++o) out[g * H + o] = bi[o] + (lbr_new_gate ? 0.f : bh[o]);
      }
      if (c.cell == Cell::Gru)
        std::memcpy(out + 3 * H, b_hh.data<float>() + 2 * H, static_cast<size_t>(H) * sizeof(float));
    }
    if (P != H) {
      Tensor w_hr = expect(params[base + c.perLayerDir() - 1], {P, H}, "w_hr");
      std::memcpy(f(w.proj) + d * P * H, w_hr.data<float>(), static_cast<size_t>(P * H) * sizeof(float));
    }
  }
  return w;
}

// A layer's weights for llga's recurrence, in PyTorch's gate order: w_ih of
// every direction stacked ([D * G * H][in]), b_ih likewise (zeros without
// biases), and each direction's W_hh and b_hh prepared (recurrent::prepareIter).
struct OwnWeights {
  Tensor w_ih, b_ih;
  std::vector<recurrent::IterWeights> iter;
};

OwnWeights ownWeights(const Config& c, const std::vector<Tensor>& params, int64_t layer, int64_t in_size) {
  const int64_t GH = gatesOf(c.cell) * c.H, D = c.dirs;
  OwnWeights w{Tensor::empty(ScalarType::Float, {D * GH, in_size}), Tensor::zeros(ScalarType::Float, {D * GH}), {}};
  for (int64_t d = 0; d < D; ++d) {
    const size_t base = static_cast<size_t>((layer * D + d) * c.perLayerDir());
    Tensor w_ih = checkedParam(c, params[base], {GH, in_size}, layer, "w_ih");
    Tensor w_hh = checkedParam(c, params[base + 1], {GH, c.H}, layer, "w_hh");
    std::memcpy(f(w.w_ih) + d * GH * in_size, w_ih.data<float>(), static_cast<size_t>(GH * in_size) * sizeof(float));
    Tensor b_hh;
    if (c.has_biases) {
      Tensor b_ih = checkedParam(c, params[base + 2], {GH}, layer, "b_ih");
      b_hh = checkedParam(c, params[base + 3], {GH}, layer, "b_hh");
      std::memcpy(f(w.b_ih) + d * GH, b_ih.data<float>(), static_cast<size_t>(GH) * sizeof(float));
    }
    w.iter.push_back(recurrent::prepareIter(w_hh.data<float>(), c.H, c.has_biases ? b_hh.data<float>() : nullptr, GH, c.H));
  }
  return w;
}

class RnnKernel final : public Kernel {
 public:
  RnnKernel(Cell cell, bool constant_params) : cell_(cell), constant_params_(constant_params) {}
  const char* primitiveKind() const override {
    std::shared_ptr<const RnnEntry> e = last_.load();  // the latest call's path
    if (e && e->own) return "llga recurrence";
    return cell_ == Cell::Lstm ? "lstm" : cell_ == Cell::Gru ? "lbr_gru" : "vanilla_rnn";
  }
  KernelReport report() const override {
    std::shared_ptr<const RnnEntry> e = last_.load();
    if (!e) return {};
    return {e->impl, "", "", "", "", ""};
  }

  void run(const KernelArgs& a) override {
    // The padded overload: (x, hx, params, has_biases, layers, dropout, train, bidirectional, batch_first);
    // the packed one (.data): (data, batch_sizes, hx, params, has_biases, layers, dropout, train, bidirectional).
    const bool packed = cell_ == Cell::Lstm ? a.input(1).isTensor() : a.input(2).isTensor();
    const size_t at = packed ? 1 : 0;  // the shift of hx and what follows
    std::vector<Tensor> hx;
    if (cell_ == Cell::Lstm) {
      for (const RtValue& v : *a.input(1 + at).list()) hx.push_back(v.tensor());
      if (hx.size() != 2) throw std::invalid_argument("lstm expects hx = [h0, c0], got " + std::to_string(hx.size()) + " tensors");
    } else {
      hx.push_back(a.tensor(1 + at));
    }
    std::vector<Tensor> params;
    for (const RtValue& v : *a.input(2 + at).list()) params.push_back(v.tensor());
    Config c{cell_, a.toBool(3 + at), a.toBool(7 + at), packed ? false : a.toBool(8), true, a.toInt(4 + at), 1, 0, 0, 0, 0, 0};
    if (a.toBool(6 + at) && a.toDouble(5 + at) != 0.0)
      throw std::invalid_argument(std::string(cellName(cell_)) + " with dropout in training mode; call model.eval() before tracing");
    c.dirs = c.bidirectional ? 2 : 1;
    const Tensor& x_in = a.tensor(0);
    if (x_in.dtype() != ScalarType::Float) throw std::invalid_argument(std::string(cellName(cell_)) + " supports float32 input, got " + x_in.describe());
    if (packed ? x_in.dim() != 2 : (x_in.dim() != 3 && x_in.dim() != 2))
      throw std::invalid_argument(std::string(cellName(cell_)) + " expects a " + (packed ? "2-D packed" : "2-D or 3-D") +
                                  " input, got " + x_in.describe());
    if (c.layers < 1) throw std::invalid_argument(std::string(cellName(cell_)) + ": num_layers must be positive");
    const int64_t expect_params = c.layers * c.dirs;
    if (params.empty() || static_cast<int64_t>(params.size()) % expect_params != 0)
      throw std::invalid_argument(std::string(cellName(cell_)) + ": " + std::to_string(params.size()) +
                                  " weights for " + std::to_string(expect_params) + " layer directions");
    const int64_t per = static_cast<int64_t>(params.size()) / expect_params;
    if (params[0].dim() != 2 || params[1].dim() != 2)
      throw std::invalid_argument(std::string(cellName(cell_)) + ": the first weights are " + params[0].describe() + " and " +
                                  params[1].describe() + ", expected 2-D w_ih and w_hh");
    c.H = params[0].size(0) / gatesOf(cell_);
    c.P = params[1].size(1);
    c.I = x_in.size(-1);
    if (per != c.perLayerDir())
      throw std::invalid_argument(std::string(cellName(cell_)) + ": " + std::to_string(per) + " weights per layer direction, expected " +
                                  std::to_string(c.perLayerDir()));
    if (packed) return runPacked(a, c, x_in, a.tensor(1), hx, params);

    c.batched = x_in.dim() == 3;
    // Unbatched input (T, I) runs as a batch of one.
    Tensor x = (c.batched ? x_in : x_in.unsqueeze(c.batch_first ? 0 : 1)).contiguous();
    c.T = x.size(c.batch_first ? 1 : 0);
    c.N = x.size(c.batch_first ? 0 : 1);
    std::vector<Tensor> states = initialStates(c, hx);
    if (c.T == 0) throw std::invalid_argument("Expected sequence length to be larger than 0 in RNN");
    // An empty batch: empty results without oneDNN (whose RNN kernels divide by it)
    auto [out, final_states] = c.N == 0 ? std::pair{Tensor::empty(ScalarType::Float, c.batch_first ? Shape{0, c.T, c.dirs * c.P}
                                                                                                    : Shape{c.T, 0, c.dirs * c.P}),
                                                    states}
                                        : core(a.ctx, c, x, states, params);
    if (!c.batched) {
      out = out.squeeze(c.batch_first ? 0 : 1);
      for (Tensor& st : final_states) st = st.squeeze(1);
    }
    a.set(0, out);
    for (size_t i = 0; i < final_states.size(); ++i) a.set(i + 1, final_states[i]);
  }

 private:
  // h0 (and c0) as (L*D, N, size), float, contiguous, checked against the config.
  std::vector<Tensor> initialStates(const Config& c, const std::vector<Tensor>& hx) const {
    std::vector<Tensor> states;
    for (size_t i = 0; i < hx.size(); ++i) {
      const int64_t size = i == 0 ? c.P : c.H;
      Tensor h = c.batched ? hx[i] : hx[i].unsqueeze(1);
      if (h.sizes() != Shape{c.layers * c.dirs, c.N, size})
        throw std::invalid_argument(std::string(cellName(cell_)) + ": initial state " + hx[i].describe() + " should be " +
                                    shapeString(c.batched ? Shape{c.layers * c.dirs, c.N, size} : Shape{c.layers * c.dirs, size}));
      states.push_back(h.to(ScalarType::Float).contiguous());
    }
    return states;
  }

  // A packed sequence (PyTorch's PackedSequence: rows time-major, batch_sizes[t]
  // sequences still running at step t, longest first): each sequence runs on
  // its own (oneDNN's RNN primitives take one length per call), its rows
  // gathered from the packed data and its results scattered back.
  void runPacked(const KernelArgs& a, Config c, const Tensor& data_in, const Tensor& batch_sizes_in,
                 const std::vector<Tensor>& hx, const std::vector<Tensor>& params) {
    Tensor bs = batch_sizes_in.to(ScalarType::Long).contiguous();
    const int64_t steps = bs.numel();
    const int64_t* b = bs.data<int64_t>();
    if (bs.dim() != 1 || steps == 0) throw std::invalid_argument(std::string(cellName(cell_)) + ": bad batch_sizes " + batch_sizes_in.describe());
    int64_t rows = 0;
    for (int64_t t = 0; t < steps; ++t) {
      if (b[t] <= 0 || (t > 0 && b[t] > b[t - 1]))
        throw std::invalid_argument(std::string(cellName(cell_)) + ": batch_sizes must be positive and not increase");
      rows += b[t];
    }
    if (rows != data_in.size(0))
      throw std::invalid_argument(std::string(cellName(cell_)) + ": packed data " + data_in.describe() + " does not hold the " +
                                  std::to_string(rows) + " rows batch_sizes count");
    const int64_t N = b[0];
    std::vector<int64_t> start(static_cast<size_t>(steps), 0);  // the packed row of step t's first sequence
    for (int64_t t = 1; t < steps; ++t) start[static_cast<size_t>(t)] = start[static_cast<size_t>(t - 1)] + b[t - 1];
    c.batched = true;
    c.N = N;
    std::vector<Tensor> states = initialStates(c, hx);
    Tensor data = data_in.contiguous();
    const int64_t out_c = c.dirs * c.P;
    Tensor out = Tensor::empty(ScalarType::Float, {rows, out_c});
    std::vector<Tensor> finals;
    for (const Tensor& st : states) finals.push_back(Tensor::empty(ScalarType::Float, st.sizes()));
    for (int64_t n = 0; n < N; ++n) {
      int64_t len = 0;
      while (len < steps && b[len] > n) ++len;
      Config one = c;
      one.N = 1;
      one.T = len;
      Tensor x = Tensor::empty(ScalarType::Float, {len, 1, c.I});
      for (int64_t t = 0; t < len; ++t) x.select(0, t).select(0, 0).copyFrom(data.select(0, start[static_cast<size_t>(t)] + n));
      std::vector<Tensor> st;
      for (const Tensor& s0 : states) st.push_back(s0.narrow(1, n, 1).contiguous());
      auto [y, fin] = core(a.ctx, one, x, st, params);
      for (int64_t t = 0; t < len; ++t) out.select(0, start[static_cast<size_t>(t)] + n).copyFrom(y.select(0, t).select(0, 0));
      for (size_t i = 0; i < fin.size(); ++i) finals[i].narrow(1, n, 1).copyFrom(fin[i]);
    }
    a.set(0, out);
    for (size_t i = 0; i < finals.size(); ++i) a.set(i + 1, finals[i]);
  }

  // The layers on x (T, N, I) or (N, T, I) contiguous: (output, final states).
  std::pair<Tensor, std::vector<Tensor>> core(ExecContext& ctx, const Config& c, const Tensor& x,
                                              const std::vector<Tensor>& states, const std::vector<Tensor>& params) {
    thread_local std::vector<int64_t> key;
    key.clear();
    key.insert(key.end(), {c.T, c.N, c.I, c.H, c.P, c.layers, c.dirs, c.has_biases, c.batch_first});
    std::shared_ptr<RnnEntry> e = cache_.get(key, [&] { return prepare(ctx, c, constant_params_ ? &params : nullptr); });
    last_.store(e);

    const int64_t out_c = c.dirs * c.P;
    Tensor out = Tensor::empty(ScalarType::Float, c.batch_first ? Shape{c.N, c.T, out_c} : Shape{c.T, c.N, out_c});
    std::vector<Tensor> final_states;
    for (size_t i = 0; i < states.size(); ++i) final_states.push_back(Tensor::empty(ScalarType::Float, states[i].sizes()));
    Tensor layer_in = x, layer_out;
    for (int64_t l = 0; l < c.layers; ++l) {
      const LayerEntry& le = e->layers[static_cast<size_t>(l)];
      layer_out = l + 1 == c.layers ? out : Tensor::empty(ScalarType::Float, {c.T, c.N, out_c});
      if (e->own) {
        ownLayer(ctx, c, le.own, l, layer_in, layer_out, states, final_states, params);
        layer_in = layer_out;
        continue;
      }
      std::unordered_map<int, memory> args;
      args[DNNL_ARG_SRC_LAYER] = memory(le.src_md, cpuEngine(), layer_in.data());
      args[DNNL_ARG_DST_LAYER] = memory(le.dst_md, cpuEngine(), layer_out.data());
      const int64_t state_off = l * c.dirs * c.N;
      args[DNNL_ARG_SRC_ITER] = memory(le.iter_md, cpuEngine(), const_cast<float*>(states[0].data<float>()) + state_off * c.P);
      args[DNNL_ARG_DST_ITER] = memory(le.iter_md, cpuEngine(), f(final_states[0]) + state_off * c.P);
      if (cell_ == Cell::Lstm) {
        args[DNNL_ARG_SRC_ITER_C] = memory(le.iter_c_md, cpuEngine(), const_cast<float*>(states[1].data<float>()) + state_off * c.H);
        args[DNNL_ARG_DST_ITER_C] = memory(le.iter_c_md, cpuEngine(), f(final_states[1]) + state_off * c.H);
      }
      Tensor keep_wl, keep_wi, keep_bias, keep_proj;  // this call's weights when they are not constant
      if (constant_params_) {
        args[DNNL_ARG_WEIGHTS_LAYER] = le.wl;
        args[DNNL_ARG_WEIGHTS_ITER] = le.wi;
        args[DNNL_ARG_BIAS] = le.bias;
        if (c.P != c.H) args[DNNL_ARG_WEIGHTS_PROJECTION] = le.proj;
      } else {
        LayerWeights w = rearrange(c, params, l, l == 0 ? c.I : out_c);
        args[DNNL_ARG_WEIGHTS_LAYER] = toLayout(ctx, w.wl, le.wl_md, plainWeights(c, l == 0 ? c.I : out_c, c.P, false), keep_wl);
        args[DNNL_ARG_WEIGHTS_ITER] = toLayout(ctx, w.wi, le.wi_md, plainWeights(c, c.P, c.P, true), keep_wi);
        args[DNNL_ARG_BIAS] = memory(le.bias_md, cpuEngine(), w.bias.data());
        keep_bias = w.bias;
        if (c.P != c.H) args[DNNL_ARG_WEIGHTS_PROJECTION] = toLayout(ctx, w.proj, le.proj_md, projPlain(c), keep_proj);
      }
      execute(ctx, le.prim, le.scratch_md, std::move(args));
      layer_in = layer_out;
    }
    return {out, final_states};
  }

  // oneDNN's RNN kernels run a step as a small GEMM with their threads
  // meeting at every step; at batch 1 that overhead is most of the time.
  // llga's recurrence, measured against them (2 threads, AVX-512 without
  // AMX, llga.optimize on an nn.LSTM/GRU/RNN with 64 inputs, best of 15):
  // - batch 1: LSTM H=256 bidirectional 50 steps 583-607 against 993-1228
  //   us, unidirectional 572 / 794; 2-layer LSTM H=128 314 / 472; GRU H=128
  //   118 / 181; bidirectional RNN H=128 60 / 282; LSTM H=20 at batch 3
  //   30 / 82; in the models, torchaudio's DeepSpeech 375 -> 140 us, the
  //   LSTM tagger 776 -> 297, the GRU encoder 336 -> 152;
  // - up to batch 8 where W_hh is at most 256 KiB (LSTM H=128: 295 / 405 at
  //   4, GRU H=128 397 / 549 at 8) or both directions run (one a thread:
  //   LSTM H=256 bidirectional 1198 / 1760 at 4, 2163 / 2576 at 8);
  // - slower where W_hh passes 1 MiB a direction (LSTM H=384
  //   bidirectional 1816 / 1193, H=512 3579 / 3026: each step reads it from
  //   L3) and for one direction of LSTM H=256 at batch 2+ (954 / 661:
  //   oneDNN shares each step's product between the threads, llga's runs
  //   a direction on one).
  static constexpr int64_t kOwnMaxBatch = 8;
  static constexpr int64_t kOwnMaxIterBytes = int64_t{1} << 20, kOwnOneThreadBytes = int64_t{256} << 10;
  static bool ownRecurrencePays(const Config& c) {
    const int64_t iter_bytes = gatesOf(c.cell) * c.H * c.H * static_cast<int64_t>(sizeof(float));
    if (c.P != c.H || c.N > kOwnMaxBatch || iter_bytes > kOwnMaxIterBytes || !recurrent::available()) return false;
    return c.dirs == 2 || c.N == 1 || iter_bytes <= kOwnOneThreadBytes;
  }

  // One layer by llga's recurrence: the input projection of every step and
  // direction (one matmul), then the directions, one per thread.
  void ownLayer(ExecContext& ctx, const Config& c, const OwnLayer& le, int64_t l, const Tensor& layer_in, Tensor& layer_out,
                const std::vector<Tensor>& states, std::vector<Tensor>& final_states,
                const std::vector<Tensor>& params) const {
    const int64_t GH = gatesOf(c.cell) * c.H, DGH = c.dirs * GH, out_c = c.dirs * c.H;
    Tensor xg = Tensor::empty(ScalarType::Float, {c.T * c.N, DGH});
    OwnWeights call_w;  // this call's weights when they are not constant
    std::unordered_map<int, memory> args;
    args[DNNL_ARG_SRC] = memory(le.x_md, cpuEngine(), const_cast<void*>(layer_in.data()));
    args[DNNL_ARG_DST] = memory(le.xg_md, cpuEngine(), xg.data());
    Tensor keep_w;
    if (constant_params_) {
      args[DNNL_ARG_WEIGHTS] = le.w;
      args[DNNL_ARG_BIAS] = le.b;
    } else {
      call_w = ownWeights(c, params, l, l == 0 ? c.I : out_c);
      args[DNNL_ARG_WEIGHTS] = toLayout(ctx, call_w.w_ih, le.w_md, ownProjPlain(l == 0 ? c.I : out_c, DGH), keep_w);
      args[DNNL_ARG_BIAS] = memory(le.b_md, cpuEngine(), call_w.b_ih.data());
    }
    execute(ctx, le.proj, le.scratch_md, std::move(args));
    const std::vector<recurrent::IterWeights>& iter = constant_params_ ? le.iter : call_w.iter;
    // Rows of xg and of the output: (t, n) at t * N + n, or n * T + t where batch_first
    const bool in_bf = l == 0 && c.batch_first, out_bf = l + 1 == c.layers && c.batch_first;
    const size_t per_dir = recurrent::scratchFloats(iter[0], c.N, c.H);
    Tensor scratch = Tensor::empty(ScalarType::Float, {static_cast<int64_t>(per_dir) * c.dirs});
    const bool lstm = c.cell == Cell::Lstm;
    const int threads = c.dirs > 1 && getNumThreads() > 1 ? 2 : 1;
#pragma omp parallel for num_threads(threads) schedule(static, 1)
    for (int64_t d = 0; d < c.dirs; ++d) {
      const int64_t state = (l * c.dirs + d) * c.N * c.H;
      recurrent::Direction dir{c.cell, c.H, c.T, c.N, d == 1,
                               xg.data<float>() + d * GH, (in_bf ? 1 : c.N) * DGH, (in_bf ? c.T : 1) * DGH,
                               states[0].data<float>() + state, lstm ? states[1].data<float>() + state : nullptr,
                               layer_out.data<float>() + d * c.H, (out_bf ? 1 : c.N) * out_c, (out_bf ? c.T : 1) * out_c,
                               final_states[0].data<float>() + state, lstm ? final_states[1].data<float>() + state : nullptr};
      recurrent::run(dir, iter[static_cast<size_t>(d)], scratch.data<float>() + static_cast<int64_t>(per_dir) * d);
    }
  }

  // The stacked w_ih ([D * G * H][in]) seen as the matmul's [in][D * G * H] weights.
  static memory::desc ownProjPlain(int64_t in, int64_t dgh) {
    return memory::desc({in, dgh}, memory::data_type::f32, tag::ba);
  }

  // The rearranged weights' own layout: {1, D, in, G, H} as ldgoi.
  static memory::desc plainWeights(const Config& c, int64_t in, int64_t /*p*/, bool iter) {
    return memory::desc({1, c.dirs, iter ? c.P : in, gatesOf(c.cell), c.H}, memory::data_type::f32, tag::ldgoi);
  }
  static memory::desc projPlain(const Config& c) { return memory::desc({1, c.dirs, c.H, c.P}, memory::data_type::f32, tag::ldoi); }

  static memory toLayout(ExecContext& ctx, const Tensor& t, const memory::desc& md, const memory::desc& plain, Tensor& keep) {
    memory src(plain, cpuEngine(), const_cast<void*>(t.data()));
    memory dst = temporary(md, keep);
    reorder(ctx, src, dst);
    return dst;
  }

  RnnEntry prepare(ExecContext& ctx, const Config& c, const std::vector<Tensor>* params) const {
    if (ownRecurrencePays(c)) return prepareOwn(ctx, c, params);
    RnnEntry e;
    const auto f32 = memory::data_type::f32;
    const int64_t G = gatesOf(c.cell), Gb = c.cell == Cell::Gru ? 4 : G, out_c = c.dirs * c.P;
    const auto dir = c.bidirectional ? dnnl::rnn_direction::bidirectional_concat : dnnl::rnn_direction::unidirectional_left2right;
    const auto fwd = dnnl::prop_kind::forward_inference;
    for (int64_t l = 0; l < c.layers; ++l) {
      LayerEntry le;
      const int64_t in = l == 0 ? c.I : out_c;
      le.src_md = memory::desc({c.T, c.N, in}, f32, l == 0 && c.batch_first ? tag::ntc : tag::tnc);
      le.dst_md = memory::desc({c.T, c.N, out_c}, f32, l + 1 == c.layers && c.batch_first ? tag::ntc : tag::tnc);
      le.iter_md = memory::desc({1, c.dirs, c.N, c.P}, f32, tag::ldnc);
      le.iter_c_md = memory::desc({1, c.dirs, c.N, c.H}, f32, tag::ldnc);
      const memory::desc wl_any({1, c.dirs, in, G, c.H}, f32, tag::any), wi_any({1, c.dirs, c.P, G, c.H}, f32, tag::any);
      le.bias_md = memory::desc({1, c.dirs, Gb, c.H}, f32, tag::ldgo);
      std::string impl;
      switch (c.cell) {
        case Cell::Lstm: {
          // The projection's weights in the layout oneDNN picks, unless that
          // is its packed format (AVX2, T = 1, N = 2: the reorder into it
          // crashes), then plain (ldio). Plain where oneDNN wants its own
          // blocked layout (AVX-512: brgemm LSTM, abDc32d) gave garbage.
          auto lstmDesc = [&](const memory::desc& proj) {
            return c.P == c.H ? dnnl::lstm_forward::desc(fwd, dir, le.src_md, le.iter_md, le.iter_c_md, wl_any, wi_any,
                                                         le.bias_md, le.dst_md, le.iter_md, le.iter_c_md)
                              : dnnl::lstm_forward::desc(fwd, dir, le.src_md, le.iter_md, le.iter_c_md, wl_any, wi_any,
                                                         memory::desc(), proj, le.bias_md, le.dst_md, le.iter_md,
                                                         le.iter_c_md);
          };
          dnnl::lstm_forward::primitive_desc pd(lstmDesc(memory::desc({1, c.dirs, c.H, c.P}, f32, tag::any)),
                                                scratchpadAttr(), cpuEngine());
          if (c.P != c.H && pd.weights_projection_desc().data.format_kind == dnnl_format_kind_rnn_packed)
            pd = dnnl::lstm_forward::primitive_desc(lstmDesc(memory::desc({1, c.dirs, c.H, c.P}, f32, tag::ldio)),
                                                    scratchpadAttr(), cpuEngine());
          le.wl_md = pd.weights_layer_desc();
          le.wi_md = pd.weights_iter_desc();
          if (c.P != c.H) le.proj_md = pd.weights_projection_desc();
          le.scratch_md = pd.scratchpad_desc();
          impl = pd.impl_info_str();
          le.prim = dnnl::lstm_forward(pd);
          break;
        }
        case Cell::Gru: {
          dnnl::lbr_gru_forward::desc d(fwd, dir, le.src_md, le.iter_md, wl_any, wi_any, le.bias_md, le.dst_md, le.iter_md);
          dnnl::lbr_gru_forward::primitive_desc pd(d, scratchpadAttr(), cpuEngine());
          le.wl_md = pd.weights_layer_desc();
          le.wi_md = pd.weights_iter_desc();
          le.scratch_md = pd.scratchpad_desc();
          impl = pd.impl_info_str();
          le.prim = dnnl::lbr_gru_forward(pd);
          break;
        }
        case Cell::RnnTanh:
        case Cell::RnnRelu: {
          const auto act = c.cell == Cell::RnnTanh ? dnnl::algorithm::eltwise_tanh : dnnl::algorithm::eltwise_relu;
          dnnl::vanilla_rnn_forward::desc d(fwd, act, dir, le.src_md, le.iter_md, wl_any, wi_any, le.bias_md, le.dst_md, le.iter_md);
          dnnl::vanilla_rnn_forward::primitive_desc pd(d, scratchpadAttr(), cpuEngine());
          le.wl_md = pd.weights_layer_desc();
          le.wi_md = pd.weights_iter_desc();
          le.scratch_md = pd.scratchpad_desc();
          impl = pd.impl_info_str();
          le.prim = dnnl::vanilla_rnn_forward(pd);
          break;
        }
      }
      e.impl = impl;
      if (params) {  // constant weights: rearranged and reordered into the primitive's layout once
        LayerWeights w = rearrange(c, *params, l, in);
        le.wl = toLayout(ctx, w.wl, le.wl_md, plainWeights(c, in, c.P, false), le.keep_wl);
        le.wi = toLayout(ctx, w.wi, le.wi_md, plainWeights(c, c.P, c.P, true), le.keep_wi);
        le.keep_bias = w.bias;
        le.bias = memory(le.bias_md, cpuEngine(), le.keep_bias.data());
        if (c.P != c.H) le.proj = toLayout(ctx, w.proj, le.proj_md, projPlain(c), le.keep_proj);
      }
      e.layers.push_back(std::move(le));
    }
    return e;
  }

  RnnEntry prepareOwn(ExecContext& ctx, const Config& c, const std::vector<Tensor>* params) const {
    RnnEntry e;
    e.own = true;
    e.impl = "llga_recurrence:avx512";
    const auto f32 = memory::data_type::f32;
    const int64_t DGH = c.dirs * gatesOf(c.cell) * c.H, rows = c.T * c.N;
    for (int64_t l = 0; l < c.layers; ++l) {
      LayerEntry le;
      OwnLayer& o = le.own;
      const int64_t in = l == 0 ? c.I : c.dirs * c.H;
      o.x_md = memory::desc({rows, in}, f32, tag::ab);
      o.xg_md = memory::desc({rows, DGH}, f32, tag::ab);
      o.b_md = memory::desc({1, DGH}, f32, tag::ab);
      dnnl::matmul::desc d(o.x_md, memory::desc({in, DGH}, f32, tag::any), o.b_md, o.xg_md);
      dnnl::matmul::primitive_desc pd(d, scratchpadAttr(), cpuEngine());
      o.w_md = pd.weights_desc();
      o.scratch_md = pd.scratchpad_desc();
      o.proj = dnnl::matmul(pd);
      if (params) {  // constant weights: stacked, reordered and the recurrent ones prepared once
        OwnWeights w = ownWeights(c, *params, l, in);
        o.w = toLayout(ctx, w.w_ih, o.w_md, ownProjPlain(in, DGH), o.keep_w);
        o.keep_b = w.b_ih;
        o.b = memory(o.b_md, cpuEngine(), o.keep_b.data());
        o.iter = std::move(w.iter);
      }
      e.layers.push_back(std::move(le));
    }
    return e;
  }

  Cell cell_;
  bool constant_params_;
  PrimitiveCache<RnnEntry> cache_;
  SharedSlot<const RnnEntry> last_;
};

// The params list is constant when it is a constant or built from constants and bound weights.
bool constantParams(const Node& n) {
  if (isConstantInput(n, 2)) return true;
  const Node* list = n.input(2)->node();
  if (list->kind() != prim::ListConstruct) return false;
  for (size_t i = 0; i < list->inputs().size(); ++i)
    if (!isConstantInput(*list, i)) return false;
  return true;
}

// _pack_padded_sequence(input, lengths, batch_first) -> (data, batch_sizes):
// rows time-major, the sequences still running at each step (lengths sorted,
// longest first, as pack_padded_sequence passes them).
void packPadded(const KernelArgs& a) {
  Tensor x = a.tensor(0);
  Tensor lengths = a.tensor(1).to(ScalarType::Long).contiguous();
  const bool batch_first = a.toBool(2);
  if (x.dim() < 2) throw std::invalid_argument("pack_padded_sequence expects at least 2 dims, got " + x.describe());
  if (batch_first) x = x.transpose(0, 1);
  const int64_t T = x.size(0), B = x.size(1);
  if (lengths.dim() != 1 || lengths.numel() != B)
    throw std::invalid_argument("pack_padded_sequence: lengths " + lengths.describe() + " must have one entry per sequence (" +
                                std::to_string(B) + ")");
  const int64_t* len = lengths.data<int64_t>();
  for (int64_t i = 0; i < B; ++i) {
    if (len[i] <= 0 || len[i] > T)
      throw std::invalid_argument("pack_padded_sequence: length " + std::to_string(len[i]) + " is outside [1, " + std::to_string(T) + "]");
    if (i > 0 && len[i] > len[i - 1])
      throw std::invalid_argument("pack_padded_sequence: lengths must be sorted in decreasing order (enforce_sorted)");
  }
  const int64_t steps = B ? len[0] : 0;
  Tensor bs = Tensor::empty(ScalarType::Long, {steps});
  int64_t rows = 0;
  for (int64_t t = 0; t < steps; ++t) {
    int64_t n = 0;
    while (n < B && len[n] > t) ++n;
    bs.data<int64_t>()[t] = n;
    rows += n;
  }
  Shape shape = x.sizes();
  shape.erase(shape.begin());
  shape[0] = rows;
  Tensor data = Tensor::empty(x.dtype(), shape);
  for (int64_t t = 0, r = 0; t < steps; ++t) {
    const int64_t n = bs.data<int64_t>()[t];
    data.narrow(0, r, n).copyFrom(x.select(0, t).narrow(0, 0, n));
    r += n;
  }
  a.set(0, data);
  a.set(1, bs);
}

// _pad_packed_sequence(data, batch_sizes, batch_first, padding_value, total_length) -> (padded, lengths)
void padPacked(const KernelArgs& a) {
  const Tensor& data = a.tensor(0);
  Tensor bs = a.tensor(1).to(ScalarType::Long).contiguous();
  const bool batch_first = a.toBool(2);
  const double pad = a.toDouble(3);
  const int64_t steps = bs.numel(), B = steps ? bs.data<int64_t>()[0] : 0;
  const int64_t T = std::max<int64_t>(a.toInt(4), steps);
  Shape shape{T, B};
  shape.insert(shape.end(), data.sizes().begin() + 1, data.sizes().end());
  Tensor out = Tensor::empty(data.dtype(), shape);
  out.fill(pad);
  Tensor lengths = Tensor::zeros(ScalarType::Long, {B});
  int64_t r = 0;
  for (int64_t t = 0; t < steps; ++t) {
    const int64_t n = bs.data<int64_t>()[t];
    if (n > B || r + n > data.size(0)) throw std::invalid_argument("pad_packed_sequence: batch_sizes do not fit the packed data");
    out.select(0, t).narrow(0, 0, n).copyFrom(data.narrow(0, r, n));
    for (int64_t i = 0; i < n; ++i) ++lengths.data<int64_t>()[i];
    r += n;
  }
  a.set(0, batch_first ? out.transpose(0, 1).contiguous() : out);
  a.set(1, lengths);
}

}  // namespace

void registerRnnOps(OpRegistry& r) {
  r.add("aten::_pack_padded_sequence", 3, 3, packPadded);
  r.add("aten::_pad_packed_sequence", 5, 5, padPacked);
  for (auto [kind, cell] : {std::pair{"aten::lstm", Cell::Lstm}, std::pair{"aten::gru", Cell::Gru},
                            std::pair{"aten::rnn_tanh", Cell::RnnTanh}, std::pair{"aten::rnn_relu", Cell::RnnRelu}}) {
    r.add(OpDef{kind, 9, 9, [cell = cell](const Node& n) { return std::make_unique<RnnKernel>(cell, constantParams(n)); }});
  }
}
LLGA_REGISTER_OPS(registerRnnOps);

}  // namespace llga
