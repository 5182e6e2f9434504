// Bindings for the pass pipeline: records as plain dicts (llga/passes.py wraps them).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdio>

#include "backend/dnnl/fusion_group.h"
#include "backend/dnnl/quantize.h"
#include "fuser/patterns.h"
#include "runtime/evaluator.h"
#include "passes/assign_precision.h"
#include "passes/pass.h"
#include "python/bindings.h"
#include "python/numpy_interop.h"

namespace py = pybind11;
using namespace llga;


namespace llga::python {

std::shared_ptr<PassContext> passContextFromPython(py::dict weights, py::dict methods, py::object example_inputs,
                                                   const std::vector<std::string>& route_off, const std::string& precision,
                                                   const std::map<std::string, std::string>& precision_overrides,
                                                   py::object quantization) {
  auto ctx = std::make_shared<PassContext>();
  ctx->evaluator = runtimeEvaluator();
  for (auto [k, v] : weights) {
    std::string name = py::str(k);
    ctx->weights.emplace(name, constantFromNumpy(py::array::ensure(v), "weight '" + name + "'"));
  }
  for (auto [k, v] : methods) ctx->methods.emplace(py::str(k), v.cast<std::shared_ptr<Graph>>());
  ctx->route_off.insert(route_off.begin(), route_off.end());
  if (precision != "fp32" && precision != "bf16" && precision != "int8")
    throw py::value_error("precision must be 'fp32', 'bf16' or 'int8', not '" + precision + "'");
  ctx->bf16 = precision == "bf16";
  ctx->int8 = precision == "int8";
  if (ctx->int8) ctx->int8_shift_signed = int8::shiftSignedActivations();
  ctx->precision_overrides = precision_overrides;
  // llga.quantize's options: {"calibration": [[array, ...], ...], "method": str,
  // "percentile": float, "activations": "symmetric" | "asymmetric", "skip": [name, ...],
  // "only": [name, ...] or None}
  if (!quantization.is_none()) {
    py::dict q = quantization.cast<py::dict>();
    if (q.contains("method")) ctx->calibration_method = q["method"].cast<std::string>();
    if (q.contains("percentile")) ctx->percentile = q["percentile"].cast<double>();
    if (q.contains("mode")) {
      const std::string mode = q["mode"].cast<std::string>();
      if (mode != "static" && mode != "dynamic")
        throw py::value_error("quantization mode must be 'static' or 'dynamic', not '" + mode + "'");
      ctx->int8_dynamic = mode == "dynamic";
    }
    if (q.contains("activations")) {
      const std::string scheme = q["activations"].cast<std::string>();
      if (scheme != "symmetric" && scheme != "asymmetric")
        throw py::value_error("activations must be 'symmetric' or 'asymmetric', not '" + scheme + "'");
      ctx->int8_asymmetric = scheme == "asymmetric";
    }
    if (q.contains("skip"))
      for (py::handle name : q["skip"]) ctx->int8_skip.insert(name.cast<std::string>());
    if (q.contains("only") && !q["only"].is_none()) {
      std::set<std::string> only;
      for (py::handle name : q["only"]) only.insert(name.cast<std::string>());
      ctx->int8_only = std::move(only);
    }
    size_t k = 0;
    for (py::handle set : q.contains("calibration") ? py::iterable(q["calibration"]) : py::iterable(py::list())) {
      std::vector<TensorRef> inputs;
      size_t i = 0;
      for (py::handle x : set) {
        const std::string what = "calibration set " + std::to_string(k) + ", input " + std::to_string(i++);
        py::array arr = py::array::ensure(x);
        if (!arr) throw py::type_error(what + " is not an array");
        inputs.push_back(constantFromNumpy(arr, what));
      }
      ctx->calibration.push_back(std::move(inputs));
      ++k;
    }
  }
  if (!example_inputs.is_none()) {
    size_t i = 0;
    for (py::handle x : example_inputs) {
      py::array arr = py::array::ensure(x);
      if (!arr) throw py::type_error("example input " + std::to_string(i) + " is not an array");
      ctx->example_inputs.push_back(constantFromNumpy(arr, "example input " + std::to_string(i)));
      ++i;
    }
  }
  return ctx;
}

void raise(const char* cls_name, const std::string& msg) {
  py::object cls = py::module_::import("llga.errors").attr(cls_name);
  PyErr_SetObject(cls.ptr(), py::str(msg).ptr());
  throw py::error_already_set();
}

void raisePassError(const PassError& e) {
  py::list recs;
  for (const auto& r : e.records) recs.append(py::cast(r));
  py::object cls = py::module_::import("llga.errors").attr("PassError");
  py::object exc = cls(e.what(), recs);
  PyErr_SetObject(cls.ptr(), exc.ptr());
  throw py::error_already_set();
}

}  // namespace llga::python

void bindPasses(py::module_& m) {
  py::class_<GraphStats>(m, "GraphStats", "Node counts of a graph: all nodes, fusion groups, and by kind.")
      .def_readonly("nodes", &GraphStats::nodes)
      .def_readonly("fusion_groups", &GraphStats::fusion_groups)
      .def_readonly("kinds", &GraphStats::kinds)
      .def("__repr__", [](const GraphStats& s) {
        return "GraphStats(nodes=" + std::to_string(s.nodes) + ", fusion_groups=" + std::to_string(s.fusion_groups) + ")";
      });
  py::class_<Unfused>(m, "Unfused", "An op the fuse pass left outside partitions, and why.")
      .def_readonly("kind", &Unfused::kind)
      .def_readonly("source", &Unfused::source)
      .def_readonly("value", &Unfused::value)
      .def_readonly("reason", &Unfused::reason)
      .def("__repr__", [](const Unfused& u) {
        return "Unfused(" + u.kind + (u.source.empty() ? "" : " at " + u.source) +
               (u.value.empty() ? "" : " (%" + u.value + ")") + ": " + u.reason + ")";
      });
  py::class_<PassRecord>(m, "PassRecord",
                         "What one pass did: its name, whether it changed the graph, its time, the IR after it, "
                         "node statistics before and after, verifier findings, notes on what it left alone, the ops "
                         "it left outside partitions (unfused) and what it threw (error).")
      .def_readonly("name", &PassRecord::name)
      .def_readonly("changed", &PassRecord::changed)
      .def_readonly("seconds", &PassRecord::seconds)
      .def_property_readonly("ir", [](const PassRecord& r) { return python::lossyStr(r.ir); })
      .def_readonly("before", &PassRecord::before)
      .def_readonly("after", &PassRecord::after)
      .def_readonly("verify_errors", &PassRecord::verify_errors)
      .def_readonly("notes", &PassRecord::notes)
      .def_readonly("unfused", &PassRecord::unfused)
      .def_readonly("error", &PassRecord::error)
      .def("__str__", [](const PassRecord& r) {
        char ms[32];
        std::snprintf(ms, sizeof ms, "%.2f", r.seconds * 1e3);
        return r.name + ": " + (r.changed ? "changed" : "unchanged") + ", " + ms + " ms, " + std::to_string(r.before.nodes) +
               " -> " + std::to_string(r.after.nodes) + " nodes";
      })
      .def("__repr__", [](const PassRecord& r) {
        return "PassRecord(name='" + r.name + "', changed=" + (r.changed ? "True" : "False") + ")";
      });
  m.def("run_passes", [](std::shared_ptr<Graph> g, const std::string& pipeline, py::dict weights, py::dict methods,
                         py::object example_inputs, std::vector<std::string> route_off, const std::string& shapes,
                         const std::string& precision, std::map<std::string, std::string> precision_overrides,
                         py::object quantization) {
        PassManagerOptions opts;
        auto ctx = python::passContextFromPython(weights, methods, example_inputs, route_off, precision,
                                                 precision_overrides, quantization);
        if (shapes == "functions") ctx->shapes = ShapeSource::Functions;
        else if (shapes == "execute") ctx->shapes = ShapeSource::Execute;
        else if (shapes != "infer")
          throw py::value_error("shapes must be 'infer', 'functions' or 'execute', not '" + shapes + "'");
        opts.context = ctx;
        try {
          PassManager pm(pipeline, opts);
          py::gil_scoped_release release;
          return pm.run(*g);
        } catch (const PassError& e) {
          python::raisePassError(e);
        }
      },
      py::arg("graph"), py::arg("pipeline"), py::arg("weights") = py::dict(), py::arg("methods") = py::dict(),
      py::arg("example_inputs") = py::none(), py::arg("route_off") = std::vector<std::string>(),
      py::arg("shapes") = "infer", py::arg("precision") = "fp32",
      py::arg("precision_overrides") = std::map<std::string, std::string>(), py::arg("quantization") = py::none(),
      "Runs a pass pipeline on graph in place (weights bind module attributes, methods feed inline, "
      "example_inputs feed propagate-shapes, route_off keeps op kinds or patterns out of fusion, shapes "
      "says where propagate-shapes takes shapes from: 'infer', 'functions' or 'execute'; precision "
      "('fp32', 'bf16' or 'int8'), precision_overrides and quantization (llga.quantize's options: "
      "calibration, method, percentile, skip, only) feed assign-precision); returns the records.");
  m.def("precision_policy", [] {
    py::list out;
    for (const PrecisionRule& r : precisionPolicy()) {
      py::dict d;
      d["kind"] = r.kind;
      d["precision"] = std::string(precisionName(r.precision));
      d["bf16_kernel"] = r.bf16_kernel;
      d["int8_kernel"] = r.int8_kernel;
      d["why"] = r.why;
      out.append(d);
    }
    return out;
  }, "The precision policy (assign-precision's table): kind, precision under precision='bf16', "
     "bf16_kernel (whether an override may choose bf16), int8_kernel (whether llga.quantize runs it in int8), why.");
  m.def("fusion_patterns", [] {
    py::list out;
    for (const FusionPattern& p : fusionPatterns()) {
      py::dict d;
      d["name"] = p.name;
      d["tier"] = p.tier;
      d["anchors"] = p.anchors;
      d["max_post_ops"] = p.max_post_ops;
      d["lone_ok"] = p.lone_ok;
      d["then"] = p.then ? py::object(py::str(p.then)) : py::object(py::none());
      d["closing"] = p.closing;
      d["may_close"] = p.may_close ? py::object(py::str(p.may_close)) : py::object(py::none());
      d["fp32_only"] = p.fp32_only;
      const PatternKernel* k = PatternKernels::global().find(p.name);
      d["kernel"] = k ? k->description : std::string("(no kernel bound)");
      d["diagram"] = p.diagram;
      out.append(d);
    }
    return out;
  }, "The fusion pattern table, highest tier first.");
  m.def("list_passes", [] {
    std::vector<std::pair<std::string, std::string>> out;
    for (const PassInfo* p : PassRegistry::global().list()) out.emplace_back(p->name, p->description);
    return out;
  });
  m.def("default_pipeline", [] { return std::string(defaultPipeline()); });
}
