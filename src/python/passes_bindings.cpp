// Bindings for the pass pipeline: records as plain dicts (llga/passes.py wraps them).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "fuser/patterns.h"
#include "passes/pass.h"
#include "python/numpy_interop.h"

namespace py = pybind11;
using namespace llga;

namespace {

py::dict statsDict(const GraphStats& s) {
  py::dict d;
  d["nodes"] = s.nodes;
  d["fusion_groups"] = s.fusion_groups;
  d["kinds"] = s.kinds;
  return d;
}

py::dict recordDict(const PassRecord& r) {
  py::dict d;
  d["name"] = r.name;
  d["changed"] = r.changed;
  d["seconds"] = r.seconds;
  d["ir"] = py::reinterpret_steal<py::str>(PyUnicode_DecodeUTF8(r.ir.data(), static_cast<py::ssize_t>(r.ir.size()), "replace"));
  d["before"] = statsDict(r.before);
  d["after"] = statsDict(r.after);
  d["verify_errors"] = r.verify_errors;
  d["notes"] = r.notes;
  d["error"] = r.error;
  return d;
}

}  // namespace

void bindPasses(py::module_& m) {
  m.def("run_passes", [](std::shared_ptr<Graph> g, const std::string& pipeline, py::dict weights, py::dict methods,
                         py::object example_inputs, std::vector<std::string> route_off) {
        std::vector<PassRecord> records;
        auto ctx = std::make_shared<PassContext>();
        for (auto [k, v] : weights) {
          std::string name = py::str(k);
          ctx->weights.emplace(name, python::constantFromNumpy(py::array::ensure(v), "weight '" + name + "'"));
        }
        for (auto [k, v] : methods) ctx->methods.emplace(py::str(k), v.cast<std::shared_ptr<Graph>>());
        ctx->route_off.insert(route_off.begin(), route_off.end());
        if (!example_inputs.is_none()) {
          size_t i = 0;
          for (py::handle x : example_inputs) {
            py::array arr = py::array::ensure(x);
            if (!arr) throw py::type_error("example input " + std::to_string(i) + " is not an array");
            ctx->example_inputs.push_back(python::constantFromNumpy(arr, "example input " + std::to_string(i)));
            ++i;
          }
        }
        try {
          PassManagerOptions opts;
          opts.context = ctx;
          PassManager pm(pipeline, opts);
          py::gil_scoped_release release;
          records = pm.run(*g);
        } catch (const PassError& e) {
          py::list recs;
          for (const auto& r : e.records) recs.append(recordDict(r));
          py::object cls = py::module_::import("llga.errors").attr("PassError");
          py::object exc = cls(e.what(), recs);
          PyErr_SetObject(cls.ptr(), exc.ptr());
          throw py::error_already_set();
        }
        py::list out;
        for (const auto& r : records) out.append(recordDict(r));
        return out;
      },
      py::arg("graph"), py::arg("pipeline"), py::arg("weights") = py::dict(), py::arg("methods") = py::dict(),
      py::arg("example_inputs") = py::none(), py::arg("route_off") = std::vector<std::string>(),
      "Runs a pass pipeline on graph in place (weights bind module attributes, methods feed inline, "
      "example_inputs feed propagate-shapes, route_off keeps op kinds or patterns out of fusion); "
      "returns the records.");
  m.def("fusion_patterns", [] {
    py::list out;
    for (const FusionPattern& p : fusionPatterns()) {
      py::dict d;
      d["name"] = p.name;
      d["tier"] = p.tier;
      d["anchors"] = p.anchors;
      d["max_post_ops"] = p.max_post_ops;
      d["lone_ok"] = p.lone_ok;
      d["kernel"] = p.kernel;
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
