// propagate-shapes: every tensor value gets the dtype, sizes and strides it
// has for the graph's example inputs (the context's, else the graph inputs'
// complete types). Shapes come from the per-op shape functions
// (shape_functions.h), applied in program order from the inputs, weights and
// constants, with the integer values traced graphs compute sizes with
// (aten::size, prim::NumToTensor, aten::Int). Where no function can say (an
// op without one, control flow, a case it does not model), the context's
// evaluator runs the graph once and what the kernels produce fills the rest;
// where both answer and differ, execution wins and the pass notes the
// function's mistake. A value that takes several shapes (inside a loop)
// keeps only what they agree on; values of branches not taken keep their
// types. PassContext::shapes picks functions only or execution only instead.
//
//   Given:  %y : Tensor = aten::relu(%x)    (%x : Float(1, 8, 4, 4))
//   Result: %y : Float(1, 8, 4, 4, strides=[128, 16, 4, 1], requires_grad=0, device=cpu) = aten::relu(%x)
#include <functional>
#include <string>
#include <unordered_map>

#include "passes/pass.h"
#include "passes/pass_utils.h"
#include "passes/shape_functions.h"

namespace llga {
namespace {

TensorInfo infoOfConstant(const ConstantTensor& t) {
  std::vector<int64_t> strides = t.strides;
  if (strides.size() != t.sizes.size()) return contiguousInfo(t.dtype, t.sizes);
  return stridedInfo(t.dtype, t.sizes, strides);
}

// What a constant's value is, as shape functions read it.
Known knownConstant(const Node& n) {
  Known k;
  const AttrValue* a = n.attributes().find(attr::value);
  if (!a) {
    k.none = n.output()->type()->isSimple("NoneType");
    return k;
  }
  if (a->is<int64_t>()) k.i = a->get<int64_t>();
  else if (a->is<bool>()) k.i = a->get<bool>() ? 1 : 0;
  else if (a->is<double>()) k.f = a->get<double>();
  else if (a->is<TensorRef>() && a->get<TensorRef>()) {
    const ConstantTensor& t = *a->get<TensorRef>();
    k.tensor = infoOfConstant(t);
    const bool integral = t.dtype == ScalarType::Long || t.dtype == ScalarType::Int || t.dtype == ScalarType::Bool;
    if (t.sizes.empty() && t.hasData() && integral && !t.approximate)
      k.i = static_cast<int64_t>(t.scalarAsDouble(0));  // a size traced as a 0-dim tensor
  }
  else if (a->is<AttrList>()) {
    k.items.emplace();
    for (const AttrValue& item : a->get<AttrList>()) {
      Known e;
      if (item.is<int64_t>()) e.i = item.get<int64_t>();
      else if (item.is<bool>()) e.i = item.get<bool>() ? 1 : 0;
      else if (item.is<double>()) e.f = item.get<double>();
      k.items->push_back(e);
    }
  }
  return k;
}

class PropagateShapes final : public Pass {
 public:
  std::string_view name() const override { return "propagate-shapes"; }
  std::string_view description() const override {
    return "dtypes and shapes from the example inputs, on every value (shape functions, else execution)";
  }

  bool run(Graph& g) override {
    if (context().example_inputs.empty() && allComplete(g)) {
      note("every tensor value already has a complete type: nothing to run");
      return false;
    }
    const ShapeSource source = context().shapes;
    std::unordered_map<const Value*, TensorInfo> inferred;
    size_t unknown = 0;
    std::string first_unknown;
    if (source != ShapeSource::Execute) {
      if (!infer(g, inferred, unknown, first_unknown)) return false;
    } else {
      unknown = 1;
    }

    std::unordered_map<const Value*, TensorInfo> observed;
    if (unknown > 0 && source != ShapeSource::Functions) {
      if (!evaluator()) {
        note("no evaluator in the pass context: " + std::to_string(unknown) +
             " tensor values the shape functions cannot type keep their types");
      } else {
        try {
          observed = evaluator()->observeTensors(g, context());
        } catch (const std::exception& e) {
          note(std::string(e.what()) + "; shapes left to the shape functions");
        }
      }
    }

    bool changed = false;
    size_t from_functions = 0, from_execution = 0;
    auto apply = [&](const Value* v, const TensorInfo& info) {
      const Type& t = *v->type();
      if (!t.isTensor()) return;  // Optional[Tensor] and the like keep their declarations
      if (t.tensorInfo() == info) return;
      const_cast<Value*>(v)->setType(Type::tensor(info));
      changed = true;
    };
    for (const auto& [v, info] : inferred) {
      auto o = observed.find(v);
      if (o != observed.end() && !(o->second == info)) {
        note("the shape function of " + where(*v->node()) + " said " + Type::tensor(info)->str() +
             ", execution gave " + Type::tensor(o->second)->str());
        continue;  // execution's answer is applied below
      }
      apply(v, info);
      ++from_functions;
    }
    for (const auto& [v, info] : observed) {
      if (inferred.count(v) && inferred.at(v) == info) continue;
      apply(v, info);
      ++from_execution;
    }
    if (source == ShapeSource::Infer && from_execution > 0)
      note(std::to_string(from_functions) + " tensor values typed by shape functions, " +
           std::to_string(from_execution) + " by running the graph (the first the functions could not type: " +
           first_unknown + ")");
    return changed;
  }

 private:
  // Applies the shape functions to the top-level block in program order.
  // Counts the tensor values left unknown (in nested blocks too); false when
  // the inputs' shapes are not known.
  bool infer(const Graph& g, std::unordered_map<const Value*, TensorInfo>& out, size_t& unknown,
             std::string& first_unknown) {
    std::unordered_map<const Value*, Known> known;
    std::unordered_map<const Value*, std::string> module_paths;
    const auto& examples = context().example_inputs;
    size_t next_example = 0;
    for (const Value* in : g.inputs()) {
      if (in->type()->kind() == TypeKind::Class) {
        module_paths[in] = "";
        continue;
      }
      if (!examples.empty()) {
        if (next_example >= examples.size()) {
          note("more graph inputs than example inputs: shapes left as they were");
          return false;
        }
        known[in] = Known::ofTensor(infoOfConstant(*examples[next_example++]));
        continue;
      }
      if (!in->type()->isTensor()) continue;
      const TensorInfo& t = in->type()->tensorInfo();
      auto sizes = t.concreteSizes();
      if (!t.dtype || !sizes) {
        note("no example inputs, and %" + in->debugName() + " has no complete tensor type: shapes left as they were");
        return false;
      }
      known[in] = Known::ofTensor(t.strides && t.strides->size() == sizes->size()
                                      ? stridedInfo(*t.dtype, *sizes, *t.strides)
                                      : contiguousInfo(*t.dtype, *sizes));
    }
    if (!examples.empty() && next_example != examples.size()) {
      note("fewer graph inputs than example inputs: shapes left as they were");
      return false;
    }

    static const Known nothing;
    auto countUnknown = [&](const Node* n) {
      for (const Value* o : n->outputs())
        if (o->type()->isTensor()) {
          ++unknown;
          if (first_unknown.empty()) first_unknown = where(*n);
        }
    };
    for (const Node* n : g.block()->nodes()) {
      if (n->kind() == prim::Constant) {
        const Known& k = known[n->output()] = knownConstant(*n);
        // A tensor constant bound to its value (a frozen module's, not a
        // literal read back from text) is typed by it: freeze prints the
        // scale of q @ k^T / sqrt(d) as `Tensor`, and the fuser takes no
        // operand of unknown dtype into a chain.
        const AttrValue* a = n->attributes().find(attr::value);
        if (k.tensor && a && a->is<TensorRef>() && a->get<TensorRef>()->hasData() && !a->get<TensorRef>()->approximate)
          out[n->output()] = *k.tensor;
        continue;
      }
      if (n->kind() == prim::GetAttr) {
        getAttr(*n, known, module_paths);
        continue;
      }
      if (!n->blocks().empty()) {
        countUnknown(n);
        std::function<void(const Block*)> walk = [&](const Block* b) {
          for (const Node* inner : b->nodes()) {
            countUnknown(inner);
            for (const Block* sub : inner->blocks()) walk(sub);
          }
        };
        for (const Block* sub : n->blocks()) walk(sub);
        continue;
      }
      const ShapeFn* fn = findShapeFn(n->kind());
      std::optional<std::vector<Known>> result;
      if (fn) {
        std::vector<const Known*> args;
        for (const Value* v : n->inputs()) {
          auto it = known.find(v);
          args.push_back(it == known.end() ? &nothing : &it->second);
        }
        result = (*fn)(ShapeArgs(*n, std::move(args)));
        if (result && result->size() != n->outputs().size()) result.reset();
      }
      for (size_t i = 0; i < n->outputs().size(); ++i) {
        const Value* o = n->output(i);
        if (result) {
          known[o] = (*result)[i];
          if ((*result)[i].tensor) {
            out[o] = *(*result)[i].tensor;
            continue;
          }
        }
        if (o->type()->isTensor()) {
          ++unknown;
          if (first_unknown.empty()) first_unknown = where(*n);
        }
      }
    }
    return true;
  }

  void getAttr(const Node& n, std::unordered_map<const Value*, Known>& known,
               std::unordered_map<const Value*, std::string>& module_paths) {
    auto it = module_paths.find(n.input(0));
    if (it == module_paths.end()) return;
    const std::string& attr_name = n.attr(attr::name).get<std::string>();
    std::string path = it->second.empty() ? attr_name : it->second + "." + attr_name;
    if (n.output()->type()->kind() == TypeKind::Class) {
      module_paths[n.output()] = path;
      return;
    }
    auto w = context().weights.find(path);
    if (w != context().weights.end() && w->second) known[n.output()] = Known::ofTensor(infoOfConstant(*w->second));
  }

  static bool allComplete(const Graph& g) {
    bool all = true;
    g.forEachNode([&](Node* n) {
      for (const Value* o : n->outputs())
        if (o->type()->isTensor() && (!o->type()->tensorInfo().dtype || !o->type()->tensorInfo().concreteSizes())) all = false;
    });
    return all;
  }
};

}  // namespace

LLGA_REGISTER_PASS(PropagateShapes);

}  // namespace llga
