// Bindings for the runtime: numpy arrays in and out without copies.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "ir/precision.h"

#include "python/numpy_interop.h"
#include "driver/compile.h"
#include "passes/pass.h"
#include "python/bindings.h"
#include "runtime/compiled.h"
#include "backend/dnnl/fused_attention.h"
#include "backend/dnnl/microbench.h"
#include "backend/dnnl/recurrent.h"
#include "backend/dnnl/activations.h"
#include "backend/dnnl/ops/primitive_cache.h"
#include "runtime/profiler.h"
#include "runtime/threads.h"

namespace py = pybind11;
using namespace llga;
using llga::python::raise;

namespace {

py::dtype numpyDtype(ScalarType t) {
  switch (t) {
    case ScalarType::Float: return py::dtype("float32");
    case ScalarType::Double: return py::dtype("float64");
    case ScalarType::Long: return py::dtype("int64");
    case ScalarType::Int: return py::dtype("int32");
    case ScalarType::Short: return py::dtype("int16");
    case ScalarType::Char: return py::dtype("int8");
    case ScalarType::Byte: return py::dtype("uint8");
    case ScalarType::Bool: return py::dtype("bool");
    default: throw py::type_error("dtype " + std::string(scalarTypeName(t)) + " has no numpy equivalent");
  }
}

// A tensor over the array's own memory; the array stays alive as long as the
// tensor's storage. Arrays llga cannot address in place (negative or
// unaligned strides, data not aligned to its element size: a numpy view at
// an odd byte offset; non-native byte order) are copied once, here, unless
// `in_place` says the graph writes into this input: a write into a copy
// would never reach the caller, so that is an InputError instead.
Tensor tensorFromNumpy(py::array arr, const std::string& what, const InputSpec* in_place = nullptr) {
  ScalarType dt = python::dtypeFromNumpy(arr.dtype(), what);
  auto item = static_cast<int64_t>(arr.itemsize());
  Shape sizes, strides;
  const bool swapped = python::byteSwapped(arr);
  const bool strided_ok = python::elementStrides(arr, sizes, strides);
  const int64_t misaligned = python::misalignment(arr);
  if (!strided_ok || swapped || misaligned) {
    if (in_place)
      throw std::invalid_argument(
          what + ": the graph writes into this input in place (" + in_place->writerText() + "), but the array " +
          (swapped      ? std::string("is in non-native byte order")
           : misaligned ? "is not aligned to its " + std::to_string(item) + "-byte elements (its address is " +
                              std::to_string(misaligned) + " bytes past a multiple)"
                        : std::string("has negative or unaligned strides")) +
          " and llga would run on a copy, so the write would not reach it; pass numpy.ascontiguousarray(x)");
    return tensorFromNumpy(python::nativeCopy(arr), what);
  }
  int64_t extent = 1;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] > 0) extent += (sizes[d] - 1) * strides[d];
  const bool writable = arr.writeable();
  auto st = Storage::borrow(const_cast<void*>(arr.data()), static_cast<size_t>(extent * item), python::keepAlive(arr),
                            writable);
  return Tensor::fromStorage(std::move(st), dt, sizes, strides, 0);
}

py::object tensorToNumpy(const Tensor& t) {
  py::dtype dt = numpyDtype(t.dtype());
  std::vector<py::ssize_t> shape(t.sizes().begin(), t.sizes().end()), strides;
  for (int64_t s : t.strides()) strides.push_back(s * static_cast<py::ssize_t>(t.itemsize()));
  auto* keep = new std::shared_ptr<Storage>(t.storage());
  py::capsule owner(keep, [](void* p) { delete static_cast<std::shared_ptr<Storage>*>(p); });
  return py::array(dt, shape, strides, t.data(), owner);
}

// A Python value as the graph input's declared type takes it (`expected`,
// null when not known): an int where a float is declared is that float (as
// PyTorch converts it), a list's and a dict's items take the element types,
// and a container of another kind is refused by name.
RtValue fromPython(const py::handle& o, const std::string& what, const Type* expected = nullptr) {
  auto pyType = [](const py::handle& h) { return std::string(py::str(h.get_type().attr("__name__"))); };
  if (expected && expected->kind() == TypeKind::Optional && !expected->contained().empty())
    return o.is_none() ? RtValue() : fromPython(o, what, expected->contained()[0].get());
  if (o.is_none()) return RtValue();
  if (py::isinstance<py::array>(o)) return RtValue(tensorFromNumpy(py::reinterpret_borrow<py::array>(o), what));
  if (expected && expected->isTensor() &&
      (py::isinstance<py::bool_>(o) || py::isinstance<py::int_>(o) || py::isinstance<py::float_>(o) ||
       py::isinstance<py::str>(o) || py::isinstance<py::list>(o) || py::isinstance<py::tuple>(o) ||
       py::isinstance<py::dict>(o)))
    throw py::type_error(what + ": expected a numpy array (a Tensor), got a " + pyType(o));
  if (py::isinstance<py::bool_>(o)) return RtValue(o.cast<bool>());
  if (py::isinstance<py::int_>(o)) {
    if (expected && expected->isSimple("float")) return RtValue(static_cast<double>(o.cast<int64_t>()));
    return RtValue(o.cast<int64_t>());
  }
  if (py::isinstance<py::float_>(o)) {
    if (expected && expected->isSimple("int"))
      throw py::type_error(what + ": expected an int, got a float (" + std::string(py::repr(o)) + ")");
    return RtValue(o.cast<double>());
  }
  if (py::isinstance<py::str>(o)) return RtValue(o.cast<std::string>());
  if (py::isinstance<py::list>(o) || py::isinstance<py::tuple>(o)) {
    const bool list = expected ? expected->kind() == TypeKind::List : py::isinstance<py::list>(o);
    if (expected && expected->kind() == TypeKind::List && !py::isinstance<py::list>(o))
      throw py::type_error(what + ": expected a list (" + expected->str() + "), got a " + pyType(o));
    std::vector<RtValue> items;
    size_t k = 0;
    for (auto item : o) {
      const Type* t = nullptr;
      if (expected && expected->kind() == TypeKind::List && !expected->contained().empty()) t = expected->contained()[0].get();
      if (expected && expected->kind() == TypeKind::Tuple && k < expected->contained().size()) t = expected->contained()[k].get();
      items.push_back(fromPython(item, what + "[" + std::to_string(k) + "]", t));
      ++k;
    }
    return list ? makeList(std::move(items)) : makeTuple(std::move(items));
  }
  if (py::isinstance<py::dict>(o)) {
    if (!expected || expected->kind() != TypeKind::Dict || expected->contained().size() != 2)
      throw py::type_error(what + ": cannot pass a dict to llga here" +
                           (expected ? " (the graph declares " + expected->str() + ")" : std::string()));
    auto d = std::make_shared<std::vector<std::pair<RtValue, RtValue>>>();
    for (auto kv : py::reinterpret_borrow<py::dict>(o)) {
      const std::string at = what + "[" + std::string(py::repr(kv.first)) + "]";
      RtValue key = fromPython(kv.first, at, expected->contained()[0].get());
      if (key.isTensor() || key.isList() || key.isNone())
        throw py::type_error(at + ": a dict key must be a str, int, float or bool");
      d->emplace_back(std::move(key), fromPython(kv.second, at, expected->contained()[1].get()));
    }
    return RtValue(RtDict(std::move(d)));
  }
  // numpy scalars and anything array-like
  py::object np = py::module_::import("numpy");
  if (py::isinstance(o, np.attr("generic"))) return fromPython(o.attr("item")(), what, expected);
  throw py::type_error(what + ": cannot pass a " + pyType(o) + " to llga");
}

py::object toPython(const RtValue& v) {
  return std::visit(
      [](const auto& x) -> py::object {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, RtNone>) return py::none();
        else if constexpr (std::is_same_v<T, Tensor>) return tensorToNumpy(x);
        else if constexpr (std::is_same_v<T, RtList>) {
          py::list out;
          for (const RtValue& i : *x) out.append(toPython(i));
          return py::object(std::move(out));
        } else if constexpr (std::is_same_v<T, RtTuplePtr>) {
          py::tuple out(x->items.size());
          for (size_t i = 0; i < x->items.size(); ++i) out[i] = toPython(x->items[i]);
          return py::object(std::move(out));
        } else if constexpr (std::is_same_v<T, RtDevice>) {
          return py::str(x.name);
        } else if constexpr (std::is_same_v<T, RtDict>) {
          py::dict out;
          for (const auto& [k, v] : *x) out[toPython(k)] = toPython(v);
          return py::object(std::move(out));
        } else {
          return py::cast(x);
        }
      },
      v.v);
}

[[noreturn]] void raiseUnsupported(const UnsupportedOps& e) {
  py::dict ops;
  for (const auto& [kind, lines] : e.ops) ops[py::str(kind)] = lines;
  py::object cls = py::module_::import("llga.errors").attr("UnsupportedOpError");
  py::object exc = cls(e.what(), ops);
  PyErr_SetObject(cls.ptr(), exc.ptr());
  throw py::error_already_set();
}

WeightMap weightsFromPython(py::dict weights) {
  WeightMap w;
  for (auto [k, v] : weights) {
    std::string name = py::str(k);
    w.emplace(name, tensorFromNumpy(py::array::ensure(v), "weight '" + name + "'"));
  }
  return w;
}

}  // namespace

void bindRuntime(py::module_& m) {
  py::class_<KernelReport>(m, "KernelReport",
                           "What a kernel did on its latest call: oneDNN's implementation (impl), the layouts its "
                           "primitive used (src, weights, dst), where its output went (output: 'kept' in dst's "
                           "layout, 'plain', or '' when not said) and any detail.")
      .def_readonly("impl", &KernelReport::impl)
      .def_readonly("src", &KernelReport::src)
      .def_readonly("weights", &KernelReport::weights)
      .def_readonly("dst", &KernelReport::dst)
      .def_readonly("output", &KernelReport::output)
      .def_readonly("detail", &KernelReport::detail)
      .def_property_readonly("layouts", &KernelReport::layoutText)
      .def("__str__", &KernelReport::text)
      .def("__repr__", [](const KernelReport& k) { return "KernelReport(" + k.text() + ")"; });
  py::class_<BatchSplitReport>(m, "BatchSplitReport",
                               "How calls with one batch size run: the chunk chosen (0 while measuring; items: "
                               "whole), how many run side by side (lanes), and the ns per item measured for each "
                               "chunk tried, one after another and side by side")
      .def_readonly("items", &BatchSplitReport::items)
      .def_readonly("chunk", &BatchSplitReport::chunk)
      .def_readonly("lanes", &BatchSplitReport::lanes)
      .def_readonly("ns_per_item", &BatchSplitReport::ns_per_item)
      .def_readonly("ns_per_item_side_by_side", &BatchSplitReport::ns_per_item_side_by_side)
      .def("__repr__", [](const BatchSplitReport& r) {
        auto list = [](const std::vector<std::pair<int64_t, double>>& v) {
          std::string s = "{";
          for (size_t i = 0; i < v.size(); ++i)
            s += (i ? ", " : "") + std::to_string(v[i].first) + ": " + std::to_string(static_cast<int64_t>(v[i].second));
          return s + "}";
        };
        return "BatchSplitReport(items=" + std::to_string(r.items) + ", chunk=" + std::to_string(r.chunk) +
               ", lanes=" + std::to_string(r.lanes) + ", ns_per_item=" + list(r.ns_per_item) +
               ", ns_per_item_side_by_side=" + list(r.ns_per_item_side_by_side) + ")";
      });
  py::class_<CompiledGraph, std::shared_ptr<CompiledGraph>>(m, "CompiledGraphImpl")
      .def(py::init([](std::shared_ptr<Graph> g, py::dict weights) {
             WeightMap w = weightsFromPython(weights);
             try {
               return std::make_shared<CompiledGraph>(std::move(g), std::move(w));
             } catch (const UnsupportedOps& e) {
               raiseUnsupported(e);
             } catch (const std::invalid_argument& e) {
               raise("CompileError", e.what());
             }
             return std::shared_ptr<CompiledGraph>();
           }),
           py::arg("graph"), py::arg("weights"))
      .def("run", [](const CompiledGraph& c, py::list args, bool observe) -> py::object {
        std::vector<RtValue> in;
        for (size_t i = 0; i < args.size(); ++i) {
          const InputSpec* spec = i < c.inputs().size() ? &c.inputs()[i] : nullptr;
          std::string what = "input " + std::to_string(i);
          if (spec) what += " ('" + spec->name + "')";
          try {
            if (py::isinstance<py::array>(args[i]))
              in.emplace_back(tensorFromNumpy(py::reinterpret_borrow<py::array>(args[i]), what, spec && spec->writer ? spec : nullptr));
            else
              in.push_back(fromPython(args[i], what, spec ? spec->type.get() : nullptr));
          } catch (const py::type_error& e) {  // a numpy dtype llga has no kernels for, an object it cannot take
            std::string expected;
            if (spec && spec->type->isTensor() && spec->type->tensorInfo().dtype)
              expected = "; expected dtype " + std::string(scalarTypeName(*spec->type->tensorInfo().dtype)) + " (numpy " +
                         std::string(py::str(static_cast<py::handle>(numpyDtype(*spec->type->tensorInfo().dtype)))) + ")";
            raise("InputError", std::string(e.what()) + expected);
          } catch (const std::invalid_argument& e) {
            raise("InputError", e.what());
          }
        }
        std::vector<RtValue> out;
        // observe: a plain copy of every tensor an executed op node gives, by
        // the node's first output's name (a fusion group's after its inner
        // ops', which may share it): what llga.accuracy_report compares
        std::vector<std::pair<std::string, Tensor>> seen;
        NodeObserver observer = [&seen](const Node& n, RtValue* const* outs, size_t count) {
          if (n.outputs().empty() || count == 0 || !outs[0] || !outs[0]->isTensor()) return;
          const Tensor& t = outs[0]->tensor();
          ExecContext ctx;
          Tensor copy = t.isBlocked() ? toPlain(ctx, t) : t.clone();
          if (copy.dtype() == ScalarType::BFloat16) copy = copy.to(ScalarType::Float);  // numpy has no bf16
          // an int8 partition's output handed on quantized: its real values
          if (std::optional<ActivationQuant> q = int8OutputOf(n);
              q && (copy.dtype() == ScalarType::Byte || copy.dtype() == ScalarType::Char)) {
            copy = copy.to(ScalarType::Float).contiguous();
            float* p = static_cast<float*>(copy.data());
            const float scale = static_cast<float>(q->scale), zero = static_cast<float>(q->zero_point);
            for (int64_t i = 0, e = copy.numel(); i < e; ++i) p[i] = (p[i] - zero) * scale;
          }
          seen.emplace_back(n.output(0)->debugName(), std::move(copy));
        };
        takeWarnings();  // none left from an earlier call that failed
        try {
          py::gil_scoped_release release;
          out = c.run(std::move(in), observe ? &observer : nullptr);
        } catch (const SpecializationMismatch& e) {
          raise("SpecializationMismatch", e.what());
        } catch (const OutOfMemory& e) {
          raise("OutOfMemoryError", e.what());
        } catch (const ExecutionError& e) {
          raise("ExecutionError", e.what());
        } catch (const std::invalid_argument& e) {
          raise("InputError", e.what());
        }
        // The model's warnings (aten::warn), through Python's warnings module as PyTorch issues them.
        for (const std::string& w : takeWarnings())
          if (PyErr_WarnEx(PyExc_UserWarning, w.c_str(), 1) != 0) throw py::error_already_set();  // warnings as errors
        py::list result;
        for (const RtValue& v : out) result.append(toPython(v));
        if (!observe) return result;
        py::dict values;
        for (const auto& [name, t] : seen) values[py::str(name)] = toPython(RtValue(t));
        return py::make_tuple(result, values);
      }, py::arg("args"), py::arg("observe") = false)
      .def_property_readonly("input_names", [](const CompiledGraph& c) {
        std::vector<std::string> names;
        for (const auto& s : c.inputs()) names.push_back(s.name);
        return names;
      })
      .def_property_readonly("weight_bytes", &CompiledGraph::weightBytes)
      .def_property_readonly("batch_split_proved", [](const CompiledGraph& c) { return c.batchSplit() != nullptr; })
      .def("batch_split_reports", [](const CompiledGraph& c) {
        return c.batchSplit() ? c.batchSplit()->report() : std::vector<BatchSplitReport>{};
      })
      .def("batch_split_refused", [](const CompiledGraph& c) {
        return c.batchSplit() ? c.batchSplit()->refused() : std::string();
      })
      .def("set_batch_split", [](const CompiledGraph& c, const std::string& mode, int64_t chunk) {
        if (!c.batchSplit()) return;
        if (mode == "auto") c.batchSplit()->setMode(BatchSplit::Mode::Auto);
        else if (mode == "off") c.batchSplit()->setMode(BatchSplit::Mode::Off);
        else if (mode == "fixed") c.batchSplit()->setMode(BatchSplit::Mode::Fixed, chunk);
        else throw std::invalid_argument("batch split mode must be 'auto', 'off' or 'fixed', got '" + mode + "'");
      }, py::arg("mode"), py::arg("chunk") = 0)
      .def("kernel_reports", [](const CompiledGraph& c) {
        py::dict d;  // first output's name -> what the kernel did on its latest call
        for (const auto& [node, k] : c.kernelReports())
          if (!k.empty() && !node->outputs().empty()) d[py::str(node->output(0)->debugName())] = k;
        return d;
      })
      .def("memory", [](const CompiledGraph& c) {
        MemoryReport r = c.memory();
        py::dict d;
        d["weights"] = r.weights;
        d["weight_cache"] = r.weight_cache;
        d["released"] = r.released;
        py::dict peaks;
        for (const auto& [sig, bytes] : r.peak_activations) peaks[py::str(sig)] = bytes;
        d["peak_activations"] = peaks;
        py::dict arenas;
        for (const auto& [sig, a] : r.arenas) {
          py::dict e;
          e["bytes"] = a.arena_bytes;
          e["blocks"] = a.blocks;
          e["heap_blocks"] = a.heap_blocks;
          e["recorded_calls"] = a.recorded_calls;
          e["planned_calls"] = a.planned_calls;
          e["deviations"] = a.deviations;
          e["failed_calls"] = a.failed_calls;
          e["in_use_blocks"] = a.in_use_blocks;
          e["disabled"] = a.disabled;
          arenas[py::str(sig)] = e;
        }
        d["arena"] = arenas;
        return d;
      });
  m.def(
      "compile",
      [](std::shared_ptr<Graph> g, const std::string& pipeline, py::dict weights, py::dict methods,
         py::object example_inputs, std::vector<std::string> route_off, const std::string& precision,
         std::map<std::string, std::string> precision_overrides, py::object quantization) {
        CompileOptions opts;
        opts.pipeline = pipeline;
        opts.context = python::passContextFromPython(weights, methods, example_inputs, route_off, precision,
                                                     precision_overrides, quantization);
        WeightMap w = weightsFromPython(weights);
        try {
          CompileResult r;
          {
            py::gil_scoped_release release;
            r = compile(std::move(g), std::move(w), opts);
          }
          return py::make_tuple(r.passes, r.compiled);
        } catch (const PassError& e) {
          python::raisePassError(e);
        } catch (const UnsupportedOps& e) {
          raiseUnsupported(e);
        } catch (const std::invalid_argument& e) {
          raise("CompileError", e.what());
        }
        return py::make_tuple();
      },
      py::arg("graph"), py::arg("pipeline"), py::arg("weights") = py::dict(), py::arg("methods") = py::dict(),
      py::arg("example_inputs") = py::none(), py::arg("route_off") = std::vector<std::string>(),
      py::arg("precision") = "fp32", py::arg("precision_overrides") = std::map<std::string, std::string>(),
      py::arg("quantization") = py::none(),
      "The driver (src/driver/compile.h): runs the pipeline on graph in place and builds its plan; returns "
      "(pass records, CompiledGraphImpl).");
  m.def("set_memory_planning", &ArenaPlanner::setEnabled, py::arg("on"));
  m.def("_fail_activation_allocation_after", &failActivationAllocationAfter, py::arg("n"),
        "tests only: after n more activation allocations the next one fails, once (n < 0 disarms); "
        "returns whether it was still armed");
  m.def("memory_planning", &ArenaPlanner::enabled);
  m.def("set_num_threads", &setNumThreads);
  m.def("get_num_threads", &getNumThreads);
  m.def(
      "conv_throughput",
      [](int64_t n, int64_t c, int64_t h, int64_t w, int64_t oc, int64_t k, const std::string& dtype, int runs) {
        ConvThroughput r;
        {
          py::gil_scoped_release release;
          r = convThroughput(n, c, h, w, oc, k, dtype, runs);
        }
        py::dict d;
        d["gflops"] = r.gflops;
        d["seconds"] = r.seconds;
        d["flops"] = r.flops;
        d["impl"] = r.impl;
        d["dtype"] = r.dtype;
        d["supported"] = r.supported;
        return d;
      },
      py::arg("n"), py::arg("c"), py::arg("h"), py::arg("w"), py::arg("oc"), py::arg("k"), py::arg("dtype") = "f32",
      py::arg("runs") = 20);
  m.def("dnnl_capabilities", [] {
    DnnlCapabilities c = dnnlCapabilities();
    py::dict d;
    d["isa"] = c.isa;
    d["winograd"] = c.winograd;
    d["llga_winograd"] = c.llga_winograd;
    d["llga_dw_int8"] = c.llga_dw_int8;
    d["llga_gemv"] = c.llga_gemv;
    d["llga_gemv_bf16"] = c.llga_gemv_bf16;
    d["llga_softmax"] = c.llga_softmax;
    d["im2col_conv"] = c.im2col_conv;
    d["int8_signed"] = c.int8_signed.empty() ? py::object(py::none()) : py::object(py::str(c.int8_signed));
    d["bf16"] = c.bf16;
    d["fast_swish"] = fastSwishEnabled();
    d["fast_gelu"] = fastGeluEnabled();
    d["llga_attention"] = attention::available();
    d["llga_recurrence"] = recurrent::available();
    const std::optional<attention::Bf16Path> bf16_attention = attention::bf16Path();
    d["llga_attention_bf16"] = bf16_attention ? py::object(py::str(attention::bf16PathName(*bf16_attention))) : py::none();
    return d;
  });
  auto events = [](const std::vector<ProfileEvent>& evs) {
    py::list out;
    for (const ProfileEvent& e : evs) {
      py::dict d;
      d["name"] = e.name;
      d["pattern"] = e.pattern;
      d["partition"] = e.partition;
      d["depth"] = e.depth;
      d["start_ns"] = e.start_ns;
      d["dur_ns"] = e.dur_ns;
      d["thread"] = e.thread;
      d["source"] = e.source;
      d["primitive"] = e.primitive;
      d["kernel"] = e.kernel;
      d["inputs"] = e.inputs;
      d["outputs"] = e.outputs;
      out.append(std::move(d));
    }
    return out;
  };
  m.def("profiler_enable", [](bool on) { Profiler::global().setEnabled(on); });
  m.def("profiler_enabled", [] { return Profiler::global().enabled(); });
  m.def("profiler_kernel_log", [](bool on) { Profiler::global().setKernelLog(on); });
  m.def("profiler_kernel_log_enabled", [] { return Profiler::global().kernelLog(); });
  m.def("profiler_verbose", [](int level) { Profiler::global().setVerbose(level); });
  m.def("profiler_events", [events] { return events(Profiler::global().events()); });
  m.def("profiler_kernel_events", [events] { return events(Profiler::global().kernelEvents()); });
  m.def("profiler_clear", [] { Profiler::global().clearEvents(); });
  m.def("profiler_clear_kernel_log", [] { Profiler::global().clearKernelLog(); });
  m.def("specialization_stats", [] {
    const PrimitiveCacheStats& st = primitiveCacheStats();
    py::dict d;
    d["built"] = st.built.load();
    d["evicted"] = st.evicted.load();
    d["hits"] = st.hits.load();
    d["max_per_kernel"] = kMaxSpecializations;
    return d;
  });
  // Every op kind llga runs: its kernels (with the arity their schema allows)
  // and the kinds the decompose pass rewrites into them.
  m.def("supported_ops", [] {
    py::list out;
    const OpRegistry& reg = OpRegistry::global();
    for (const std::string& k : reg.kinds()) {
      const OpDef* d = reg.find(Symbol::fromQualString(k));
      py::dict e;
      e["kind"] = k;
      e["via"] = "kernel";
      e["min_inputs"] = d->min_inputs;
      e["max_inputs"] = d->max_inputs;
      out.append(e);
    }
    for (const std::string& k : decomposedKinds()) {
      if (reg.find(Symbol::fromQualString(k))) continue;  // also a kernel (addmm): listed once
      py::dict e;
      e["kind"] = k;
      e["via"] = "decompose";
      e["min_inputs"] = py::none();
      e["max_inputs"] = py::none();
      out.append(e);
    }
    return out;
  });
}
