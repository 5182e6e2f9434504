// What the binding files share: building a PassContext from Python objects
// and raising llga's exceptions.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <vector>

#include "passes/pass.h"

namespace llga::python {

namespace py = pybind11;

// weights {name: array} (numpy views, no copy), methods {"<class>.<method>":
// Graph}, example inputs (arrays or None), op kinds and patterns kept out of fusion.
std::shared_ptr<PassContext> passContextFromPython(py::dict weights, py::dict methods, py::object example_inputs,
                                                   const std::vector<std::string>& route_off,
                                                   const std::string& precision = "fp32",
                                                   const std::map<std::string, std::string>& precision_overrides = {},
                                                   py::object quantization = py::none());
// llga.errors.<cls_name>(msg) raised as the current Python exception.
[[noreturn]] void raise(const char* cls_name, const std::string& msg);
// llga.PassError carrying the records up to the failed pass.
[[noreturn]] void raisePassError(const PassError& e);

}  // namespace llga::python
