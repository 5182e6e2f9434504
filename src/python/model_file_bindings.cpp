// Bindings for model files (driver/model_file.h): llga.save / llga.load.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <system_error>

#include "driver/model_file.h"
#include "python/bindings.h"

namespace py = pybind11;
using namespace llga;

namespace {

// OSError(errno, reason, path): Python makes it FileNotFoundError,
// PermissionError, ... as the errno says.
[[noreturn]] void raiseOSError(const std::system_error& e, const std::string& path) {
  py::object exc = py::reinterpret_steal<py::object>(PyObject_CallFunction(
      PyExc_OSError, "iss", e.code().value(), e.code().message().c_str(), path.c_str()));
  if (!exc) throw py::error_already_set();
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  throw py::error_already_set();
}

}  // namespace

void bindModelFile(py::module_& m) {
  m.def(
      "save_model",
      [](std::shared_ptr<CompiledGraph> compiled, const std::string& path, const std::string& source_ir,
         std::vector<PassRecord> passes, const std::string& python) {
        ModelExtras extras{source_ir, std::move(passes), python};
        try {
          py::gil_scoped_release release;
          saveModel(path, *compiled, extras);
        } catch (const std::invalid_argument& e) {
          throw py::value_error(e.what());
        } catch (const std::system_error& e) {
          raiseOSError(e, path);
        }
      },
      py::arg("compiled"), py::arg("path"), py::arg("source_ir"), py::arg("passes"), py::arg("python"),
      "Writes a compiled graph's plan, weights and records to one .llga file (driver/model_file.h).");
  m.def(
      "load_model",
      [](const std::string& path, bool verify_weights, bool build) {
        LoadOptions opts;
        opts.verify_weights = verify_weights;
        opts.build = build;
        LoadedModel lm;
        try {
          py::gil_scoped_release release;
          lm = loadModel(path, opts);
        } catch (const FormatError& e) {
          python::raise("FormatError", e.what());
        } catch (const std::system_error& e) {
          raiseOSError(e, path);
        }
        py::dict info;
        info["format_version"] = lm.format_version;
        info["file_bytes"] = lm.file_bytes;
        info["weight_bytes"] = lm.weight_bytes;
        info["tensors"] = lm.tensors;
        info["packed"] = lm.packed;
        info["packed_used"] = lm.packed_used;
        info["meta"] = lm.meta;
        return py::make_tuple(lm.graph, lm.compiled ? py::cast(lm.compiled) : py::none(), lm.extras.passes,
                              lm.extras.source_ir, py::bytes(lm.extras.python), info);
      },
      py::arg("path"), py::arg("verify_weights") = false, py::arg("build") = true,
      "Reads a .llga file: (graph, CompiledGraphImpl or None, pass records, source IR, python manifest bytes, info).");
  m.def("cpu_fingerprint", &cpuFingerprint, "oneDNN's ISA here: what a model file records as cpu_isa.");
}
