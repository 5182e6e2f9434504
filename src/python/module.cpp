// llga._llga: the thin Python layer over the core. Nothing here is used by the
// core; handles to nodes and values keep their Graph alive.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>

#include "frontend/parser.h"
#include "ir/ir.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "python/numpy_interop.h"

namespace py = pybind11;
using namespace llga;

namespace {

using GraphPtr = std::shared_ptr<Graph>;

// Text that comes from parsed input (names, scopes, strings, error excerpts)
// may hold bytes that are not UTF-8: python::lossyStr decodes with replacement.
using llga::python::lossyStr;

struct PyValue {
  GraphPtr g;
  Value* v;
};
struct PyNode {
  GraphPtr g;
  Node* n;
};
struct PyBlock {
  GraphPtr g;
  Block* b;
};
struct PyTensorConstant {
  TensorRef t;
};
struct PyType {
  TypePtr t;
};
std::vector<PyType> wrapTypes(const std::vector<TypePtr>& ts) {
  std::vector<PyType> out;
  for (const auto& t : ts) out.push_back({t});
  return out;
}

std::vector<PyValue> wrapValues(const GraphPtr& g, const std::vector<Value*>& vs) {
  std::vector<PyValue> out;
  out.reserve(vs.size());
  for (Value* v : vs) out.push_back({g, v});
  return out;
}

std::vector<PyNode> blockNodes(const GraphPtr& g, const Block* b, bool recursive) {
  std::vector<PyNode> out;
  for (Node* n : b->nodes()) {
    out.push_back({g, n});
    if (recursive)
      for (Block* sub : n->blocks()) {
        auto inner = blockNodes(g, sub, true);
        out.insert(out.end(), inner.begin(), inner.end());
      }
  }
  return out;
}

std::string numpyDtype(ScalarType t) {
  switch (t) {
    case ScalarType::Float: return "float32";
    case ScalarType::Double: return "float64";
    case ScalarType::Half: return "float16";
    case ScalarType::Long: return "int64";
    case ScalarType::Int: return "int32";
    case ScalarType::Short: return "int16";
    case ScalarType::Char: return "int8";
    case ScalarType::Byte: return "uint8";
    case ScalarType::Bool: return "bool";
    case ScalarType::ComplexFloat: return "complex64";
    case ScalarType::ComplexDouble: return "complex128";
    default: return "";
  }
}

py::object tensorToNumpy(const TensorRef& t) {
  if (!t->hasData()) throw py::value_error("this tensor constant has no data bound (printed as <Tensor>)");
  std::string dt = numpyDtype(t->dtype);
  if (dt.empty()) throw py::type_error("dtype " + std::string(scalarTypeName(t->dtype)) + " has no numpy equivalent");
  py::dtype dtype(dt);
  std::vector<py::ssize_t> shape(t->sizes.begin(), t->sizes.end()), strides;
  for (int64_t s : t->strides) strides.push_back(s * static_cast<py::ssize_t>(dtype.itemsize()));
  // The capsule keeps the constant (and so its storage) alive as long as the array.
  auto* keep = new TensorRef(t);
  py::capsule owner(keep, [](void* p) { delete static_cast<TensorRef*>(p); });
  py::array arr(dtype, shape, strides, t->data, owner);
  py::detail::array_proxy(arr.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return arr;
}

py::object attrToPython(const GraphPtr& g, const AttrValue& a) {
  return std::visit(
      [&](const auto& x) -> py::object {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, TensorRef>) return py::cast(PyTensorConstant{x});
        else if constexpr (std::is_same_v<T, std::string>) return lossyStr(x);
        else if constexpr (std::is_same_v<T, std::monostate>) return py::none();
        else if constexpr (std::is_same_v<T, AttrList>) {
          py::list out;
          for (const auto& item : x) out.append(attrToPython(g, item));
          if (a.seq == AttrValue::Seq::Tuple) return py::tuple(out);
          if (a.seq == AttrValue::Seq::Dict) {
            py::dict d;
            for (size_t i = 0; i + 1 < x.size(); i += 2) d[out[i]] = out[i + 1];
            return d;
          }
          return out;
        } else {
          return py::cast(x);
        }
      },
      a.v);
}

const char* typeKindName(TypeKind k) {
  switch (k) {
    case TypeKind::Tensor: return "Tensor";
    case TypeKind::Simple: return "Simple";
    case TypeKind::List: return "List";
    case TypeKind::Optional: return "Optional";
    case TypeKind::Tuple: return "Tuple";
    case TypeKind::Dict: return "Dict";
    case TypeKind::Union: return "Union";
    case TypeKind::Future: return "Future";
    case TypeKind::RRef: return "RRef";
    case TypeKind::Class: return "Class";
  }
  return "?";
}

void translateParseError(const ParseError& e) {
  py::object cls = py::module_::import("llga.errors").attr("ParseError");
  py::object exc = cls(lossyStr(e.message), e.line, e.column, lossyStr(e.excerpt), lossyStr(e.what()));
  PyErr_SetObject(cls.ptr(), exc.ptr());
}

}  // namespace

void bindRuntime(py::module_& m);  // runtime_bindings.cpp
void bindPasses(py::module_& m);   // passes_bindings.cpp
void bindModelFile(py::module_& m);  // model_file_bindings.cpp

PYBIND11_MODULE(_llga, m) {
  m.doc() = "llga core bindings (use the llga package, not this module)";

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ParseError& e) {
      translateParseError(e);
    } catch (const VerifyError& e) {
      py::object cls = py::module_::import("llga.errors").attr("VerifyError");
      PyErr_SetObject(cls.ptr(), lossyStr(e.what()).ptr());
    }
  });

  py::class_<PyType>(m, "Type")
      .def("__str__", [](const PyType& pt) { const TypePtr& t = pt.t; return t->str(); })
      .def("__repr__", [](const PyType& pt) { const TypePtr& t = pt.t; return "<llga.Type " + t->str() + ">"; })
      .def("__eq__", [](const PyType& a, const PyType& b) { return a.t->equals(*b.t); })
      .def("__hash__", [](const PyType& pt) { const TypePtr& t = pt.t; return std::hash<std::string>()(t->str()); })
      .def_property_readonly("kind", [](const PyType& pt) { const TypePtr& t = pt.t; return typeKindName(t->kind()); })
      .def_property_readonly("is_tensor", [](const PyType& pt) { const TypePtr& t = pt.t; return t->isTensor(); })
      .def_property_readonly("name", [](const PyType& pt) -> py::object { const TypePtr& t = pt.t;
        if (t->kind() == TypeKind::Simple || t->kind() == TypeKind::Class) return py::str(t->name());
        return py::none();
      })
      .def_property_readonly("contained", [](const PyType& pt) { const TypePtr& t = pt.t; return wrapTypes(t->contained()); })
      .def_property_readonly("field_names", [](const PyType& pt) { return pt.t->fieldNames(); },
                             "a named tuple's item names (empty for other types)")
      .def_property_readonly("dtype", [](const PyType& pt) -> py::object { const TypePtr& t = pt.t;
        if (!t->isTensor() || !t->tensorInfo().dtype) return py::none();
        return py::str(std::string(scalarTypeName(*t->tensorInfo().dtype)));
      })
      .def_property_readonly("sizes", [](const PyType& pt) -> py::object { const TypePtr& t = pt.t;
        if (!t->isTensor() || !t->tensorInfo().sizes) return py::none();
        return py::cast(*t->tensorInfo().sizes);
      })
      .def_property_readonly("strides", [](const PyType& pt) -> py::object { const TypePtr& t = pt.t;
        if (!t->isTensor() || !t->tensorInfo().strides) return py::none();
        return py::cast(*t->tensorInfo().strides);
      })
      .def_property_readonly("requires_grad", [](const PyType& pt) -> py::object { const TypePtr& t = pt.t;
        if (!t->isTensor() || !t->tensorInfo().requires_grad) return py::none();
        return py::cast(*t->tensorInfo().requires_grad);
      })
      .def_property_readonly("device", [](const PyType& pt) -> py::object { const TypePtr& t = pt.t;
        if (!t->isTensor() || !t->tensorInfo().device) return py::none();
        return py::cast(*t->tensorInfo().device);
      });

  py::class_<PyTensorConstant>(m, "TensorConstant")
      .def_property_readonly("dtype", [](const PyTensorConstant& c) { return std::string(scalarTypeName(c.t->dtype)); })
      .def_property_readonly("shape", [](const PyTensorConstant& c) { return py::tuple(py::cast(c.t->sizes)); })
      .def_property_readonly("bound", [](const PyTensorConstant& c) { return c.t->hasData(); })
      .def_property_readonly("approximate", [](const PyTensorConstant& c) { return c.t->approximate; })
      .def("numpy", [](const PyTensorConstant& c) { return tensorToNumpy(c.t); })
      .def("__repr__", [](const PyTensorConstant& c) {
        std::string shape;
        for (size_t i = 0; i < c.t->sizes.size(); ++i) shape += (i ? ", " : "") + std::to_string(c.t->sizes[i]);
        return "<llga.TensorConstant " + std::string(scalarTypeName(c.t->dtype)) + "(" + shape + ")" +
               (c.t->hasData() ? (c.t->approximate ? ", printed values" : "") : ", unbound") + ">";
      });

  py::class_<PyValue>(m, "Value")
      .def_property_readonly("name", [](const PyValue& v) { return lossyStr(v.v->debugName()); })
      .def_property_readonly("type", [](const PyValue& v) { return PyType{v.v->type()}; })
      .def_property_readonly("node", [](const PyValue& v) { return PyNode{v.g, v.v->node()}; })
      .def_property_readonly("offset", [](const PyValue& v) { return v.v->offset(); })
      .def_property_readonly("uses", [](const PyValue& v) {
        std::vector<std::pair<PyNode, size_t>> out;
        for (const Use& u : v.v->uses()) out.emplace_back(PyNode{v.g, u.user}, u.offset);
        return out;
      })
      .def("__eq__", [](const PyValue& a, const PyValue& b) { return a.v == b.v; })
      .def("__hash__", [](const PyValue& v) { return std::hash<const void*>()(v.v); })
      .def("__repr__", [](const PyValue& v) { return lossyStr("<llga.Value %" + v.v->debugName() + " : " + v.v->type()->str() + ">"); });

  py::class_<PyBlock>(m, "Block")
      .def_property_readonly("inputs", [](const PyBlock& b) { return wrapValues(b.g, b.b->inputs()); })
      .def_property_readonly("outputs", [](const PyBlock& b) { return wrapValues(b.g, b.b->outputs()); })
      .def("nodes", [](const PyBlock& b, bool recursive) { return blockNodes(b.g, b.b, recursive); },
           py::arg("recursive") = false)
      .def("__repr__", [](const PyBlock& b) { return "<llga.Block of " + b.b->owningNode()->kind().toQualString() + ">"; });

  py::class_<PyNode>(m, "Node")
      .def_property_readonly("kind", [](const PyNode& n) { return n.n->kind().toQualString(); })
      .def_property_readonly("inputs", [](const PyNode& n) { return wrapValues(n.g, n.n->inputs()); })
      .def_property_readonly("outputs", [](const PyNode& n) { return wrapValues(n.g, n.n->outputs()); })
      .def_property_readonly("blocks", [](const PyNode& n) {
        std::vector<PyBlock> out;
        for (Block* b : n.n->blocks()) out.push_back({n.g, b});
        return out;
      })
      .def_property_readonly("attributes", [](const PyNode& n) {
        py::dict d;
        for (const auto& [k, v] : n.n->attributes()) d[py::str(std::string(k.name()))] = attrToPython(n.g, v);
        return d;
      })
      .def_property_readonly("scope", [](const PyNode& n) { return lossyStr(n.n->scope()); })
      .def_property_readonly("source", [](const PyNode& n) { return lossyStr(n.n->source()); })
      .def_property_readonly("subgraph", [](const PyNode& n) -> py::object {
        if (auto sg = n.n->subgraph()) return py::cast(sg);
        return py::none();
      })
      .def("__str__", [](const PyNode& n) { return lossyStr(n.n->str()); })
      .def("__repr__", [](const PyNode& n) { return lossyStr("<llga.Node " + n.n->str() + ">"); })
      .def("__eq__", [](const PyNode& a, const PyNode& b) { return a.n == b.n; })
      .def("__hash__", [](const PyNode& n) { return std::hash<const void*>()(n.n); });

  py::class_<Graph, GraphPtr>(m, "Graph")
      .def("__str__", [](const Graph& g) { return lossyStr(g.toString()); })
      .def("__repr__", [](const Graph& g) {
        size_t n = 0;
        g.forEachNode([&](Node*) { ++n; });
        std::string ins;
        for (size_t i = 0; i < g.inputs().size() && i < 4; ++i)
          ins += (i ? ", %" : "%") + g.inputs()[i]->debugName() + " : " + g.inputs()[i]->type()->str();
        if (g.inputs().size() > 4) ins += ", ...";
        return lossyStr("<llga.Graph (" + ins + ") -> " + std::to_string(g.outputs().size()) + " output(s), " +
                        std::to_string(n) + " nodes>");
      })
      .def_property_readonly("inputs", [](const GraphPtr& g) { return wrapValues(g, g->inputs()); })
      .def_property_readonly("outputs", [](const GraphPtr& g) { return wrapValues(g, g->outputs()); })
      .def("nodes", [](const GraphPtr& g, bool recursive) { return blockNodes(g, g->block(), recursive); },
           py::arg("recursive") = false, "Nodes of the top block; recursive=True descends into blocks.")
      .def("__iter__", [](const GraphPtr& g) { return py::iter(py::cast(blockNodes(g, g->block(), false))); })
      .def("find_value", [](const GraphPtr& g, const std::string& name) -> py::object {
        std::string_view n = name;
        if (!n.empty() && n[0] == '%') n.remove_prefix(1);
        if (Value* v = g->findValue(n)) return py::cast(PyValue{g, v});
        return py::none();
      })
      .def("verify", [](const Graph& g) {
        py::list out;
        for (const auto& e : verify(g)) out.append(lossyStr(e));
        return out;
      }, "List of invariant violations (empty: valid).")
      .def("copy", [](const Graph& g) { return g.copy(); })
      .def("node_counts", [](const Graph& g) {
        std::map<std::string, size_t> counts;
        g.forEachNode([&](Node* n) { ++counts[n->kind().toQualString()]; });
        return counts;
      }, "{kind: count} over all blocks, sorted by kind.");

  m.def("parse", [](const std::string& text, const std::string& filename) {
        ParseOptions opts;
        opts.filename = filename;
        py::gil_scoped_release release;
        return parseGraph(text, opts);
      }, py::arg("text"), py::arg("filename") = "<string>");
  m.def("parse_type", [](const std::string& text) { return PyType{parseType(text)}; });
  m.def("format_double", &formatDouble);
  bindRuntime(m);
  bindPasses(m);
  bindModelFile(m);
}
