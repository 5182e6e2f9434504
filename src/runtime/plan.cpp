// The plan builder: a graph to a register machine's instruction list (each
// node's kernel from the op registry, registers and their last readers,
// bound constants, which values may stay blocked or strided between kernels).
// Running it: interpreter.cpp; the weights it holds and their compaction:
// weight_compaction.cpp; the registry: op_registry.cpp.
#include "runtime/plan.h"

#include <algorithm>
#include <array>
#include <mutex>
#include <unordered_set>

#include "ir/effects.h"
#include "ir/out_layouts.h"
#include "runtime/constant_eval.h"
#include "runtime/exec_context.h"
#include "runtime/profiler.h"
#include "runtime/threads.h"

namespace llga {

std::string describeNode(const Node& n) {
  std::string s = n.kind().toQualString();
  if (auto sub = n.subgraph()) {  // a fusion group: name the ops inside
    std::string ops;
    for (const Node* inner : sub->nodes())
      if (inner->kind() != prim::Constant) ops += (ops.empty() ? "" : " -> ") + inner->kind().toQualString();
    s += " [" + ops + "]";
  }
  if (!n.source().empty()) s += " at " + n.source();
  if (!n.outputs().empty()) s += " (%" + n.output(0)->debugName() + ")";
  return s;
}

// ---------------------------------------------------------------- building

Tensor tensorFromConstant(const ConstantTensor& c) {
  auto st = Storage::borrow(c.data, static_cast<size_t>(c.numel()) * scalarTypeSize(c.dtype), c.owner);
  return Tensor::fromStorage(st, c.dtype, c.sizes, c.strides, 0);
}

namespace {

struct MissingListData {};  // a list constant's tensor printed without its data ("[<Tensors>]")

// Constant lists of tensors ("[<Tensor>, ...]"); other constants go through constantValue().
RtValue tensorListFromAttr(const AttrList& items) {
  std::vector<RtValue> out;
  for (const AttrValue& a : items) {
    if (!a.is<TensorRef>()) throw std::invalid_argument("unsupported list constant element");
    if (!a.get<TensorRef>()->hasData()) throw MissingListData{};
    out.emplace_back(tensorFromConstant(*a.get<TensorRef>()));
  }
  return makeList(std::move(out));
}

}  // namespace

class PlanBuilder {
 public:
  friend class Plan;
  PlanBuilder(Plan& p, const WeightMap& w) : p_(p), weights_(w) {}

  void build(const Graph& g) {
    // A class-typed first input is the module ("self"): only GetAttr may read it.
    for (const Value* in : g.inputs()) {
      if (in->type()->kind() == TypeKind::Class) {
        module_paths_[in] = "";
      } else {
        p_.main_.inputs.push_back(reg(in));
      }
    }
    buildBlock(g.block(), p_.main_);
    for (const Value* v : g.outputs()) {
      if (module_paths_.count(v)) errors_.push_back("the graph returns a module object (%" + v->debugName() + ")");
      p_.main_.outputs.push_back(reg(v));
    }
    keepShapeOnly();
    if (!unsupported_.empty()) {
      std::string msg = "llga cannot run " + std::to_string(unsupported_.size()) + " op kind(s):";
      for (const auto& [kind, lines] : unsupported_) {
        msg += "\n  " + kind + " (" + std::to_string(lines.size()) + "x), first at " + lines.front();
      }
      throw UnsupportedOps(msg, unsupported_);
    }
    if (!errors_.empty()) {
      std::string msg = errors_.front();
      for (size_t i = 1; i < errors_.size() && i < 10; ++i) msg += "\n" + errors_[i];
      if (errors_.size() > 10) msg += "\n... and " + std::to_string(errors_.size() - 10) + " more";
      throw std::invalid_argument(msg);
    }
    p_.num_regs_ = next_reg_;
  }

 private:
  int reg(const Value* v) {
    auto [it, inserted] = regs_.try_emplace(v, next_reg_);
    if (inserted) ++next_reg_;
    return it->second;
  }

  void constant(const Value* v, RtValue value, std::string weight_name = {}) {
    p_.constants_.emplace_back(reg(v), std::move(value));
    p_.constant_origins_.push_back({v, std::move(weight_name)});
    constant_regs_.insert(reg(v));
  }

  // The op's source line; for ops PyTorch recorded without one (TorchScript's
  // bookkeeping: prim::device, prim::dtype, ...), the line of the nearest op
  // that reads its result, or of the next (else previous, else enclosing) op
  // with a line, with the value named; never a bare value name.
  std::string where(const Node& n) {
    if (!n.source().empty()) return n.source();
    const std::string value = n.outputs().empty() ? std::string() : " (%" + n.output(0)->debugName() + ")";
    std::vector<const Node*> frontier;
    for (const Value* o : n.outputs())
      for (const Use& u : o->uses()) frontier.push_back(u.user);
    for (int depth = 0; depth < 4 && !frontier.empty(); ++depth) {
      std::vector<const Node*> next;
      for (const Node* u : frontier) {
        if (!u->source().empty()) return u->source() + " (%" + n.output(0)->debugName() + ", read there)";
        for (const Value* o : u->outputs())
          for (const Use& uu : o->uses()) next.push_back(uu.user);
      }
      frontier = std::move(next);
    }
    for (const Node* m = n.next(); m && m->kind() != prim::Return; m = m->next())
      if (!m->source().empty()) return "the op before " + m->source() + value;
    for (const Node* m = n.prev(); m && m->kind() != prim::Param; m = m->prev())
      if (!m->source().empty()) return "the op after " + m->source() + value;
    for (const Node* owner = n.owningBlock() ? n.owningBlock()->owningNode() : nullptr; owner;
         owner = owner->owningBlock() ? owner->owningBlock()->owningNode() : nullptr)
      if (!owner->source().empty()) return "inside the block of " + owner->source() + value;
    // Nothing in the graph has a line: the node itself, as printed, is the best pointer there is.
    std::string text = n.str();
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    return "`" + text + "` (no source line in the graph)";
  }

  void bindConstant(const Node& n) {
    const Value* out = n.output();
    const AttrValue* a = n.attributes().find(attr::value);
    if (a && a->is<TensorRef>()) {
      const ConstantTensor& c = *a->get<TensorRef>();
      if (auto it = weights_.find(out->debugName()); it != weights_.end()) return constant(out, it->second, it->first);
      if (!c.hasData()) {
        errors_.push_back("missing weight for the tensor constant %" + out->debugName() +
                          " (pass it in params, or optimize the TorchScript object itself)");
        return;
      }
      if (c.approximate) {
        errors_.push_back("tensor constant %" + out->debugName() +
                          " has only the ~4 significant digits PyTorch printed; pass its value in params");
        return;
      }
      return constant(out, tensorFromConstant(c));
    }
    if (auto v = constantValue(n)) return constant(out, std::move(*v));
    if (!a && out->type()->isSimple("Function")) return;  // a function reference: only prim::CallFunction reads it
    try {
      if (a && a->is<AttrList>()) return constant(out, tensorListFromAttr(a->get<AttrList>()));
    } catch (const std::invalid_argument&) {
    } catch (const MissingListData&) {
      errors_.push_back("missing weights for the tensor list constant %" + out->debugName() +
                        " (PyTorch prints such lists as [<Tensors>], without data: optimize the TorchScript object "
                        "itself, whose importer expands them)");
      return;
    }
    errors_.push_back("unsupported constant " + n.str());
  }

  void bindGetAttr(const Node& n) {
    const Value* src = n.input(0);
    auto it = module_paths_.find(src);
    if (it == module_paths_.end()) {
      errors_.push_back("prim::GetAttr on a value that is not the module, at " + where(n));
      return;
    }
    const std::string& name = n.attr(attr::name).get<std::string>();
    std::string path = it->second.empty() ? name : it->second + "." + name;
    if (n.output()->type()->kind() == TypeKind::Class) {
      module_paths_[n.output()] = path;
      return;
    }
    auto w = weights_.find(path);
    if (w == weights_.end()) {
      errors_.push_back("missing weight '" + path + "' (read by prim::GetAttr at " + where(n) + ")");
      return;
    }
    constant(n.output(), w->second, path);
  }

  void buildBlock(const llga::Block* b, Plan::Block& out) {
    for (const Node* n : b->nodes()) {
      const Symbol k = n->kind();
      if (k == prim::Constant) {
        bindConstant(*n);
        continue;
      }
      if (k == prim::GetAttr) {
        bindGetAttr(*n);
        continue;
      }
      for (const Value* in : n->inputs())
        if (module_paths_.count(in)) errors_.push_back("a module object is used by " + describeNode(*n));
      Plan::Instr ins;
      ins.node = n;
      for (const Value* in : n->inputs()) ins.in.push_back(reg(in));
      for (const Value* o : n->outputs()) ins.out.push_back(reg(o));
      if (k == prim::If || k == prim::Loop) {
        ins.kind = k == prim::If ? Plan::Instr::Kind::If : Plan::Instr::Kind::Loop;
        for (const llga::Block* sub : n->blocks()) {
          auto pb = std::make_unique<Plan::Block>();
          for (const Value* v : sub->inputs()) pb->inputs.push_back(reg(v));
          buildBlock(sub, *pb);
          for (const Value* v : sub->outputs()) pb->outputs.push_back(reg(v));
          ins.blocks.push_back(std::move(pb));
        }
      } else if (const OpDef* def = OpRegistry::global().find(k)) {
        if (auto sub = n->subgraph()) {
          ins.partition = partitions_++;
          if (const AttrValue* a = n->attributes().find(Symbol::fromQualString("attr::pattern")); a && a->is<std::string>())
            ins.pattern = a->get<std::string>();
        }
        size_t n_in = n->inputs().size();
        if (n_in < def->min_inputs || n_in > def->max_inputs) {
          errors_.push_back(k.toQualString() + " takes " + std::to_string(def->min_inputs) +
                            (def->max_inputs != def->min_inputs ? "-" + std::to_string(def->max_inputs) : "") +
                            " inputs, got " + std::to_string(n_in) + " at " + where(*n));
          continue;
        }
        try {
          ins.kernel = def->make(*n);
        } catch (const std::exception& e) {
          errors_.push_back(describeNode(*n) + ": " + e.what());
          continue;
        }
        if (def->scalar && n_in == def->scalar_arity && n->outputs().size() == 1 && numbersOnly(*n))
          ins.scalar = def->scalar;
        applyLayouts(*n, *ins.kernel);
        if (!isAliasing(*n))
          for (size_t p = 0; p < n_in && p < 64; ++p)
            if (!writesInput(*n, p)) ins.may_copy |= uint64_t{1} << p;
      } else {
        unsupported_[k.toQualString()].push_back(where(*n));
        continue;
      }
      out.code.push_back(std::move(ins));
    }
    computeFrees(b, out);
  }

  // The top-level instructions mark-shape-only marked, and which of their
  // outputs the rest of the plan (or its outputs) reads: those are kept per
  // input signature (ShapeValues).
  void keepShapeOnly() {
    static const Symbol kShapeOnly = Symbol::attr("shape_only");
    auto marked = [](const Plan::Instr& ins) {
      const AttrValue* a = ins.node->attributes().find(kShapeOnly);
      return ins.kind == Plan::Instr::Kind::Op && a && a->is<int64_t>() && a->get<int64_t>() == 1;
    };
    std::unordered_set<int> read(p_.main_.outputs.begin(), p_.main_.outputs.end());
    for (const Plan::Instr& ins : p_.main_.code) {
      if (marked(ins)) continue;
      std::vector<int> used;
      collectUses(ins, used);
      read.insert(used.begin(), used.end());
    }
    for (Plan::Instr& ins : p_.main_.code) {
      if (!marked(ins)) continue;
      ins.shape_only = true;
      for (int r : ins.out)
        if (read.count(r)) ins.keep.emplace_back(r, p_.shape_slots_++);
    }
  }

  // Every input and output typed int, float or bool.
  static bool numbersOnly(const Node& n) {
    auto number = [](const Value* v) {
      const Type& t = *v->type();
      return t.isSimple("int") || t.isSimple("float") || t.isSimple("bool");
    };
    return std::all_of(n.inputs().begin(), n.inputs().end(), number) &&
           std::all_of(n.outputs().begin(), n.outputs().end(), number);
  }

  // What propagate-layouts decided (passes/propagate_layouts.cpp): the
  // outputs a kernel may hand out blocked or strided. Without the attribute
  // (a pipeline without the pass) every value is handed over plain.
  static void applyLayouts(const Node& n, Kernel& k) {
    const std::vector<OutLayout> layouts = outLayouts(n);
    for (size_t j = 0; j < layouts.size(); ++j) {
      if (layouts[j].blocked) k.allowBlockedOutput(j);
      if (layouts[j].strided) k.allowStridedOutput(j);
    }
  }


  // A register is freed right after the last instruction of its own block
  // that reads it (directly or inside nested blocks); block outputs and
  // constants live on.
  void computeFrees(const llga::Block* b, Plan::Block& out) {
    std::unordered_map<int, size_t> last;
    std::unordered_set<int> defined(out.inputs.begin(), out.inputs.end());
    for (size_t i = 0; i < out.code.size(); ++i) {
      for (int r : out.code[i].out) {
        defined.insert(r);
        last.emplace(r, i);  // unused outputs die right away
      }
      std::vector<int> used;
      collectUses(out.code[i], used);
      for (int r : used) last[r] = i;
    }
    std::unordered_set<int> keep;
    for (const Value* v : b->outputs()) keep.insert(reg(v));
    for (const auto& [r, i] : last)
      if (defined.count(r) && !keep.count(r) && !constant_regs_.count(r)) out.code[i].free_after.push_back(r);
    for (Plan::Instr& ins : out.code)
      for (size_t p = 0; p < ins.in.size() && p < 64; ++p)
        if (std::find(ins.free_after.begin(), ins.free_after.end(), ins.in[p]) != ins.free_after.end())
          ins.dying |= uint64_t{1} << p;
  }

  static void collectUses(const Plan::Instr& ins, std::vector<int>& used) { Plan::collectUses(ins, used); }

  Plan& p_;
  const WeightMap& weights_;
  std::unordered_map<const Value*, int> regs_;
  std::unordered_map<const Value*, std::string> module_paths_;
  std::unordered_set<int> constant_regs_;
  std::map<std::string, std::vector<std::string>> unsupported_;
  std::vector<std::string> errors_;
  int next_reg_ = 0;
  int partitions_ = 0;
};

std::unique_ptr<Plan> Plan::build(std::shared_ptr<const Graph> graph, const WeightMap& weights) {
  auto p = std::unique_ptr<Plan>(new Plan());
  p->graph_ = graph;
  PlanBuilder(*p, weights).build(*graph);
  return p;
}

size_t Plan::numInstructions() const { return main_.code.size(); }

std::vector<std::pair<const Node*, KernelReport>> Plan::kernelReports() const {
  std::vector<std::pair<const Node*, KernelReport>> out;
  auto walk = [&out](const Block& b, auto& self) -> void {
    for (const Instr& ins : b.code) {
      if (ins.kernel) out.emplace_back(ins.node, ins.kernel->report());
      for (const auto& sub : ins.blocks) self(*sub, self);
    }
  };
  walk(main_, walk);
  return out;
}

// Every reader of register r in the main block is an op that accepts a strided
// tensor at that position, r is not read inside a nested block, and (if
// need_reader) something reads it.
bool Plan::readersAcceptStrided(int r, bool need_reader) const {
  bool any = false;
  for (const Instr& ins : main_.code) {
    for (size_t p = 0; p < ins.in.size(); ++p)
      if (ins.in[p] == r) {
        if (ins.kind != Instr::Kind::Op || !ins.kernel->acceptsStrided(p)) return false;
        any = true;
      }
    for (const auto& b : ins.blocks) {
      std::vector<int> used(b->outputs.begin(), b->outputs.end());
      for (const auto& sub : b->code) collectUses(sub, used);
      if (std::find(used.begin(), used.end(), r) != used.end()) return false;
    }
  }
  return any || !need_reader;
}

bool Plan::inputAcceptsStrided(size_t i) const {
  if (i >= main_.inputs.size()) return false;
  const int r = main_.inputs[i];
  if (std::find(main_.outputs.begin(), main_.outputs.end(), r) != main_.outputs.end()) return false;
  return readersAcceptStrided(r, /*need_reader=*/true);
}

void Plan::allowOutputStrided(size_t j) {
  if (j >= main_.outputs.size()) return;
  const int r = main_.outputs[j];
  if (std::count(main_.outputs.begin(), main_.outputs.end(), r) != 1) return;
  for (Instr& ins : main_.code) {
    for (size_t k = 0; k < ins.out.size(); ++k) {
      if (ins.out[k] != r) continue;
      // Inner readers of the value must take it strided too (none is the usual case).
      if (ins.kind == Instr::Kind::Op && readersAcceptStrided(r, /*need_reader=*/false)) ins.kernel->allowStridedOutput(k);
      return;
    }
  }
}

void Plan::collectUses(const Instr& ins, std::vector<int>& used) {
  used.insert(used.end(), ins.in.begin(), ins.in.end());
  for (const auto& b : ins.blocks) {
    for (const auto& sub : b->code) collectUses(sub, used);
    used.insert(used.end(), b->outputs.begin(), b->outputs.end());
  }
}

}  // namespace llga
